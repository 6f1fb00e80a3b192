"""The MLM pre-training study at a tiny size: its results, which weights each arm starts from, the CLI."""

import json
import types

import keras
import numpy as np
import pytest

from benchmarks.language_models.pretraining.__main__ import main, parse_args
from benchmarks.language_models.pretraining.study import ARMS, MaskedLMCurve, compare_pretraining, finetune_steps
from keras_transformer.config import language_model_preset
from keras_transformer.models.language import build_encoder_only

TINY = dict(
    preset="tiny", vocab_size=600, corpus_size=200, label_counts=(8, 16), validation_size=20, test_size=30,
    pretrain_max_steps=8, every=4, batch_size=8, seq_len=12, finetune_batch_size=4, finetune_epochs=1,
    finetune_min_steps=2, finetune_max_steps=3, finetune_scales=(0.5, 2.0), seed=3,
)  # fmt: skip


def encoder_weights(model):
    """`{layer name: [arrays]}` of every layer with weights but the classification head."""
    return {layer.name: layer.get_weights() for layer in model.layers if layer.weights and layer.name != "class_logits"}


@pytest.fixture(scope="module")
def study_and_starts():
    starts = {}

    def inspect(arm, classifier, pretrained):
        starts.setdefault(arm, []).append(
            {
                "weights": encoder_weights(classifier),
                "head": classifier.get_layer("class_logits").get_weights(),
                "pretrained": encoder_weights(pretrained),
                "shared": {id(v) for v in classifier.weights} & {id(v) for v in pretrained.weights},
                "trainable": sorted(v.path for v in classifier.trainable_weights),
            }
        )

    return compare_pretraining(**TINY, before_fine_tuning=inspect), starts


def test_study_returns_a_label_count_curve_with_a_scale_chosen_on_validation(study_and_starts):
    study, _ = study_and_starts
    assert list(study["curve"]) == ["8", "16"]
    assert [study["curve"][n]["steps"] for n in ("8", "16")] == [2, 3]  # one pass of 8, then of 16, within [2, 3]
    for entry in study["curve"].values():
        for arm in ARMS:
            run = entry[arm]
            assert len(run["validation_accuracy"]) == 2 and all(0 <= a <= 1 for a in run["validation_accuracy"])
            best = int(np.argmax(run["validation_accuracy"]))
            assert run["chosen_scale"] == TINY["finetune_scales"][best] and 0 <= run["test_accuracy"] <= 1
    pretraining = study["pretraining"]
    assert pretraining["steps"] == [0, 4, 8] and pretraining["chosen_steps"] == 8 and not pretraining["levelled_off"]
    assert len(pretraining["validation_accuracy"]) == len(pretraining["validation_loss"]) == 3
    assert study["settings"]["chance"] == pytest.approx(1 / 8) and len(study["settings"]["peak_learning_rates"]) == 2


def test_arms_start_from_the_same_head_and_the_pretrained_or_the_initial_encoder(study_and_starts):
    study, starts = study_and_starts
    copied = study["pretraining"]["copied_layers"]
    assert set(copied) == {"token_embedding", "block_0"}  # sinusoidal positions: no weights
    # The weights the pre-training started from: the masked LM built from the same seed.
    keras.utils.set_random_seed(TINY["seed"])
    sizes = dict(vocab_size=study["settings"]["learned_vocab_size"], max_length=TINY["seq_len"])
    initial = encoder_weights(build_encoder_only(language_model_preset("tiny", "encoder", **sizes)))
    assert [len(starts[arm]) for arm in ARMS] == [4, 4, 4]  # 2 label counts x 2 scales
    head = starts["scratch"][0]["head"]
    for arm in ARMS:
        for start in starts[arm]:
            expected = initial if arm == "scratch" else start["pretrained"]
            assert set(start["weights"]) == set(copied)
            for name in copied:
                for got, want in zip(start["weights"][name], expected[name], strict=True):
                    np.testing.assert_array_equal(got, want)
            for got, want in zip(start["head"], head, strict=True):
                np.testing.assert_array_equal(got, want)
            assert not start["shared"]  # copies, not the pre-trained variables
    pretrained = starts["fine_tuned"][0]["pretrained"]
    assert not np.array_equal(initial["block_0"][0], pretrained["block_0"][0])  # pre-training moved them
    assert starts["probe"][0]["trainable"] == ["class_logits/bias", "class_logits/kernel"]
    assert len(starts["fine_tuned"][0]["trainable"]) == len(starts["scratch"][0]["trainable"]) > 2


def test_study_is_deterministic_given_its_seed(study_and_starts):
    study, _ = study_and_starts
    again = compare_pretraining(**{**TINY, "label_counts": (8,)})
    for arm in ARMS:
        assert again["curve"]["8"][arm] | {"seconds": 0} == study["curve"]["8"][arm] | {"seconds": 0}
    assert again["pretraining"]["validation_loss"] == study["pretraining"]["validation_loss"]


def test_the_dates_corpus_runs_too():
    study = compare_pretraining(
        **{**TINY, "corpus": "dates", "vocab_size": 160, "seq_len": 24, "label_counts": (8,), "finetune_scales": (1,)}
    )
    assert study["settings"]["chance"] == pytest.approx(1 / 20)  # decades, 1900s .. 2090s
    assert set(study["curve"]["8"]) == {"steps", *ARMS}


def test_masked_lm_stops_when_its_accuracy_gains_less_than_the_plateau_over_the_last_fifth():
    class Scripted(MaskedLMCurve):
        def measure(self):
            return accuracies[len(self.steps) - 1]

    accuracies = [0.1, 0.3, 0.4, 0.45, 0.47, 0.48, 0.483, 0.49, 0.491]
    curve = Scripted(np.zeros((1, 3), "int32"), np.zeros((1, 3), "int32"), every=10, plateau=0.005)
    curve.set_model(types.SimpleNamespace(stop_training=False))
    curve.on_train_begin()
    for _ in range(80):
        curve.on_train_batch_end(0)
        if curve.model.stop_training:
            break
    # At 60 steps 0.483 - 0.47 (at 40, the last at or before 48) >= 0.005; at 70, 0.49 - 0.48 (at 50) too;
    # at 80, 0.491 - 0.483 (at 60) too: it runs to the end without levelling off.
    assert curve.steps == [0, 10, 20, 30, 40, 50, 60, 70, 80] and not curve.levelled_off
    accuracies[-1] = 0.485  # 0.485 - 0.483 < 0.005: levelled off at 80
    curve.model.stop_training = False
    curve.on_train_begin()
    for _ in range(80):
        curve.on_train_batch_end(0)
    assert curve.levelled_off and curve.model.stop_training


def test_finetune_steps_are_passes_within_bounds():
    assert finetune_steps(30, 32, 5, 150, 500) == 150
    assert finetune_steps(3000, 32, 5, 150, 500) == 469
    assert finetune_steps(30000, 32, 5, 150, 500) == 500


def test_study_rejects_bad_arguments():
    with pytest.raises(ValueError, match="`pretrain_max_steps` must be a positive multiple of `every`=4"):
        compare_pretraining(**{**TINY, "pretrain_max_steps": 6})
    with pytest.raises(ValueError, match="Unknown corpus 'poems'"):
        compare_pretraining(**{**TINY, "corpus": "poems"})
    with pytest.raises(ValueError, match="Unknown label 'year'"):
        compare_pretraining(**{**TINY, "corpus": "dates", "label": "year"})
    with pytest.raises(ValueError, match=r"Label counts must be in \[1, corpus_size=200\]. Received: \[8, 300\]"):
        compare_pretraining(**{**TINY, "label_counts": (8, 300)})


def test_the_benchmark_writes_the_table_the_json_and_the_plot(tmp_path, capsys):
    argv = [
        "--preset", "tiny", "--seeds", "0,1", "--label-counts", "8,16", "--corpus-size", "200",
        "--validation-size", "20", "--test-size", "20", "--pretrain-max-steps", "4", "--every", "4",
        "--batch-size", "8", "--finetune-batch-size", "4", "--finetune-min-steps", "2", "--finetune-max-steps", "2",
        "--finetune-scales", "1", "--precision", "float32", "--out", str(tmp_path),
    ]  # fmt: skip
    assert main(argv) == 0
    data = json.loads((tmp_path / "pretraining.json").read_text())
    assert (tmp_path / "pretraining.png").stat().st_size > 0
    assert data["settings"]["seeds"] == [0, 1] and data["settings"]["corpus"] == "topics"
    assert set(data["runs"]) == {"0", "1"} and data["machine"]["cpu"]["flags"]
    for count in ("8", "16"):
        for arm in ARMS:
            row = data["summary"]["curve"][count][arm]
            per_seed = [data["runs"][seed]["curve"][count][arm]["test_accuracy"] for seed in ("0", "1")]
            assert row["test_accuracy"] == per_seed and row["mean"] == pytest.approx(np.mean(per_seed))
            assert row["min"] == min(per_seed) and row["max"] == max(per_seed)
    assert data["summary"]["pretraining"]["chosen_steps"] == [4, 4]
    assert data["command"] == "python -m benchmarks.language_models.pretraining " + " ".join(argv)
    table = capsys.readouterr().out
    assert "linear probe (frozen)" in table and "CPU " in table


def test_the_corpus_sets_the_vocabulary_and_the_length_unless_given_and_bad_flags_are_named(capsys):
    args = parse_args([])
    assert (args.vocab_size, args.max_length, args.seeds, args.label_counts) == (
        600,
        12,
        [0, 1, 2],
        [30, 100, 300, 1000, 3000],
    )
    assert args.out.parts[-4:] == ("benchmarks", "language_models", "pretraining", "results")
    args = parse_args(["--corpus", "dates", "--max-length", "20"])
    assert (args.vocab_size, args.max_length) == (400, 20)
    for argv, message in (
        (["--max-length", "2"], "--max-length must be >= 3. Received: 2"),
        (["--preset", "huge"], "argument --preset: invalid choice: 'huge'"),
        (["--seeds", "0,a"], "expected comma-separated ints"),
        (["--label-counts", "30,30000"], "--label-counts must be in [1, --corpus-size]"),
        (["--pretrain-max-steps", "300"], "--pretrain-max-steps must be a multiple of --every=200"),
    ):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert message in capsys.readouterr().err, argv
