"""Multi-head attention, the tutorial's `multihead_attention` (paper section 3.2)."""

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_rate
from keras_transformer.config import ATTENTION_INITIALIZATIONS as INITIALIZATIONS
from keras_transformer.config import ATTENTION_SCORES, check_attention_implementation
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.fused_attention import fused_context, fused_pays, log_choice_once
from keras_transformer.layers.normalization import LayerNorm
from keras_transformer.layers.scoring import AttentionScore, softmax_over_keys, weighted_sum, with_attention_score
from keras_transformer.masks import SIGN_MASK_RULES, attention_masks, zero_padding_rows


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiheadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention with residual connection and LayerNorm.

    The tutorial's `multihead_attention(queries, keys, num_units, num_heads, dropout_rate,
    is_training, causality)`, paper section 3.2.2:

        Q = queries W^Q, K = keys W^K, V = values W^V         projections (linear), with bias
        split into H heads of width K = num_units / H
        scores = Q K^T / sqrt(K)                                scaled dot products (`attention_score`)
        scores[key is padding] = -2^32 + 1                      key masking
        scores[key is in the future] = -2^32 + 1                tril causality (optional)
        weights = softmax(scores) * (query is real)             query masking
        context = concat_heads(dropout(weights) V) W^O          weighted sum, output projection
        outputs = LayerNorm(dropout(context) + queries)         residual dropout, residual, normalize

    The function exists in two versions. The document's code has linear projections, masks
    `sign(reduce_sum(abs(x), -1))` and its final `normalize` commented out (residual, no
    LayerNorm). Kyubyong's repository has relu projections, masks `sign(abs(reduce_sum(x, -1)))`
    and the final `normalize` applied. Neither has the output projection `W^O`. The defaults here
    are the paper's: linear projections, `W^O`, LayerNorm after the residual.
    `use_output_projection=False, normalize=False` is the document's code;
    `use_output_projection=False, projection_activation="relu", sign_mask_rule="sum",
    zero_padding=False` is Kyubyong's repository.

    Padding masks are, in order of precedence: the `queries_mask` / `keys_mask` arguments, the
    Keras masks attached to `queries` / `keys` (e.g. from a `mask_zero` embedding; Keras passes
    them in those arguments automatically), and otherwise the sign masks, computed from the raw
    `queries` and `keys` by `sign_mask_rule`: by default (the document's rule) a position whose
    vector is all zeros is padding.

    Deviation: `W^O` (the paper's output projection) is applied by default; the document's code
    has none. `use_output_projection=False` reproduces it.
    Deviation: LayerNorm follows the residual connection by default (the paper; Kyubyong's
    repository); the document's code has it commented out. `normalize=False` reproduces it.
    Deviation: the outputs at padding queries are set to exactly zero, so that sign masks stay
    right in every later layer. The document's code gets zero there too (`context` and the
    query are zero there), but not once `W^O` or LayerNorm is added; Kyubyong's repository
    leaves LayerNorm's `beta` there. `zero_padding=False` reproduces both.
    Deviation: dropout on the sub-layer's output before the residual connection (the paper's
    residual dropout, section 5.4) is available, `residual_dropout_rate`; neither version of the
    tutorial code has it, and it is off by default.
    Deviation: scores and softmax are computed in float32 whatever the compute dtype, so the
    tutorial's `-2^32 + 1` cannot overflow under mixed precision.

    Extension: `attention_score` replaces the scaled dot product by another score function of
    each head's projected queries and keys (`keras_transformer.layers.AttentionScore`, shared with
    the single-head `Attention`): `"dot"`, `"additive"` (Bahdanau et al. 2015), `"bilinear"`
    (Luong et al. 2015's "general") or `"cosine"`, with their default settings (additive width
    A = K, learned cosine scale initialized to 10). The default, `"scaled_dot"`, is the paper's and
    creates no weights: the layer's weights are those of the tutorial port.

    Args:
        num_heads: int, number of heads H.
        num_units: int or None, width of the projected queries/keys/values (H * K). Defaults to
            the width of `queries`. Must be divisible by `num_heads`.
        dropout_rate: float in [0, 1), dropout on the attention weights (as in both versions).
        residual_dropout_rate: float in [0, 1), dropout on the sub-layer's output (after `W^O`),
            before it is added to the queries: the paper's residual dropout (0.1 in its base
            model). Default 0, as in both versions of the tutorial code.
        causality: bool, whether query `i` may only attend to keys `0..i` (decoder
            self-attention).
        use_output_projection: bool, apply the output projection `W^O`.
        projection_activation: activation of the Q/K/V projections: None (linear, the paper and
            the document's code) or e.g. `"relu"` (Kyubyong's repository).
        normalize: bool, apply LayerNorm after the residual connection (False: the document's
            code). No LayerNorm weights are created when False.
        epsilon: LayerNorm epsilon.
        initialization: `"glorot"` (the tutorial's `tf.layers.dense` default: Glorot uniform on
            each `[D, H*K]` kernel) or `"per_head"`: Glorot uniform with the fans of the per-head
            views `[D, H, K]` of W^Q, W^K, W^V (fans `D*H`, `D*K`) and `[H, K, D]` of W^O (as
            Keras computes fans for such kernels, the first axis being the receptive field):
            `(H + K) / 2` and `(1 + H) / 2` times less variance. Attention starts nearer uniform,
            and the model learns faster early on (measured on Multi30k; see
            docs/benchmarks/multi30k.md).
        attention_score: the score function of each head: `"scaled_dot"` (default, the paper),
            `"dot"`, `"additive"`, `"bilinear"` or `"cosine"`; see `AttentionScore`. The name of
            the model configs' field and of the CLI's `--attention-score`.
        sign_mask_rule: the rule of the sign masks, used where no mask is given: `"abs_sum"`
            (the document's code: padding is an all-zero vector) or `"sum"` (Kyubyong's
            repository: a vector whose entries sum to zero); see `keras_transformer.masks.sign_mask`.
        zero_padding: bool, set the outputs at padding queries to zero (default). False leaves
            what the tutorial code leaves there: `W^O`'s bias plus the query (zero context, by
            query masking), after LayerNorm if `normalize`.
        attention_implementation: `"auto"` (default), `"fused"` or `"explicit"`: whether the
            scaled dot-product attention runs as one `keras.ops.dot_product_attention` call (a
            fused kernel on a GPU) or explicitly (scores, masked softmax, weighted sum); see
            `keras_transformer.layers.fused_attention`. `"auto"` fuses where it was measured faster:
            on a GPU from the crossover length, and on PyTorch's CPU. The fused call needs
            `attention_score="scaled_dot"` and `dropout_rate=0` (`"fused"` raises otherwise); with
            `return_attention_scores` the explicit path runs, since it computes the weights.

    Call arguments:
        queries: float tensor `[B, T_q, D]`.
        keys: float tensor `[B, T_k, D_k]`.
        values: float tensor `[B, T_k, D_v]` or None (then the keys are also the values, as in
            the tutorial).
        training: bool, whether dropout is active.
        queries_mask: optional bool tensor `[B, T_q]`, True at real query positions.
        keys_mask: optional bool tensor `[B, T_k]`, True at real key positions.
        return_attention_scores: bool; if True, also return the attention weights
            `[B, H, T_q, T_k]` (after masking, before dropout).

    Returns:
        float tensor `[B, T_q, D]`, zero at padding queries (with `zero_padding`); and the
        weights if requested.

    Example:
    >>> attention = MultiheadAttention(num_heads=2)
    >>> x = np.random.rand(2, 5, 8).astype("float32")
    >>> attention(x, x).shape
    (2, 5, 8)
    >>> attention.head_width
    4
    >>> document = MultiheadAttention(num_heads=2, use_output_projection=False, normalize=False)
    """

    def __init__(
        self,
        num_heads=8,
        num_units=None,
        dropout_rate=0.0,
        causality=False,
        use_output_projection=True,
        projection_activation=None,
        normalize=True,
        epsilon=1e-8,
        initialization="glorot",
        attention_score="scaled_dot",
        residual_dropout_rate=0.0,
        sign_mask_rule="abs_sum",
        zero_padding=True,
        attention_implementation="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice("attention_score", attention_score, ATTENTION_SCORES)
        check_rate("dropout_rate", dropout_rate)
        check_rate("residual_dropout_rate", residual_dropout_rate)
        check_attention_implementation(
            attention_implementation, attention_score, dropout_rate, dropout_name="dropout_rate"
        )
        check_choice("sign_mask_rule", sign_mask_rule, SIGN_MASK_RULES)
        check_choice("initialization", initialization, INITIALIZATIONS)
        check_int("num_heads", num_heads, 1)
        if num_units is not None and check_int("num_units", num_units, 1) % num_heads != 0:
            raise ValueError(
                f"`num_units` must be divisible by `num_heads`. Received: num_units={num_units}, num_heads={num_heads}"
            )
        self.num_heads = num_heads
        self.num_units = num_units
        self.dropout_rate = dropout_rate
        self.residual_dropout_rate = residual_dropout_rate
        self.causality = causality
        self.use_output_projection = use_output_projection
        self.projection_activation = keras.activations.get(projection_activation)
        self.normalize = normalize
        self.epsilon = epsilon
        self.initialization = initialization
        self.attention_score = attention_score
        self.sign_mask_rule = sign_mask_rule
        self.zero_padding = zero_padding
        self.attention_implementation = attention_implementation
        self.supports_masking = True
        self._head_width = None  # K, known in `build`

    @property
    def head_width(self):
        """Width of one head, the int K = num_units // num_heads; None until the layer is built."""
        return self._head_width

    def _initializer(self, per_head_scale):
        if self.initialization == "glorot":
            return "glorot_uniform"
        # Glorot uniform is VarianceScaling(1, "fan_avg", "uniform") on the Dense kernel's fans.
        return keras.initializers.VarianceScaling(per_head_scale, mode="fan_avg", distribution="uniform")

    def build(self, queries_shape, keys_shape, values_shape=None):
        model_width = queries_shape[-1]
        num_units = self.num_units or model_width
        if num_units % self.num_heads != 0:
            raise ValueError(
                f"The queries' width must be divisible by `num_heads` when `num_units` is None. "
                f"Received: width={num_units}, num_heads={self.num_heads}"
            )
        if not self.use_output_projection and num_units != model_width:
            raise ValueError(
                "Without the output projection, `num_units` must equal the queries' width for "
                f"the residual connection. Received: num_units={num_units}, width={model_width}"
            )
        self._head_width = num_units // self.num_heads
        values_shape = keys_shape if values_shape is None else values_shape

        heads, width = self.num_heads, self._head_width

        def projection(name):
            return keras.layers.Dense(
                num_units,
                activation=self.projection_activation,
                kernel_initializer=self._initializer(2.0 / (heads + width)),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query_dense = projection("query_dense")
        self.query_dense.build(queries_shape)
        self.key_dense = projection("key_dense")
        self.key_dense.build(keys_shape)
        self.value_dense = projection("value_dense")
        self.value_dense.build(values_shape)
        # The score function of the heads; "scaled_dot" (the default) has no weights.
        self.scoring = AttentionScore(self.attention_score, dtype=self.dtype_policy, name="scoring")
        self.scoring.build((None, heads, None, width), (None, heads, None, width))
        if self.use_output_projection:
            self.output_dense = keras.layers.Dense(
                model_width,
                kernel_initializer=self._initializer(2.0 / (1 + heads)),
                dtype=self.dtype_policy,
                name="output_dense",
            )
            self.output_dense.build(tuple(queries_shape[:-1]) + (num_units,))
        self.attention_dropout = Dropout(self.dropout_rate, dtype=self.dtype_policy, name="attention_dropout")
        self.residual_dropout = Dropout(self.residual_dropout_rate, dtype=self.dtype_policy, name="residual_dropout")
        if self.normalize:
            self.layer_norm = LayerNorm(epsilon=self.epsilon, dtype=self.dtype_policy, name="layer_norm")
            self.layer_norm.build(queries_shape)

    def _split_heads(self, projected):
        batch, length = ops.shape(projected)[0], ops.shape(projected)[1]
        heads = ops.reshape(projected, (batch, length, self.num_heads, self._head_width))  # (B, T, H, K)
        return ops.transpose(heads, (0, 2, 1, 3))  # (B, H, T, K)

    def project_keys_values(self, keys, values=None):
        """Project and split the keys and values into heads, once, for `attend`.

        Incremental decoding calls this once per encoder output (cross-attention) and once per
        new token (self-attention cache), instead of re-projecting every key at every step.

        Args:
            keys: float tensor `[B, T_k, D_k]`.
            values: float tensor `[B, T_k, D_v]` or None (the keys are the values).

        Returns:
            `(key, value)`: float tensors `[B, H, T_k, K]`.
        """
        values = keys if values is None else values
        return self._split_heads(self.key_dense(keys)), self._split_heads(self.value_dense(values))

    def call(
        self,
        queries,
        keys,
        values=None,
        training=None,
        queries_mask=None,
        keys_mask=None,
        return_attention_scores=False,
    ):
        queries_mask, allowed = attention_masks(
            queries, keys, queries_mask, keys_mask, self.causality, self.sign_mask_rule
        )
        key, value = self.project_keys_values(keys, values)  # (B, H, T_k, K) each
        return self.attend(queries, key, value, allowed, queries_mask, training, return_attention_scores)

    def attend(self, queries, key, value, allowed, queries_mask, training=None, return_attention_scores=False):
        """Attention of `queries` over keys and values already projected by `project_keys_values`.

        `call` is `project_keys_values` then `attend`; a key/value cache calls `attend` directly,
        with `allowed` saying which cached positions exist (causality is then implicit).

        Args:
            queries: float tensor `[B, T_q, D]` (not yet projected).
            key: float tensor `[B, H, T_k, K]`, the projected keys split into heads.
            value: float tensor `[B, H, T_k, K]`, the projected values split into heads.
            allowed: bool tensor broadcastable to `[B, H, T_q, T_k]`, True where query `i` may
                attend to key `j`.
            queries_mask: bool tensor `[B, T_q]`, True at real query positions.
            training: bool, whether dropout is active.
            return_attention_scores: bool; also return the weights `[B, H, T_q, T_k]`.

        Returns:
            float tensor `[B, T_q, D]`, zero at padding queries (with `zero_padding`); and the
            weights if requested.
        """
        query = self._split_heads(self.query_dense(queries))  # (B, H, T_q, K)
        if self.uses_fused(key.shape[2], training, return_attention_scores):
            context = fused_context(query, key, value, allowed)  # (B, T_q, H*K)
        else:
            context, weights = self._explicit_context(query, key, value, allowed, training)
        if not self.zero_padding:  # the query-masked weights' zero context at padding queries
            context = zero_padding_rows(context, queries_mask)
        if self.use_output_projection:
            context = self.output_dense(context)  # (B, T_q, D)

        outputs = self.residual_dropout(context, training=training) + queries  # (B, T_q, D) residual connection
        if self.normalize:
            outputs = self.layer_norm(outputs)
        if self.zero_padding:
            outputs = zero_padding_rows(outputs, queries_mask)
        if return_attention_scores:
            return outputs, weights * ops.cast(queries_mask[:, None, :, None], weights.dtype)
        return outputs

    def uses_fused(self, key_length, training=None, return_attention_scores=False):
        """Whether a call runs the fused `keras.ops.dot_product_attention` (logged once per choice).

        Args:
            key_length: int or None, the static number of keys T_k.
            training: bool, whether dropout is active.
            return_attention_scores: bool, whether the weights are requested.
        """
        if (
            self.attention_implementation == "explicit"
            or self.attention_score != "scaled_dot"
            or return_attention_scores
        ):
            return False
        if training and self.dropout_rate:
            return False
        if self.attention_implementation == "fused":
            return True
        fused = fused_pays(key_length, self.causality)
        log_choice_once("fused" if fused else "explicit", f'"auto", {keras.backend.backend()}, {key_length} keys')
        return fused

    def _explicit_context(self, query, key, value, allowed, training):
        """Scores, masked softmax, weighted sum: `(context [B, T_q, H*K], weights [B, H, T_q, T_k])`."""
        scores = self.scoring(query, key, allowed)  # float32 (B, H, T_q, T_k), masked
        weights = ops.cast(softmax_over_keys(scores), self.compute_dtype)  # (B, H, T_q, T_k)
        # Query masking (the tutorial's `outputs *= query_masks`) is applied to the returned
        # weights only: the rows of padding queries are zeroed at the end (with `zero_padding`),
        # or their context is (without), so the outputs and gradients are the same without a
        # pass over [B, H, T_q, T_k].
        context = weighted_sum(self.attention_dropout(weights, training=training), value)  # (B, H, T_q, K)
        context = ops.transpose(context, (0, 2, 1, 3))  # (B, T_q, H, K)
        batch, query_length = ops.shape(context)[0], ops.shape(context)[1]
        return ops.reshape(context, (batch, query_length, self.num_heads * self._head_width)), weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "num_units": self.num_units,
                "dropout_rate": self.dropout_rate,
                "residual_dropout_rate": self.residual_dropout_rate,
                "causality": self.causality,
                "use_output_projection": self.use_output_projection,
                "projection_activation": keras.activations.serialize(self.projection_activation),
                "normalize": self.normalize,
                "epsilon": self.epsilon,
                "initialization": self.initialization,
                "attention_score": self.attention_score,
                "sign_mask_rule": self.sign_mask_rule,
                "zero_padding": self.zero_padding,
                "attention_implementation": self.attention_implementation,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return super().from_config(with_attention_score(config))
