"""Training the key-value lookup models: soft against hard attention, and every score function.

The studies of docs/benchmarks/hard-attention.md and docs/benchmarks/scoring.md, and of notebook
04, as functions that return their curves (drawing them is the caller's):

- `compare_variants` trains `keras_transformer.models.lookup.KeyValueLookup` in each variant
  (soft, REINFORCE with any of the estimators of `REINFORCE_ESTIMATORS`, straight-through
  Gumbel-softmax, and the untrainable argmax as a control) from the same initial weights on the
  same stream of examples, and records every `every` steps the held-out accuracy
  (`training=False`: hard variants read the argmax) and the noise of the gradient the optimizer
  gets for the score function's weights (the key and query embeddings, and the score's own
  weights if any): over `gradient_batches` fresh minibatches (new examples and new sampling
  noise) at the current weights, the total variance `tr Cov[g] = mean_m |g_m - mean g|^2` and the
  noise-to-signal ratio `tr Cov[g] / |mean g|^2` (`gradient_noise`).
- `compare_scores` trains soft attention with each score function of
  `keras_transformer.config.ATTENTION_SCORES` from the same embeddings and read-out, and records
  its accuracy curve and what its read does before and after training (`what_the_read_does`:
  the weight on the answer's pair, how often that pair is the argmax, the entropy), with the
  attention maps of a few held-out examples.

Gradients are taken with `tf.GradientTape`, so this module needs the TensorFlow backend; the
model and the task are backend-neutral. `benchmarks.attention_family.lookup` runs both over
seeds and writes their tables, JSON and figures.
"""

import weakref

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.config import ATTENTION_SCORES
from keras_transformer.data.lookup import lookup_examples
from keras_transformer.layers.reinforce import Reinforce
from keras_transformer.models.lookup import VARIANTS, KeyValueLookup, lookup_accuracy
from keras_transformer.training.callbacks import AccuracyCurve

__all__ = [
    "REINFORCE_ESTIMATORS", "STUDY_VARIANTS", "LookupAccuracyCurve", "LookupStudyCurve", "compare_scores",
    "compare_variants", "gradient_noise", "model_arguments", "read_weights", "score_gradient", "score_weights",
    "what_the_read_does",
]  # fmt: skip

# REINFORCE estimators `compare_variants` can compare, by name: `variant="reinforce"` with these settings
# (`keras_transformer.layers.reinforce`). "reads" of a step: examples x samples.
REINFORCE_ESTIMATORS = {
    "reinforce_plain": Reinforce("none"),
    "reinforce_learned": Reinforce("learned"),
    "reinforce_value": Reinforce("value"),
    "reinforce_entropy": Reinforce("learned", entropy_weight=0.01),
    "reinforce_normalized": Reinforce("learned", normalize=True),
    "reinforce_batch_mean": Reinforce("batch_mean"),
    "reinforce_loo2": Reinforce("leave_one_out", samples=2),
    "reinforce_loo4": Reinforce("leave_one_out", samples=4),
    "reinforce_loo8": Reinforce("leave_one_out", samples=8),
}
# Every name `compare_variants` takes.
STUDY_VARIANTS = VARIANTS + tuple(REINFORCE_ESTIMATORS)


def _check_counts(minimums, **counts):
    """Raise `ValueError` naming the first of `counts` that is not an int >= its minimum (1 unless given)."""
    for name, value in counts.items():
        minimum = minimums.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"`{name}` must be an int >= {minimum}. Received: {name}={value!r}")


def model_arguments(name):
    """`KeyValueLookup`'s `variant` and `reinforce` arguments for a name of `STUDY_VARIANTS`.

    Raises:
        ValueError: an unknown name.
    """
    if name in REINFORCE_ESTIMATORS:
        return {"variant": "reinforce", "reinforce": REINFORCE_ESTIMATORS[name]}
    if name in VARIANTS:
        return {"variant": name}
    raise ValueError(f"Unknown variant {name!r}; expected one of {STUDY_VARIANTS}")


def score_weights(model):
    """The variables of the score function of a `KeyValueLookup`: key and query embeddings, the score's own."""
    return [model.key_embedding.embeddings, model.query_embedding.embeddings, *model.attention.scoring.weights]


def score_gradient(model, inputs, answers):
    """The training loss's gradient for the score function's weights, on one minibatch, flattened.

    Args:
        model: a `KeyValueLookup`.
        inputs: dict of int arrays, a minibatch (see `lookup_examples`).
        answers: int array `[B]`.

    Returns:
        float64 NumPy vector; zeros where no gradient reaches a weight.
    """
    inputs = {name: tf.constant(ids) for name, ids in inputs.items()}
    gradients = _gradient_function(model)(inputs, tf.constant(answers))
    return np.concatenate([np.ravel(gradient.numpy()) for gradient in gradients]).astype("float64")


# One traced gradient per model: a study measures the noise at dozens of points of each training.
_GRADIENT_FUNCTIONS = weakref.WeakKeyDictionary()


def _gradient_function(model):
    """`fn(inputs, answers) -> [gradient of each of score_weights(model)]`, a `tf.function` traced once per model."""
    if model not in _GRADIENT_FUNCTIONS:

        @tf.function(reduce_retracing=True, autograph=False)
        def gradients(inputs, answers):
            with tf.GradientTape() as tape:  # watches the trainable variables (the argmax control's are not)
                loss = model.compute_loss(y=answers, y_pred=model(inputs, training=True), training=True)
            variables = score_weights(model)  # after the call, which builds a model not yet built
            found = tape.gradient(loss, variables)
            return [tf.zeros(v.shape) if g is None else tf.convert_to_tensor(g) for v, g in zip(variables, found)]

        _GRADIENT_FUNCTIONS[model] = gradients
    return _GRADIENT_FUNCTIONS[model]


def gradient_noise(model, examples, batch_size):
    """Variance of the score function's gradient over minibatches, at the model's current weights.

    Args:
        model: a `KeyValueLookup`.
        examples: `(inputs, answers)` of `M * batch_size` examples, cut into `M >= 2` minibatches.
        batch_size: int, examples per minibatch.

    Returns:
        dict: `"variance"` (tr Cov of the gradient), `"mean_norm_squared"` (|mean gradient|^2) and
        `"noise_to_signal"` (their ratio; inf when the mean gradient is zero).
    """
    inputs, answers = examples
    count = len(answers) // batch_size
    gradients = np.stack(
        [
            score_gradient(
                model,
                {name: array[m * batch_size : (m + 1) * batch_size] for name, array in inputs.items()},
                answers[m * batch_size : (m + 1) * batch_size],
            )
            for m in range(count)
        ]
    )  # (M, weights)
    mean = gradients.mean(axis=0)
    variance = float(((gradients - mean) ** 2).sum(axis=1).mean())
    signal = float(mean @ mean)
    return {
        "variance": variance,
        "mean_norm_squared": signal,
        "noise_to_signal": variance / signal if signal > 0 else float("inf"),
    }


class LookupAccuracyCurve(AccuracyCurve):
    """Record held-out lookup accuracy every `every` training steps (and before the first).

    Args:
        inputs: dict of int arrays, the held-out examples (see `lookup_examples`).
        answers: int array `[B]`.
        every: int, steps between two measurements.
    """

    def __init__(self, inputs, answers, every=25):
        super().__init__(every)
        self.inputs, self.answers = inputs, answers

    def measure(self):
        return lookup_accuracy(self.model, self.inputs, self.answers)


class LookupStudyCurve(LookupAccuracyCurve):
    """`LookupAccuracyCurve` that also records `gradient_noise` (attribute `noise`, a list of dicts)."""

    def __init__(self, inputs, answers, noise_examples, batch_size, every=25):
        super().__init__(inputs, answers, every)
        self.noise_examples, self.batch_size = noise_examples, batch_size

    def on_train_begin(self, logs=None):
        self.noise = []
        super().on_train_begin(logs)

    def _record(self, step):
        super()._record(step)
        self.noise.append(gradient_noise(self.model, self.noise_examples, self.batch_size))


def compare_variants(
    variants=VARIANTS,
    steps=1000,
    every=50,
    batch_size=64,
    pairs=16,
    num_keys=64,
    num_values=16,
    width=32,
    attention_score="dot",
    learning_rate=3e-3,
    gradient_batches=20,
    held_out=1000,
    seed=0,
):
    """Train each variant from the same initial weights on the same examples; record the curves.

    Args:
        variants: names from `STUDY_VARIANTS`: a model variant ("reinforce" with the model's
            default estimator) or a named REINFORCE estimator.
        steps: int, Adam steps of each training (one pass over `steps * batch_size` examples).
        every: int, steps between two measurements (also taken before the first step).
        batch_size: int, examples per step.
        pairs: int P, key-value pairs per example.
        num_keys: int, key alphabet size.
        num_values: int, value alphabet size.
        width: int D, the embeddings' width.
        attention_score: the attention's score function, one of `ATTENTION_SCORES`.
        learning_rate: Adam's learning rate.
        gradient_batches: int M >= 2, minibatches per gradient-noise measurement.
        held_out: int, examples of the accuracy measurement.
        seed: int; the initial weights, the examples and the sampling noise follow from it.

    Returns:
        dict: `"settings"` (the arguments), and per variant under `"variants"` a dict of
        `"steps"`, `"accuracy"` and `"noise"` (lists, one entry per measurement), `"seconds"` and
        `"samples"` (reads per example in training).

    Raises:
        ValueError: an unknown variant (before anything trains), or a count below its minimum
            (`gradient_batches` >= 2, the others >= 1).
    """
    _check_counts(
        {"gradient_batches": 2}, steps=steps, every=every, batch_size=batch_size, pairs=pairs, num_keys=num_keys,
        num_values=num_values, width=width, gradient_batches=gradient_batches, held_out=held_out,
    )  # fmt: skip
    for variant in variants:
        model_arguments(variant)
    settings = dict(
        steps=steps, every=every, batch_size=batch_size, pairs=pairs, num_keys=num_keys, num_values=num_values,
        width=width, attention_score=attention_score, learning_rate=learning_rate, gradient_batches=gradient_batches,
        held_out=held_out, seed=seed,
    )  # fmt: skip
    sizes = dict(pairs=pairs, num_keys=num_keys, num_values=num_values)
    train = lookup_examples(steps * batch_size, seed=seed, **sizes)
    test_inputs, test_answers, _ = lookup_examples(held_out, seed=seed + 1, **sizes)
    noise_inputs, noise_answers, _ = lookup_examples(gradient_batches * batch_size, seed=seed + 2, **sizes)
    results = {}
    for variant in variants:
        arguments = model_arguments(variant)
        keras.utils.set_random_seed(seed)  # the same initial weights for every variant
        model = KeyValueLookup(num_keys, num_values, width, attention_score=attention_score, seed=seed, **arguments)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate))
        model({name: ids[:1] for name, ids in test_inputs.items()})  # built, so that its optimizer can be too
        model.optimizer.build(model.trainable_variables)
        curve = LookupStudyCurve(test_inputs, test_answers, (noise_inputs, noise_answers), batch_size, every)
        timer = tf.timestamp()
        model.fit(train[0], train[1], batch_size=batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[curve])
        seconds = float(tf.timestamp() - timer)
        samples = model.reinforce.samples if model.variant == "reinforce" else 1
        results[variant] = {
            "steps": curve.steps, "accuracy": curve.accuracy, "noise": curve.noise, "seconds": seconds,
            "samples": samples,
        }  # fmt: skip
    return {"settings": settings, "variants": results}


def read_weights(model, inputs):
    """The attention weights of `model`'s read, `training=False`: float32 NumPy `[B, P]`."""
    return keras.ops.convert_to_numpy(model(inputs, training=False)["weights"]).astype("float32")


def what_the_read_does(weights, positions):
    """How a read's attention weights `[B, P]` sit over the pairs, given the answer's `positions` `[B]`.

    Returns:
        dict: `"weight_on_answer"`, the mean weight on the pair that holds the answer;
        `"answer_is_argmax"`, the fraction of examples whose highest weight is on it; and
        `"entropy"`, the mean entropy of the weights in nats (log P: uniform; 0: one pair).
    """
    rows = np.arange(len(positions))
    entropy = -(weights * np.log(np.where(weights > 0, weights, 1.0))).sum(-1)
    return {
        "weight_on_answer": float(weights[rows, positions].mean()),
        "answer_is_argmax": float((weights.argmax(-1) == positions).mean()),
        "entropy": float(entropy.mean()),
    }


def compare_scores(
    scores=ATTENTION_SCORES,
    steps=500,
    every=25,
    batch_size=64,
    pairs=16,
    num_keys=64,
    num_values=16,
    width=32,
    learning_rate=3e-3,
    held_out=1000,
    shown=8,
    seed=0,
):
    """Train soft attention with each score function on the lookup task; record its curve and its maps.

    Every score starts from the same embeddings and read-out (the score's own weights, if any,
    are its own) and trains on the same stream of examples. Before and after training it
    records `what_the_read_does` on the held-out examples and the attention weights of the
    first `shown` of them (the maps).

    Args:
        scores: names from `keras_transformer.config.ATTENTION_SCORES`.
        steps: int, Adam steps of each training.
        every: int, steps between two accuracy measurements.
        batch_size: int, examples per step.
        pairs: int P, key-value pairs per example.
        num_keys: int, key alphabet size.
        num_values: int, value alphabet size.
        width: int D, the embeddings' width.
        learning_rate: Adam's learning rate.
        held_out: int, held-out examples of the measurements.
        shown: int, held-out examples whose maps are kept.
        seed: int; the initial weights and the examples follow from it.

    Returns:
        dict: `"settings"`; `"positions"`, the answer's pair in each shown example (list of int);
        and per score under `"scores"`: `"steps"` and `"accuracy"` (lists), `"before"` and
        `"after"` (`what_the_read_does`), `"maps_before"` and `"maps_after"` (`[shown, P]`
        lists), `"steps_to_90"` (the first measured step at 90% accuracy, or None) and
        `"seconds"`.

    Raises:
        ValueError: an unknown score (before anything trains), or a count below 1.
    """
    _check_counts(
        {}, steps=steps, every=every, batch_size=batch_size, pairs=pairs, num_keys=num_keys, num_values=num_values,
        width=width, held_out=held_out, shown=shown,
    )  # fmt: skip
    unknown = [score for score in scores if score not in ATTENTION_SCORES]
    if unknown:
        raise ValueError(f"`scores` must be names of {ATTENTION_SCORES}. Received: {unknown}")
    settings = dict(
        steps=steps, every=every, batch_size=batch_size, pairs=pairs, num_keys=num_keys, num_values=num_values,
        width=width, learning_rate=learning_rate, held_out=held_out, shown=shown, seed=seed,
    )  # fmt: skip
    sizes = dict(pairs=pairs, num_keys=num_keys, num_values=num_values)
    train = lookup_examples(steps * batch_size, seed=seed, **sizes)
    test_inputs, test_answers, test_positions = lookup_examples(held_out, seed=seed + 1, **sizes)
    results = {}
    for score in scores:
        keras.utils.set_random_seed(seed)  # the same embeddings and read-out for every score
        model = KeyValueLookup(num_keys, num_values, width, variant="soft", attention_score=score, seed=seed)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate))
        before = read_weights(model, test_inputs)  # (N, P)
        curve = LookupAccuracyCurve(test_inputs, test_answers, every)
        timer = tf.timestamp()
        model.fit(train[0], train[1], batch_size=batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[curve])
        seconds = float(tf.timestamp() - timer)
        after = read_weights(model, test_inputs)
        reached = next((step for step, value in zip(curve.steps, curve.accuracy) if value >= 0.9), None)
        results[score] = {
            "steps": curve.steps, "accuracy": curve.accuracy, "steps_to_90": reached, "seconds": seconds,
            "before": what_the_read_does(before, test_positions), "after": what_the_read_does(after, test_positions),
            "maps_before": before[:shown].tolist(), "maps_after": after[:shown].tolist(),
        }  # fmt: skip
    return {"settings": settings, "positions": test_positions[:shown].tolist(), "scores": results}
