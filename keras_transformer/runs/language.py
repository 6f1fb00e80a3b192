"""The language-model tasks of a run (`train --task lm|mlm`): text, one vocabulary, the model, its scores, its export.

The job (`runs.job.train`) runs every task the same way (run directory, precision, strategy,
`model.fit` with checkpoints and exact resume, summary); `LanguageModelTask`, registered for `lm`
and `mlm`, gives it what is particular to a language model:

- text: one text per line of the built-in corpus (its typed dates), of the `--train-files` /
  `--validation-files` / `--test-files` (one or more text files each, read in order) or of a
  TFDS dataset's `--tfds-text-feature`; `--train-size` etc. keep the first N texts of a split;
- one WordPiece vocabulary, `RUN_DIR/vocab.txt`, learned from the training texts (`--vocab-size`;
  for `mlm` with `<mask>`), reused when the file is already there;
- `lm`: a decoder-only model (`build_decoder_only`) on packed causal LM windows of
  `--max-length` tokens; `mlm`: an encoder-only model (`build_encoder_only`) on masked LM rows of
  `--max-length` tokens, masked anew on every pass (`data.masked_lm_batches`). Both train with the
  translation model's loss, metrics and optimizer;
- evaluation on the test split: the mean cross-entropy of the predicted tokens (every next token
  for `lm`, the selected tokens for `mlm`; without label smoothing), its perplexity and the token
  accuracy; for `lm` also a few greedy continuations of the first half of test texts, logged;
- the export: `export.TextGenerator` for `lm` (text in, continuation out, and an ids signature;
  with `ids_only`, `export.IdsGenerator`), `export.MaskFiller` for `mlm` (ids in, filled ids and
  logits out).
"""

import dataclasses
import math
from pathlib import Path

import tensorflow as tf

from keras_transformer.config import LanguageModelConfig, language_model_preset
from keras_transformer.data.causal_lm_batches import causal_lm_dataset
from keras_transformer.data.masked_lm_batches import masked_lm_dataset
from keras_transformer.data.special_tokens import MASK_TOKEN, PAD_ID, START_ID
from keras_transformer.data.texts import TextCorpus, encode_texts, load_texts
from keras_transformer.data.tokenizers import SubwordTokenizer
from keras_transformer.data.vocabulary import learn_vocabulary, write_vocabulary
from keras_transformer.export import (
    GENERATE_IDS_SIGNATURE_KEY,
    SIGNATURE_KEY,
    MaskFiller,
    TextGenerator,
    export_module,
)
from keras_transformer.models import build_language_model
from keras_transformer.runs.directory import (
    LANGUAGE_MODEL_FIELDS,
    MODEL_CONFIG_FILE,
    TRANSLATION_MODEL_FIELDS,
    WARMUP_SENTENCES,
    RunError,
)
from keras_transformer.runs.tasks import register_task

VOCAB_FILE = "vocab.txt"
KINDS = {"lm": "decoder", "mlm": "encoder"}  # task -> LanguageModelConfig.kind
EXAMPLES = 3  # greedy continuations logged by the evaluation of an lm run


@dataclasses.dataclass
class TextData:
    """The text and tokens of a language-model run.

    Attributes:
        texts: `{split: TextCorpus}` for "train" and "validation".
        tokenizer: the run's `SubwordTokenizer`.
        ids: `{split: int32 RaggedTensor [N, (T)]}`, the texts' pieces.
        seq_len: the tokens of a row of the batches, the model's `max_length`.
    """

    texts: dict
    tokenizer: SubwordTokenizer
    ids: dict
    seq_len: int


def load_split(train_config, split):
    """A split of the text a `TrainConfig` names, cut to its first `{split}_size` texts (0: all).

    Args:
        train_config: `TrainConfig` of an `lm` or `mlm` run.
        split: "train", "validation" or "test".

    Returns:
        `TextCorpus`; from files, the texts of every file of the split in order.
    """
    size = getattr(train_config, f"{split}_size")
    if train_config.corpus == "files":
        texts, skipped = [], {}
        for path in getattr(train_config, f"{split}_files"):
            corpus = load_texts("files", split, path=path)
            texts += corpus.texts
            for reason, count in corpus.skipped.items():
                skipped[reason] = skipped.get(reason, 0) + count
        return TextCorpus(texts[:size] if size else texts, skipped)
    return load_texts(
        train_config.corpus,
        split,
        size=size,
        seed=train_config.seed,
        tfds_name=train_config.tfds_name,
        tfds_feature=train_config.tfds_text_feature,
        tfds_data_dir=train_config.tfds_data_dir,
    )


def _check_vocabulary(path, task):
    """A `mlm` vocabulary must hold `<mask>` (raises `RunError`)."""
    if task == "mlm" and Path(path).is_file():
        tokenizer = SubwordTokenizer(str(path))
        if tokenizer.mask_id is None:
            raise RunError(
                f"{path} has no {MASK_TOKEN}: --task mlm needs a vocabulary with it; remove the file to learn one "
                "from the training text, or choose another --run-dir"
            )


@register_task("lm", "mlm")
class LanguageModelTask:
    """The parts of a run that are a language model's own; the methods of `runs.tasks.Task`.

    Args:
        name: "lm" (decoder-only, causal LM) or "mlm" (encoder-only, masked LM).
    """

    config_class = LanguageModelConfig

    def __init__(self, name):
        if name not in KINDS:
            raise ValueError(f"Unknown language-model task {name!r}; expected one of {sorted(KINDS)}")
        self.name = name
        self.kind = KINDS[name]

    def model_config(self, preset_name, model_overrides):
        """The model of a new run: `language_model_preset` with the overrides (raises `RunError`)."""
        translation_only = sorted(set(model_overrides) & (TRANSLATION_MODEL_FIELDS - LANGUAGE_MODEL_FIELDS))
        if translation_only:
            raise RunError(
                f"--{translation_only[0].replace('_', '-')} is a translation-model setting; a language model's "
                "length is --max-length"
            )
        try:
            config = language_model_preset(preset_name, self.kind, **model_overrides)
        except (TypeError, ValueError) as error:
            given = ", ".join(f"{name}={value!r}" for name, value in sorted(model_overrides.items()))
            source = f"the {preset_name!r} preset" + (f" with {given}" if given else "")
            raise RunError(f"{error} (model: {source})") from None
        shortest = 2 if self.name == "lm" else 3  # lm: a token and the next; mlm: <s>, a piece, </s>
        if config.max_length < shortest:
            raise RunError(f"--task {self.name} needs --max-length >= {shortest}. Received: {config.max_length}")
        return config

    def check_global_batch(self, train_config, model_config, replicas):
        if train_config.batch_size < replicas:
            raise RunError(
                f"--batch-size {train_config.batch_size} is too small for {replicas} replicas: it is the global "
                "batch, split across the replicas; use at least one text per replica"
            )

    def settle_new_run(self, train_config, model_config):
        """`train_config`, once a vocabulary already in the new run directory is found to suit the task."""
        _check_vocabulary(Path(train_config.run_dir) / VOCAB_FILE, self.name)
        return train_config

    def read_and_encode(self, train_config, model_config, log):
        """Read the training and validation texts, settle the vocabulary and encode the texts.

        The learned vocabulary size goes into `model_config`, which is then saved in the run directory.
        """
        run_dir = Path(train_config.run_dir)
        texts = {split: load_split(train_config, split) for split in ("train", "validation")}
        path = run_dir / VOCAB_FILE
        _check_vocabulary(path, self.name)
        if not path.is_file():
            extra = (MASK_TOKEN,) if self.name == "mlm" else ()
            write_vocabulary(
                learn_vocabulary(texts["train"].texts, train_config.vocab_size, extra_reserved=extra), path
            )
        tokenizer = self.load_tokenizers(run_dir, train_config)[0]
        model_config.vocab_size = tokenizer.vocab_size
        model_config.validate().save(run_dir / MODEL_CONFIG_FILE)
        ids = {split: encode_texts(texts[split], tokenizer) for split in texts}
        skipped = texts["train"].skipped
        log(
            f"Corpus {train_config.corpus}: {len(texts['train'])} training texts "
            f"({int(ids['train'].flat_values.shape[0])} pieces"
            f"{', skipped while reading: ' + str(skipped) if skipped else ''}), {len(texts['validation'])} "
            f"validation texts; vocabulary {tokenizer.vocab_size} pieces"
        )
        return TextData(texts, tokenizer, ids, model_config.max_length)

    def tokenizers(self, data):
        return (data.tokenizer,)

    def load_tokenizers(self, run_dir, train_config):
        return (SubwordTokenizer(str(Path(run_dir) / VOCAB_FILE), name="tokenizer"),)

    def build_model(self, model_config):
        return build_language_model(model_config)

    def _dataset(self, ids, data, train_config, **options):
        seq_len = data.seq_len
        if self.name == "lm":
            return causal_lm_dataset(ids, seq_len, train_config.batch_size, seed=train_config.seed, **options)
        tokenizer = data.tokenizer
        return masked_lm_dataset(
            ids,
            seq_len,
            train_config.batch_size,
            tokenizer.vocab_size,
            mask_id=tokenizer.mask_id,
            num_reserved=tokenizer.num_reserved,
            seed=train_config.seed,
            **options,
        )

    def train_dataset(self, data, train_config):
        """The repeated, shuffled batches of the training texts (masked anew on each pass for `mlm`)."""
        return self._dataset(data.ids["train"], data, train_config, shuffle=True, repeat=True)

    def validation_dataset(self, data, train_config):
        """One pass over the validation texts (the same masks every time for `mlm`)."""
        return self._dataset(data.ids["validation"], data, train_config)

    def callbacks(self, model, model_config, train_config, data):
        return []

    def data_summary(self, data):
        return {
            "train_texts": len(data.texts["train"]),
            "train_pieces": int(data.ids["train"].flat_values.shape[0]),
            "skipped_while_reading": data.texts["train"].skipped,
        }

    def serving_module(self, model, model_config, tokenizers, run_dir, train_config):
        """`TextGenerator` (lm) or `MaskFiller` (mlm) with the run's sampler."""
        (tokenizer,) = tokenizers
        config_path = Path(run_dir) / MODEL_CONFIG_FILE
        if self.name == "mlm":
            return MaskFiller(
                model, model_config, config_path, (tokenizer.vocab_path,), tokenizer.mask_id, tokenizer.num_reserved
            )
        return TextGenerator(model, model_config, tokenizer, config_path, **sampler_settings(train_config))

    def evaluate(self, module, train_config, log):
        """Score the test split; for `lm`, log a few greedy continuations too.

        Returns:
            dict: `texts`, `tokens` (predicted), `loss` (mean cross-entropy, nats), `perplexity`,
            `accuracy`; for `lm` also `examples`, a list of `{prompt, continuation, text}`.
        """
        test = load_split(train_config, "test")
        (tokenizer,) = self.load_tokenizers(train_config.run_dir, train_config)
        data = TextData({}, tokenizer, {}, module.model_config.max_length)
        batches = self._dataset(encode_texts(test, tokenizer), data, train_config)
        scores = {"texts": len(test), **score_language_model(module.model, batches)}
        what = "next tokens" if self.name == "lm" else "masked tokens"
        if self.name == "lm":
            generator = module
            if train_config.sampler != "greedy":
                generator = TextGenerator(module.model, module.model_config, tokenizer, module._config_path)
            scores["examples"] = continue_texts(generator, test.texts[:EXAMPLES])
            for example in scores["examples"]:
                log(f"  {example['prompt']!r} -> {example['continuation']!r} (text {example['text']!r})")
        log(
            f"Test: loss {scores['loss']:.4f}, perplexity {scores['perplexity']:.2f}, token accuracy "
            f"{scores['accuracy']:.2%} over {scores['tokens']} {what} of {scores['texts']} texts"
        )
        return scores

    def export(self, module, train_config, export_dir=None, ids_only=False):
        """Export `module` as the next version of `EXPORT_DIR/MODEL_NAME` (`_ids` with `ids_only`), with warm-ups."""
        texts = load_split(train_config, "validation").texts[:WARMUP_SENTENCES]
        export_dir = export_dir or train_config.export_dir
        model_name = train_config.model_name
        (tokenizer,) = self.load_tokenizers(train_config.run_dir, train_config)
        if self.name == "mlm":
            if ids_only:
                raise RunError("A --task mlm export takes and gives token ids already; leave out --ids-only")
            row = prompt_ids(module.model_config, tokenizer, texts[:1])
            row = tf.where(tf.range(tf.shape(row)[1]) == 1, module.mask_id, row)  # the first piece masked
            return export_module(module, export_dir, model_name, {SIGNATURE_KEY: {"token_ids": row.numpy()}})
        prompts = [first_half(text) for text in texts] + [""]
        ids = prompt_ids(module.model_config, tokenizer, prompts).numpy()
        if ids_only:
            return export_module(
                module.ids_only(), export_dir, f"{model_name}_ids", {SIGNATURE_KEY: {"prompt_ids": ids}}
            )
        warmup = {
            SIGNATURE_KEY: {"prompt": tf.constant(prompts).numpy()},
            GENERATE_IDS_SIGNATURE_KEY: {"prompt_ids": ids},
        }
        return export_module(module, export_dir, model_name, warmup)


def sampler_settings(train_config):
    """The `IdsGenerator` arguments of a run's sampler: `sampler`, `seed` and the sampler's own options."""
    options = {
        "greedy": {},
        "beam": {"num_beams": train_config.num_beams},
        "top_k": {"k": train_config.top_k, "temperature": train_config.temperature},
        "top_p": {"p": train_config.top_p, "temperature": train_config.temperature},
        "random": {"temperature": train_config.temperature},
    }[train_config.sampler]
    return {"sampler": train_config.sampler, "seed": train_config.sampler_seed, **options}


def first_half(text):
    """The first half of a text's words (at least one): a prompt whose continuation can be compared."""
    words = text.split()
    return " ".join(words[: max(1, len(words) // 2)])


def prompt_ids(model_config, tokenizer, texts):
    """`<s>` and the pieces of each text, cut to `max_length - 1` tokens: int32 `[B, P]`, right-padded with 0."""
    pieces = tokenizer.tokenize(tf.constant(texts, tf.string))
    starts = tf.fill([pieces.nrows(), 1], tf.constant(START_ID, tf.int32))
    ids = tf.concat([starts, pieces], axis=1)[:, : model_config.max_length - 1]
    return ids.to_tensor(default_value=PAD_ID)


def continue_texts(generator, texts):
    """Continue the first half of each text with a `TextGenerator`.

    Returns:
        list of `{"prompt", "continuation", "text"}` dicts, one per text.
    """
    if not texts:
        return []
    prompts = [first_half(text) for text in texts]
    continuations = generator.generate(tf.constant(prompts, tf.string))["continuation"].numpy()
    return [
        {"prompt": prompt, "continuation": continuation.decode("utf-8"), "text": text}
        for prompt, continuation, text in zip(prompts, continuations, texts)
    ]


@tf.function(reduce_retracing=True, autograph=False)
def _batch_scores(model, inputs, labels):
    logits = tf.cast(model(inputs, training=False), tf.float32)  # (B, T, V)
    real = tf.not_equal(labels, PAD_ID)  # (B, T)
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)  # (B, T)
    hits = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels)
    weight = tf.cast(real, tf.float32)
    return tf.reduce_sum(nll * weight), tf.reduce_sum(tf.cast(hits, tf.float32) * weight), tf.reduce_sum(weight)


def score_language_model(model, batches):
    """Cross-entropy, perplexity and accuracy of a language model over every labelled token of `batches`.

    Args:
        model: a model of `build_language_model` (logits `[B, T, V]`).
        batches: a finite dataset of `(inputs int32 [B, T], labels int32 [B, T])`, labels 0 where
            nothing is predicted.

    Returns:
        dict: `tokens` (labelled), `loss` (mean cross-entropy in nats, no label smoothing),
        `perplexity` (`exp(loss)`), `accuracy` (argmax equals the label); 0 tokens give 0 loss,
        perplexity 1 and accuracy 0.
    """
    total = correct = count = 0.0
    for inputs, labels in batches:
        batch_total, batch_correct, batch_count = _batch_scores(model, inputs, labels)
        total, correct, count = total + float(batch_total), correct + float(batch_correct), count + float(batch_count)
    loss = total / count if count else 0.0
    return {
        "tokens": int(count),
        "loss": round(loss, 4),
        "perplexity": round(math.exp(loss), 3),
        "accuracy": round(correct / count, 4) if count else 0.0,
    }
