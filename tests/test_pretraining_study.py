"""The MLM pre-training study at a tiny size: curves, determinism, which weights each arm starts from."""

import numpy as np
import pytest
from pretraining_study import ARMS, compare_pretraining

TINY = dict(
    preset="tiny", vocab_size=160, corpus_size=200, labeled=32, held_out=40, pretrain_steps=8, finetune_steps=4,
    every=4, batch_size=8, seq_len=24, seed=3,
)  # fmt: skip


def encoder_weights(model):
    """`{layer name: [arrays]}` of every layer with weights but the classification head."""
    return {layer.name: layer.get_weights() for layer in model.layers if layer.weights and layer.name != "class_logits"}


@pytest.fixture(scope="module")
def study_and_starts():
    starts = {}

    def inspect(arm, classifier, pretrained):
        starts[arm] = {
            "weights": encoder_weights(classifier),
            "pretrained": encoder_weights(pretrained),
            "shared": {id(v) for v in classifier.weights} & {id(v) for v in pretrained.weights},
        }

    return compare_pretraining(**TINY, before_fine_tuning=inspect), starts


def test_study_returns_curves_at_every_measurement(study_and_starts):
    study, _ = study_and_starts
    assert set(study["arms"]) == set(ARMS)
    fine_tuned, scratch = study["arms"]["fine_tuned"], study["arms"]["scratch"]
    assert fine_tuned["steps"] == [0, 4] and scratch["steps"] == [0, 4, 8, 12]
    for run in (fine_tuned, scratch):
        assert len(run["accuracy"]) == len(run["steps"]) and all(0 <= a <= 1 for a in run["accuracy"])
        assert run["final_accuracy"] == run["accuracy"][1]
    assert scratch["final_accuracy_total_steps"] == scratch["accuracy"][-1]
    assert study["settings"]["chance"] == pytest.approx(1 / 20)  # decades, 1900s .. 2090s
    assert 0 <= study["pretraining"]["accuracy"] <= 1 and np.isfinite(study["pretraining"]["loss"])


def test_fine_tuning_starts_from_the_pretrained_encoder_and_scratch_from_nothing_of_it(study_and_starts):
    study, starts = study_and_starts
    copied = study["pretraining"]["copied_layers"]
    assert set(copied) == {"token_embedding", "block_0"}  # sinusoidal positions: no weights
    fine_tuned, scratch = starts["fine_tuned"], starts["scratch"]
    assert set(fine_tuned["weights"]) == set(fine_tuned["pretrained"]) == set(copied)
    for name in copied:
        for start, pretrained in zip(fine_tuned["weights"][name], fine_tuned["pretrained"][name], strict=True):
            np.testing.assert_array_equal(start, pretrained)
        assert not any(
            np.array_equal(start, pretrained)
            for start, pretrained in zip(scratch["weights"][name], scratch["pretrained"][name], strict=True)
            if start.size > 1 and np.any(pretrained)
        ), name
    assert not fine_tuned["shared"] and not scratch["shared"]  # copies, not the pre-trained variables


def test_study_is_deterministic_given_its_seed(study_and_starts):
    study, _ = study_and_starts
    again = compare_pretraining(**TINY)
    for arm in ARMS:
        assert again["arms"][arm]["accuracy"] == study["arms"][arm]["accuracy"]
    assert again["pretraining"]["loss"] == study["pretraining"]["loss"]


def test_study_rejects_steps_off_the_measurement_grid_and_unknown_labels():
    with pytest.raises(ValueError, match="`finetune_steps` must be a positive multiple of `every`=4"):
        compare_pretraining(**{**TINY, "finetune_steps": 6})
    with pytest.raises(ValueError, match="Unknown label 'year'"):
        compare_pretraining(**{**TINY, "label": "year"})
