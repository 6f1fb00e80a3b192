"""The translation exports: raw text in, translation out, all in the graph; or token ids in and out.

Two kinds of export, because a SavedModel is loaded whole (one unknown op fails the load):

- the text export (`Translator`), which needs a model server with tensorflow-text ops (the stock
  TF Serving 2.12+ has them):
    `serving_default`: `text: string[B]` -> `translation: string[B]`, `score: float32[B]`,
        `truncated: bool[B]`
    `translate_ids`:   `source_ids: int32[B, S]` -> `output_ids: int32[B, L]`, `score`, `truncated`
- the ids-only export (`IdsTranslator`), core TensorFlow ops only, for servers built without
  tensorflow-text; its `serving_default` is `translate_ids`, and the vocabularies ride along as
  assets for the client to tokenize with.

With `jit_compile=True` (`TrainConfig.xla_decoding`) the decoding runs as one XLA computation
(`tf.function(jit_compile=True)`: the while loop and every step in it compiled together, instead of
TensorFlow running each of a step's ops in turn), on source ids padded to `max_source_len`: one
compile per batch size, at the first request of that size (the export's warm-up requests make
the first single-sentence request's). The graph holds the same ops; a model server must compile
it: TF Serving runs it only with `--xla_cpu_compilation_enabled=true`.

Defined results for awkward input: a text with no tokens (empty, whitespace only) and a row of
ids that is all padding translate to `""` / all padding with score 0; input longer than the
model's `max_source_len` is cut to it and flagged `truncated`; so is a text longer than
`MAX_TEXT_BYTES` bytes, of which only the first `MAX_TEXT_BYTES` are read (that bounds the time
of one text); invalid UTF-8 bytes are replaced (U+FFFD) and unknown characters become `<unk>`
before translation; an empty batch gives empty outputs; ids outside the vocabulary are rejected
with an `InvalidArgumentError` naming them.
"""

import tensorflow as tf

from keras_transformer.checks import check_int
from keras_transformer.data.tokenizers import PAD_ID
from keras_transformer.decoding import beam_search, greedy_decode
from keras_transformer.export.savedmodel import (
    IDS_SIGNATURE_KEY,
    MAX_TEXT_BYTES,
    SIGNATURE_KEY,
    ExportModule,
    checked_ids,
)


class IdsTranslator(ExportModule):
    """Token ids to token ids, in core TensorFlow ops only (the ids-only export).

    Args:
        model: a trained model from `build_transformer`.
        model_config: its `ModelConfig` (`max_source_len` truncates inputs, `max_target_len`
            bounds outputs, `source/target_vocab_size` bound the ids).
        config_path: the `model_config.json` to ship as an asset.
        vocab_paths: the source and target vocabulary files to ship as assets.
        beam_size: int, 1 for greedy decoding.
        length_penalty: float, the beam search's GNMT alpha.
        jit_compile: bool, decode as one XLA computation (see the module's docstring).
    """

    def __init__(
        self, model, model_config, config_path, vocab_paths=(), beam_size=4, length_penalty=0.6, jit_compile=False
    ):
        check_int("beam_size", beam_size, 1)
        super().__init__(model, model_config, config_path, vocab_paths, name="translator")
        self.beam_size = beam_size
        self.length_penalty = length_penalty
        self.jit_compile = bool(jit_compile)

    def signatures(self):
        """`{signature name: tf.function}` to save."""
        return {SIGNATURE_KEY: self.translate_ids}

    # autograph=False here and below: the graphs have explicit control flow (ops.while_loop, ops.cond),
    # so converting their Python source would only add tracing time (3.8 s of CPU in a tiny `train`).
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")], autograph=False)
    def translate_ids(self, source_ids):
        """Translates token ids: `source_ids: int32[B, S]` (0 = padding) -> a dict of outputs.

        The outputs: `{"output_ids": int32[B, L], "score": float32[B], "truncated": bool[B]}`;
        `L` is `max_target_len`.
        """
        source_ids = checked_ids(source_ids, self.model_config.source_vocab_size, "source_ids")
        max_source_len = self.model_config.max_source_len
        truncated = tf.reduce_any(tf.not_equal(source_ids[:, max_source_len:], PAD_ID), axis=1)
        return {**self._decode(source_ids[:, :max_source_len]), "truncated": truncated}

    def _decode(self, source_ids):
        """int32 `[B, S <= max_source_len]` -> `{"output_ids": [B, L], "score": [B]}`."""
        # At least one source position, so that a batch of empty inputs still has keys; under XLA
        # `max_source_len` of them, so that only the batch size makes a new shape to compile.
        length = self.model_config.max_source_len if self.jit_compile else 1
        source_ids = tf.pad(source_ids, [[0, 0], [0, tf.maximum(length - tf.shape(source_ids)[1], 0)]])
        if self.jit_compile:
            # Made while `translate_ids` is traced: saved inside its graph, not as a function of its own.
            return tf.function(self._decode_padded, jit_compile=True, autograph=False)(source_ids)
        return self._decode_padded(source_ids)

    def _decode_padded(self, source_ids):
        """int32 `[B, S >= 1]` -> `{"output_ids": [B, L], "score": [B]}`."""
        max_length = self.model_config.max_target_len
        if self.beam_size == 1:
            output_ids, scores = greedy_decode(self.model, source_ids, max_length)
        else:
            output_ids, scores = beam_search(self.model, source_ids, max_length, self.beam_size, self.length_penalty)
        empty = tf.reduce_all(tf.equal(source_ids, PAD_ID), axis=1)  # (B,): nothing to translate
        return {
            "output_ids": tf.where(empty[:, None], PAD_ID, output_ids),
            "score": tf.where(empty, 0.0, scores),
        }


class Translator(IdsTranslator):
    """Text to text: tensorflow-text tokenization, decoding and detokenization in one graph.

    Args:
        model, model_config, config_path, beam_size, length_penalty, jit_compile: see `IdsTranslator`.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s of the run (their vocabularies
            are saved as assets).
    """

    def __init__(
        self,
        model,
        model_config,
        source_tokenizer,
        target_tokenizer,
        config_path,
        beam_size=4,
        length_penalty=0.6,
        jit_compile=False,
    ):
        super().__init__(model, model_config, config_path, (), beam_size, length_penalty, jit_compile)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer

    def signatures(self):
        return {SIGNATURE_KEY: self.translate, IDS_SIGNATURE_KEY: self.translate_ids}

    def ids_only(self):
        """The `IdsTranslator` of the same model and decoding settings, for the ids-only export."""
        vocab_paths = (self.source_tokenizer.vocab_path, self.target_tokenizer.vocab_path)
        return IdsTranslator(
            self.model,
            self.model_config,
            self._config_path,
            vocab_paths,
            self.beam_size,
            self.length_penalty,
            self.jit_compile,
        )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def translate(self, text):
        """Translates text: `text: string[B]` -> a dict of outputs.

        The outputs: `{"translation": string[B], "score": float32[B], "truncated": bool[B]}`.
        `truncated` is true where the text has more than `max_source_len` tokens or more than
        `MAX_TEXT_BYTES` bytes: only its beginning was translated.
        """
        source_ids, truncated = source_ids_of_text(self.source_tokenizer, text, self.model_config.max_source_len)
        # Through the ids signature's function: one decoder graph in the SavedModel (and one trace
        # when saving), shared by both signatures.
        outputs = self.translate_ids(source_ids)
        return {
            "translation": self.target_tokenizer.detokenize(outputs["output_ids"]),
            "score": outputs["score"],
            "truncated": truncated,
        }


def source_ids_of_text(tokenizer, text, max_source_len):
    """The source ids a translation reads from texts, and which texts it reads only in part.

    Args:
        tokenizer: the source `SubwordTokenizer`.
        text: string tensor `[B]`.
        max_source_len: int, the most source ids the model reads.

    Returns:
        `(source_ids, truncated)`: int32 `[B, S]` (`S <= max_source_len`, 0 = padding) and bool
        `[B]`, true where the text has more than `max_source_len` pieces or more than
        `MAX_TEXT_BYTES` bytes.
    """
    too_long = tf.strings.length(text) > MAX_TEXT_BYTES  # (B,)
    text = tf.strings.substr(text, 0, MAX_TEXT_BYTES)  # a character cut in two reads as U+FFFD
    # One word more than fits: every word gives at least one piece, so that extra word shows
    # whether the text is longer than `max_source_len` pieces.
    pieces = tokenizer.tokenize(text, max_words=max_source_len + 1)  # (B, (S))
    truncated = tf.logical_or(too_long, pieces.row_lengths() > max_source_len)
    return pieces[:, :max_source_len].to_tensor(default_value=PAD_ID), truncated  # (B, S), (B,)
