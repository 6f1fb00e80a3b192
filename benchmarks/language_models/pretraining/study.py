"""Does masked-LM pre-training pay where labels are scarce? A label-count curve, on data the library generates.

The study (`compare_pretraining`), for one seed:

1. The text. `corpus="topics"` (the default): sentences of a small grammar
   (`keras_transformer.data.topic_sentences`) whose content words all belong to the sentence's
   topic, so a hidden word can be predicted from the others; the class is the topic.
   `corpus="dates"`: typed dates of the built-in corpus, the class a date's decade, month or
   weekday (`date_classification`); a digit of a random date cannot be predicted from the rest.
   The unlabeled text is `corpus_size` texts of the train split; the labelled examples are the
   first ones of the same split (their text is among the pre-training's), the validation examples
   (which choose the fine-tuning's learning rate) and the test examples (which are reported) come
   from the validation and test splits, which the pre-training never saw.
2. One WordPiece vocabulary with `<mask>`, learned from the unlabeled text.
3. Pre-training: an encoder-only model (`build_encoder_only`, no head) trained as a masked
   language model (`masked_lm_dataset`: 15% of the pieces chosen, 80/10/10). Every `every` steps
   its masked-piece accuracy is measured on `validation_size` validation texts (masked once, the
   same for every measurement); it stops at the first measurement where that accuracy gained
   less than `plateau` over the last 20% of the steps so far (levelled off), or at
   `pretrain_max_steps`.
4. For each label count `n` of `label_counts`, three arms, all the same architecture (the
   encoder with a classification head on `<s>`), built from the same seed: the same initial
   head, and the same initial encoder weights the pre-training started from.

       fine_tuned  the encoder's weights copied from the pre-trained model, all weights trained
       scratch     no pre-training, all weights trained
       probe       the pre-trained encoder, frozen; only the head trained (a linear probe)

   Each trains on the first `n` labelled examples for the same number of steps,
   `finetune_steps(n)` (`finetune_epochs` passes, within `finetune_min_steps` and
   `finetune_max_steps`), once per Noam scale of `finetune_scales`; the scale whose model is most
   accurate on the validation examples is the arm's (chosen per arm, label count and seed), and
   its accuracy on the test examples is what the study reports.

Accuracy is that of the argmax of `class_logits`, read with `training=False`. Deterministic: the
corpus, the initial weights, the shuffling and the masking follow from `seed`
(`keras.utils.set_random_seed` before each model is built, seeded tf.data).
docs/benchmarks/pretraining.md has what was measured.
"""

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.config import language_model_preset
from keras_transformer.data.date_classification import DATE_LABELS, classification_dataset, date_classification
from keras_transformer.data.masked_lm_batches import masked_lm_dataset
from keras_transformer.data.special_tokens import MASK_TOKEN, PAD_ID
from keras_transformer.data.texts import builtin_texts, encode_texts
from keras_transformer.data.tokenizers import SubwordTokenizer
from keras_transformer.data.topic_sentences import topic_sentences
from keras_transformer.data.vocabulary import learn_vocabulary, write_vocabulary
from keras_transformer.models.language import build_encoder_only
from keras_transformer.training import AccuracyCurve, MaskedLabelSmoothedLoss, NoamSchedule, dtype_policy

__all__ = [
    "ARMS", "CORPORA", "MaskedLMCurve", "classifier_of", "compare_pretraining", "copy_weights_by_name",
    "finetune_steps", "peak_learning_rate",
]  # fmt: skip

# The arms of the comparison, in the order they train.
ARMS = ("fine_tuned", "scratch", "probe")
# The texts the study can pre-train on and classify.
CORPORA = ("topics", "dates")


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


def finetune_steps(labelled, batch_size, epochs, min_steps, max_steps):
    """Classification steps for `labelled` examples: `epochs` passes, within `[min_steps, max_steps]`."""
    return int(min(max(math.ceil(epochs * labelled / batch_size), min_steps), max_steps))


def peak_learning_rate(scale, d_model, warmup_steps):
    """The Noam schedule's largest learning rate, at step `warmup_steps`: `scale * (d_model * warmup_steps)^-0.5`."""
    return scale * (d_model * warmup_steps) ** -0.5


class MaskedLMCurve(AccuracyCurve):
    """Record the masked-piece accuracy (and loss) on fixed masked rows every `every` steps; stop once it levels off.

    Training stops at the first measurement (from the fifth after the start on) where the accuracy gained less
    than `plateau` since the measurement at 80% of the steps so far.

    Args:
        inputs: int32 array `[N, L]`, masked rows.
        labels: int32 array `[N, L]`, the original id at each masked position, 0 elsewhere.
        every: int, steps between two measurements.
        plateau: float, the smallest gain over the last 20% of the steps that keeps training.
    """

    def __init__(self, inputs, labels, every, plateau):
        super().__init__(every)
        self.inputs, self.labels, self.plateau = inputs, np.asarray(labels), plateau
        self.levelled_off, self.loss = False, []  # `loss`: the mean cross-entropy of the masked pieces

    def on_train_begin(self, logs=None):
        self.loss = []
        super().on_train_begin(logs)

    def measure(self):
        logits = self.model.predict(self.inputs, batch_size=512, verbose=0)  # (N, L, V)
        chosen = self.labels != PAD_ID
        logits, answers = logits[chosen], self.labels[chosen]  # (M, V), (M,)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        self.loss.append(float(-np.mean(log_probabilities[np.arange(len(answers)), answers])))
        return float(np.mean(np.argmax(logits, axis=-1) == answers))

    def _record(self, step):
        super()._record(step)
        if len(self.steps) > 5:
            earlier = max(index for index, at in enumerate(self.steps) if at <= 0.8 * step)
            if self.accuracy[-1] - self.accuracy[earlier] < self.plateau:
                self.levelled_off = self.model.stop_training = True


def compare_pretraining(
    corpus="topics", label="decade", preset="small", vocab_size=600, corpus_size=20000,
    label_counts=(30, 100, 300, 1000, 3000), validation_size=500, test_size=1000, pretrain_max_steps=3000,
    every=200, plateau=0.005, batch_size=256, mask_rate=0.3, seq_len=12, pretrain_warmup_steps=200,
    finetune_batch_size=32, finetune_epochs=5, finetune_min_steps=150, finetune_max_steps=500,
    finetune_warmup_steps=50, finetune_scales=(0.3, 1.0), precision="float32", seed=0, before_fine_tuning=None,
):  # fmt: skip
    """Pre-train with MLM; at each label count, fine-tune, train from scratch and probe.

    Args:
        corpus: one of `CORPORA`, "topics" or "dates".
        label: with `corpus="dates"`, a key of `DATE_LABELS`; unused with "topics".
        preset: model size, a `language_model_preset` name.
        vocab_size: requested vocabulary size (the learned one may be smaller).
        corpus_size: unlabeled training texts: the pre-training text and the vocabulary's.
        label_counts: the numbers of labelled examples, each at most `corpus_size`.
        validation_size: validation examples (the MLM's stopping rule, the learning rates).
        test_size: test examples of the reported accuracy.
        pretrain_max_steps: the masked LM's most steps, a multiple of `every`.
        every: steps between two masked-LM validation measurements.
        plateau: the stopping rule's smallest gain of masked-piece accuracy over the last 20%.
        batch_size: examples per masked-LM step.
        mask_rate: the share of pieces the masked LM hides (80/10/10), in (0, 1).
        seq_len: L, tokens per row, `<s>` and `</s>` included (longer texts are cut).
        pretrain_warmup_steps: warm-up of the pre-training's Noam schedule (scale 1).
        finetune_batch_size: examples per classification step.
        finetune_epochs: passes over the labelled examples, before `finetune_min_steps` and
            `finetune_max_steps` bound the steps (`finetune_steps`).
        finetune_min_steps: the fewest classification steps.
        finetune_max_steps: the most classification steps.
        finetune_warmup_steps: warm-up of the classification's Noam schedule.
        finetune_scales: the Noam scales tried for each arm; validation chooses one.
        precision: Keras dtype policy of the models ("float32", "mixed_bfloat16", ...).
        seed: the corpus seed, the initial weights, the shuffling and the masking.
        before_fine_tuning: optional `callable(arm, classifier, pretrained)`, called just
            before each classification training with the arm's name, its classifier
            (`classifier_of`) and the pre-trained model; to inspect them, e.g. in tests.

    Returns:
        dict: `"settings"` (the arguments, the learned vocabulary size, class names, chance
        accuracy and the peak learning rate of each scale), `"pretraining"` (`"steps"` and
        `"validation_accuracy"` and `"validation_loss"` of the masked LM's measurements,
        `"chosen_steps"`, `"levelled_off"`, the masked-LM `"loss"` on the training batches at the
        end, `"seconds"`, `"copied_layers"`) and `"curve"`: per label count (a `str` key), its
        `"steps"` and per arm `"validation_accuracy"` (one per scale), `"chosen_scale"`,
        `"test_accuracy"` (at the chosen scale) and `"seconds"` (all scales).

    Raises:
        ValueError: an unknown corpus or label, a label count not in `[1, corpus_size]`, no
            scale, or `pretrain_max_steps` not a positive multiple of `every`.
    """
    # The arguments, in their order: taken first, while they are the only local names.
    settings = {name: value for name, value in locals().items() if name != "before_fine_tuning"}
    settings["label_counts"], settings["finetune_scales"] = list(label_counts), list(finetune_scales)
    _check_arguments(settings)
    # tf.data's shuffles take the global seed with their own: set it before any dataset is made.
    keras.utils.set_random_seed(seed)
    data = _study_data(settings)
    classes, sizes = data.classes, dict(vocab_size=data.tokenizer.vocab_size, max_length=seq_len)
    mlm_config = language_model_preset(preset, "encoder", **sizes)
    class_config = language_model_preset(preset, "encoder", **sizes, num_classes=len(classes))
    settings.update(
        learned_vocab_size=sizes["vocab_size"],
        classes=list(classes),
        chance=1 / len(classes),
        peak_learning_rates=[
            peak_learning_rate(s, class_config.d_model, finetune_warmup_steps) for s in finetune_scales
        ],
    )
    # The head's layer is made first, which moves the seeds of the encoder's initializers: the
    # scratch arm takes its encoder from the masked LM before training, not from the seed.
    initial = _build(mlm_config, settings)
    pretrained, pretraining = _pretrain(mlm_config, data, settings)
    classifiers = [_Classifier(class_config, settings, probe) for probe in (False, True)]
    starts = {"fine_tuned": pretrained, "scratch": initial, "probe": pretrained}
    curve = {}
    for count in label_counts:
        curve[str(count)] = _label_count(classifiers, starts, data, count, settings, before_fine_tuning)
        pretraining["copied_layers"] = curve[str(count)].pop("copied_layers")
    return {"settings": settings, "pretraining": pretraining, "curve": curve}


def _check_arguments(settings):
    """Raise `ValueError` on an unknown corpus or label, a bad label count or step budget, or no scale."""
    if settings["corpus"] not in CORPORA:
        raise ValueError(f"Unknown corpus {settings['corpus']!r}; expected one of {CORPORA}")
    if settings["corpus"] == "dates" and settings["label"] not in DATE_LABELS:
        raise ValueError(f"Unknown label {settings['label']!r}; expected one of {tuple(DATE_LABELS)}")
    counts = settings["label_counts"]
    if not counts or any(not 1 <= count <= settings["corpus_size"] for count in counts):
        raise ValueError(f"Label counts must be in [1, corpus_size={settings['corpus_size']}]. Received: {counts}")
    if not settings["finetune_scales"] or any(not scale > 0 for scale in settings["finetune_scales"]):
        raise ValueError(f"`finetune_scales` must be positive numbers. Received: {settings['finetune_scales']}")
    steps, every = settings["pretrain_max_steps"], settings["every"]
    if steps < 1 or every < 1 or steps % every:
        raise ValueError(f"`pretrain_max_steps` must be a positive multiple of `every`={every}. Received: {steps}")


@dataclass
class _StudyData:
    """The study's text, encoded: the vocabulary, the masked-LM batches and the classification examples."""

    tokenizer: SubwordTokenizer
    classes: tuple  # the class names
    unlabeled: tf.data.Dataset  # endless masked-LM batches of the unlabeled text
    mlm_validation: tuple  # (inputs int32 [N, L], labels int32 [N, L]): masked validation rows
    train_ids: tf.RaggedTensor  # the labelled training texts' token ids, int32 [N, (T)]
    train_labels: list  # their classes
    validation: tuple  # (token_ids int32 [N, L], labels int32 [N])
    test: tuple  # (token_ids int32 [N, L], labels int32 [N])


def _study_data(settings):
    """The corpus and the labelled examples of each split, the vocabulary learned from the corpus, encoded."""
    seed, corpus_size = settings["seed"], settings["corpus_size"]
    if settings["corpus"] == "topics":

        def labelled(split, size):
            return topic_sentences(split, size, seed=seed)

        texts = labelled("train", corpus_size).texts
    else:

        def labelled(split, size):
            return date_classification(split, size, seed=seed, label=settings["label"])

        texts = builtin_texts("train", size=corpus_size, seed=seed).texts
    train = labelled("train", max(settings["label_counts"]))
    validation = labelled("validation", settings["validation_size"])
    test = labelled("test", settings["test_size"])
    with tempfile.TemporaryDirectory() as folder:
        vocab_path = Path(folder) / "vocab.txt"
        write_vocabulary(learn_vocabulary(texts, settings["vocab_size"], extra_reserved=(MASK_TOKEN,)), vocab_path)
        tokenizer = SubwordTokenizer(str(vocab_path))

    def masked(ids, **order):
        return masked_lm_dataset(
            ids, settings["seq_len"], settings["batch_size"], tokenizer.vocab_size, mask_id=tokenizer.mask_id,
            num_reserved=tokenizer.num_reserved, mask_rate=settings["mask_rate"], seed=seed, **order,
        )  # fmt: skip

    validation_ids = encode_texts(validation.texts, tokenizer)
    mlm_rows = list(masked(validation_ids).as_numpy_iterator())
    return _StudyData(
        tokenizer=tokenizer,
        classes=train.classes,
        unlabeled=masked(encode_texts(texts, tokenizer), shuffle=True, repeat=True),
        mlm_validation=tuple(np.concatenate([row[part] for row in mlm_rows]) for part in (0, 1)),
        train_ids=encode_texts(train.texts, tokenizer),
        train_labels=list(train.labels),
        validation=_rows(validation_ids, validation.labels, settings["seq_len"]),
        test=_rows(encode_texts(test.texts, tokenizer), test.labels, settings["seq_len"]),
    )


def _rows(ids, labels, seq_len):
    """`(token_ids int32 [N, L], labels int32 [N])`: the rows `classification_dataset` gives, as arrays."""
    inputs, answers = next(iter(classification_dataset(ids, labels, seq_len, batch_size=len(labels))))
    return inputs.numpy(), answers.numpy()


def _adam(schedule):
    return keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)


def _compile(model, optimizer, loss, metrics):
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics)
    # Built before `fit`, as `compile_transformer` does: left to `fit`, the first step's trace
    # creates the optimizer's variables behind an initialization check each.
    model.optimizer.build(model.trainable_variables)
    return model


def _build(config, settings):
    """`build_encoder_only(config)` in the study's precision, its initial weights drawn from the study's seed."""
    with dtype_policy(settings["precision"]):
        keras.utils.set_random_seed(settings["seed"])
        return build_encoder_only(config)


class _RescaledNoam(NoamSchedule):
    """The Noam schedule with its scale in a variable: one traced training step serves every scale."""

    def __init__(self, d_model, warmup_steps):
        super().__init__(d_model, warmup_steps)
        self._factor = keras.Variable(NoamSchedule.factor(self), dtype="float32", trainable=False, name="noam_factor")

    def rescale(self, scale):
        """Make every later step's rate that of `NoamSchedule(d_model, warmup_steps, scale)`."""
        self.scale = scale
        self._factor.assign(NoamSchedule.factor(self))

    def factor(self):
        return self._factor


class _Classifier:
    """A compiled classifier of the study (`classifier_of`), trained again and again from the same start.

    Tracing a training step costs more than the few steps an arm trains, so the classifier of a
    set of trainable weights (all, or the probe's head) is built and compiled once. `restart`
    puts every variable of the model and its optimizer back to its value after building (the
    head, the encoder, the dropout seeds, Adam's moments and step count), then copies a start's
    encoder in and sets the schedule's scale: the training that follows is that of a classifier
    built anew from the study's seed.

    Args:
        config: the classifier's `LanguageModelConfig`.
        settings: `compare_pretraining`'s arguments, by name.
        probe: whether only the head (`class_logits`) trains.
    """

    def __init__(self, config, settings, probe):
        self._model = _build(config, settings)  # the same head for every arm
        if probe:
            for layer in self._model.layers:
                layer.trainable = layer.name == "class_logits"
        self._schedule = _RescaledNoam(config.d_model, settings["finetune_warmup_steps"])
        self.classifier = _compile(
            classifier_of(self._model),
            _adam(self._schedule),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            [],
        )
        self._initial = [keras.ops.convert_to_numpy(v) for v in self._variables()]

    def _variables(self):
        return [*self.classifier.variables, *self.classifier.optimizer.variables]

    def restart(self, start, scale):
        """Back to the built weights, `start`'s encoder copied in, the schedule at `scale`; the copied layers."""
        for variable, value in zip(self._variables(), self._initial, strict=True):
            variable.assign(value)
        self._schedule.rescale(scale)
        return copy_weights_by_name(start, self._model)


def _pretrain(config, data, settings):
    """Pre-train an encoder as a masked language model until its validation accuracy levels off.

    Args:
        config: the masked language model's `LanguageModelConfig`.
        data: the study's `_StudyData`.
        settings: `compare_pretraining`'s arguments, by name.

    Returns:
        `(pretrained, pretraining)`: the model, and `compare_pretraining`'s `"pretraining"` but
        the copied layers.
    """
    pretrained = _build(config, settings)  # the same initial weights as the study's `initial`
    schedule = NoamSchedule(config.d_model, settings["pretrain_warmup_steps"])
    _compile(pretrained, _adam(schedule), MaskedLabelSmoothedLoss(0.0), [])
    curve = MaskedLMCurve(*data.mlm_validation, settings["every"], settings["plateau"])
    timer = tf.timestamp()
    history = pretrained.fit(
        data.unlabeled, epochs=1, steps_per_epoch=settings["pretrain_max_steps"], verbose=0, callbacks=[curve]
    )
    return pretrained, {
        "steps": curve.steps,
        "validation_accuracy": curve.accuracy,
        "validation_loss": curve.loss,
        "chosen_steps": curve.steps[-1],
        "levelled_off": curve.levelled_off,
        "loss": float(history.history["loss"][-1]),
        "seconds": float(tf.timestamp() - timer),
    }


def _accuracy(classifier, token_ids, labels, batch_size=512):
    """The share of `labels` `[N]` the argmax of `classifier`'s logits for `token_ids` `[N, L]` gets right.

    The classifier is called on each batch as it is: `predict` would first trace a function for
    each of the study's classifiers, which costs more than the few batches it then runs.
    """
    correct = 0
    for start in range(0, len(labels), batch_size):
        logits = keras.ops.convert_to_numpy(classifier(token_ids[start : start + batch_size], training=False))
        correct += int(np.sum(np.argmax(logits, axis=-1) == labels[start : start + batch_size]))
    return correct / len(labels)


def _label_count(classifiers, starts, data, count, settings, before_fine_tuning):
    """Train every arm at every scale on the first `count` labelled examples; choose each arm's scale on validation.

    Args:
        classifiers: the `_Classifier` that trains all weights and the probe's, in that order.
        starts: `{arm: the model whose encoder it starts from}`, the pre-trained masked LM or the
            masked LM before training.
        data: the study's `_StudyData`.
        count: the number of labelled examples.
        settings: `compare_pretraining`'s arguments, by name.
        before_fine_tuning: `compare_pretraining`'s, or None.

    Returns:
        `compare_pretraining`'s entry of the label count, and `"copied_layers"`.
    """
    steps = finetune_steps(
        count, *(settings[f"finetune_{name}"] for name in ("batch_size", "epochs", "min_steps", "max_steps"))
    )
    result, copied_layers = {"steps": steps}, None
    for arm in ARMS:
        timer, validation, test = tf.timestamp(), [], []
        for scale in settings["finetune_scales"]:
            copied_layers = classifiers[arm == "probe"].restart(starts[arm], scale)
            classifier = classifiers[arm == "probe"].classifier
            if before_fine_tuning is not None:
                before_fine_tuning(arm, classifier, starts["fine_tuned"])
            batches = classification_dataset(
                data.train_ids[:count], data.train_labels[:count], settings["seq_len"],
                settings["finetune_batch_size"], shuffle=True, repeat=True, seed=settings["seed"],
            )  # fmt: skip
            classifier.fit(batches, epochs=1, steps_per_epoch=steps, verbose=0)
            validation.append(_accuracy(classifier, *data.validation))
            test.append(_accuracy(classifier, *data.test))
        chosen = int(np.argmax(validation))  # the first of the best
        result[arm] = {
            "validation_accuracy": validation,
            "chosen_scale": settings["finetune_scales"][chosen],
            "test_accuracy": test[chosen],
            "seconds": float(tf.timestamp() - timer),
        }
    result["copied_layers"] = copied_layers
    return result
