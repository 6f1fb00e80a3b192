"""Encoder and decoder blocks: the loop bodies of the tutorial's encoder and decoder (paper section 3.1, figure 1).

`DecoderOnlyBlock` is the block of a decoder-only (GPT-style) language model: an encoder block
whose self-attention is causal.
"""

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int
from keras_transformer.config import (
    ATTENTION_SCORES,
    EMBEDDING_SWITCHES,
    PADDING_MASKS,
    variant_switches,
)
from keras_transformer.layers.attention import MultiheadAttention
from keras_transformer.layers.feedforward import FeedForward
from keras_transformer.masks import attention_masks, sign_mask


class _Block(keras.layers.Layer):
    """Hyperparameters, config and the cached self-attention step shared by every block.

    With `padding_masks="ids"` (the default) the block uses the masks it is given, and its
    sublayers zero their padding rows. With `"abs_sum"` or `"sum"` it ignores them, as the
    tutorial code has none: each attention sublayer gets the masks that sign rule finds in its
    own inputs (`keras_transformer.masks.sign_mask`; given explicitly, so that no Keras mask
    attached to the inputs replaces them), and padding rows keep what the sublayers leave there.
    Its self-attention cache then also holds, per position, whether the rule found a real vector
    there (`self_cache`).
    """

    causal_self_attention = False

    def __init__(
        self,
        num_heads,
        d_ff,
        dropout_rate=0.0,
        inner_dropout_rate=0.0,
        use_output_projection=True,
        projection_activation=None,
        normalize=True,
        epsilon=1e-8,
        attention_initialization="glorot",
        attention_score="scaled_dot",
        attention_implementation="auto",
        attention_dropout_rate=None,
        attention_residual_dropout_rate=0.0,
        feed_forward_dropout_rate=None,
        padding_masks="ids",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_int("d_ff", d_ff, 1)
        check_choice("attention_score", attention_score, ATTENTION_SCORES)
        check_choice("padding_masks", padding_masks, PADDING_MASKS)
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout_rate = dropout_rate
        self.inner_dropout_rate = inner_dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.attention_residual_dropout_rate = attention_residual_dropout_rate
        self.feed_forward_dropout_rate = feed_forward_dropout_rate
        self.use_output_projection = use_output_projection
        self.projection_activation = keras.activations.get(projection_activation)
        self.normalize = normalize
        self.epsilon = epsilon
        self.attention_initialization = attention_initialization
        self.attention_score = attention_score
        self.attention_implementation = attention_implementation
        self.padding_masks = padding_masks
        self.supports_masking = True
        # Attention sublayers are made here, so bad arguments fail at construction.
        self.self_attention = self._attention("self_attention", causality=self.causal_self_attention)

    def _attention(self, name, causality=False):
        return MultiheadAttention(
            num_heads=self.num_heads,
            dropout_rate=_rate_or(self.attention_dropout_rate, self.dropout_rate),
            residual_dropout_rate=self.attention_residual_dropout_rate,
            causality=causality,
            use_output_projection=self.use_output_projection,
            projection_activation=self.projection_activation,
            normalize=self.normalize,
            epsilon=self.epsilon,
            initialization=self.attention_initialization,
            attention_score=self.attention_score,
            attention_implementation=self.attention_implementation,
            sign_mask_rule="abs_sum" if self._uses_ids else self.padding_masks,
            zero_padding=self._uses_ids,
            dtype=self.dtype_policy,
            name=name,
        )

    def _feed_forward(self, width):
        return FeedForward(
            num_units=(self.d_ff, width),
            dropout_rate=_rate_or(self.feed_forward_dropout_rate, self.dropout_rate),
            inner_dropout_rate=self.inner_dropout_rate,
            normalize=self.normalize,
            epsilon=self.epsilon,
            zero_padding=self._uses_ids,
            dtype=self.dtype_policy,
            name="feed_forward",
        )

    @property
    def _uses_ids(self):
        """Whether the block uses the masks it is given (`padding_masks="ids"`)."""
        return self.padding_masks == "ids"

    def _mask(self, inputs, given):
        """The padding mask `[B, T]` of a sublayer's `inputs [B, T, D]`: `given`, or the sign rule's."""
        return given if self._uses_ids else sign_mask(inputs, self.padding_masks)

    def self_cache(self, batch, length):
        """An empty self-attention cache of `length` positions for `decode_step`.

        Returns:
            `(key, value)`, zero float tensors `[B, H, L, K]`; under a sign rule also `real`, a
            False bool tensor `[B, L]` (whether the rule finds a real input at each position).
        """
        attention = self.self_attention
        shape = (batch, attention.num_heads, length, attention.head_width)
        cache = (ops.zeros(shape, attention.compute_dtype), ops.zeros(shape, attention.compute_dtype))
        return cache if self._uses_ids else (*cache, ops.zeros((batch, length), "bool"))

    @staticmethod
    def pad_self_cache(cache, extra):
        """A self-attention cache with `extra` empty positions appended (any of `self_cache`'s forms)."""
        return tuple(
            ops.pad(t, ((0, 0), (0, extra)) if len(t.shape) == 2 else ((0, 0), (0, 0), (0, extra), (0, 0)))
            for t in cache
        )

    def _cached_self_attention(self, inputs, index, self_cache, inputs_mask):
        """Self-attention of one new position over a key/value cache (the first sublayer of `decode_step`).

        Args:
            inputs: float tensor `[B, 1, D]`, the new position's input.
            index: int scalar, its position `t`.
            self_cache: from `self_cache` or the previous step (`(key, value)`, float tensors
                `[B, H, L, K]`, ...), holding positions `0 .. t-1`.
            inputs_mask: bool tensor `[B, L]`, True at the positions position `t` may attend to
                (its causality: False from `t + 1` on). Under a sign rule only its causality is
                used; which positions are real is the rule's, kept in the cache.

        Returns:
            `(outputs, self_cache, query_mask)`: float tensor `[B, 1, D]`, the cache with position
            `t` written, and bool `[B, 1]`, whether position `t` is real.
        """
        attention = self.self_attention
        new_key, new_value = attention.project_keys_values(inputs)  # (B, H, 1, K) each
        positions = ops.arange(ops.shape(inputs_mask)[1])  # (L,)
        at_index = ops.equal(positions, index)[None, None, :, None]  # (1, 1, L, 1)
        key, value = (ops.where(at_index, new, cached) for new, cached in zip((new_key, new_value), self_cache))
        if self._uses_ids:
            self_cache = (key, value)
            query_mask = ops.take(inputs_mask, ops.reshape(index, (1,)), axis=1)  # (B, 1)
            keys_mask = inputs_mask  # (B, L)
        else:
            query_mask = sign_mask(inputs, attention.sign_mask_rule)  # (B, 1)
            real = ops.where(at_index[:, 0, :, 0], query_mask, self_cache[2])  # (B, L)
            self_cache = (key, value, real)
            keys_mask = ops.logical_and(real, ops.less_equal(positions, index)[None, :])  # (B, L)
        outputs = attention.attend(inputs, key, value, keys_mask[:, None, None, :], query_mask)
        return outputs, self_cache, query_mask

    def compute_output_spec(self, inputs, *args, return_attention_scores=False, **kwargs):
        """The block's output on symbolic inputs: `[B, T, D]` like `inputs`, in the compute dtype.

        Building a functional model then costs no trace of `call`, which Keras would otherwise run
        in a scratch graph (it made building or loading a model several times slower); only the
        attention weights' shapes, when asked for, are still found by tracing. (Keras takes
        `return_attention_scores` by keyword only: a layer's positional arguments are tensors.)
        """
        if return_attention_scores:
            return super().compute_output_spec(inputs, *args, return_attention_scores=True, **kwargs)
        return keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout_rate": self.dropout_rate,
                "inner_dropout_rate": self.inner_dropout_rate,
                "use_output_projection": self.use_output_projection,
                "projection_activation": keras.activations.serialize(self.projection_activation),
                "normalize": self.normalize,
                "epsilon": self.epsilon,
                "attention_initialization": self.attention_initialization,
                "attention_score": self.attention_score,
                "attention_implementation": self.attention_implementation,
                "attention_dropout_rate": self.attention_dropout_rate,
                "attention_residual_dropout_rate": self.attention_residual_dropout_rate,
                "feed_forward_dropout_rate": self.feed_forward_dropout_rate,
                "padding_masks": self.padding_masks,
            }
        )
        return config


def _rate_or(rate, default):
    """`rate`, or `default` where `rate` is None (a block's rates that follow its `dropout_rate`)."""
    return default if rate is None else rate


def block_arguments(config):
    """The block arguments a model config sets: every block of a model gets the same ones.

    Args:
        config: a `ModelConfig` or `LanguageModelConfig` (their block and attention fields).

    Returns:
        dict of `EncoderBlock` / `DecoderBlock` / `DecoderOnlyBlock` arguments: the config's sizes
        and its variant's switches (`variant_switches`), explicit fields included, but for those
        of the embeddings (`EMBEDDING_SWITCHES`).
    """
    return dict(
        num_heads=config.num_heads,
        d_ff=config.d_ff,
        dropout_rate=config.dropout_rate,
        attention_initialization=config.attention_initialization,
        attention_score=config.attention_score,
        attention_implementation=config.attention_implementation,
        **{name: value for name, value in variant_switches(config).items() if name not in EMBEDDING_SWITCHES},
    )


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderBlock(_Block):
    """One encoder block: self-attention, then feed-forward.

    The body of the tutorial's `for i in range(num_blocks)` encoder loop, paper section 3.1:
    `multihead_attention(queries=enc, keys=enc)` then `feedforward(enc, [d_ff, D])`. The
    sublayers keep their own deviations from the document's code (see `MultiheadAttention` and
    `FeedForward`). With `use_output_projection=False, normalize=False, attention_dropout_rate=0.1,
    feed_forward_dropout_rate=0.2, inner_dropout_rate=0.2` the sublayers are the document's code;
    `ModelConfig(variant="document")` gives every block those arguments (`block_arguments`).

    Args:
        num_heads: int H.
        d_ff: int F, inner width of the feed-forward sublayer.
        dropout_rate: float, dropout on the attention weights and on `FFN(x)` (the paper's
            residual dropout of the feed-forward sublayer), unless `attention_dropout_rate` or
            `feed_forward_dropout_rate` is given.
        inner_dropout_rate: float, `FeedForward`'s dropout after its relu convolution (the
            document's code: 0.2; the paper: 0).
        attention_dropout_rate: float, or None for `dropout_rate`: dropout on the attention
            weights (both versions of the tutorial code; not the paper).
        attention_residual_dropout_rate: float, dropout on each attention sublayer's output
            before its residual connection (the paper's residual dropout, section 5.4; neither
            version of the tutorial code). Default 0.
        feed_forward_dropout_rate: float, or None for `dropout_rate`: dropout on `FFN(x)` before
            its residual connection (the paper's residual dropout; the document's code: 0.2).
        use_output_projection, projection_activation, normalize, epsilon: see
            `MultiheadAttention`; `normalize` also applies to `FeedForward`.
        attention_initialization: `MultiheadAttention`'s `initialization`.
        attention_score: `MultiheadAttention`'s `attention_score`, the score function of every attention
            sublayer: `"scaled_dot"` (default), `"dot"`, `"additive"`, `"bilinear"` or `"cosine"`.
        attention_implementation: `MultiheadAttention`'s `attention_implementation` for every
            attention sublayer: `"auto"` (default), `"fused"` or `"explicit"`.

    Call arguments:
        inputs: float tensor `[B, S, D]`.
        training: bool.
        mask: optional bool tensor `[B, S]` (True = real token); defaults to the Keras mask of
            `inputs`, else to sign masks.
        return_attention_scores: bool; also return a dict with the `self_attention` weights
            `[B, H, S, S]`.

    Returns:
        float tensor `[B, S, D]`, zero at padding.
    """

    def build(self, input_shape):
        self.self_attention.build(input_shape, input_shape)
        self.feed_forward = self._feed_forward(input_shape[-1])
        self.feed_forward.build(input_shape)

    def call(self, inputs, training=None, mask=None, return_attention_scores=False):
        inputs_mask = self._mask(inputs, mask)
        # The weights only when asked for: computing them rules out the fused attention path.
        outputs = self.self_attention(
            inputs,
            inputs,
            training=training,
            queries_mask=inputs_mask,
            keys_mask=inputs_mask,
            return_attention_scores=return_attention_scores,
        )  # (B, S, D), and (B, H, S, S) if asked
        outputs, weights = outputs if return_attention_scores else (outputs, None)
        outputs = self.feed_forward(outputs, training=training, mask=mask)  # (B, S, D)
        if return_attention_scores:
            return outputs, {"self_attention": weights}
        return outputs


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderOnlyBlock(EncoderBlock):
    """One block of a decoder-only (GPT-style) model: causal self-attention, then feed-forward.

    An `EncoderBlock` whose self-attention is causal, as the decoder's (`multihead_attention(dec,
    dec, causality=True)`): position `t` attends to positions `0 .. t` only. It is a
    `DecoderBlock` without the encoder-decoder attention, and decodes step by step with the same
    key/value cache (`prefill`, `decode_step`).

    Args: as `EncoderBlock`.

    Call arguments:
        inputs: float tensor `[B, T, D]`.
        training: bool.
        mask: optional bool tensor `[B, T]` (True = real token); defaults to the Keras mask of
            `inputs`, else to sign masks.
        return_attention_scores: bool; also return a dict with the `self_attention` weights
            `[B, H, T, T]`.

    Returns:
        float tensor `[B, T, D]`, zero at padding.
    """

    causal_self_attention = True

    def prefill(self, inputs, mask):
        """`call` on a whole prefix (inference), also returning its self-attention keys and values.

        Args:
            inputs: float tensor `[B, T, D]`.
            mask: bool tensor `[B, T]`, True at real positions.

        Returns:
            `(outputs, cache)`: float tensor `[B, T, D]` and the cache of `decode_step` for
            positions `0 .. T-1` (as `self_cache` makes it): `(key, value)`, float tensors
            `[B, H, T, K]`, and under a sign rule `real` `[B, T]`.
        """
        mask = self._mask(inputs, mask)
        queries_mask, allowed = attention_masks(inputs, inputs, mask, mask, causality=True)
        cache = self.self_attention.project_keys_values(inputs)  # (B, H, T, K) each
        outputs = self.self_attention.attend(inputs, *cache, allowed, queries_mask)  # (B, T, D)
        if not self._uses_ids:
            cache = (*cache, queries_mask)
        return self.feed_forward(outputs, mask=mask), cache

    def decode_step(self, inputs, index, cache, inputs_mask):
        """Run the block on one new position, with a key/value cache.

        Equal to `call` on the whole prefix, at its last position, but the earlier positions'
        keys and values come from `cache` instead of being recomputed.

        Args:
            inputs: float tensor `[B, 1, D]`, the new position's input.
            index: int scalar, its position `t`.
            cache: from `self_cache`, `prefill` or the previous step (`(key, value)`, float
                tensors `[B, H, L, K]`, ...), holding positions `0 .. t-1` (later positions are
                ignored).
            inputs_mask: bool tensor `[B, L]`, True at the positions `0 .. t` position `t` may
                attend to, False from `t + 1` on (the causality of the step).

        Returns:
            `(outputs, cache)`: float tensor `[B, 1, D]` and the cache with position `t` written.
        """
        outputs, cache, query_mask = self._cached_self_attention(inputs, index, cache, inputs_mask)
        return self.feed_forward(outputs, mask=query_mask), cache  # (B, 1, D)


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderBlock(_Block):
    """One decoder block: causal self-attention, encoder-decoder attention, feed-forward.

    The body of the tutorial's decoder loop, paper section 3.1:
    `multihead_attention(dec, dec, causality=True)`, `multihead_attention(dec, enc)` ("vanilla
    attention"), `feedforward(dec, [d_ff, D])`. The sublayers keep their own deviations from the
    document's code (see `MultiheadAttention` and `FeedForward`).

    Args: as `EncoderBlock`.

    Call arguments:
        inputs: float tensor `[B, T, D]`, the target side.
        memory: float tensor `[B, S, D]`, the encoder output.
        training: bool.
        inputs_mask: optional bool tensor `[B, T]`; defaults to the Keras mask of `inputs`,
            else to sign masks.
        memory_mask: optional bool tensor `[B, S]`; defaults to the Keras mask of `memory`,
            else to sign masks.
        return_attention_scores: bool; also return a dict with `self_attention` weights
            `[B, H, T, T]` and `cross_attention` weights `[B, H, T, S]`.

    Returns:
        float tensor `[B, T, D]`, zero at padding.
    """

    causal_self_attention = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cross_attention = self._attention("cross_attention")

    def build(self, inputs_shape, memory_shape):
        self.self_attention.build(inputs_shape, inputs_shape)
        self.cross_attention.build(inputs_shape, memory_shape)
        self.feed_forward = self._feed_forward(inputs_shape[-1])
        self.feed_forward.build(inputs_shape)

    def call(
        self,
        inputs,
        memory,
        training=None,
        inputs_mask=None,
        memory_mask=None,
        return_attention_scores=False,
    ):
        self_mask = self._mask(inputs, inputs_mask)
        # The weights only when asked for: computing them rules out the fused attention path.
        outputs = self.self_attention(
            inputs,
            inputs,
            training=training,
            queries_mask=self_mask,
            keys_mask=self_mask,
            return_attention_scores=return_attention_scores,
        )  # (B, T, D), and (B, H, T, T) if asked
        outputs, self_weights = outputs if return_attention_scores else (outputs, None)
        outputs = self.cross_attention(
            outputs,
            memory,
            training=training,
            queries_mask=self._mask(outputs, inputs_mask),
            keys_mask=self._mask(memory, memory_mask),
            return_attention_scores=return_attention_scores,
        )  # (B, T, D), and (B, H, T, S) if asked
        outputs, cross_weights = outputs if return_attention_scores else (outputs, None)
        outputs = self.feed_forward(outputs, training=training, mask=inputs_mask)  # (B, T, D)
        if return_attention_scores:
            return outputs, {"self_attention": self_weights, "cross_attention": cross_weights}
        return outputs

    def cross_attention_cache(self, memory):
        """Project the encoder output once for every decoding step of `decode_step`.

        Args:
            memory: float tensor `[B, S, D]`.

        Returns:
            `(key, value)`: float tensors `[B, H, S, K]`.
        """
        return self.cross_attention.project_keys_values(memory)

    def decode_step(self, inputs, index, self_cache, cross_cache, inputs_mask, memory_mask):
        """Run the block on one new target position, with a key/value cache.

        Equal to `call` on the whole prefix, at its last position, but the earlier positions'
        self-attention keys and values come from `self_cache` instead of being recomputed.

        Args:
            inputs: float tensor `[B, 1, D]`, the new position's input.
            index: int scalar, its position `t` in the target.
            self_cache: from `self_cache` or the previous step (`(key, value)`, float tensors
                `[B, H, L, K]`, ...), holding positions `0 .. t-1` (later positions are ignored).
            cross_cache: `(key, value)` from `cross_attention_cache`.
            inputs_mask: bool tensor `[B, L]`, True at the real target positions `0 .. t`
                (False from `t + 1` on: the causality of the step).
            memory_mask: bool tensor `[B, S]`, the encoder output's padding mask (under a sign
                rule, the rule's mask of `memory`, which `call` would compute).

        Returns:
            `(outputs, self_cache)`: float tensor `[B, 1, D]` and the cache with position `t`
            written.
        """
        outputs, self_cache, query_mask = self._cached_self_attention(inputs, index, self_cache, inputs_mask)
        outputs = self.cross_attention.attend(outputs, *cross_cache, memory_mask[:, None, None, :], query_mask)
        outputs = self.feed_forward(outputs, mask=query_mask)  # (B, 1, D)
        return outputs, self_cache
