"""The batch decoders, ours and keras-hub's, compiled for the backend; their timing, checks and ratios."""

import time

import keras
import numpy as np
from keras import ops

from keras_transformer.decoding import beam_search, greedy_decode

FIRST_REGULAR_ID = 4  # ids 0-3 are <pad>, <unk>, <s>, </s>
BEAM_SIZE = 4
LENGTH_PENALTY = 0.6
KERAS_HUB_CHECK_SENTENCES = 2

LABELS = {
    "greedy_uncached": "greedy, uncached (tutorial)",
    "greedy_cached": "greedy, cached",
    "beam4_cached": f"beam {BEAM_SIZE}, cached",
    "keras_hub_greedy_cached": "keras-hub greedy, cached",
    "keras_hub_beam4_cached": f"keras-hub beam {BEAM_SIZE}, cached",
}


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
        "output_shape": [args.batch_size, args.output_tokens],
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
