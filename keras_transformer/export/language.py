"""The language-model exports: prompts continued, or masked pieces filled, in the graph.

Language models are exported the way translation models are (`export_module`: the same layout,
versions, warm-up requests and models.config):

- a causal language model (`TextGenerator`, tensorflow-text ops):
    `serving_default`: `prompt: string[B]` -> `continuation: string[B]`, `output_ids: int32[B, L]`,
        `truncated: bool[B]`; the prompt is tokenized, `<s>` put in front, continued by cached
        generation with the sampler chosen at export time (greedy by default; a sampling one
        with its seed, so that a freshly loaded export samples the same continuations), and the
        generated tokens (up to `</s>`) detokenized;
    `generate_ids`:    `prompt_ids: int32[B, P]` -> `output_ids: int32[B, L]`, `truncated: bool[B]`;
  and its ids-only export (`IdsGenerator`, core ops only), whose `serving_default` is `generate_ids`.
  `L` is the model's `max_length`, prompt included; a prompt is cut to `L - 1` tokens (flagged
  `truncated`), so that at least one token is generated.
- a masked language model (`MaskFiller`, core ops only):
    `serving_default`: `token_ids: int32[B, T]` -> `filled_ids: int32[B, T']` (each `<mask>` replaced
        by the likeliest text piece, the other ids kept), `logits: float32[B, T', V]`,
        `truncated: bool[B]`; `T'` is `T` cut to the model's `max_length`.
"""

import tensorflow as tf

from keras_transformer.data.tokenizers import PAD_ID, RESERVED_TOKENS, START_ID
from keras_transformer.export.savedmodel import (
    GENERATE_IDS_SIGNATURE_KEY,
    MAX_TEXT_BYTES,
    SIGNATURE_KEY,
    ExportModule,
    checked_ids,
)


class IdsGenerator(ExportModule):
    """Prompt ids to prompt and continuation ids by cached generation, in core TensorFlow ops only.

    Args:
        model, model_config, config_path, vocab_paths: see `ExportModule`; `model` from
            `build_decoder_only`.
        sampler: a name of `generation.SAMPLERS`: "greedy", "beam", "top_k", "top_p", "random".
        seed: int, the seed of a sampler that draws at random: its seed generator's state is a
            variable of the export, so that every freshly loaded export samples alike.
        num_reserved: int, the vocabulary's reserved ids, never generated but `</s>` (see
            `generation.generate`).
        **options: the sampler's options (`num_beams`, `k`, `p`, `temperature`).
    """

    def __init__(
        self,
        model,
        model_config,
        config_path,
        vocab_paths=(),
        sampler="greedy",
        seed=0,
        num_reserved=len(RESERVED_TOKENS),
        **options,
    ):
        super().__init__(model, model_config, config_path, vocab_paths, name="generator")
        self.num_reserved = int(num_reserved)
        if model_config.max_length < 2:
            raise ValueError(f"Generation needs max_length >= 2. Received: max_length={model_config.max_length}")
        from keras_transformer.decoding.generation import get_sampler  # imports keras-hub: only for a language model

        # Built once, outside the traced function (a sampler made inside would make a new variable per trace).
        sampler_object = get_sampler(sampler, seed, **options)
        object.__setattr__(self, "sampler", sampler_object)  # untracked: only its state is saved
        generator = getattr(sampler_object, "seed_generator", None)
        self.sampler_state = [] if generator is None else [generator.state.value]
        self.sampler_settings = dict(sampler=sampler, seed=seed, **options)

    def signatures(self):
        """`{signature name: tf.function}` to save."""
        return {SIGNATURE_KEY: self.generate_ids}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="prompt_ids")], autograph=False)
    def generate_ids(self, prompt_ids):
        """Continues prompts given as ids: `prompt_ids: int32[B, P]`, right-padded with 0.

        A prompt should start with `<s>` (id 2), as the training texts do; a row of padding
        only starts from `<s>`.

        Returns:
            `{"output_ids": int32[B, L], "truncated": bool[B]}`: each prompt, cut to `L - 1`
            tokens, then its continuation, padding (0) after a generated `</s>`; `truncated`
            where the prompt was cut. `L` is the model's `max_length`.
        """
        prompt_ids = checked_ids(prompt_ids, self.model_config.vocab_size, "prompt_ids")
        room = self.model_config.max_length - 1
        truncated = tf.reduce_any(tf.not_equal(prompt_ids[:, room:], PAD_ID), axis=1)
        return {"output_ids": self._generate(prompt_ids[:, :room]), "truncated": truncated}

    def _generate(self, prompt_ids):
        """int32 `[B, P < L]` -> int32 `[B, L]`, the prompts and their continuations."""
        from keras_transformer.decoding.generation import generate

        return generate(
            self.model, prompt_ids, self.model_config.max_length, sampler=self.sampler, num_reserved=self.num_reserved
        )


class TextGenerator(IdsGenerator):
    """Prompt text to continuation text: tokenization, cached generation and detokenization in one graph.

    Args:
        model, model_config, config_path, sampler, seed, **options: see `IdsGenerator`.
        tokenizer: the run's `SubwordTokenizer` (its vocabulary is saved as an asset); its
            reserved tokens are never generated but `</s>`.
    """

    def __init__(self, model, model_config, tokenizer, config_path, sampler="greedy", seed=0, **options):
        super().__init__(model, model_config, config_path, (), sampler, seed, tokenizer.num_reserved, **options)
        self.tokenizer = tokenizer

    def signatures(self):
        return {SIGNATURE_KEY: self.generate, GENERATE_IDS_SIGNATURE_KEY: self.generate_ids}

    def ids_only(self):
        """The `IdsGenerator` of the same model and sampler, for the ids-only export."""
        return IdsGenerator(
            self.model,
            self.model_config,
            self._config_path,
            (self.tokenizer.vocab_path,),
            num_reserved=self.num_reserved,
            **self.sampler_settings,
        )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="prompt")], autograph=False)
    def generate(self, prompt):
        """Continues text: `prompt: string[B]` -> a dict of outputs.

        The outputs: `{"continuation": string[B], "output_ids": int32[B, L], "truncated": bool[B]}`:
        the generated text after the prompt (up to `</s>`), `<s>`, the prompt's ids and the
        generated ones, and whether the prompt was cut (more than `L - 2` pieces or
        `MAX_TEXT_BYTES` bytes: only its beginning was continued).
        """
        too_long = tf.strings.length(prompt) > MAX_TEXT_BYTES  # (B,)
        prompt = tf.strings.substr(prompt, 0, MAX_TEXT_BYTES)
        room = self.model_config.max_length - 2  # pieces after <s>, leaving one position to generate
        pieces = self.tokenizer.tokenize(prompt, max_words=room + 1)  # (B, (P)); see `Translator.translate`
        truncated = tf.logical_or(too_long, pieces.row_lengths() > room)
        starts = tf.fill([pieces.nrows(), 1], tf.constant(START_ID, tf.int32))
        prompt_ids = tf.concat([starts, pieces[:, :room]], axis=1).to_tensor(default_value=PAD_ID)  # (B, P)
        output_ids = self.generate_ids(prompt_ids)["output_ids"]  # (B, L); one generation graph, as in `Translator`
        extra = tf.shape(output_ids)[1] - tf.shape(prompt_ids)[1]
        in_prompt = tf.pad(tf.not_equal(prompt_ids, PAD_ID), [[0, 0], [0, extra]])  # (B, L)
        generated = tf.where(in_prompt, PAD_ID, output_ids)  # (B, L)
        return {
            "continuation": self.tokenizer.detokenize(generated),
            "output_ids": output_ids,
            "truncated": truncated,
        }


class MaskFiller(ExportModule):
    """Token ids with `<mask>`s to the masked language model's fill-in, in core TensorFlow ops only.

    Args:
        model, model_config, config_path, vocab_paths: see `ExportModule`; `model` from
            `build_encoder_only`, without a classification head.
        mask_id: the id of `<mask>`.
        num_reserved: the number of reserved ids; a mask is filled with a text piece, never one of them.
    """

    def __init__(self, model, model_config, config_path, vocab_paths, mask_id, num_reserved):
        super().__init__(model, model_config, config_path, vocab_paths, name="mask_filler")
        self.mask_id = int(mask_id)
        self.num_reserved = int(num_reserved)

    def signatures(self):
        """`{signature name: tf.function}` to save."""
        return {SIGNATURE_KEY: self.fill_masks}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids")], autograph=False)
    def fill_masks(self, token_ids):
        """Fills the masks of `token_ids: int32[B, T]`, right-padded with 0, `<s>` first as in training.

        Returns:
            `{"filled_ids": int32[B, T'], "logits": float32[B, T', V], "truncated": bool[B]}`:
            the ids with each `<mask>` replaced by its likeliest text piece, the model's logits
            at every position, and where a row was longer than `T' = min(T, max_length)`.
        """
        token_ids = checked_ids(token_ids, self.model_config.vocab_size, "token_ids")
        max_length = self.model_config.max_length
        truncated = tf.reduce_any(tf.not_equal(token_ids[:, max_length:], PAD_ID), axis=1)
        token_ids = token_ids[:, :max_length]
        logits = tf.cast(self.model(token_ids, training=False), tf.float32)  # (B, T', V)
        is_piece = tf.range(self.model_config.vocab_size) >= self.num_reserved  # (V,)
        best = tf.argmax(tf.where(is_piece, logits, float("-inf")), axis=-1, output_type=tf.int32)  # (B, T')
        filled = tf.where(tf.equal(token_ids, self.mask_id), best, token_ids)
        return {"filled_ids": filled, "logits": logits, "truncated": truncated}
