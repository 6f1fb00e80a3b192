"""The CTranslate2 peer: our model's own weights, converted (`models.transformer_spec`), run by the engine.

The engine is swept over what a deployer would try on a CPU, `compute_type` float32 and int8 (8-bit
weights, quantized when loading) by `intra_threads` 1 and 2 (the threads of one translation). Each
setting runs in a worker process of its own (`ctranslate2_worker`: no TensorFlow, no Keras), after
our decoders and exports are timed, so that no other thread pool spins on the cores while it
decodes (the engine's and TensorFlow's both keep their threads spinning for a while after each
call: interleaved in one process, each slowed the other). Each setting decodes the study's batch
with exactly `--output-tokens` tokens per sentence, and single sentences until `</s>`, as ours
does: reserved tokens but `</s>` never emitted, `</s>` allowed first, beam search ranking by
log-probability (`length_penalty` 0; with every hypothesis of one length, as in the batch runs,
ours ranks the same way whatever its alpha).
"""

import json
import time

import numpy as np

from benchmarks.harness import workers
from benchmarks.speed.decode.decoders import BEAM_SIZE
from benchmarks.speed.decode.latency import LATENCY_WARMUPS, latency_summary
from keras_transformer.data.special_tokens import RESERVED_TOKENS
from keras_transformer.models import transformer_spec

COMPUTE_TYPES = ("float32", "int8")
THREADS = (1, 2)
BEAMS = (1, BEAM_SIZE)


def setting_name(compute_type, threads, beam_size):
    """`ctranslate2_float32_1t_beam1`, ...: the name of one setting in the JSON."""
    return f"ctranslate2_{compute_type}_{threads}t_beam{beam_size}"


def convert(model, model_config, folder):
    """Save our model as the engine's model in `folder` (made), with a vocabulary of made-up tokens.

    Returns:
        The seconds the conversion took.
    """
    start = time.perf_counter()
    tokens = list(RESERVED_TOKENS) + [f"t{i}" for i in range(len(RESERVED_TOKENS), model_config.target_vocab_size)]
    sources = list(RESERVED_TOKENS) + [f"s{i}" for i in range(len(RESERVED_TOKENS), model_config.source_vocab_size)]
    spec = transformer_spec(model, model_config, sources, tokens)
    spec.optimize(quantization=None)
    folder.mkdir(parents=True)
    spec.save(str(folder))
    return time.perf_counter() - start


def measure(folder, conversion_seconds, source_ids, max_length, repeats, requests, ours_outputs, ours_medians):
    """Every setting, each in its own worker: the batch, then `requests` single sentences.

    Args:
        folder: the converted model (`convert`).
        conversion_seconds: what `convert` took (the latency entries' `export_seconds`).
        source_ids: int `[B, S]`, the study's batch.
        max_length: the tokens of every batch output and the most of a single sentence's.
        repeats: timed calls of the batch, after one untimed.
        requests: timed single sentences (cycling through the batch's), after `LATENCY_WARMUPS`
            untimed; 0 skips them.
        ours_outputs: our decoders' outputs (`greedy_cached`, `beam4_cached`), for the agreement check.
        ours_medians: our decoders' median seconds per batch, for the ratios.

    Returns:
        `(batches, latency)`: `{setting name: {"beam_size", "median_seconds_per_batch",
        "sentences_per_second", "output_tokens_per_second", "raw_seconds",
        "ours_cached_median_over_it", "equal_to_ours_token_fraction"}}` and
        `{setting name: latency_summary(...) with "beam_size", "export_seconds"}` (empty without requests).
    """
    sentences = np.asarray(source_ids).tolist()
    batches, latency = {}, {}
    for compute_type in COMPUTE_TYPES:
        for threads in THREADS:
            command = workers.worker_command(
                f"{__package__}.ctranslate2_worker",
                [str(folder)],
                "--compute-type",
                compute_type,
                "--threads",
                str(threads),
            )
            worker = workers.JsonLinesWorker(command, f"ctranslate2 {compute_type} {threads}t")
            try:
                for beam_size in BEAMS:
                    name = setting_name(compute_type, threads, beam_size)
                    decoding = {"beam_size": beam_size, "max_length": max_length}
                    reply = worker.request(
                        json.dumps({"source_ids": sentences, "forced": True, "repeats": repeats, **decoding})
                    )
                    median = float(np.median(reply["seconds"]))
                    ours = "greedy_cached" if beam_size == 1 else "beam4_cached"
                    batches[name] = {
                        "beam_size": beam_size,
                        "median_seconds_per_batch": median,
                        "sentences_per_second": len(sentences) / median,
                        "output_tokens_per_second": len(sentences) * max_length / median,
                        "raw_seconds": reply["seconds"],
                        "ours_cached_median_over_it": ours_medians[ours] / median,
                        "equal_to_ours_token_fraction": float(
                            np.mean(np.asarray(reply["output_ids"]) == ours_outputs[ours])
                        ),
                    }
                    if requests:
                        asked = [sentences[i % len(sentences)] for i in range(requests)]
                        reply = worker.request(json.dumps({"sentences": asked, "warmups": LATENCY_WARMUPS, **decoding}))
                        latency[name] = {
                            "beam_size": beam_size,
                            "export_seconds": conversion_seconds,
                            **latency_summary(reply["ms"], reply["lengths"], max_length),
                        }
            finally:
                worker.close()
    return batches, latency


def latency_ratios(results):
    """For each beam and compute type, the best setting's p50 and ours (default and XLA) over it.

    Args:
        results: `measure_latency`'s results, the engine's settings among them.

    Returns:
        `{"beam1": {"float32": {"best": name, "p50_ms", "ours_p50_over_it", "ours_xla_p50_over_it"}, ..}, ..}`.
    """
    ratios = {}
    for beam_size in BEAMS:
        by_type = {}
        for compute_type in COMPUTE_TYPES:
            names = [setting_name(compute_type, threads, beam_size) for threads in THREADS]
            best = min(names, key=lambda name: results[name]["p50_ms"])
            p50 = results[best]["p50_ms"]
            by_type[compute_type] = {"best": best, "p50_ms": p50}
            for ours, key in (
                (f"beam{beam_size}", "ours_p50_over_it"),
                (f"beam{beam_size}_xla", "ours_xla_p50_over_it"),
            ):
                if ours in results:
                    by_type[compute_type][key] = results[ours]["p50_ms"] / p50
        ratios[f"beam{beam_size}"] = by_type
    return ratios
