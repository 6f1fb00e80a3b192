"""Generating from a decoder-only language model: a key/value cache and keras-hub's samplers.

`generate(model, prompt_ids, max_length, sampler=...)` continues right-padded prompts of any
lengths. It runs the model once over the prompts (`CachedDecoderOnly.prefill`), keeping every
block's self-attention keys and values in a cache of `max_length` positions, then feeds one token
at a time (`CachedDecoderOnly.next_token_logits`): the cached decoding of
`keras_transformer.decoding`, with the blocks' shared cached self-attention step, without an
encoder.

The choice of each next token is keras-hub's: `keras_hub.samplers.GreedySampler`, `BeamSampler`,
`TopKSampler`, `TopPSampler`, `RandomSampler` (each with a `temperature`), or their names. A
sampler calls `next(prompt, cache, index)` for the logits of position `index` from the tokens
before it, keeps the prompt's tokens where `mask` is True, writes its choice elsewhere, and stops
once every row has generated a stop token.

Everything is written with `keras.ops`, so it runs on every Keras backend and traces into one
graph (e.g. a `tf.function` for a SavedModel export). A generated token is never a reserved one
but `</s>` (`<pad>`, `<unk>`, `<s>`, and `<mask>` where the vocabulary has it: `num_reserved`);
after a row's generated `</s>` its output is padding (0).
"""

import keras_hub
from keras import ops

from keras_transformer.checks import check_choice, check_int
from keras_transformer.data.special_tokens import END_ID, PAD_ID, RESERVED_TOKENS, START_ID
from keras_transformer.decoding.translation import forbid_never_emitted
from keras_transformer.masks import padding_mask
from keras_transformer.models.language import LanguageModelLayers, embed

# The samplers `generate` accepts by name, each keras-hub's.
SAMPLERS = {
    "greedy": keras_hub.samplers.GreedySampler,
    "beam": keras_hub.samplers.BeamSampler,
    "top_k": keras_hub.samplers.TopKSampler,
    "top_p": keras_hub.samplers.TopPSampler,
    "random": keras_hub.samplers.RandomSampler,
}


def get_sampler(sampler="greedy", seed=None, **options):
    """A keras-hub sampler from its name or an instance, seeded.

    Args:
        sampler: a name in `SAMPLERS` (`"greedy"`, `"beam"`, `"top_k"`, `"top_p"`, `"random"`)
            or a `keras_hub.samplers.Sampler` instance.
        seed: int or None. Given, a sampler that draws at random is a new one with this seed
            (an instance is copied from its config, not changed), so that equal seeds give equal
            samples. None keeps an instance as it is: its seed generator advances with each use.
        **options: arguments of the named sampler's class, e.g. `k=10, temperature=0.7`.

    Returns:
        A `keras_hub.samplers.Sampler`.

    Raises:
        ValueError: an unknown name, options given with an instance, or a `BeamSampler` that
            returns all its beams.
    """
    if isinstance(sampler, str):
        sampler = SAMPLERS[check_choice("sampler", sampler, SAMPLERS)](**options)
    elif not isinstance(sampler, keras_hub.samplers.Sampler):
        raise ValueError(f"`sampler` must be a name or a keras-hub sampler. Received: sampler={sampler!r}")
    elif options:
        raise ValueError(f"Options are for a sampler given by name. Received: {sorted(options)} with {sampler!r}")
    if getattr(sampler, "return_all_beams", False):
        raise ValueError("`generate` returns the best beam: build the BeamSampler with return_all_beams=False")
    config = sampler.get_config()
    if seed is not None and "seed" in config:
        sampler = type(sampler).from_config({**config, "seed": seed})
    return sampler


class CachedDecoderOnly:
    """A decoder-only model's next-token logits, one position at a time, with a key/value cache.

    `prefill` runs the model once over whole prompts and returns the cache; `next_token_logits`
    is keras-hub's `next(prompt, cache, index)`, the function a sampler calls at each step (and
    the one to trace, e.g. in a `tf.function`, for an export that steps itself). The cache is a
    tuple with one block cache per block: `(key, value)`, float tensors `[B, H, L, K]` (and, under a
    tutorial variant's sign rule, `real` `[B, L]`; see `DecoderOnlyBlock.prefill`).

    Args:
        model: a model from `keras_transformer.models.build_decoder_only`.
        num_reserved: int, the vocabulary's reserved ids `0 .. num_reserved - 1`, never emitted
            but `</s>`: 4 (`RESERVED_TOKENS`), or 5 for a vocabulary with `<mask>` (its
            tokenizer's `num_reserved`).

    Raises:
        ValueError: `model` is not a decoder-only model.
    """

    def __init__(self, model, num_reserved=len(RESERVED_TOKENS)):
        self.num_reserved = num_reserved
        try:
            self.layers = LanguageModelLayers.from_model(model)
        except KeyError as error:
            raise ValueError(f"Not a model of `build_decoder_only`: it has no layer {error}") from None
        if not self.layers.blocks or not self.layers.causal:
            raise ValueError(f"Generation needs a decoder-only (causal) model. Received: model {model.name!r}")
        positions = self.layers.positions
        # The longest sequence the positions have encodings for (None: sinusoids, any length).
        self.max_length = positions.max_length if positions.learned else None

    def prefill(self, token_ids, length):
        """Run the model over whole prompts and keep every block's self-attention keys and values.

        Args:
            token_ids: int tensor `[B, P]`, right-padded prompts (0 = padding).
            length: int L >= P, the number of positions of the cache.

        Returns:
            `(hidden, cache)`: the last block's outputs, float `[B, L, D]` (zero after the prompts),
            and the cache, correct at every prompt position (the rest is overwritten by the steps).
        """
        token_ids = ops.cast(token_ids, "int32")
        extra = length - ops.shape(token_ids)[1]
        hidden, mask = embed(self.layers, token_ids, training=False)  # (B, P, D), (B, P)
        cache = []
        for block in self.layers.blocks:
            hidden, block_cache = block.prefill(hidden, mask)  # (B, P, D), (B, H, P, K) x 2, ...
            cache.append(block.pad_self_cache(block_cache, extra))
        return ops.pad(hidden, ((0, 0), (0, extra), (0, 0))), tuple(cache)

    def next_token_logits(self, token_ids, cache, index):
        """The logits of the token at position `index`, given the tokens before it.

        Feeds the token at `index - 1` through the blocks, attending to the cached positions
        `0 .. index - 2` and writing its own keys and values into the cache.

        Args:
            token_ids: int tensor `[B, L]`, real tokens at positions `0 .. index - 1` (later
                positions are ignored).
            cache: from `prefill` or the previous step, correct at positions `0 .. index - 2`.
            index: int scalar >= 1.

        Returns:
            `(logits, hidden, cache)`: float32 `[B, V]` (reserved ids but `</s>` impossible), the
            last block's output `[B, D]` at `index - 1`, and the cache with `index - 1` written.
        """
        layers = self.layers
        position = ops.cast(index, "int32") - 1
        batch, length = ops.shape(token_ids)[0], ops.shape(token_ids)[1]
        token = ops.take(ops.cast(token_ids, "int32"), ops.reshape(position, (1,)), axis=1)  # (B, 1)
        hidden = layers.token_embedding(token)  # (B, 1, D)
        hidden = layers.positions(hidden, mask=ops.ones((batch, 1), dtype="bool"), start=position)
        # The step's causality: position `index - 1` attends to itself and the positions before it.
        keys_mask = ops.broadcast_to(ops.arange(length)[None, :] <= position, (batch, length))  # (B, L)
        new_cache = []
        for block, block_cache in zip(layers.blocks, cache):
            hidden, block_cache = block.decode_step(hidden, position, block_cache, keys_mask)  # (B, 1, D)
            new_cache.append(block_cache)
        logits = layers.logits(hidden)[:, 0, :]  # (B, V)
        return forbid_never_emitted(logits, self.num_reserved), hidden[:, 0, :], tuple(new_cache)


def generate(
    model,
    prompt_ids,
    max_length,
    sampler="greedy",
    seed=None,
    end_id=END_ID,
    start_id=START_ID,
    num_reserved=len(RESERVED_TOKENS),
):
    """Continue prompts with a decoder-only language model, with a key/value cache.

    Args:
        model: a model from `keras_transformer.models.build_decoder_only`.
        prompt_ids: int tensor `[B, P]`, the prompts right-padded with 0, of any lengths. A row
            with no token starts from `start_id`.
        max_length: int L >= P, the length of the outputs, prompts included (with learned
            positions, at most the model's `max_length`).
        sampler: a keras-hub sampler or its name, see `get_sampler`: `"greedy"` (default),
            `"beam"`, `"top_k"`, `"top_p"`, `"random"`, or e.g.
            `keras_hub.samplers.TopKSampler(k=10, temperature=0.7)`.
        seed: int or None; given, sampling is reproducible (see `get_sampler`). Inside a traced
            function, pass a sampler built outside it, with its seed, and no `seed` (a seed makes
            a new sampler, whose seed generator is a new variable).
        end_id: int id that ends a sequence, or None to always generate up to `max_length`.
        start_id: int id given to empty prompts.
        num_reserved: int, the vocabulary's reserved ids, never generated but `END_ID`: 4
            (`<pad>`, `<unk>`, `<s>`, `</s>`), or the tokenizer's `num_reserved` (5 where the
            vocabulary has `<mask>`).

    Returns:
        int32 `[B, L]`: each prompt followed by its continuation; padding (0) after a generated
        `end_id`, and nowhere else.

    Raises:
        ValueError: a bad `max_length`, sampler or model (the message names it).

    Example:
    >>> model = build_decoder_only(language_model_preset("tiny", "decoder", vocab_size=50))
    >>> generate(model, np.array([[2, 7, 9], [2, 0, 0]]), 8, keras_hub.samplers.TopKSampler(k=5), seed=1).shape
    (2, 8)
    """
    check_int("max_length", max_length, 1)
    sampler = get_sampler(sampler, seed)
    decoder = CachedDecoderOnly(model, num_reserved)
    if decoder.max_length is not None and max_length > decoder.max_length:
        raise ValueError(
            f"`max_length` is longer than the model's learned positions. Received: max_length={max_length}, "
            f"model max_length={decoder.max_length}"
        )
    prompt_ids = ops.cast(prompt_ids, "int32")
    batch, prompt_length = ops.shape(prompt_ids)[0], ops.shape(prompt_ids)[1]
    if isinstance(prompt_length, int) and prompt_length > max_length:
        raise ValueError(
            f"The prompts are longer than `max_length`. Received: prompt length={prompt_length}, "
            f"max_length={max_length}"
        )

    def run():
        return _generate(decoder, sampler, prompt_ids, max_length, end_id, start_id, model)

    # TensorFlow's oneDNN CPU convolution mishandles an empty batch (see `keras_transformer.decoding`):
    # an empty batch never reaches the model.
    if isinstance(batch, int):
        return run() if batch else ops.zeros((0, max_length), dtype="int32")
    return ops.cond(batch > 0, run, lambda: ops.zeros((batch, max_length), dtype="int32"))


def _generate(decoder, sampler, prompt_ids, max_length, end_id, start_id, model):
    prompt_ids = prompt_ids[:, :max_length]  # a no-op but where the prompts' length is only known when run
    prompt_length = ops.shape(prompt_ids)[1]
    tokens = ops.pad(prompt_ids, ((0, 0), (0, max_length - prompt_length)))  # (B, L)
    empty = ops.logical_not(ops.any(padding_mask(tokens), axis=1))  # (B,)
    at_start = ops.equal(ops.arange(max_length), 0)[None, :]  # (1, L)
    tokens = ops.where(ops.logical_and(empty[:, None], at_start), start_id, tokens)
    prompt_mask = padding_mask(tokens)  # (B, L)
    # The prefill covers the prompts' columns (all L when their number is not known before running).
    prefill_length = max(prompt_length, 1) if isinstance(prompt_length, int) else max_length
    hidden, cache = decoder.prefill(tokens[:, :prefill_length], max_length)
    outputs = sampler(
        next=decoder.next_token_logits,
        prompt=tokens,
        cache=cache,
        index=ops.min(ops.sum(ops.cast(prompt_mask, "int32"), axis=1)),  # the first column to fill
        mask=prompt_mask,
        stop_token_ids=None if end_id is None else (end_id,),
        hidden_states=hidden,
        model=model,
    )
    return pad_after_end(ops.cast(outputs, "int32"), prompt_mask, end_id)


def pad_after_end(tokens, prompt_mask, end_id=END_ID):
    """Replace every token after a row's first generated `end_id` by padding (0).

    Args:
        tokens: int tensor `[B, L]`, prompts and their continuations.
        prompt_mask: bool tensor `[B, L]`, True at the prompts' tokens (an `end_id` there ends
            nothing).
        end_id: int, or None to leave `tokens` as they are.

    Returns:
        int tensor `[B, L]`.
    """
    if end_id is None:
        return tokens
    ends = ops.cast(ops.logical_and(ops.equal(tokens, end_id), ops.logical_not(prompt_mask)), "int32")  # (B, L)
    after_end = ops.cumsum(ends, axis=1) - ends > 0  # (B, L)
    return ops.where(after_end, PAD_ID, tokens)
