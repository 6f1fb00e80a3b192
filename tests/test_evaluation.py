"""Scoring translations (`keras_transformer.evaluation`): one exact-match rule, BLEU and chrF."""

import tensorflow as tf

from keras_transformer import evaluation
from keras_transformer.config import TrainConfig


def test_scores_include_chrf_with_its_signature():
    scores = evaluation.score_translations(["the cat sat", "a dog"], ["the cat sat", "a big dog"])
    assert 0 < scores["chrf"] < 100 and scores["chrf_signature"].startswith("nrefs:1|")
    assert evaluation.score_translations(["x"], ["x"])["chrf"] == 100.0


def test_exact_match_ignores_only_whitespace():
    hypotheses = ["1987-03-21", "a b", "a b", "1987-03-21"]
    references = ["  1987-03-21 ", "a\t b", "ab", "1987-03-12"]
    assert [evaluation.same_translation(h, r) for h, r in zip(hypotheses, references)] == [True, True, False, False]
    assert evaluation.score_translations(hypotheses, references)["exact_match"] == 0.5


def test_no_sentences_score_zero_instead_of_failing():
    scores = evaluation.score_translations([], [])
    assert (scores["sentences"], scores["exact_match"], scores["bleu"], scores["chrf"]) == (0, 0.0, 0.0, 0.0)


class _EchoTranslator:
    """Stands in for an exported `Translator`: "translates" each sentence into itself, words one space apart."""

    def translate(self, texts):
        return {"translation": tf.constant([" ".join(text.decode().split()) for text in texts.numpy()])}


def test_logged_examples_and_scores_follow_the_same_exact_match_rule(tmp_path):
    lines = ["march  21,  1987", " 21.03.1987 ", "1987-03-21"]
    paths = {}
    for split in ("train", "validation", "test"):
        for side in ("source", "target"):
            paths[split, side] = tmp_path / f"{split}.{side}"
            paths[split, side].write_text("\n".join(lines) + "\n")
    config = TrainConfig(
        corpus="files",
        **{
            f"{split}_files": (str(paths[split, "source"]), str(paths[split, "target"]))
            for split in ("train", "validation", "test")
        },
    ).validate()
    logged = []
    scores = evaluation.evaluate_translator(_EchoTranslator(), config, log=logged.append)
    examples = [line for line in logged if "->" in line]
    assert len(examples) == len(lines) and all(line.endswith(", ok)") for line in examples), examples
    assert scores["exact_match"] == 1.0
