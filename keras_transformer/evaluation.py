"""Scoring translations: a test set translated by a `Translator`, exact match, sacreBLEU and chrF.

Also the exact match per category of the typed-dates set (`keras_transformer.data.typed_dates`).

One rule for exact match everywhere (the logged examples, the scores, the per-epoch validation
BLEU): a hypothesis matches its reference when both are equal after collapsing runs of whitespace
and stripping the ends (`same_translation`), as the detokenizer writes words one space apart.
"""

import keras
import numpy as np
import sacrebleu
import tensorflow as tf

from keras_transformer.data.parallel_text import load_corpus
from keras_transformer.training import averaged_weights


def translate_texts(translator, texts, batch_size=256):
    """Translate sentences with a `Translator` (the exported graph function), in batches.

    Args:
        translator: `export.Translator`.
        texts: list of str.
        batch_size: sentences per call.

    Returns:
        list of str, one translation per text.
    """
    outputs = []
    for start in range(0, len(texts), batch_size):
        batch = tf.constant(texts[start : start + batch_size], dtype=tf.string)
        outputs.extend(t.decode("utf-8") for t in translator.translate(batch)["translation"].numpy())
    return outputs


def same_translation(hypothesis, reference):
    """Whether `hypothesis` equals `reference` up to whitespace (runs collapsed, ends stripped)."""
    return hypothesis.split() == reference.split()


def score_typed_dates(translate, examples):
    """Exact match per category of a model's translations of `typed_date_set` examples.

    Args:
        translate: function from a list of `str` to their translations (a list of `str`), e.g.
            `lambda texts: evaluation.translate_texts(translator, texts)`.
        examples: `{category: (sources, targets)}`, as `typed_date_set` returns.

    Returns:
        `{category: {"sentences": n, "exact_match": fraction, "wrong": [(source, hypothesis,
        reference), ...]}}` in the order of `examples`, exact match as `same_translation`
        decides it, plus `"all"`: every category together.
    """
    scores, total, matched = {}, 0, 0
    for category, (sources, targets) in examples.items():
        hypotheses = translate(list(sources)) if sources else []
        wrong = [
            (source, hypothesis, target)
            for source, hypothesis, target in zip(sources, hypotheses, targets, strict=True)
            if not same_translation(hypothesis, target)
        ]
        right = len(sources) - len(wrong)
        scores[category] = {
            "sentences": len(sources),
            "exact_match": right / len(sources) if sources else 0.0,
            "wrong": wrong,
        }
        total, matched = total + len(sources), matched + right
    scores["all"] = {"sentences": total, "exact_match": matched / total if total else 0.0, "wrong": []}
    return scores


def score_translations(hypotheses, references):
    """Exact match (`same_translation`), sacreBLEU and chrF of detokenized output against references.

    Args:
        hypotheses: list of str.
        references: list of str, one per hypothesis.

    Returns:
        dict with `sentences`, `exact_match` (a fraction), `bleu`, `chrf` and their sacreBLEU
        signatures; with no sentences, every score is 0 and the signatures are empty.
    """
    if not references:  # sacreBLEU cannot score an empty corpus
        return {
            "sentences": 0,
            "exact_match": 0.0,
            "bleu": 0.0,
            "bleu_signature": "",
            "chrf": 0.0,
            "chrf_signature": "",
        }
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    return {
        "sentences": len(references),
        "exact_match": float(np.mean([same_translation(h, r) for h, r in zip(hypotheses, references)])),
        "bleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf": round(chrf.corpus_score(hypotheses, [references]).score, 2),
        "chrf_signature": str(chrf.get_signature()),
    }


def evaluate_translator(translator, train_config, log=print, examples=5):
    """Translate the run's test split; log a few examples and the scores; return the scores.

    Args:
        translator: `export.Translator`.
        train_config: `TrainConfig` naming the corpus.
        log: function receiving progress lines.
        examples: how many translations to log, each marked `ok` or `WRONG`.

    Returns:
        The dict of `score_translations`.
    """
    test = load_corpus(train_config, "test")
    sources, references = test.sources, test.targets
    hypotheses = translate_texts(translator, sources)
    for source, hypothesis, reference in list(zip(sources, hypotheses, references))[:examples]:
        mark = "ok" if same_translation(hypothesis, reference) else "WRONG"
        log(f"  {source!r} -> {hypothesis!r} (reference {reference!r}, {mark})")
    scores = score_translations(hypotheses, references)
    log(
        f"Test: exact match {scores['exact_match']:.2%} of {scores['sentences']} sentences, "
        f"BLEU {scores['bleu']} ({scores['bleu_signature']}), chrF {scores['chrf']} ({scores['chrf_signature']})"
    )
    return scores


class ValidationBleu(keras.callbacks.Callback):
    """After every epoch, put the BLEU of some translated validation sentences in the logs as `val_bleu`.

    `History` and TensorBoard then record it with the epoch's other metrics, as the tutorial
    reported BLEU per epoch. With weight averaging on, the averaged weights are scored: those
    training ends with.

    Args:
        make_translator: function returning a `Translator` of the model being trained (called
            once, at the first epoch's end).
        text: `ParallelText` to translate and score.
    """

    def __init__(self, make_translator, text):
        super().__init__()
        self._make_translator = make_translator
        self._translator = None
        self.text = text

    def on_epoch_end(self, epoch, logs=None):
        self._translator = self._translator or self._make_translator()
        with averaged_weights(self.model):
            hypotheses = translate_texts(self._translator, self.text.sources)
        if logs is not None:
            logs["val_bleu"] = score_translations(hypotheses, self.text.targets)["bleu"]
