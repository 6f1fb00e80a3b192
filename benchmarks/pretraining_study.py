"""Does masked-LM pre-training help? Fine-tuning against training from scratch on few labels.

The study (`compare_pretraining`), on data the library generates:

1. One WordPiece vocabulary, with `<mask>`, learned from the built-in corpus's training text
   (the typed dates of `builtin_texts("train")`).
2. Pre-training: an encoder-only model (`build_encoder_only`, no classification head) trained
   as a masked language model (`masked_lm_dataset`: 15% of the pieces chosen, 80/10/10) for
   `pretrain_steps` steps on that unlabeled text.
3. Fine-tuning: the same architecture with a classification head on `<s>` (`num_classes > 0`),
   its encoder weights copied from the pre-trained model by layer name, then all of its weights
   trained for `finetune_steps` steps on a small labeled set: the first `labeled` dates of
   `date_classification("train", label=...)`.
4. From scratch: the same architecture, the same initial head and the same initial encoder
   weights the pre-training started from, trained on the same labeled batches with the same
   optimizer and schedule. It runs for `pretrain_steps + finetune_steps` steps, so it is read
   both at `finetune_steps` (equal fine-tuning steps) and at the end (equal total steps). The
   schedule does not depend on the run's length, so its first `finetune_steps` steps are
   exactly the run an `finetune_steps`-step training would be.

Every `every` steps (and before the first) both classifiers are scored on `held_out` dates of
the validation split, which the pre-training never saw: accuracy of the argmax of
`class_logits`, read with `training=False`.

The label is `label`: "decade" (20 classes, read from a year in digits or in words such as
"nineteen eighty-seven", the default), "month" or "weekday". docs/benchmarks/pretraining.md has
what was measured.

Deterministic: the corpus, the initial weights, the shuffling and the masking follow from
`seed` (`keras.utils.set_random_seed` before each model is built, seeded tf.data).
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.config import language_model_preset
from keras_transformer.data.date_classification import (
    DATE_LABELS,
    DateClassification,
    classification_dataset,
    date_classification,
)
from keras_transformer.data.masked_lm_batches import masked_lm_dataset
from keras_transformer.data.special_tokens import MASK_TOKEN
from keras_transformer.data.texts import builtin_texts, encode_texts
from keras_transformer.data.tokenizers import SubwordTokenizer
from keras_transformer.data.vocabulary import learn_vocabulary, write_vocabulary
from keras_transformer.models.language import build_encoder_only
from keras_transformer.training import (
    AccuracyCurve,
    MaskedAccuracy,
    MaskedLabelSmoothedLoss,
    NoamSchedule,
    dtype_policy,
)

__all__ = ["ARMS", "ClassificationCurve", "classifier_of", "copy_weights_by_name", "compare_pretraining"]

# The arms of the comparison, in the order they train.
ARMS = ("fine_tuned", "scratch")


def copy_weights_by_name(source, target):
    """Copy the weights of every layer of `source` into the layer of the same name in `target`.

    `build_encoder_only` names its layers by role (`token_embedding`, `positions`, `block_0`,
    ...), the same with and without a classification head, so this moves a pre-trained encoder
    into a fine-tuning model; the head (`class_logits`), absent from the source, keeps its own.

    Args:
        source: a built `keras.Model`.
        target: a built `keras.Model`.

    Returns:
        list of `str`, the names of the layers whose weights were copied.
    """
    source_layers = {layer.name: layer for layer in source.layers if layer.weights}
    copied = []
    for layer in target.layers:
        if layer.name in source_layers and layer.weights:
            layer.set_weights(source_layers[layer.name].get_weights())
            copied.append(layer.name)
    return copied


def classifier_of(model):
    """The classification path of an encoder with a head: token ids `[B, T]` -> class logits `[B, C]`.

    A `keras.Model` over the same layers (the same variables) without the language-model
    logits `[B, T, V]`, which fine-tuning does not use.
    """
    return keras.Model(model.input, model.output["class_logits"], name=f"{model.name}_classifier")


class ClassificationCurve(AccuracyCurve):
    """Record the held-out classification accuracy every `every` training steps (and before the first).

    Args:
        token_ids: int32 array `[N, L]`, the held-out examples.
        labels: int array `[N]`.
        every: int, steps between two measurements.
    """

    def __init__(self, token_ids, labels, every):
        super().__init__(every)
        self.token_ids, self.labels = token_ids, np.asarray(labels)

    def measure(self):
        logits = self.model(self.token_ids, training=False)  # (N, C); eager, nothing to trace
        predictions = keras.ops.convert_to_numpy(keras.ops.argmax(logits, axis=-1))
        return float(np.mean(predictions == self.labels))


def _adam(d_model, warmup_steps, scale):
    return keras.optimizers.Adam(NoamSchedule(d_model, warmup_steps, scale), beta_1=0.9, beta_2=0.98, epsilon=1e-9)


def _compile(model, optimizer, loss, metrics):
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics)
    # Built before `fit`, as `compile_transformer` does: left to `fit`, the first step's trace
    # creates the optimizer's variables behind an initialization check each.
    model.optimizer.build(model.trainable_variables)
    return model


def _rows(ids, labels, seq_len):
    """`(token_ids int32 [N, L], labels int32 [N])`: the rows `classification_dataset` gives, as arrays."""
    inputs, answers = next(iter(classification_dataset(ids, labels, seq_len, batch_size=len(labels))))
    return inputs.numpy(), answers.numpy()


def compare_pretraining(
    label="decade", preset="small", vocab_size=400, corpus_size=20000, labeled=300, held_out=1000,
    pretrain_steps=400, finetune_steps=200, every=50, batch_size=64, seq_len=36, pretrain_warmup_steps=200,
    finetune_warmup_steps=100, finetune_scale=0.5, precision="float32", seed=0, before_fine_tuning=None,
):  # fmt: skip
    """Pre-train with MLM, fine-tune on few labels, and train the same model from scratch.

    Args:
        label: the classification task, a key of `DATE_LABELS` ("decade", "month", "weekday").
        preset: model size, a `language_model_preset` name.
        vocab_size: requested vocabulary size (the learned one may be smaller).
        corpus_size: unlabeled training texts: the pre-training text and the vocabulary's.
        labeled: labeled training dates (the first of the train split; their text is among the
            pre-training's).
        held_out: validation dates of the accuracy measurements.
        pretrain_steps: P, masked-LM steps.
        finetune_steps: F, classification steps of the fine-tuned arm (the scratch arm takes
            P + F).
        every: steps between two accuracy measurements; P and F must be multiples of it.
        batch_size: examples per step, in both phases.
        seq_len: L, tokens per row, `<s>` and `</s>` included (longer texts are cut).
        pretrain_warmup_steps: warm-up of the pre-training's Noam schedule (scale 1).
        finetune_warmup_steps: warm-up of the classification training's Noam schedule.
        finetune_scale: scale of the classification training's Noam schedule.
        precision: Keras dtype policy of the models ("float32", "mixed_bfloat16", ...).
        seed: the corpus seed, the initial weights, the shuffling and the masking.
        before_fine_tuning: optional `callable(arm, classifier, pretrained)`, called just
            before each arm's classification training with the arm's name, its classifier
            (`classifier_of`) and the pre-trained model; to inspect them, e.g. in tests.

    Returns:
        dict: `"settings"` (the arguments, the learned vocabulary size, class names and chance
        accuracy), `"pretraining"` (`"seconds"`, the masked-LM `"loss"` and `"accuracy"` on the
        training batches at the end, `"copied_layers"`), and per arm under `"arms"`:
        `"steps"` and `"accuracy"` (lists, one entry per measurement), `"final_accuracy"` (at
        step F; the scratch arm also `"final_accuracy_total_steps"`, at P + F) and `"seconds"`.

    Raises:
        ValueError: an unknown label, or P or F not a positive multiple of `every`.
    """
    # The arguments, in their order: taken first, while they are the only local names.
    settings = {name: value for name, value in locals().items() if name != "before_fine_tuning"}
    _check_arguments(label, pretrain_steps, finetune_steps, every)
    # tf.data's shuffles take the global seed with their own: set it before any dataset is made.
    keras.utils.set_random_seed(seed)
    data = _study_data(label, vocab_size, corpus_size, labeled, held_out, batch_size, seq_len, seed)
    classes, sizes = data.train.classes, dict(vocab_size=data.tokenizer.vocab_size, max_length=seq_len)
    settings.update(learned_vocab_size=sizes["vocab_size"], classes=list(classes), chance=1 / len(classes))
    mlm_config = language_model_preset(preset, "encoder", **sizes)
    class_config = language_model_preset(preset, "encoder", **sizes, num_classes=len(classes))
    pretrained, pretraining = _pretrain(mlm_config, data.unlabeled, settings)
    arms, copied_layers = _train_arms(class_config, pretrained, data, settings, before_fine_tuning)
    pretraining["copied_layers"] = copied_layers
    arms["scratch"]["final_accuracy_total_steps"] = arms["scratch"]["accuracy"][-1]
    return {"settings": settings, "pretraining": pretraining, "arms": arms}


def _check_arguments(label, pretrain_steps, finetune_steps, every):
    """Raise `ValueError` on an unknown label, or on P or F not a positive multiple of `every`."""
    if label not in DATE_LABELS:
        raise ValueError(f"Unknown label {label!r}; expected one of {tuple(DATE_LABELS)}")
    for name, steps in (("pretrain_steps", pretrain_steps), ("finetune_steps", finetune_steps)):
        if steps < 1 or every < 1 or steps % every:
            raise ValueError(f"`{name}` must be a positive multiple of `every`={every}. Received: {steps}")


@dataclass
class _StudyData:
    """The study's text, encoded: the vocabulary, the masked-LM batches and the labeled examples."""

    tokenizer: SubwordTokenizer
    unlabeled: tf.data.Dataset  # endless masked-LM batches of the unlabeled text
    train: DateClassification  # the labeled training dates
    train_ids: tf.RaggedTensor  # their texts' token ids, int32 [N, (T)]
    test_inputs: np.ndarray  # int32 [N, L], the held-out examples
    test_labels: np.ndarray  # int32 [N]


def _study_data(label, vocab_size, corpus_size, labeled, held_out, batch_size, seq_len, seed):
    """The corpus, the labeled dates and the held-out ones, the vocabulary learned from the corpus, encoded."""
    texts = builtin_texts("train", size=corpus_size, seed=seed).texts
    train = date_classification("train", size=labeled, seed=seed, label=label)
    test = date_classification("validation", size=held_out, seed=seed, label=label)
    with tempfile.TemporaryDirectory() as folder:
        vocab_path = Path(folder) / "vocab.txt"
        write_vocabulary(learn_vocabulary(texts, vocab_size, extra_reserved=(MASK_TOKEN,)), vocab_path)
        tokenizer = SubwordTokenizer(str(vocab_path))
    unlabeled = masked_lm_dataset(
        encode_texts(texts, tokenizer), seq_len, batch_size, tokenizer.vocab_size, mask_id=tokenizer.mask_id,
        num_reserved=tokenizer.num_reserved, shuffle=True, repeat=True, seed=seed,
    )  # fmt: skip
    train_ids = encode_texts(train.texts, tokenizer)
    test_inputs, test_labels = _rows(encode_texts(test.texts, tokenizer), test.labels, seq_len)
    return _StudyData(tokenizer, unlabeled, train, train_ids, test_inputs, test_labels)


def _pretrain(config, unlabeled, settings):
    """Pre-train an encoder as a masked language model, for `pretrain_steps` steps of `unlabeled` batches.

    Args:
        config: the masked language model's `LanguageModelConfig`.
        unlabeled: the endless masked-LM batches.
        settings: `compare_pretraining`'s arguments, by name.

    Returns:
        `(pretrained, pretraining)`: the model, and `{"seconds", "loss", "accuracy"}` (the
        masked-LM loss and accuracy on the training batches at the end).
    """
    with dtype_policy(settings["precision"]):
        keras.utils.set_random_seed(settings["seed"])
        pretrained = build_encoder_only(config)
    _compile(
        pretrained,
        _adam(config.d_model, settings["pretrain_warmup_steps"], 1.0),
        MaskedLabelSmoothedLoss(0.0),
        [MaskedAccuracy()],
    )
    timer = tf.timestamp()
    history = pretrained.fit(unlabeled, epochs=1, steps_per_epoch=settings["pretrain_steps"], verbose=0)
    return pretrained, {
        "seconds": float(tf.timestamp() - timer),
        "loss": float(history.history["loss"][-1]),
        "accuracy": float(history.history["accuracy"][-1]),
    }


def _train_arms(config, pretrained, data, settings, before_fine_tuning):
    """Train both arms' classifiers on the labeled batches, in the order of `ARMS`.

    The two start from the same initial weights (those the pre-training started from, and one
    head); the fine-tuned one's encoder is then replaced by the pre-trained encoder.

    Args:
        config: the classifier's `LanguageModelConfig`.
        pretrained: the pre-trained masked language model.
        data: the study's `_StudyData`.
        settings: `compare_pretraining`'s arguments, by name.
        before_fine_tuning: `compare_pretraining`'s, or None.

    Returns:
        `(arms, copied_layers)`: `{arm: its result}` and the layers copied from `pretrained`.
    """
    arms, copied_layers = {}, None
    for arm in ARMS:
        with dtype_policy(settings["precision"]):
            keras.utils.set_random_seed(settings["seed"])
            model = build_encoder_only(config)
        if arm == "fine_tuned":
            copied_layers = copy_weights_by_name(pretrained, model)
        classifier = _compile(
            classifier_of(model),
            _adam(config.d_model, settings["finetune_warmup_steps"], settings["finetune_scale"]),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            [],
        )
        if before_fine_tuning is not None:
            before_fine_tuning(arm, classifier, pretrained)
        finetune_steps, pretrain_steps = settings["finetune_steps"], settings["pretrain_steps"]
        steps = finetune_steps if arm == "fine_tuned" else pretrain_steps + finetune_steps
        arms[arm] = _fit_classifier(classifier, steps, data, settings)
    return arms, copied_layers


def _fit_classifier(classifier, steps, data, settings):
    """Train `classifier` for `steps` steps on the labeled batches, measuring it every `every` steps.

    Returns:
        `{"steps", "accuracy", "final_accuracy", "seconds"}`, as in `compare_pretraining`'s arms.
    """
    labeled_batches = classification_dataset(
        data.train_ids,
        data.train.labels,
        settings["seq_len"],
        settings["batch_size"],
        shuffle=True,
        repeat=True,
        seed=settings["seed"],
    )
    curve = ClassificationCurve(data.test_inputs, data.test_labels, settings["every"])
    timer = tf.timestamp()
    classifier.fit(labeled_batches, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[curve])
    return {
        "steps": curve.steps,
        "accuracy": curve.accuracy,
        "final_accuracy": curve.accuracy[curve.steps.index(settings["finetune_steps"])],
        "seconds": float(tf.timestamp() - timer),
    }
