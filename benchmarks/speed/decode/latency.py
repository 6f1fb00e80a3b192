"""The single-sentence latency, ours and keras-hub's, greedy and beam 4: of SavedModels, or compiled decoders.

On TensorFlow, of the exports a model server would load: ours (`IdsTranslator`), by default and
with XLA decoding (`jit_compile=True`, what `--xla-decoding true` exports; served by TF Serving with
`--xla_cpu_compilation_enabled=true`), and the peer's generation saved the same way
(`keras_hub_serving`). On the other backends, of the batch decoders compiled with `</s>` as the end
token (`decoders.decoders`).
"""

import tempfile
import time
from pathlib import Path

import keras
import numpy as np
from keras import ops

from benchmarks.speed.decode.decoders import BEAM_SIZE, LENGTH_PENALTY, decoders
from keras_transformer.data.special_tokens import END_ID

LATENCY_WARMUPS = 3


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
    """Export ours (`IdsTranslator`) and the peer (`keras_hub_serving`), greedy and beam 4, into `folder`.

    Returns:
        `{name: (beam_size, seconds the export took, version folder)}`, names `beam1`, `beam4`,
        `beam1_xla`, `beam4_xla` (ours with XLA decoding), `keras_hub_beam1`, `keras_hub_beam4`.
    """
    import tensorflow as tf

    from keras_transformer.export import IdsTranslator, export_translator

    config_path = Path(folder) / "model_config.json"
    model_config.save(config_path)
    exports = {}
    for beam_size in (1, BEAM_SIZE):
        for name, xla in ((f"beam{beam_size}", False), (f"beam{beam_size}_xla", True)):
            start = time.perf_counter()
            translator = IdsTranslator(
                model, model_config, config_path, beam_size=beam_size, length_penalty=LENGTH_PENALTY, jit_compile=xla
            )
            version_dir = export_translator(translator, Path(folder) / name, "bench")
            exports[name] = (beam_size, time.perf_counter() - start, version_dir)
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


def measure_latency(model, model_config, hub, source_ids, requests, jit=False, folder=None):
    """p50/p95 ms of single-sentence requests, ours and keras-hub's, greedy and beam 4 (`latency_functions`).

    All of them are warmed up first; then request i goes to each of them, in an order rotated by
    i, so that load from other processes falls on all of them alike. The exports go to `folder`
    (kept), or to a temporary folder.
    """
    sentences = [ops.convert_to_tensor(source_ids[i : i + 1]) for i in range(len(source_ids))]  # int32 (1, S) each
    serving, results = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        exports = tmp if folder is None else folder
        for name, (beam_size, export_seconds, serve) in latency_functions(
            model, model_config, hub, exports, jit
        ).items():
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
                lengths[name].append(output_length(output_ids[0]))
    for name in names:
        results[name].update(latency_summary(milliseconds[name], lengths[name], model_config.max_target_len))
    for beam_size in (1, BEAM_SIZE):
        ours, peer = results[f"beam{beam_size}"], results[f"keras_hub_beam{beam_size}"]
        ours["keras_hub_p50_over_ours"] = peer["p50_ms"] / ours["p50_ms"]
        if f"beam{beam_size}_xla" in results:
            xla = results[f"beam{beam_size}_xla"]
            xla["default_p50_over_xla"] = ours["p50_ms"] / xla["p50_ms"]
            xla["keras_hub_p50_over_ours"] = peer["p50_ms"] / xla["p50_ms"]
    return results


def latency_summary(milliseconds, lengths, max_length):
    """The summary of timed requests and their outputs' lengths: p50 and p95 ms, mean and most tokens, the raw ms."""
    return {
        "p50_ms": float(np.percentile(milliseconds, 50)),
        "p95_ms": float(np.percentile(milliseconds, 95)),
        "mean_output_tokens": float(np.mean(lengths)),
        "max_output_tokens": max_length,
        "raw_ms": list(milliseconds),
    }


def output_length(output_ids):
    """Tokens of one output `[L]` up to and including its first `</s>` (all `L` without one)."""
    ends = np.flatnonzero(output_ids == END_ID)
    return int(ends[0]) + 1 if len(ends) else len(output_ids)
