"""Hard attention: `Attention(hard=...)`, its two estimators, the lookup task and the soft-vs-hard study.

The properties a user relies on: argmax reads exactly one allowed position, the highest-scoring
one; sampling draws positions with the attention distribution's frequencies and never a masked
one (the REINFORCE estimator itself is tested in test_reinforce.py); straight-through Gumbel-softmax
reads one-hot but passes gradients to the score function; configs round-trip; errors name the
argument. Then the lookup task and model, the studies' learning curves, gradient noise and maps
(`keras_transformer.training.lookup`), and the two benchmarks that run them over seeds.

Tiny sizes: B=2, T_q=3, T_k=5, D=4.
"""

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from benchmarks.attention_family.lookup import __main__ as hard_attention_study
from benchmarks.attention_family.lookup import scores as scores_study
from benchmarks.harness import machine
from keras_transformer.data.lookup import lookup_examples
from keras_transformer.layers import Attention
from keras_transformer.layers.reinforce import Reinforce
from keras_transformer.models.lookup import VARIANTS, KeyValueLookup, lookup_accuracy
from keras_transformer.training.lookup import (
    compare_scores,
    compare_variants,
    gradient_noise,
    score_gradient,
    what_the_read_does,
)

B, TQ, TK, D = 2, 3, 5, 4
HARD = [("argmax", "reinforce"), ("sample", "reinforce"), ("sample", "gumbel")]


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)


def random_inputs(rng, keys_length=TK):
    queries = rng.standard_normal((B, TQ, D)).astype("float32")
    keys = rng.standard_normal((B, keys_length, D)).astype("float32")
    values = rng.standard_normal((B, keys_length, 6)).astype("float32")
    return queries, keys, values


def soft_weights(queries, keys, keys_mask=None):
    """The soft attention distribution alpha of the same layer settings (`"dot"` score)."""
    _, weights = Attention(attention_score="dot")(queries, keys, keys_mask=keys_mask, return_attention_scores=True)
    return keras.ops.convert_to_numpy(weights)


def to_numpy(*tensors):
    return [keras.ops.convert_to_numpy(tensor) for tensor in tensors]


# ---------------------------------------------------------------------------
# The layer: exactly one position, the right one
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("hard, estimator", HARD)
@pytest.mark.parametrize("training", [False, True])
def test_hard_attention_reads_exactly_one_allowed_value(hard, estimator, training):
    rng = np.random.default_rng(1)
    queries, keys, values = random_inputs(rng)
    keys_mask = np.array([[True, True, True, False, False], [True, True, True, True, True]])
    layer = Attention(attention_score="dot", hard=hard, estimator=estimator, seed=3)
    context, weights, log_prob = to_numpy(
        *layer(queries, keys, values, keys_mask=keys_mask, return_attention_scores=True, return_log_prob=True,
               training=training)
    )  # fmt: skip
    assert set(np.unique(weights)) <= {0.0, 1.0}
    np.testing.assert_array_equal(weights.sum(-1), np.ones((B, TQ)))
    assert not weights[0, :, 3:].any()  # never a masked key
    chosen = weights.argmax(-1)  # (B, T_q)
    np.testing.assert_allclose(context, np.take_along_axis(values, chosen[:, :, None], axis=1), atol=1e-6)
    alpha = soft_weights(queries, keys, keys_mask)
    np.testing.assert_allclose(log_prob, np.log(np.take_along_axis(alpha, chosen[:, :, None], -1)[..., 0]), atol=1e-5)
    if hard == "argmax" or not training:  # the highest-scoring allowed key
        np.testing.assert_array_equal(chosen, alpha.argmax(-1))


def test_sampling_follows_the_attention_distribution_and_skips_masked_keys():
    rng = np.random.default_rng(2)
    queries, keys, _ = random_inputs(rng)
    queries, keys = np.repeat(queries[:1, :1], 20000, axis=0), np.repeat(keys[:1], 20000, axis=0)
    keys_mask = np.repeat([[True, True, True, True, False]], 20000, axis=0)
    layer = Attention(attention_score="dot", hard="sample", seed=0)
    _, weights = layer(queries, keys, keys_mask=keys_mask, return_attention_scores=True, training=True)
    frequencies = keras.ops.convert_to_numpy(weights)[:, 0].mean(0)
    alpha = soft_weights(queries[:1], keys[:1], keys_mask[:1])[0, 0]
    assert frequencies[4] == 0.0
    # Binomial standard error at 20000 draws is at most 0.0036: 5 of them.
    np.testing.assert_allclose(frequencies, alpha, atol=0.018)


def test_sampling_is_reproducible_from_the_seed_and_varies_between_calls():
    rng = np.random.default_rng(3)
    queries, keys, _ = random_inputs(rng, keys_length=50)

    def draws(layer):
        return [keras.ops.convert_to_numpy(layer(queries, keys, return_attention_scores=True, training=True)[1])
                for _ in range(2)]  # fmt: skip

    first = draws(Attention(attention_score="dot", hard="sample", seed=7))
    second = draws(Attention(attention_score="dot", hard="sample", seed=7))
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert not np.array_equal(first[0], first[1])


def test_a_query_with_no_allowed_key_reads_nothing():
    rng = np.random.default_rng(4)
    queries, keys, values = random_inputs(rng)
    keys_mask = np.array([[False] * TK, [True] * TK])
    for hard, estimator in HARD:
        layer = Attention(attention_score="dot", hard=hard, estimator=estimator, seed=0)
        context, weights, log_prob = to_numpy(
            *layer(queries, keys, values, keys_mask=keys_mask, return_attention_scores=True, return_log_prob=True,
                   training=True)
        )  # fmt: skip
        assert not context[0].any() and not weights[0].any() and not log_prob[0].any()
        assert np.isfinite(context).all() and np.isfinite(log_prob).all()


def test_padding_queries_read_zero_and_have_zero_log_prob():
    rng = np.random.default_rng(5)
    queries, keys, values = random_inputs(rng)
    queries[1, 2] = 0.0  # a padding query (sign mask)
    context, weights, log_prob = to_numpy(
        *Attention(attention_score="dot", hard="sample", seed=0)(queries, keys, values, return_attention_scores=True,
                                                       return_log_prob=True, training=True)
    )  # fmt: skip
    assert not context[1, 2].any() and not weights[1, 2].any() and log_prob[1, 2] == 0.0
    assert (log_prob[0] < 0).all()


def test_causal_hard_attention_never_reads_the_future():
    rng = np.random.default_rng(6)
    inputs = rng.standard_normal((B, TK, D)).astype("float32")
    layer = Attention(attention_score="dot", causality=True, hard="sample", seed=0)
    for _ in range(20):
        _, weights = layer(inputs, inputs, return_attention_scores=True, training=True)
        assert not np.triu(keras.ops.convert_to_numpy(weights), k=1).any()


# ---------------------------------------------------------------------------
# Gradients: none through argmax, REINFORCE unbiased, Gumbel straight-through passes them
# ---------------------------------------------------------------------------
def gradients_for_queries_and_values(layer, queries, keys, values):
    queries, values = tf.constant(queries), tf.constant(values)
    with tf.GradientTape() as tape:
        tape.watch([queries, values])
        context = layer(queries, keys, values, training=True)
        loss = tf.reduce_sum(context * tf.range(1.0, 7.0))
    return tape.gradient(loss, [queries, values])


@pytest.mark.parametrize("hard, estimator", HARD)
def test_gradients_reach_the_values_and_the_queries_only_through_gumbel(hard, estimator):
    rng = np.random.default_rng(7)
    queries, keys, values = random_inputs(rng)
    query_gradient, value_gradient = gradients_for_queries_and_values(
        Attention(attention_score="dot", hard=hard, estimator=estimator, seed=0), queries, keys, values
    )
    assert np.abs(value_gradient.numpy()).sum() > 0
    if estimator == "gumbel":
        assert query_gradient is not None and np.isfinite(query_gradient.numpy()).all()
        assert np.abs(query_gradient.numpy()).sum() > 0
    else:
        assert query_gradient is None or not query_gradient.numpy().any()


def test_gumbel_straight_through_gradient_is_the_relaxed_weights_gradient():
    """Straight-through Gumbel-softmax differentiates softmax((log alpha + g) / temperature).

    At a very low temperature that relaxation is the one-hot itself: the gradient vanishes; at a
    very high one it is uniform, whose gradient for the queries is zero too; in between, not.
    """
    rng = np.random.default_rng(8)
    queries, keys, values = random_inputs(rng)
    norms = {}
    for temperature in (1e-4, 1.0, 1e4):
        layer = Attention(attention_score="dot", hard="sample", estimator="gumbel", temperature=temperature, seed=0)
        query_gradient, _ = gradients_for_queries_and_values(layer, queries, keys, values)
        norms[temperature] = float(tf.norm(query_gradient))
    assert norms[1.0] > 100 * max(norms[1e-4], norms[1e4])


# ---------------------------------------------------------------------------
# Config and errors
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("hard, estimator", HARD)
def test_hard_attention_config_round_trips(hard, estimator):
    layer = Attention(attention_score="bilinear", hard=hard, estimator=estimator, temperature=0.5, seed=11)
    config = layer.get_config()
    assert (config["hard"], config["estimator"], config["temperature"], config["seed"]) == (hard, estimator, 0.5, 11)
    restored = keras.layers.deserialize(json.loads(json.dumps(keras.layers.serialize(layer))))
    assert restored.get_config() == config


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(hard="max"), "`hard` must be one of \\(None, 'argmax', 'sample'\\). Received: hard='max'"),
        (dict(hard="sample", estimator="straight"), "`estimator` must be one of .*estimator='straight'"),
        (
            dict(hard="sample", estimator="gumbel", temperature=0.0),
            "`temperature` must be a number > 0. Received: temperature=0.0",
        ),
        (dict(temperature="1"), "`temperature` must be a number > 0. Received: temperature='1'"),
    ],
)
def test_bad_hard_attention_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Attention(**kwargs)


# ---------------------------------------------------------------------------
# The lookup task, the model and the study
# ---------------------------------------------------------------------------
def test_lookup_examples_hold_the_answer_under_the_queried_key_only():
    inputs, answers, positions = lookup_examples(200, pairs=6, num_keys=10, num_values=4, seed=0)
    keys, values, query = inputs["keys"], inputs["values"], inputs["query"]
    assert keys.shape == values.shape == (200, 6) and query.shape == answers.shape == positions.shape == (200,)
    assert all(len(set(row)) == 6 for row in keys)  # distinct keys: one position holds the answer
    rows = np.arange(200)
    np.testing.assert_array_equal(keys[rows, positions], query)
    np.testing.assert_array_equal(values[rows, positions], answers)
    assert keys.max() < 10 and values.max() < 4
    again, _, _ = lookup_examples(200, pairs=6, num_keys=10, num_values=4, seed=0)
    np.testing.assert_array_equal(again["keys"], keys)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(pairs=11, num_keys=10), "`pairs` must be at most `num_keys`"),
        (dict(count=0), "`count` must be an int >= 1. Received: count=0"),
    ],
)
def test_bad_lookup_sizes_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lookup_examples(**{"count": 5, **kwargs})


def test_lookup_model_round_trips_and_rejects_unknown_variants(tmp_path):
    inputs, answers, _ = lookup_examples(8, seed=0)
    model = KeyValueLookup(variant="reinforce", attention_score="additive", seed=1)
    model.compile(optimizer="adam")
    model.fit(inputs, answers, batch_size=4, epochs=1, verbose=0)
    path = tmp_path / "lookup.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    assert restored.get_config() == model.get_config()
    restored_logits, logits = to_numpy(restored(inputs)["logits"], model(inputs)["logits"])
    np.testing.assert_allclose(restored_logits, logits, atol=1e-6)
    with pytest.raises(ValueError, match="`variant` must be one of .*variant='hardest'"):
        KeyValueLookup(variant="hardest")


def test_soft_gradient_has_no_sampling_noise_and_reinforce_has_the_most():
    """The same minibatch ten times: soft attention's gradient never changes, the sampled ones do.

    At the same initial weights plain REINFORCE's (no baseline) varies more than straight-through
    Gumbel's.
    """
    inputs, answers, _ = lookup_examples(64, pairs=16, num_keys=64, seed=0)
    repeated = ({name: np.concatenate([array] * 10) for name, array in inputs.items()}, np.concatenate([answers] * 10))
    variances = {}
    for variant in ("soft", "reinforce", "gumbel"):
        keras.utils.set_random_seed(0)
        model = KeyValueLookup(64, variant=variant, seed=0, reinforce=Reinforce("none"))
        variances[variant] = gradient_noise(model, repeated, batch_size=64)["variance"]
        assert np.abs(score_gradient(model, inputs, answers)).sum() > 0
    assert variances["soft"] < 1e-12 * variances["reinforce"]
    assert 0 < variances["gumbel"] < variances["reinforce"]


@pytest.mark.learning(seed=0)
def test_study_soft_gumbel_and_reinforce_learn_the_lookup_argmax_cannot(learning):
    """300 steps from the same initial weights; chance is 1/16.

    Measured over seeds 0 to 4 with oneDNN on and off (Zen 5 EPYC): soft, Gumbel and REINFORCE
    (the model's default estimator, leave-one-out over 4 reads) 1.0 (bar 0.95), the argmax
    control 0.11 to 0.18 (bar 0.3; it trains only the read-out).
    """
    study = compare_variants(steps=300, every=150, gradient_batches=2, held_out=500, seed=learning.seed)
    accuracy = {variant: result["accuracy"] for variant, result in study["variants"].items()}
    assert set(accuracy) == set(VARIANTS)
    assert all(len(curve) == 3 for curve in accuracy.values())  # steps 0, 150 and 300
    learning.check("soft accuracy", accuracy["soft"][-1], above=0.95)
    learning.check("gumbel accuracy", accuracy["gumbel"][-1], above=0.95)
    learning.check("reinforce accuracy", accuracy["reinforce"][-1], above=0.95)
    learning.check("argmax accuracy", accuracy["argmax"][-1], below=0.3)


def test_lookup_accuracy_counts_right_answers():
    inputs, answers, _ = lookup_examples(32, seed=0)
    model = KeyValueLookup(variant="argmax")
    accuracy = lookup_accuracy(model, inputs, answers)
    predictions = np.argmax(keras.ops.convert_to_numpy(model(inputs)["logits"]), -1)
    assert accuracy == pytest.approx(np.mean(predictions == answers))


def test_the_studies_reject_bad_arguments_before_training():
    with pytest.raises(ValueError, match="Unknown variant 'hardest'"):
        compare_variants(["soft", "hardest"])
    with pytest.raises(ValueError, match="`gradient_batches` must be an int >= 2. Received: gradient_batches=1"):
        compare_variants(["soft"], gradient_batches=1)
    with pytest.raises(ValueError, match="`steps` must be an int >= 1. Received: steps=0"):
        compare_scores(["dot"], steps=0)
    with pytest.raises(ValueError, match=r"`scores` must be names of .*\['fancy'\]"):
        compare_scores(["dot", "fancy"])


def test_compare_scores_records_curves_maps_and_what_the_read_does():
    study = compare_scores(["dot", "cosine"], steps=20, every=10, held_out=40, shown=4, seed=0)
    _, _, positions = lookup_examples(40, pairs=16, num_keys=64, num_values=16, seed=1)  # the held-out examples
    assert study["positions"] == positions[:4].tolist() and study["settings"]["shown"] == 4
    for score in ("dot", "cosine"):
        run = study["scores"][score]
        assert run["steps"] == [0, 10, 20] and len(run["accuracy"]) == 3
        assert np.array(run["maps_before"]).shape == np.array(run["maps_after"]).shape == (4, 16)
        np.testing.assert_allclose(np.array(run["maps_after"]).sum(-1), 1.0, atol=1e-5)
        assert set(run["before"]) == set(run["after"]) == {"weight_on_answer", "answer_is_argmax", "entropy"}
        assert run["steps_to_90"] is None or run["steps_to_90"] in run["steps"]
    # Every score starts from the same embeddings and read-out: untrained, dot's maps are its own, cosine's sharper.
    assert study["scores"]["cosine"]["before"]["entropy"] < study["scores"]["dot"]["before"]["entropy"]


# ---------------------------------------------------------------------------
# python -m benchmarks.attention_family.lookup: soft against hard attention
# ---------------------------------------------------------------------------
def test_benchmark_writes_every_seeds_curves_the_summary_the_cpu_and_the_plot(tmp_path, capsys):
    argv = ["--variants", "reinforce", "--seeds", "0,1", "--steps", "20", "--every", "10"]
    argv += ["--gradient-batches", "2", "--held-out", "50", "--out", str(tmp_path)]
    assert hard_attention_study.main(argv) == 0
    out = capsys.readouterr().out
    assert machine.cpu_line(machine.cpu_info()) in out.splitlines()
    assert any(line.startswith("reinforce ") for line in out.splitlines())
    written = json.loads((tmp_path / "hard_attention.json").read_text())
    assert written["command"] == "python -m benchmarks.attention_family.lookup " + " ".join(argv)
    assert written["machine"]["cpu"] == machine.cpu_info() and written["settings"]["precision"] == "float32"
    assert written["settings"]["attention_score"] == "dot" and written["settings"]["learning_rate"] == 3e-3
    assert set(written["runs"]) == {"0", "1"} and list(written["summary"]) == ["reinforce"]
    for variant, row in written["summary"].items():
        runs = [written["runs"][seed][variant] for seed in ("0", "1")]
        assert all(run["steps"] == [0, 10, 20] and len(run["accuracy"]) == len(run["noise"]) == 3 for run in runs)
        assert row["accuracy_at"]["20"] == pytest.approx(np.mean([run["accuracy"][-1] for run in runs]))
        assert row["initial_gradient_variance"] == pytest.approx(np.mean([run["noise"][0]["variance"] for run in runs]))
    assert (tmp_path / "hard_attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--variants", "soft,hardest"], "expected comma-separated values of .*got 'soft,hardest'"),
        (["--seeds", "0,a"], "expected comma-separated ints"),
        (["--steps", "0"], "--steps must be >= 1"),
        (["--pairs", "9", "--num-keys", "8"], "--pairs must be at most --num-keys"),
        (["--gradient-batches", "1"], "--gradient-batches must be >= 2"),
        (["--batch-size", "0"], "`batch_size` must be an int >= 1"),
        (["--attention-score", "fancy"], "argument --attention-score/--attention_score: invalid choice: 'fancy'"),
    ],
)
def test_benchmark_rejects_bad_flags_naming_them(argv, match, capsys):
    with pytest.raises(SystemExit) as exit_info:
        hard_attention_study.parse_args(argv)
    assert exit_info.value.code == 2
    assert re.search(match, capsys.readouterr().err)


# ---------------------------------------------------------------------------
# python -m benchmarks.attention_family.lookup.scores: every score trained on the lookup
# ---------------------------------------------------------------------------
def test_what_the_read_does_measures_weight_argmax_and_entropy():
    weights = np.array([[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]], "float32")
    figures = what_the_read_does(weights, np.array([0, 1]))
    assert figures["weight_on_answer"] == pytest.approx(0.25)  # (0.5 + 0.0) / 2
    assert figures["answer_is_argmax"] == pytest.approx(0.5)
    assert figures["entropy"] == pytest.approx(1.5 * np.log(2) / 2)


def test_scores_benchmark_writes_each_scores_curve_figures_maps_and_the_cpu(tmp_path, capsys):
    argv = ["--scores", "dot,additive", "--seeds", "0", "--steps", "20", "--every", "10", "--held-out", "50"]
    assert scores_study.main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert machine.cpu_line(machine.cpu_info()) in out.splitlines()
    written = json.loads((tmp_path / "lookup_scores.json").read_text())
    assert (
        written["command"] == f"python -m benchmarks.attention_family.lookup.scores {' '.join(argv)} --out {tmp_path}"
    )
    assert list(written["summary"]) == ["dot", "additive"] and written["machine"]["cpu"] == machine.cpu_info()
    study = written["runs"]["0"]
    _, _, positions = lookup_examples(50, pairs=16, num_keys=64, num_values=16, seed=1)  # the held-out examples
    assert study["positions"] == positions[:8].tolist()
    for score in ("dot", "additive"):
        run = study["scores"][score]
        assert run["steps"] == [0, 10, 20] and len(run["accuracy"]) == 3
        maps_before, maps_after = np.array(run["maps_before"]), np.array(run["maps_after"])
        assert maps_before.shape == maps_after.shape == (8, 16)
        np.testing.assert_allclose(maps_after.sum(-1), 1.0, atol=1e-5)  # soft attention: distributions
        assert not np.allclose(maps_before, maps_after)  # training moved them
        row = written["summary"][score]
        assert row["after_weight_on_answer"] == pytest.approx(run["after"]["weight_on_answer"])
    assert (tmp_path / "lookup_scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):
        scores_study.parse_args(["--scores", "dot,fancy"])
    assert "expected comma-separated values of scaled_dot" in capsys.readouterr().err
    args = scores_study.parse_args([])
    assert (args.name, args.steps, args.every, args.adam_learning_rate) == ("lookup_scores", 500, 25, 3e-3)
    assert args.out.parts[-4:] == ("benchmarks", "attention_family", "lookup", "results")
