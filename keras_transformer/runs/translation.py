"""The translation task of a run (`train --task translate`): sentence pairs, the encoder-decoder, BLEU, `Translator`.

`TranslationTask` gives the job (`runs.job`) what is particular to translation:

- text: the sentence pairs of the corpus (`data.parallel_text.load_corpus`);
- two WordPiece vocabularies, `RUN_DIR/source_vocab.txt` and `target_vocab.txt`, learned from the
  training pairs once (`--joint-vocab`: one vocabulary, written to both files), reused after;
- the encoder-decoder of `build_transformer`, on batches of encoded pairs (`--batch-size` pairs,
  or `--batch-tokens` tokens);
- the optional validation BLEU after every epoch, and the evaluation on the test split (exact
  match and BLEU, `evaluation.evaluate_translator`);
- the export: a `Translator` (text in, translation out), or with `ids_only` its ids-only model,
  with warm-up requests made of the first validation sentences.
"""

import dataclasses
from pathlib import Path

import tensorflow as tf

from keras_transformer.config import ModelConfig, preset, variant_switches
from keras_transformer.data.parallel_text import load_corpus
from keras_transformer.data.tokenizers import SubwordTokenizer
from keras_transformer.data.translation_batches import EncodedPairs, encode_pairs, make_dataset
from keras_transformer.data.vocabulary import learn_translation_vocabularies, write_vocabulary
from keras_transformer.evaluation import ValidationBleu, evaluate_translator
from keras_transformer.export import IDS_SIGNATURE_KEY, SIGNATURE_KEY, Translator, export_translator
from keras_transformer.models import build_transformer
from keras_transformer.runs.directory import (
    LANGUAGE_MODEL_FIELDS,
    MODEL_CONFIG_FILE,
    TRANSLATION_MODEL_FIELDS,
    WARMUP_SENTENCES,
    RunError,
)
from keras_transformer.runs.tasks import register_task


@register_task("translate")
class TranslationTask:
    """The parts of a run that are translation's own: sentence pairs, the encoder-decoder, BLEU, `Translator`.

    It has the methods of `runs.tasks.Task`.

    Args:
        name: the task's name, "translate".
    """

    config_class = ModelConfig

    def __init__(self, name="translate"):
        self.name = name

    def model_config(self, preset_name, model_overrides):
        """The model of a new run: `preset` with the overrides (raises `RunError`)."""
        lm_only = sorted(set(model_overrides) & (LANGUAGE_MODEL_FIELDS - TRANSLATION_MODEL_FIELDS))
        if lm_only:
            raise RunError(
                f"--{lm_only[0].replace('_', '-')} is a language-model setting (--task lm/mlm); a translation model's "
                "lengths are --max-source-len and --max-target-len"
            )
        return _model_config(preset_name, model_overrides)

    def check_global_batch(self, train_config, model_config, replicas):
        _check_global_batch(train_config, model_config, replicas)

    def settle_new_run(self, train_config, model_config):
        """`train_config` with `joint_vocab` settled: one vocabulary where one table embeds both sides.

        Unset, it follows the model's embedding sharing (`variant_switches`: the paper variant's is
        one table); set false with one table, it is an error.
        """
        one_table = variant_switches(model_config)["embedding_sharing"] == "all"
        if train_config.joint_vocab is None:
            return dataclasses.replace(train_config, joint_vocab=one_table)
        if one_table and not train_config.joint_vocab:
            raise RunError(
                "--embedding-sharing all (or --variant paper) embeds source and target with one table, so both sides "
                "need one vocabulary: drop --joint-vocab false (or share the decoder's tables only: "
                "--embedding-sharing decoder)"
            )
        return train_config

    def read_and_encode(self, train_config, model_config, log):
        return _read_and_encode(train_config, model_config, log)

    def tokenizers(self, data):
        return data.source_tokenizer, data.target_tokenizer

    def load_tokenizers(self, run_dir, train_config):
        return _make_tokenizers(run_dir, train_config)

    def build_model(self, model_config):
        return build_transformer(model_config)

    def train_dataset(self, data, train_config):
        """The repeated, shuffled global batches of the training pairs."""
        batching = dict(batch_size=train_config.batch_size, batch_tokens=train_config.batch_tokens)
        return make_dataset(data.train_pairs, shuffle=True, repeat=True, seed=train_config.seed, **batching)

    def validation_dataset(self, data, train_config):
        """One pass over the validation pairs."""
        batching = dict(batch_size=train_config.batch_size, batch_tokens=train_config.batch_tokens)
        return make_dataset(data.validation_pairs, **batching)

    def callbacks(self, model, model_config, train_config, data):
        """The validation BLEU, when asked for."""
        if not train_config.validation_bleu_sentences:
            return []
        run_dir = Path(train_config.run_dir)
        return [
            ValidationBleu(
                lambda: make_translator(
                    model,
                    model_config,
                    data.source_tokenizer,
                    data.target_tokenizer,
                    run_dir,
                    train_config,
                    beam_size=1,
                ),
                data.texts["validation"].head(train_config.validation_bleu_sentences),
            )
        ]

    def data_summary(self, data):
        return {
            "train_pairs": len(data.train_pairs),
            "dropped_pairs": data.train_pairs.num_dropped,
            "skipped_while_reading": data.texts["train"].skipped,
        }

    def serving_module(self, model, model_config, tokenizers, run_dir, train_config):
        source_tokenizer, target_tokenizer = tokenizers
        return make_translator(model, model_config, source_tokenizer, target_tokenizer, run_dir, train_config)

    def evaluate(self, module, train_config, log):
        return evaluate_translator(module, train_config, log)

    def export(self, module, train_config, export_dir=None, ids_only=False):
        return _export_translator(module, train_config, export_dir, ids_only)


@dataclasses.dataclass
class _RunData:
    """The text and tokens of a run: splits read, vocabularies settled, pairs encoded."""

    texts: dict  # split -> ParallelText, for "train" and "validation"
    source_tokenizer: SubwordTokenizer
    target_tokenizer: SubwordTokenizer
    train_pairs: EncodedPairs
    validation_pairs: EncodedPairs


def _read_and_encode(train_config, model_config, log):
    """Read the training and validation splits, settle the vocabularies and encode the pairs.

    The learned vocabulary sizes go into `model_config`, which is then saved in the run directory.
    """
    run_dir = Path(train_config.run_dir)
    texts = {split: load_corpus(train_config, split) for split in ("train", "validation")}
    source_tokenizer, target_tokenizer = _tokenizers(run_dir, train_config, texts["train"])
    model_config.source_vocab_size = source_tokenizer.vocab_size
    model_config.target_vocab_size = target_tokenizer.vocab_size
    model_config.validate().save(run_dir / MODEL_CONFIG_FILE)
    train_pairs, validation_pairs = (
        encode_pairs(
            texts[split].sources,
            texts[split].targets,
            source_tokenizer,
            target_tokenizer,
            model_config.max_source_len,
            model_config.max_target_len,
        )
        for split in ("train", "validation")
    )
    skipped = texts["train"].skipped
    log(
        f"Corpus {train_config.corpus}: {len(train_pairs)} training pairs ({train_pairs.num_dropped} dropped as "
        f"too long or empty{', skipped while reading: ' + str(skipped) if skipped else ''}), "
        f"{len(validation_pairs)} validation pairs; vocabularies {source_tokenizer.vocab_size} / "
        f"{target_tokenizer.vocab_size} pieces"
    )
    return _RunData(texts, source_tokenizer, target_tokenizer, train_pairs, validation_pairs)


def _tokenizers(run_dir, train_config, train_text):
    """The run's source and target `SubwordTokenizer`s, learned from the training split once.

    Later they are read from `RUN_DIR/{source,target}_vocab.txt`; with `joint_vocab`, one
    vocabulary learned from both sides is written to both files.
    """
    paths = {side: Path(run_dir) / f"{side}_vocab.txt" for side in ("source", "target")}
    normalize = train_config.normalizes_source
    if not all(path.is_file() for path in paths.values()):
        vocabularies = learn_translation_vocabularies(
            train_text.sources,
            train_text.targets,
            train_config.source_vocab_size,
            train_config.target_vocab_size,
            joint=train_config.joint_vocab,
            normalize_source=normalize,
        )
        for side, path in paths.items():
            write_vocabulary(vocabularies[side], path)
    return _make_tokenizers(run_dir, train_config)


def _make_tokenizers(run_dir, train_config):
    """`(source, target)` `SubwordTokenizer`s over RUN_DIR's vocabularies; the source one may normalize typing."""
    return tuple(
        SubwordTokenizer(
            str(Path(run_dir) / f"{side}_vocab.txt"),
            name=f"{side}_tokenizer",
            normalize_typing=side == "source" and train_config.normalizes_source,
        )
        for side in ("source", "target")
    )


def _model_config(preset_name, model_overrides):
    """The model of a new run: the preset with the overrides on top, validated once.

    Raises:
        RunError: an unknown field or an invalid combination; the message names the values and
            where they came from.
    """
    try:
        return preset(preset_name, **model_overrides)
    except (TypeError, ValueError) as error:  # TypeError: a field ModelConfig does not have
        given = ", ".join(f"{name}={value!r}" for name, value in sorted(model_overrides.items()))
        source = f"the {preset_name!r} preset" + (f" with {given}" if given else "")
        raise RunError(f"{error} (model: {source})") from None


def _check_global_batch(train_config, model_config, replicas):
    """A global batch must give every replica at least one pair (see `distribute.split_batches`)."""
    if train_config.batch_tokens:
        longest = max(model_config.max_source_len, model_config.max_target_len)
        if train_config.batch_tokens // longest < replicas:
            raise RunError(
                f"--batch-tokens {train_config.batch_tokens} is too small for {replicas} replicas: batches of "
                f"{longest}-token pairs must hold a pair per replica; use at least {longest * replicas}"
            )
    elif train_config.batch_size < replicas:
        raise RunError(
            f"--batch-size {train_config.batch_size} is too small for {replicas} replicas: it is the global "
            "batch, split across the replicas; use at least one pair per replica"
        )


def make_translator(
    model, model_config, source_tokenizer, target_tokenizer, run_dir, train_config, beam_size=None, length_penalty=None
):
    """The run's `Translator`: its `beam_size` and `length_penalty` unless given, and its `xla_decoding`."""
    return Translator(
        model,
        model_config,
        source_tokenizer,
        target_tokenizer,
        Path(run_dir) / MODEL_CONFIG_FILE,
        beam_size=beam_size or train_config.beam_size,
        length_penalty=train_config.length_penalty if length_penalty is None else length_penalty,
        jit_compile=train_config.xla_decoding,
    )


def _export_translator(translator, train_config, export_dir=None, ids_only=False):
    sources = load_corpus(train_config, "validation").sources
    texts = tf.constant(sources[:WARMUP_SENTENCES] + [""])
    source_ids = translator.source_tokenizer.tokenize(texts).to_tensor().numpy()
    ids_requests, text_requests = [{"source_ids": source_ids}], [{"text": texts.numpy()}]
    if translator.jit_compile:  # XLA compiles per batch size: a single sentence's too
        ids_requests.append({"source_ids": source_ids[:1]})
        text_requests.append({"text": texts.numpy()[:1]})
    warmup = {IDS_SIGNATURE_KEY: ids_requests}
    model_name = train_config.model_name
    if ids_only:
        translator, model_name = translator.ids_only(), f"{model_name}_ids"
        warmup = {SIGNATURE_KEY: ids_requests}
    else:
        warmup[SIGNATURE_KEY] = text_requests
    return export_translator(translator, export_dir or train_config.export_dir, model_name, warmup)
