"""Translating token ids: greedy decoding and beam search, with or without a key/value cache.

The tutorial decodes by re-running the whole decoder on the growing output at every step
(`greedy_decode(..., use_cache=False)`, kept as the reference): `L` output tokens cost `L` decoder
passes over up to `L` positions. The cached decoders run the encoder once, project the encoder
output into each block's cross-attention keys and values once, and keep every decoder
self-attention layer's keys and values in a cache of `L` slots: each step feeds only the newest
token through the decoder.

Everything is written with `keras.ops` (`ops.while_loop`, static shapes), so it traces into one
`tf.function` graph for the SavedModel export, and compiles with XLA (`jit_compile=True`).

Decoders never emit a reserved token but `</s>` (`<pad>`, `<unk>`, `<s>`: `forbid_never_emitted`).
After a sentence's `</s>`, its output is padding (0).
Scores are log-probabilities of the whole output under the model (the sum over its tokens,
`</s>` included), in float32.
"""

from keras import ops

from keras_transformer.checks import check_int, check_number
from keras_transformer.data.special_tokens import END_ID, PAD_ID, RESERVED_TOKENS, START_ID
from keras_transformer.masks import padding_mask
from keras_transformer.models import TransformerLayers, decode, encode

# The log-probability given to tokens a decoder may not choose (finite, so sums stay finite).
IMPOSSIBLE = -1e9


def greedy_decode(model, source_ids, max_length, use_cache=True, end_id=END_ID):
    """Translate a batch of token ids greedily: the most likely next token at every step.

    Args:
        model: a model from `build_transformer`.
        source_ids: int tensor `[B, S]`, 0 = padding.
        max_length: int, most tokens to generate per sentence, `</s>` included.
        use_cache: bool; False re-runs the decoder on the whole prefix at every step, as the
            tutorial does (same tokens, slower).
        end_id: int id that ends a sentence, or None to always generate `max_length` tokens
            (for benchmarks).

    Returns:
        `(output_ids, scores)`: int32 `[B, max_length]` (padding after `</s>`) and float32 `[B]`.
    """
    return _guard_empty_batch(source_ids, max_length, lambda ids: _greedy(model, ids, max_length, use_cache, end_id))


def beam_search(model, source_ids, max_length, beam_size=4, alpha=0.6, end_id=END_ID):
    """Translate a batch of token ids with beam search and the GNMT length penalty.

    Each sentence keeps `beam_size` hypotheses, ranked by `log P / lp` with
    `lp = ((5 + length) / 6) ** alpha` (Wu et al. 2016, eq. 14); a hypothesis that has produced
    `</s>` stays in the beam with its final score. The search stops when every hypothesis of
    every sentence has ended, or after `max_length` tokens. `beam_size=1` is greedy decoding.

    Args:
        model: a model from `build_transformer`.
        source_ids: int tensor `[B, S]`, 0 = padding.
        max_length: int, most tokens per sentence, `</s>` included.
        beam_size: int >= 1, hypotheses kept per sentence.
        alpha: float >= 0, length-penalty strength (0: rank by log-probability alone).
        end_id: int id that ends a sentence, or None to always generate `max_length` tokens.

    Returns:
        `(output_ids, scores)` of the best hypothesis: int32 `[B, max_length]` and float32 `[B]`
        (its log-probability, without the length penalty).
    """
    check_int("beam_size", beam_size, 1)
    check_number("alpha", alpha, 0)
    return _guard_empty_batch(
        source_ids, max_length, lambda ids: _beam_search(model, ids, max_length, beam_size, alpha, end_id)
    )


def _guard_empty_batch(source_ids, max_length, decode_fn):
    check_int("max_length", max_length, 1)
    source_ids = ops.cast(source_ids, "int32")
    batch = ops.shape(source_ids)[0]
    # TensorFlow's oneDNN CPU convolution mishandles an empty batch (it returns the input's shape),
    # so an empty batch never reaches the model: it gets an empty result.
    return ops.cond(
        batch > 0,
        lambda: decode_fn(source_ids),
        lambda: (ops.zeros((batch, max_length), dtype="int32"), ops.zeros((batch,), dtype="float32")),
    )


def forbid_never_emitted(logits, num_reserved=len(RESERVED_TOKENS)):
    """Make the reserved tokens but `</s>` impossible: decoders never emit them.

    Args:
        logits: float tensor `[N, V]`.
        num_reserved: int, the vocabulary's reserved ids `0 .. num_reserved - 1`: `<pad>`, `<unk>`,
            `<s>`, `</s>` (`RESERVED_TOKENS`), and in a language model's vocabulary `<mask>` too
            (`num_reserved=5`, as its tokenizer's `num_reserved` says).

    Returns:
        float32 `[N, V]`: `IMPOSSIBLE` at every reserved id but `END_ID`, the logits elsewhere.
    """
    vocab_ids = ops.arange(ops.shape(logits)[-1])
    never = ops.logical_and(ops.less(vocab_ids, num_reserved), ops.not_equal(vocab_ids, END_ID))  # (V,)
    return ops.where(never[None, :], IMPOSSIBLE, ops.cast(logits, "float32"))


def _log_probs(logits):
    """`[N, V]` logits -> float32 log-probabilities, the reserved tokens but `</s>` made impossible."""
    return ops.log_softmax(forbid_never_emitted(logits), axis=-1)


def _ends(token, end_id):
    return ops.zeros_like(token, dtype="bool") if end_id is None else ops.equal(token, end_id)


def _write_column(tokens, column, values):
    """`tokens[:, column] = values`, for `[N, W]` tokens and `[N]` values."""
    at_column = ops.equal(ops.arange(ops.shape(tokens)[1]), column)[None, :]  # (1, W)
    return ops.where(at_column, values[:, None], tokens)


class _CachedDecoder:
    """The decoder of a model, one token at a time, with per-block key/value caches.

    Args:
        layers: `TransformerLayers`.
        source_ids: int32 `[B, S]`.
        max_length: int L, the cache's number of positions.
        repeats: int k, how many hypotheses decode each source sentence (beam size); the
            rows of every per-hypothesis tensor are sentence-major, `[B * k, ...]`.
    """

    def __init__(self, layers, source_ids, max_length, repeats=1):
        self.layers = layers
        self.max_length = max_length
        memory, source_mask = encode(layers, source_ids, training=False)  # (B, S, D), (B, S)
        self.source_mask = ops.repeat(source_mask, repeats, axis=0)  # (B*k, S)
        self.cross_caches = [
            tuple(ops.repeat(t, repeats, axis=0) for t in block.cross_attention_cache(memory))
            for block in layers.decoder_blocks
        ]  # per block: (B*k, H, S, K) x 2
        self.rows = ops.shape(source_ids)[0] * repeats

    def initial_caches(self):
        """Per block, an empty self-attention cache (zero keys and values `[B*k, H, L, K]`, ...)."""
        return [block.self_cache(self.rows, self.max_length) for block in self.layers.decoder_blocks]

    def step(self, tokens, index, caches):
        """Log-probabilities of the token after position `index`.

        Args:
            tokens: int32 `[B*k, L + 1]`: `<s>` then the tokens so far (positions after `index`
                are padding).
            index: int32 scalar, the position whose token is fed.
            caches: from `initial_caches` or the previous step.

        Returns:
            `(log_probs, caches)`: float32 `[B*k, V]` and the caches with position `index` written.
        """
        layers = self.layers
        target_mask = padding_mask(tokens[:, : self.max_length])  # (B*k, L): causality and padding
        token = ops.take(tokens, ops.reshape(index, (1,)), axis=1)  # (B*k, 1)
        hidden = layers.target_embedding(token)  # (B*k, 1, D)
        hidden = layers.target_positions(hidden, mask=ops.not_equal(token, PAD_ID), start=index)
        new_caches = []
        for block, cache, cross_cache in zip(layers.decoder_blocks, caches, self.cross_caches):
            hidden, cache = block.decode_step(hidden, index, cache, cross_cache, target_mask, self.source_mask)
            new_caches.append(cache)
        logits = layers.logits(hidden)[:, 0, :]  # (B*k, V)
        return _log_probs(logits), new_caches


def _greedy(model, source_ids, max_length, use_cache, end_id):
    layers = TransformerLayers.from_model(model)
    batch = ops.shape(source_ids)[0]
    # tokens[:, 0] is <s>; step t feeds tokens[:, t] and writes tokens[:, t + 1].
    tokens = ops.pad(ops.full((batch, 1), START_ID, dtype="int32"), ((0, 0), (0, max_length)))  # (B, L + 1)
    if use_cache:
        decoder = _CachedDecoder(layers, source_ids, max_length)
        caches = decoder.initial_caches()

        def next_log_probs(step, tokens, caches):
            return decoder.step(tokens, step, caches)

    else:
        memory, source_mask = encode(layers, source_ids, training=False)
        caches = ()

        def next_log_probs(step, tokens, caches):
            logits = decode(layers, tokens[:, :max_length], memory, source_mask, training=False)  # (B, L, V)
            return _log_probs(ops.take(logits, step, axis=1)), caches

    def keep_going(step, tokens, finished, scores, caches):
        return ops.logical_and(step < max_length, ops.logical_not(ops.all(finished)))

    def next_token(step, tokens, finished, scores, caches):
        log_probs, caches = next_log_probs(step, tokens, caches)  # (B, V)
        token = ops.cast(ops.argmax(log_probs, axis=-1), "int32")  # (B,)
        token_log_prob = ops.take_along_axis(log_probs, token[:, None], axis=1)[:, 0]  # (B,)
        scores = scores + ops.where(finished, 0.0, token_log_prob)
        token = ops.where(finished, PAD_ID, token)
        tokens = _write_column(tokens, step + 1, token)
        return step + 1, tokens, ops.logical_or(finished, _ends(token, end_id)), scores, caches

    finished = ops.zeros((batch,), dtype="bool")
    scores = ops.zeros((batch,), dtype="float32")
    loop_vars = (ops.convert_to_tensor(0), tokens, finished, scores, caches)
    _, tokens, _, scores, _ = ops.while_loop(keep_going, next_token, loop_vars)
    return tokens[:, 1:], scores


def _length_penalty(length, alpha):
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def _beam_search(model, source_ids, max_length, beam_size, alpha, end_id):
    layers = TransformerLayers.from_model(model)
    batch, k = ops.shape(source_ids)[0], beam_size
    decoder = _CachedDecoder(layers, source_ids, max_length, repeats=k)
    tokens = ops.pad(ops.full((batch * k, 1), START_ID, dtype="int32"), ((0, 0), (0, max_length)))  # (B*k, L + 1)
    # Only the first hypothesis of each sentence is alive at the start, so the beam does not fill
    # with k copies of the same sentence.
    log_probs = ops.tile(ops.convert_to_tensor([[0.0] + [IMPOSSIBLE] * (k - 1)]), (batch, 1))  # (B, k)
    finished = ops.zeros((batch, k), dtype="bool")
    lengths = ops.zeros((batch, k), dtype="int32")  # tokens produced, </s> included

    def keep_going(step, tokens, log_probs, finished, lengths, caches):
        return ops.logical_and(step < max_length, ops.logical_not(ops.all(finished)))

    def next_tokens(step, tokens, log_probs, finished, lengths, caches):
        step_log_probs, caches = decoder.step(tokens, step, caches)  # (B*k, V)
        vocab = ops.shape(step_log_probs)[-1]
        step_log_probs = ops.reshape(step_log_probs, (batch, k, vocab))  # (B, k, V)
        # An ended hypothesis has one continuation, padding, which costs nothing.
        pad_only = ops.where(ops.equal(ops.arange(vocab), PAD_ID), 0.0, IMPOSSIBLE)  # (V,)
        step_log_probs = ops.where(finished[:, :, None], pad_only[None, None, :], step_log_probs)
        candidate_log_probs = log_probs[:, :, None] + step_log_probs  # (B, k, V)
        candidate_lengths = ops.where(finished, lengths, step + 1)  # (B, k)
        candidate_scores = candidate_log_probs / _length_penalty(candidate_lengths, alpha)[:, :, None]
        _, best = ops.top_k(ops.reshape(candidate_scores, (batch, k * vocab)), k)  # (B, k), sorted
        beam = best // vocab  # (B, k): which hypothesis each survivor extends
        token = ops.cast(best % vocab, "int32")  # (B, k)

        log_probs = ops.take_along_axis(ops.reshape(candidate_log_probs, (batch, k * vocab)), best, axis=1)
        was_finished = ops.take_along_axis(finished, beam, axis=1)
        lengths = ops.where(was_finished, ops.take_along_axis(lengths, beam, axis=1), step + 1)
        # Candidates that were impossible (only chosen when fewer than k exist) count as ended.
        finished = was_finished | _ends(token, end_id) | (log_probs < IMPOSSIBLE / 2)

        rows = ops.reshape(ops.arange(batch)[:, None] * k + beam, (-1,))  # (B*k,) rows to continue
        tokens = _write_column(ops.take(tokens, rows, axis=0), step + 1, ops.reshape(token, (-1,)))
        caches = [tuple(ops.take(t, rows, axis=0) for t in cache) for cache in caches]
        return step + 1, tokens, log_probs, finished, lengths, caches

    loop_vars = (ops.convert_to_tensor(0), tokens, log_probs, finished, lengths, decoder.initial_caches())
    _, tokens, log_probs, _, _, _ = ops.while_loop(keep_going, next_tokens, loop_vars)
    best_rows = ops.arange(batch) * k  # top_k keeps each sentence's hypotheses sorted, best first
    return ops.take(tokens, best_rows, axis=0)[:, 1:], log_probs[:, 0]
