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

Which label, and what was measured (small preset, 300 labeled dates, batch 64, float32, on a
shared 2-core CPU; `benchmarks/README.md` has the benchmark's table). "decade" (20 classes,
read from a year in digits or in words such as "nineteen eighty-seven") is the default and the
only label measured at full size so far, and there pre-training did NOT help: after 1,000 masked-LM
steps (masked-piece accuracy 0.18 on its last batches) the fine-tuned classifier reached 0.36
held-out accuracy at 500 steps, the same model from scratch 0.52 at 500 steps and 0.56 at 1,500
(seed 0). The fine-tuned arm learned slower from its first measurement on. "month" and
"weekday" were started at a smaller size and stopped unfinished when the machine's load left
them too little CPU; they are not measured. What the text offers a masked LM is a reason to
expect little: the dates are drawn at random, so most masked pieces (digits, day and year
words) cannot be predicted from their context, and what can be (the form's fixed words) says
little about the year.

Deterministic: the corpus, the initial weights, the shuffling and the masking follow from
`seed` (`keras.utils.set_random_seed` before each model is built, seeded tf.data).
"""

import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.config import language_model_preset
from keras_transformer.data.date_classification import DATE_LABELS, classification_dataset, date_classification
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
    label="decade",
    preset="small",
    vocab_size=400,
    corpus_size=20000,
    labeled=300,
    held_out=1000,
    pretrain_steps=400,
    finetune_steps=200,
    every=50,
    batch_size=64,
    seq_len=36,
    pretrain_warmup_steps=200,
    finetune_warmup_steps=100,
    finetune_scale=0.5,
    precision="float32",
    seed=0,
    before_fine_tuning=None,
):
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
    if label not in DATE_LABELS:
        raise ValueError(f"Unknown label {label!r}; expected one of {tuple(DATE_LABELS)}")
    for name, steps in (("pretrain_steps", pretrain_steps), ("finetune_steps", finetune_steps)):
        if steps < 1 or every < 1 or steps % every:
            raise ValueError(f"`{name}` must be a positive multiple of `every`={every}. Received: {steps}")
    settings = dict(
        label=label, preset=preset, vocab_size=vocab_size, corpus_size=corpus_size, labeled=labeled,
        held_out=held_out, pretrain_steps=pretrain_steps, finetune_steps=finetune_steps, every=every,
        batch_size=batch_size, seq_len=seq_len, pretrain_warmup_steps=pretrain_warmup_steps,
        finetune_warmup_steps=finetune_warmup_steps, finetune_scale=finetune_scale, precision=precision, seed=seed,
    )  # fmt: skip
    # tf.data's shuffles take the global seed with their own: set it before any dataset is made.
    keras.utils.set_random_seed(seed)
    texts = builtin_texts("train", size=corpus_size, seed=seed).texts
    train = date_classification("train", size=labeled, seed=seed, label=label)
    test = date_classification("validation", size=held_out, seed=seed, label=label)
    with tempfile.TemporaryDirectory() as folder:
        vocab_path = Path(folder) / "vocab.txt"
        write_vocabulary(learn_vocabulary(texts, vocab_size, extra_reserved=(MASK_TOKEN,)), vocab_path)
        tokenizer = SubwordTokenizer(str(vocab_path))
    settings.update(learned_vocab_size=tokenizer.vocab_size, classes=list(train.classes), chance=1 / len(train.classes))
    unlabeled = masked_lm_dataset(
        encode_texts(texts, tokenizer), seq_len, batch_size, tokenizer.vocab_size, mask_id=tokenizer.mask_id,
        num_reserved=tokenizer.num_reserved, shuffle=True, repeat=True, seed=seed,
    )  # fmt: skip
    train_ids = encode_texts(train.texts, tokenizer)
    test_inputs, test_labels = _rows(encode_texts(test.texts, tokenizer), test.labels, seq_len)

    sizes = dict(vocab_size=tokenizer.vocab_size, max_length=seq_len)
    mlm_config = language_model_preset(preset, "encoder", **sizes)
    class_config = language_model_preset(preset, "encoder", **sizes, num_classes=len(train.classes))

    # Pre-training.
    with dtype_policy(precision):
        keras.utils.set_random_seed(seed)
        pretrained = build_encoder_only(mlm_config)
    _compile(
        pretrained,
        _adam(mlm_config.d_model, pretrain_warmup_steps, 1.0),
        MaskedLabelSmoothedLoss(0.0),
        [MaskedAccuracy()],
    )
    timer = tf.timestamp()
    history = pretrained.fit(unlabeled, epochs=1, steps_per_epoch=pretrain_steps, verbose=0)
    pretraining = {
        "seconds": float(tf.timestamp() - timer),
        "loss": float(history.history["loss"][-1]),
        "accuracy": float(history.history["accuracy"][-1]),
    }

    # The two classifiers: the same initial weights (those the pre-training started from, and
    # one head), the fine-tuned one's encoder then replaced by the pre-trained encoder.
    arms = {}
    for arm in ARMS:
        with dtype_policy(precision):
            keras.utils.set_random_seed(seed)
            model = build_encoder_only(class_config)
        if arm == "fine_tuned":
            pretraining["copied_layers"] = copy_weights_by_name(pretrained, model)
        classifier = _compile(
            classifier_of(model),
            _adam(class_config.d_model, finetune_warmup_steps, finetune_scale),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            [],
        )
        if before_fine_tuning is not None:
            before_fine_tuning(arm, classifier, pretrained)
        steps = finetune_steps if arm == "fine_tuned" else pretrain_steps + finetune_steps
        labeled_batches = classification_dataset(
            train_ids, train.labels, seq_len, batch_size, shuffle=True, repeat=True, seed=seed
        )
        curve = ClassificationCurve(test_inputs, test_labels, every)
        timer = tf.timestamp()
        classifier.fit(labeled_batches, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[curve])
        arms[arm] = {
            "steps": curve.steps,
            "accuracy": curve.accuracy,
            "final_accuracy": curve.accuracy[curve.steps.index(finetune_steps)],
            "seconds": float(tf.timestamp() - timer),
        }
    arms["scratch"]["final_accuracy_total_steps"] = arms["scratch"]["accuracy"][-1]
    return {"settings": settings, "pretraining": pretraining, "arms": arms}
