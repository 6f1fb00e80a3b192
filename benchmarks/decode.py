"""Decoding speed of `keras_transformer.decoding`, against keras-hub at equal size.

What it measures, in one run, on one randomly initialised model and one batch of random source
ids (`--batch` sentences of `--source-len` ids in `[4, V)`):

- five batch decoders, each compiled once for the backend Keras runs (`compiled`: `tf.function`
  on TensorFlow, XLA with `--jit`; `jax.jit` on JAX with `--jit`), called once to warm up (the
  "first call" column: tracing, compiling and one run), then timed `--repeats` times,
  interleaved (round r times every decoder once, in an order rotated by r, so that load from
  other processes on the machine falls on all of them alike):
    greedy, uncached   `greedy_decode(use_cache=False)`: the tutorial's way, the whole decoder
                       re-run on the whole output at every step
    greedy, cached     `greedy_decode(use_cache=True)`: one new token per step, key/value cache
    beam 4, cached     `beam_search(beam_size=4, alpha=0.6)`
    keras-hub greedy   the peer: keras-hub's `TokenAndPositionEmbedding`, `TransformerEncoder`
                       and `TransformerDecoder` layers at our preset's width, heads, feed-forward
                       width, depth and vocabulary, generating with `keras_hub.samplers.GreedySampler`
                       and the decoder's self- and cross-attention key/value caches, written the
                       way keras-hub's BART `generate_step` does it (see `KerasHubTransformer` in peers.py)
    keras-hub beam 4   the same peer with `keras_hub.samplers.BeamSampler(4)`
  Every decoder runs with no end token (`end_id=None`), so every sentence gets exactly
  `--output-tokens` tokens and "tokens/s" is exact: sentences/s x output tokens.
- the single-sentence latency, decoding until `</s>` or `max_target_len` = `--output-tokens`,
  greedy (beam 1) and beam 4, ours and the peer's. On TensorFlow, of SavedModels as a model server
  would run them (no XLA): ours, the
  ids-only export (`IdsTranslator` -> `export_translator` -> `tf.saved_model.load` ->
  `serving_default`), and the peer's, its generation above with keras-hub's `GreedySampler` or
  `BeamSampler(4)` saved the same way (`KerasHubServing`; keras-hub's beam search ranks by
  log-probability, without our length penalty). Requests cycle through the batch's sentences, one
  sentence each, and through the four exports in a rotating order. On the other backends (no
  SavedModel), of the same four decoders compiled as the batch decoders are (`jax.jit` with
  `--jit`), called on one sentence: what an application serving from JAX would run.

How to read it: "median s/batch" is the median over the repeats of one decoder call on the whole
batch; sentences/s and tokens/s follow from it. The ratios compare medians of the same run:
`cached / uncached` is the cache's speed-up, `ours / keras-hub` above 1 means our cached greedy
(or beam-4) decoder is faster than the peer's, `beam 4 / greedy` is what beam search costs. The weights are
random, so the translations mean nothing; the cost of a step does not depend on the weights,
and the export's latency depends on them only through the output length, which is reported.
Timings on a shared machine are noisy: compare ratios within a run rather than seconds across
runs, and look at the raw times in the JSON (`--out`) when a median looks odd.

    python benchmarks/decode.py                          # the default run, about a minute on 2 CPU cores
    python benchmarks/decode.py --preset tiny --repeats 2 --latency-requests 5  # a quick check
    KERAS_BACKEND=jax python benchmarks/decode.py --jit  # under JAX (benchmarks/gpu.sh decode on a GPU)
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import common
import keras
import numpy as np
from keras import ops
from peers import KerasHubTransformer

from keras_transformer.config import PRESETS, preset
from keras_transformer.data.special_tokens import END_ID
from keras_transformer.decoding import beam_search, greedy_decode
from keras_transformer.models import build_transformer

FIRST_REGULAR_ID = 4  # ids 0-3 are <pad>, <unk>, <s>, </s>
BEAM_SIZE = 4
LENGTH_PENALTY = 0.6
LATENCY_WARMUPS = 3
KERAS_HUB_CHECK_SENTENCES = 2


def parse_args(argv=None):
    """The benchmark's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS), help="Model size preset of both models.")
    parser.add_argument("--vocab", type=int, default=8000, help="Source and target vocabulary size V.")
    parser.add_argument("--batch", type=int, default=32, help="Sentences per batch of the batch decoders.")
    parser.add_argument("--source-len", type=int, default=20, help="Source length S in ids (random, no padding).")
    parser.add_argument(
        "--output-tokens", type=int, default=40, help="Tokens every sentence gets (the model's max_target_len)."
    )
    parser.add_argument("--repeats", type=int, default=5, help="Timed calls of every batch decoder, interleaved.")
    parser.add_argument(
        "--jit",
        action="store_true",
        help="Compile the decoders with XLA: tf.function(jit_compile=True) on TensorFlow, jax.jit on JAX.",
    )
    parser.add_argument(
        "--latency-requests",
        type=int,
        default=50,
        help=f"Timed single-sentence requests to each of the four, after {LATENCY_WARMUPS} warm-ups (0 skips).",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the weights and of the source ids.")
    parser.add_argument(
        "--out", default="benchmarks/results/decode.json", help="Where to write the JSON results (dirs are created)."
    )
    args = parser.parse_args(argv)
    common.check_at_least(parser, args, ("vocab", "batch", "source_len", "output_tokens", "repeats"), 1)
    if args.vocab <= FIRST_REGULAR_ID:
        parser.error(f"--vocab must be > {FIRST_REGULAR_ID} (ids 0-3 are reserved). Received: {args.vocab}")
    common.check_at_least(parser, args, ("latency_requests",), 0)
    if args.jit and keras.backend.backend() not in ("tensorflow", "jax"):
        parser.error(f"--jit compiles with XLA, on TensorFlow or JAX; Keras runs {keras.backend.backend()}")
    return args


def compiled(fn, jit, variables):
    """`fn(source_ids)` compiled once for the backend Keras runs.

    TensorFlow: `tf.function` (XLA with `jit`). JAX with `jit`: `jax.jit` of `fn` made pure, the
    `variables`' values passed in at each call (`keras.StatelessScope`), so the weights are
    arguments of the compiled program rather than constants folded into it. Otherwise `fn` as it
    is, run op by op.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=jit, autograph=False)
    if backend == "jax" and jit:
        import jax

        def pure(values, source_ids):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return fn(source_ids)

        jitted = jax.jit(pure)
        return lambda source_ids: jitted([variable.value for variable in variables], source_ids)
    return fn


def decoders(model, hub, max_length, jit, end_id=None):
    """`{name: compiled(source_ids) -> output_ids [B, L]}`, in the order of the table (`compiled`)."""
    variables = [*model.variables, *hub.model.variables]
    fns = {
        "greedy_uncached": lambda ids: greedy_decode(model, ids, max_length, use_cache=False, end_id=end_id)[0],
        "greedy_cached": lambda ids: greedy_decode(model, ids, max_length, use_cache=True, end_id=end_id)[0],
        "beam4_cached": lambda ids: beam_search(
            model, ids, max_length, beam_size=BEAM_SIZE, alpha=LENGTH_PENALTY, end_id=end_id
        )[0],
        "keras_hub_greedy_cached": lambda ids: hub.generate(ids, max_length, end_id=end_id),
        "keras_hub_beam4_cached": lambda ids: hub.generate(ids, max_length, end_id=end_id, num_beams=BEAM_SIZE),
    }
    return {name: compiled(fn, jit, variables) for name, fn in fns.items()}


LABELS = {
    "greedy_uncached": "greedy, uncached (tutorial)",
    "greedy_cached": "greedy, cached",
    "beam4_cached": f"beam {BEAM_SIZE}, cached",
    "keras_hub_greedy_cached": "keras-hub greedy, cached",
    "keras_hub_beam4_cached": f"keras-hub beam {BEAM_SIZE}, cached",
}


def timed_call(fn, source_ids):
    """Seconds of one call, the outputs copied to NumPy (so all work is done), and the outputs."""
    start = time.perf_counter()
    outputs = ops.convert_to_numpy(fn(source_ids))
    return time.perf_counter() - start, outputs


def measure_decoders(fns, source_ids, repeats, expected_shape):
    """Warm every decoder up once, then time `repeats` interleaved rounds of one call each.

    Args:
        fns: `{name: decoder}` from `decoders`.
        source_ids: the batch, int32 `[B, S]`.
        repeats: timed calls of each decoder.
        expected_shape: the output shape every decoder must return (else `AssertionError`).

    Returns:
        `(first_call, times, outputs)`: `{name: seconds of the warm-up call}`, `{name: [seconds,
        ...]}` of the timed calls and `{name: output ids}` of the warm-up call.
    """
    first_call, outputs, times = {}, {}, {name: [] for name in fns}
    for name, fn in fns.items():
        first_call[name], outputs[name] = timed_call(fn, source_ids)
        if outputs[name].shape != expected_shape:
            raise AssertionError(f"{name} returned shape {outputs[name].shape}, expected {expected_shape}")
        print(f"  warmed up {LABELS[name]}: {first_call[name]:.2f} s", flush=True)
    names = list(fns)
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            seconds, _ = timed_call(fns[name], source_ids)
            times[name].append(seconds)
        print(f"  round {r + 1}/{repeats}: " + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in names), flush=True)
    return first_call, times, outputs


def keras_hub_serving(hub, max_length, num_beams):
    """The peer's generation as a `tf.Module` to save, the way `IdsTranslator` exports ours (TensorFlow only).

    `serve` (saved as `serving_default`): `source_ids: int32[B, S]` -> `output_ids: int32[B, L]`,
    generating until every sentence has produced `</s>` or `L` tokens, with keras-hub's
    `GreedySampler` (`num_beams=1`) or `BeamSampler`. The layers' weights are saved with it.
    """
    import tensorflow as tf

    module = tf.Module()
    module.peer = hub.model  # tracks every layer's weights

    def serve(source_ids):
        return {"output_ids": hub.generate(source_ids, max_length, end_id=END_ID, num_beams=num_beams)}

    spec = tf.TensorSpec([None, None], tf.int32, name="source_ids")
    module.serve = tf.function(serve, input_signature=[spec], autograph=False)
    return module


def export_latency_models(model, model_config, hub, folder):
    """Export ours (`IdsTranslator`) and the peer (`KerasHubServing`), greedy and beam 4, into `folder`.

    Returns:
        `{name: (beam_size, seconds the export took, version folder)}`, names `beam1`, `beam4`,
        `keras_hub_beam1`, `keras_hub_beam4`.
    """
    import tensorflow as tf

    from keras_transformer.export import IdsTranslator, export_translator

    config_path = Path(folder) / "model_config.json"
    model_config.save(config_path)
    exports = {}
    for beam_size in (1, BEAM_SIZE):
        start = time.perf_counter()
        translator = IdsTranslator(
            model, model_config, config_path, vocab_paths=(), beam_size=beam_size, length_penalty=LENGTH_PENALTY
        )
        version_dir = export_translator(translator, Path(folder) / f"beam{beam_size}", "bench")
        exports[f"beam{beam_size}"] = (beam_size, time.perf_counter() - start, version_dir)
        start = time.perf_counter()
        peer = keras_hub_serving(hub, model_config.max_target_len, beam_size)
        peer_dir = Path(folder) / f"keras_hub_beam{beam_size}"
        tf.saved_model.save(peer, str(peer_dir), signatures={"serving_default": peer.serve})
        exports[f"keras_hub_beam{beam_size}"] = (beam_size, time.perf_counter() - start, peer_dir)
    return exports


def latency_functions(model, model_config, hub, folder, jit):
    """The four single-sentence decoders, ours and keras-hub's, greedy and beam 4, each warmed up.

    On TensorFlow, loaded SavedModels (`export_latency_models` into `folder`); on the other
    backends, `decoders` compiled with `</s>` as the end token.

    Returns:
        `{name: (beam_size, export seconds or None, function(source_ids [1, S]) -> output ids as NumPy)}`.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        functions = {}
        for name, (beam_size, seconds, version_dir) in export_latency_models(model, model_config, hub, folder).items():
            serve = tf.saved_model.load(str(version_dir)).signatures["serving_default"]
            functions[name] = (beam_size, seconds, lambda ids, serve=serve: serve(source_ids=ids)["output_ids"].numpy())
        return functions
    fns = decoders(model, hub, model_config.max_target_len, jit, end_id=END_ID)
    names = {"beam1": "greedy_cached", "beam4": "beam4_cached"}
    names.update({f"keras_hub_{key}": f"keras_hub_{value}" for key, value in names.items()})
    return {
        name: (
            1 if name.endswith("beam1") else BEAM_SIZE,
            None,
            lambda ids, fn=fns[decoder]: ops.convert_to_numpy(fn(ids)),
        )
        for name, decoder in names.items()
    }


def measure_latency(model, model_config, hub, source_ids, requests, jit=False):
    """p50/p95 ms of single-sentence requests, ours and keras-hub's, greedy and beam 4 (`latency_functions`).

    All four are warmed up first; then request i goes to each of them, in an order rotated by i,
    so that load from other processes falls on all of them alike.
    """
    sentences = [ops.convert_to_tensor(source_ids[i : i + 1]) for i in range(len(source_ids))]  # int32 (1, S) each
    serving, results = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (beam_size, export_seconds, serve) in latency_functions(model, model_config, hub, tmp, jit).items():
            for i in range(LATENCY_WARMUPS):
                serve(sentences[i % len(sentences)])
            serving[name] = serve
            results[name] = {"beam_size": beam_size, "export_seconds": export_seconds}
        names = list(serving)
        milliseconds = {name: [] for name in names}
        lengths = {name: [] for name in names}
        for i in range(requests):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                start = time.perf_counter()
                output_ids = serving[name](sentences[i % len(sentences)])
                milliseconds[name].append(1000 * (time.perf_counter() - start))
                lengths[name].append(_output_length(output_ids[0]))
    for name in names:
        results[name].update(
            {
                "p50_ms": float(np.percentile(milliseconds[name], 50)),
                "p95_ms": float(np.percentile(milliseconds[name], 95)),
                "mean_output_tokens": float(np.mean(lengths[name])),
                "max_output_tokens": model_config.max_target_len,
                "raw_ms": milliseconds[name],
            }
        )
    for beam_size in (1, BEAM_SIZE):
        ours, peer = results[f"beam{beam_size}"], results[f"keras_hub_beam{beam_size}"]
        ours["keras_hub_p50_over_ours"] = peer["p50_ms"] / ours["p50_ms"]
    return results


def _output_length(output_ids):
    """Tokens of one output `[L]` up to and including its first `</s>` (all `L` without one)."""
    ends = np.flatnonzero(output_ids == END_ID)
    return int(ends[0]) + 1 if len(ends) else len(output_ids)


def print_report(args, params, first_call, medians, ratios, latency, checks, cpu):
    """The table of the batch decoders, their ratios and checks, then the export's latency."""
    tokens = args.output_tokens
    print()
    print(
        f"preset {args.preset}, V={args.vocab}, batch {args.batch}, source {args.source_len} ids, "
        f"{tokens} output tokens, jit {'on' if args.jit else 'off'}, {args.repeats} repeats, {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
    print(f"parameters: ours {params['ours']:,}, keras-hub {params['keras_hub']:,}")
    header = f"{'decoder':<30}{'first call s':>13}{'median s/batch':>16}{'sentences/s':>13}{'tokens/s':>11}"
    print(header)
    print("-" * len(header))
    for name, label in LABELS.items():
        median = medians[name]
        print(
            f"{label:<30}{first_call[name]:>13.2f}{median:>16.3f}{args.batch / median:>13.1f}"
            f"{args.batch * tokens / median:>11.0f}"
        )
    for label, key in (
        ("cached / uncached speed-up:                 ", "cached_over_uncached_speedup"),
        ("ours cached / keras-hub cached (sent./s):   ", "ours_cached_over_keras_hub_sentences_per_s"),
        (
            f"ours beam {BEAM_SIZE} / keras-hub beam {BEAM_SIZE} (sent./s):   ",
            "ours_beam4_over_keras_hub_beam4_sentences_per_s",
        ),
        (f"beam {BEAM_SIZE} / cached greedy (time per batch):  ", "beam4_over_greedy_cached_time"),
    ):
        print(label + common.format_ratio(ratios[key]))
    print(
        f"checks: output shapes [B, {tokens}]; ours cached == uncached on "
        f"{checks['ours_cached_equals_uncached_token_fraction']:.1%} of tokens; keras-hub cached == its uncached "
        f"argmax decode on {checks['keras_hub_checked_sentences']} sentences"
    )
    if latency:
        served = "loaded SavedModels (no XLA)" if keras.backend.backend() == "tensorflow" else "compiled decoders"
        print(f"single-sentence latency, {served}, {args.latency_requests} requests:")
        for name, result in latency.items():
            who = "keras-hub" if name.startswith("keras_hub") else "ours"
            print(
                f"  {who:<9} beam {result['beam_size']}: p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms, "
                f"mean output {result['mean_output_tokens']:.1f} of {result['max_output_tokens']} tokens"
            )
        for beam_size in (1, BEAM_SIZE):
            ratio = latency[f"beam{beam_size}"]["keras_hub_p50_over_ours"]
            print(f"  keras-hub p50 / ours p50, beam {beam_size}: " + common.format_ratio(ratio))


def build_models(args):
    """Our model and the keras-hub peer at `--preset`, randomly initialised (seeded by the caller).

    Returns:
        `(model_config, model, hub, params)`, `params` the parameter count of each.
    """
    model_config = preset(
        args.preset,
        source_vocab_size=args.vocab,
        target_vocab_size=args.vocab,
        max_source_len=args.source_len,
        max_target_len=args.output_tokens,
    )
    model = build_transformer(model_config)
    hub = KerasHubTransformer(model_config)
    params = {"ours": int(model.count_params()), "keras_hub": int(hub.model.count_params())}
    print(f"parameters: ours {params['ours']:,}, keras-hub {params['keras_hub']:,}", flush=True)
    return model_config, model, hub, params


def check_outputs(args, hub, source_ids, outputs):
    """The checks of the decoders' outputs, for the report and the JSON.

    The peer must be honest: its cached generation equals its own uncached argmax decode on
    the first sentences (else `AssertionError`). Ours cached against uncached is measured as
    the fraction of equal tokens.

    Returns:
        `{"output_shape", "ours_cached_equals_uncached_token_fraction", "keras_hub_checked_sentences"}`.
    """
    checked = source_ids[:KERAS_HUB_CHECK_SENTENCES]
    np.testing.assert_array_equal(
        outputs["keras_hub_greedy_cached"][:KERAS_HUB_CHECK_SENTENCES],
        hub.generate_uncached(checked, args.output_tokens),
        err_msg="keras-hub cached generation differs from its uncached argmax decode",
    )
    return {
        "output_shape": [args.batch, args.output_tokens],
        "ours_cached_equals_uncached_token_fraction": float(
            np.mean(outputs["greedy_cached"] == outputs["greedy_uncached"])
        ),
        "keras_hub_checked_sentences": len(checked),
    }


def decoder_ratios(medians):
    """The report's ratios of the median seconds per batch."""
    return {
        "cached_over_uncached_speedup": medians["greedy_uncached"] / medians["greedy_cached"],
        "ours_cached_over_keras_hub_sentences_per_s": medians["keras_hub_greedy_cached"] / medians["greedy_cached"],
        "ours_beam4_over_keras_hub_beam4_sentences_per_s": medians["keras_hub_beam4_cached"] / medians["beam4_cached"],
        "beam4_over_greedy_cached_time": medians["beam4_cached"] / medians["greedy_cached"],
    }


def results_json(args, argv, model_config, params, cpu, measured):
    """The JSON of a run: its configuration, machine and versions, then `measured`'s sections."""
    config = {
        "preset": args.preset,
        "model": model_config.to_dict(),
        "vocab": args.vocab,
        "batch": args.batch,
        "source_len": args.source_len,
        "output_tokens": args.output_tokens,
        "jit": args.jit,
        "repeats": args.repeats,
        "latency_requests": args.latency_requests,
        "seed": args.seed,
        "parameters": params,
        "backend": keras.backend.backend(),
        "versions": common.package_versions(
            {"tensorflow": "tensorflow", "jax": "jax", "keras": "keras", "keras_hub": "keras-hub"}
        ),
        **common.machine(cpu),
        "command": common.command_line(sys.argv[1:] if argv is None else argv),
    }
    return {"config": config, **measured}


def main(argv=None):
    """Build both models, time the decoders and the export, print the report, write the JSON."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    keras.utils.set_random_seed(args.seed)
    tokens = args.output_tokens
    model_config, model, hub, params = build_models(args)
    rng = np.random.default_rng(args.seed)
    source_ids = rng.integers(FIRST_REGULAR_ID, args.vocab, size=(args.batch, args.source_len), dtype="int32")

    fns = decoders(model, hub, tokens, args.jit)
    first_call, times, outputs = measure_decoders(
        fns, ops.convert_to_tensor(source_ids), args.repeats, (args.batch, tokens)
    )
    checks = check_outputs(args, hub, source_ids, outputs)
    medians = {name: float(np.median(seconds)) for name, seconds in times.items()}
    ratios = decoder_ratios(medians)
    latency = {}
    if args.latency_requests:
        latency = measure_latency(model, model_config, hub, source_ids, args.latency_requests, args.jit)
    print_report(args, params, first_call, medians, ratios, latency, checks, cpu)

    decoder_results = {
        name: {
            "label": LABELS[name],
            "first_call_seconds": first_call[name],
            "median_seconds_per_batch": medians[name],
            "sentences_per_second": args.batch / medians[name],
            "output_tokens_per_second": args.batch * tokens / medians[name],
            "raw_seconds": times[name],
        }
        for name in fns
    }
    measured = {"decoders": decoder_results, "ratios": ratios, "checks": checks, "latency": latency}
    print(f"wrote {common.write_json(args.out, results_json(args, argv, model_config, params, cpu, measured))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
