"""NumPy versions of the tutorial's formulas, the yardstick for `tests/test_layers.py`.

Written from the paper ("Attention Is All You Need", Vaswani et al., 2017) and the TF1 tutorial
code (`modules.py`: `normalize`, `embedding`, `multihead_attention`, `feedforward`,
`positional_encoding`), never from `keras_transformer`. Every function takes plain NumPy arrays
with the weights passed explicitly and computes in float64, so that a layer, run in float32 with
the same weights copied in, can be compared with `assert_allclose`.

`multihead_attention` and `feedforward` exist in two versions, and both are here:

- the document's code (the version this package ports): linear Q/K/V projections, key and query
  masks `sign(reduce_sum(abs(x), -1))` (`sign_mask`), the final `normalize` of both functions
  commented out (residual connection only), and dropout (rate 0.2) after each of the two
  convolutions of `feedforward`: `document_multihead_attention`, `document_feedforward`;
- Kyubyong's repository (Kyubyong Park's `modules.py`): relu Q/K/V projections, masks
  `sign(abs(reduce_sum(x, -1)))` (`repository_sign_mask`, which also calls a real vector summing
  to zero padding), `normalize` applied, no dropout in `feedforward`:
  `repository_multihead_attention`, `repository_feedforward`.

Neither has the paper's output projection `W^O`. Dropout is left out (inference), unless a
`dropout(kind, x)` function is given: it is then applied where the tutorial code's
`tf.layers.dropout` is (and where the paper's residual dropout is), named by kind: `"weights"`
(the attention weights, after query masking), `"residual"` (an attention sub-layer's output
before the residual connection: the paper's), `"inner"` and `"output"` (after each convolution
of `feedforward`).
`multihead_attention` and `feedforward` take each of these choices as an argument, defaulting
to the document's code, plus the package's own: `W^O` (`use_output_projection=True`), explicit
`queries_mask` / `keys_mask` / `mask` (replacing the sign masks; the tutorial has no such
arguments), and the zeroing of the outputs at padding positions (`zero_padding_rows=True`; the
tutorial leaves `normalize`'s `beta` there, or `FFN(0)`).

The attention family, written from the papers' formulas: `attention_score` (the score functions
s(x, q): additive, Bahdanau et al. 2015; dot and bilinear, Luong et al. 2015; scaled dot, Vaswani
et al. 2017; cosine similarity times a scale), `attention` (single-head attention as addressing:
scores, softmax, weighted average, no projections), and `multihead_attention(score=...)`, the
tutorial's function with its scaled dot product replaced by another score of each head.

Shape letters as in the package: B batch (the tutorial's N), T_q / T_k query / key lengths,
D width (the tutorial's C), H heads (the tutorial's h), F feed-forward inner width, K / K_q key /
query width of a head, A the additive score's hidden width.
"""

import numpy as np

# The tutorial's score for masked positions, `paddings = tf.ones_like(outputs) * (-2**32 + 1)`.
MASKED_SCORE = -(2.0**32) + 1.0


def sign_mask(x):
    """The document's mask, `sign(sum(|x|, -1))`: `[B, T, D]` -> `[B, T]` float, 0 at all-zero vectors."""
    return np.sign(np.sum(np.abs(np.asarray(x, np.float64)), axis=-1))


def repository_sign_mask(x):
    """Kyubyong's repository's mask, `sign(|sum(x, -1)|)`: also 0 at a vector summing to zero."""
    return np.sign(np.abs(np.sum(np.asarray(x, np.float64), axis=-1)))


def normalize(x, gamma, beta, epsilon=1e-8):
    """The tutorial's `normalize`: `gamma * (x - mean) / (variance + epsilon) ** .5 + beta`."""
    x = np.asarray(x, np.float64)
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.mean((x - mean) ** 2, axis=-1, keepdims=True)  # tf.nn.moments: population variance
    normalized = (x - mean) / (variance + epsilon) ** 0.5
    return gamma * normalized + beta


layer_norm = normalize  # for the functions below, whose `normalize` argument hides the name


def dense(x, kernel, bias, activation=None):
    """`tf.layers.dense`: `x @ kernel + bias`, then `activation` (None or "relu")."""
    outputs = np.asarray(x, np.float64) @ kernel + bias
    if activation == "relu":
        outputs = np.maximum(outputs, 0.0)
    elif activation is not None:
        raise ValueError(f"unsupported activation: {activation}")
    return outputs


def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)


# The smallest norm a vector is divided by in the cosine score (a zero vector has cosine 0).
NORM_EPSILON = 1e-12


def attention_score(x, q, score, weights=None, head=0):
    """The score `s(x, q)` of one key `x` (width K) against one query `q` (width K_q), one head.

    Args:
        x: `[K]`, the key.
        q: `[K_q]`, the query.
        score: "additive", "dot", "scaled_dot", "bilinear" or "cosine".
        weights: the score's weights, every head's: additive `W [H, K, A]`, `U [H, K_q, A]`,
            `v [H, A]`; bilinear `W [H, K, K_q]`; cosine `g [H]` (the scale).
        head: the head whose weights are used.

    Returns:
        float, in float64.
    """
    x, q = np.asarray(x, np.float64), np.asarray(q, np.float64)
    if score == "additive":  # Bahdanau et al. 2015: v^T tanh(W x + U q)
        W, U, v = (np.asarray(weights[name][head], np.float64) for name in ("W", "U", "v"))
        return v @ np.tanh(W.T @ x + U.T @ q)
    if score == "dot":  # Luong et al. 2015: x^T q
        return x @ q
    if score == "scaled_dot":  # Vaswani et al. 2017: x^T q / sqrt(K)
        return x @ q / np.sqrt(len(x))
    if score == "bilinear":  # Luong et al. 2015 ("general"): x^T W q
        return x @ np.asarray(weights["W"][head], np.float64) @ q
    if score == "cosine":  # g cos(x, q)
        norms = max(np.linalg.norm(x), NORM_EPSILON) * max(np.linalg.norm(q), NORM_EPSILON)
        return float(weights["g"][head]) * (x @ q) / norms
    raise ValueError(f"unknown score: {score}")


def attention_scores(queries, keys, score, weights=None):
    """`attention_score` of every query against every key, head by head, position by position.

    Args:
        queries: `[B, H, T_q, K_q]`.
        keys: `[B, H, T_k, K]`.
        score: see `attention_score`.
        weights: see `attention_score`.

    Returns:
        `[B, H, T_q, T_k]`, in float64.
    """
    batch, heads, query_length, _ = np.shape(queries)
    key_length = np.shape(keys)[2]
    scores = np.zeros((batch, heads, query_length, key_length))
    for b in range(batch):
        for h in range(heads):
            for i in range(query_length):
                for j in range(key_length):
                    scores[b, h, i, j] = attention_score(keys[b, h, j], queries[b, h, i], score, weights, h)
    return scores


def attention(
    queries,
    keys,
    values,
    score,
    weights=None,
    causality=False,
    queries_mask=None,
    keys_mask=None,
):
    """Single-head attention as addressing, no projections: input, distribution, weighted average.

    1. Input: the keys `x_1 .. x_N` (and the values `v_j`; the keys when `values` is None).
    2. Attention distribution: `alpha_ij = softmax_j(s(x_j, q_i))` over the allowed keys (real,
       and with `causality` not after `i`); the others get the tutorial's `-2^32 + 1`, weight 0.
    3. Weighted average: `context_i = sum_j alpha_ij v_j`, zero at padding queries.

    Args:
        queries: `[B, T_q, D_q]`.
        keys: `[B, T_k, D_k]`.
        values: `[B, T_k, D_v]`, or None (the keys are the values).
        score: see `attention_score`.
        weights: the score's weights, with one head; see `attention_score`.
        causality: hide the future with a `tril` mask.
        queries_mask: optional `[B, T_q]`, default the sign mask of the queries.
        keys_mask: optional `[B, T_k]`, default the sign mask of the keys.

    Returns:
        `(context [B, T_q, D_v], weights [B, T_q, T_k])`, the weights zero at padding queries.
    """
    queries, keys = np.asarray(queries, np.float64), np.asarray(keys, np.float64)
    values = keys if values is None else np.asarray(values, np.float64)
    real_queries = sign_mask(queries) if queries_mask is None else np.asarray(queries_mask, float)  # (B, T_q)
    real_keys = sign_mask(keys) if keys_mask is None else np.asarray(keys_mask, float)  # (B, T_k)
    scores = attention_scores(queries[:, None], keys[:, None], score, weights)[:, 0]  # (B, T_q, T_k)
    allowed = np.broadcast_to(real_keys[:, None, :] != 0, scores.shape)
    if causality:
        allowed = allowed & (np.tril(np.ones(scores.shape[1:])) != 0)[None]
    alpha = softmax(np.where(allowed, scores, MASKED_SCORE), axis=-1) * real_queries[:, :, None]  # (B, T_q, T_k)
    context = alpha @ values  # (B, T_q, D_v)
    return context, alpha


def multihead_attention(
    queries,
    keys,
    values,
    weights,
    num_heads,
    causality=False,
    use_output_projection=False,
    projection_activation=None,
    normalize=False,
    mask_function=sign_mask,
    epsilon=1e-8,
    queries_mask=None,
    keys_mask=None,
    zero_padding_rows=False,
    score="scaled_dot",
    score_weights=None,
    dropout=None,
):
    """The tutorial's `multihead_attention`, step by step (dropout left out unless `dropout` is given).

    With the defaults, the document's code; see `document_multihead_attention` and
    `repository_multihead_attention`.

    Args:
        queries: `[B, T_q, D]`.
        keys: `[B, T_k, D_k]`.
        values: `[B, T_k, D_v]`, or None for the tutorial's "values are the keys".
        weights: dict with `query_kernel`, `query_bias`, `key_kernel`, `key_bias`,
            `value_kernel`, `value_bias`; with `normalize`, `gamma`, `beta`; with
            `use_output_projection`, `output_kernel`, `output_bias`.
        num_heads: h.
        causality: hide the future with a `tril` mask.
        use_output_projection: apply the paper's `W^O` (neither version has it).
        projection_activation: activation of the Q/K/V projections: None (the document's
            code) or "relu" (Kyubyong's repository).
        normalize: apply `normalize` after the residual connection (Kyubyong's repository; the
            document's code has it commented out).
        mask_function: `sign_mask` (the document's code) or `repository_sign_mask`.
        epsilon: `normalize`'s epsilon.
        queries_mask: optional `[B, T_q]` array replacing the queries' sign mask.
        keys_mask: optional `[B, T_k]` array replacing the keys' sign mask.
        zero_padding_rows: the package's deviation, multiply the outputs by the query mask.
        score: the package's extension: "scaled_dot" (the tutorial's multiplication and scale)
            or another score function of each head's projected queries and keys (see
            `attention_score`).
        score_weights: that score's weights, `[H, ...]` (see `attention_score`).
        dropout: optional `dropout(kind, x)`, kinds `"weights"` (given `[N, h, T_q, T_k]`, the
            package's layout) and `"residual"` (`[N, T_q, D]`).

    Returns:
        `(outputs [B, T_q, D], attention weights [B, H, T_q, T_k])`; the weights are the
        tutorial's `(h*N, T_q, T_k)` tensor (head-major) put in the package's layout.
    """
    queries = np.asarray(queries, np.float64)
    keys = np.asarray(keys, np.float64)
    values = keys if values is None else np.asarray(values, np.float64)
    h = num_heads
    real_queries = mask_function(queries) if queries_mask is None else np.asarray(queries_mask, float)  # (N, T_q)
    real_keys = mask_function(keys) if keys_mask is None else np.asarray(keys_mask, float)  # (N, T_k)

    # Linear projections
    Q = dense(queries, weights["query_kernel"], weights["query_bias"], projection_activation)  # (N, T_q, C)
    K = dense(keys, weights["key_kernel"], weights["key_bias"], projection_activation)  # (N, T_k, C)
    V = dense(values, weights["value_kernel"], weights["value_bias"], projection_activation)  # (N, T_k, C)

    # Split and concat
    Q_ = np.concatenate(np.split(Q, h, axis=2), axis=0)  # (h*N, T_q, C/h)
    K_ = np.concatenate(np.split(K, h, axis=2), axis=0)  # (h*N, T_k, C/h)
    V_ = np.concatenate(np.split(V, h, axis=2), axis=0)  # (h*N, T_k, C/h)

    if score == "scaled_dot":
        # Multiplication, scale
        outputs = Q_ @ np.transpose(K_, (0, 2, 1))  # (h*N, T_q, T_k)
        outputs = outputs / K_.shape[-1] ** 0.5
    else:  # the package's extension: the score s(k, q) of each head
        batch = queries.shape[0]

        def by_head(x):  # (h*N, T, C/h) -> (N, h, T, C/h)
            return np.transpose(x.reshape((h, batch) + x.shape[1:]), (1, 0, 2, 3))

        outputs = attention_scores(by_head(Q_), by_head(K_), score, score_weights)  # (N, h, T_q, T_k)
        outputs = np.transpose(outputs, (1, 0, 2, 3)).reshape((h * batch,) + outputs.shape[2:])  # (h*N, T_q, T_k)

    # Key masking
    key_masks = np.tile(real_keys, (h, 1))  # (h*N, T_k)
    key_masks = np.tile(key_masks[:, None, :], (1, queries.shape[1], 1))  # (h*N, T_q, T_k)
    paddings = np.ones_like(outputs) * MASKED_SCORE
    outputs = np.where(key_masks == 0, paddings, outputs)  # (h*N, T_q, T_k)

    # Causality = future blinding
    if causality:
        tril = np.tril(np.ones(outputs.shape[1:]))  # (T_q, T_k)
        masks = np.tile(tril[None, :, :], (outputs.shape[0], 1, 1))  # (h*N, T_q, T_k)
        outputs = np.where(masks == 0, paddings, outputs)  # (h*N, T_q, T_k)

    # Activation
    outputs = softmax(outputs, axis=-1)  # (h*N, T_q, T_k)

    # Query masking
    query_masks = np.tile(real_queries, (h, 1))  # (h*N, T_q)
    query_masks = np.tile(query_masks[:, :, None], (1, 1, keys.shape[1]))  # (h*N, T_q, T_k)
    outputs = outputs * query_masks  # (h*N, T_q, T_k)
    attention = outputs

    # Dropouts
    if dropout is not None:
        batch = queries.shape[0]
        by_head = np.transpose(outputs.reshape((h, batch) + outputs.shape[1:]), (1, 0, 2, 3))  # (N, h, T_q, T_k)
        outputs = np.transpose(dropout("weights", by_head), (1, 0, 2, 3)).reshape(outputs.shape)  # (h*N, T_q, T_k)

    # Weighted sum
    outputs = outputs @ V_  # (h*N, T_q, C/h)

    # Restore shape
    outputs = np.concatenate(np.split(outputs, h, axis=0), axis=2)  # (N, T_q, C)

    # The paper's output projection W^O (in neither version of the tutorial code)
    if use_output_projection:
        outputs = dense(outputs, weights["output_kernel"], weights["output_bias"])  # (N, T_q, D)

    # The paper's residual dropout (in neither version of the tutorial code)
    if dropout is not None:
        outputs = dropout("residual", outputs)

    # Residual connection
    outputs = outputs + queries

    # Normalize (commented out in the document's code)
    if normalize:
        outputs = layer_norm(outputs, weights["gamma"], weights["beta"], epsilon)  # (N, T_q, D)

    if zero_padding_rows:  # the package's deviation
        outputs = outputs * real_queries[:, :, None]

    batch = queries.shape[0]
    attention = attention.reshape((h, batch) + attention.shape[1:])  # (h, N, T_q, T_k)
    attention = np.transpose(attention, (1, 0, 2, 3))  # (N, h, T_q, T_k)
    return outputs, attention


def feedforward(
    x,
    inner_kernel,
    inner_bias,
    outer_kernel,
    outer_bias,
    gamma=None,
    beta=None,
    epsilon=1e-8,
    normalize=False,
    mask=None,
    zero_padding_rows=False,
    dropout=None,
):
    """The tutorial's `feedforward`: `x + relu(x W_1 + b_1) W_2 + b_2`, then `normalize` if asked.

    With the defaults, the document's code (its dropout after each convolution left out:
    inference, unless `dropout(kind, x)` is given: kinds `"inner"` and `"output"`);
    `normalize=True` is Kyubyong's repository. Kernels are 2-D, `[D, F]` and `[F, D]` (a `Conv1D`
    kernel `[1, in, out]` is passed as `kernel[0]`). `gamma` and `beta` are needed only with
    `normalize`; `mask` (default: the sign mask of `x`) only with `zero_padding_rows`.
    """
    x = np.asarray(x, np.float64)
    dropout = dropout or (lambda kind, values: values)
    outputs = dropout("inner", dense(x, inner_kernel, inner_bias, "relu"))  # (B, T, F)
    outputs = dropout("output", dense(outputs, outer_kernel, outer_bias))  # (B, T, D)
    outputs = outputs + x
    if normalize:  # commented out in the document's code
        outputs = layer_norm(outputs, gamma, beta, epsilon)
    if zero_padding_rows:  # the package's deviation
        mask = sign_mask(x) if mask is None else np.asarray(mask, np.float64)
        outputs = outputs * mask[:, :, None]
    return outputs


def document_multihead_attention(queries, keys, weights, num_heads, causality=False):
    """The document's `multihead_attention` (the keys are the values).

    Linear projections, masks `sign(sum(|x|))`, residual connection without `normalize`.
    Returns `(outputs, weights)`.
    """
    return multihead_attention(queries, keys, None, weights, num_heads, causality)


def repository_multihead_attention(queries, keys, weights, num_heads, causality=False, epsilon=1e-8):
    """Kyubyong's repository's `multihead_attention` (the keys are the values).

    Relu projections, masks `sign(|sum(x)|)`, residual connection and `normalize`.
    Returns `(outputs, weights)`.
    """
    return multihead_attention(
        queries,
        keys,
        None,
        weights,
        num_heads,
        causality,
        projection_activation="relu",
        normalize=True,
        mask_function=repository_sign_mask,
        epsilon=epsilon,
    )


def document_feedforward(x, inner_kernel, inner_bias, outer_kernel, outer_bias):
    """The document's `feedforward`: `x + relu(x W_1 + b_1) W_2 + b_2`, no `normalize`.

    Its dropout, rate 0.2 after each convolution, is left out: inference.
    """
    return feedforward(x, inner_kernel, inner_bias, outer_kernel, outer_bias)


def repository_feedforward(x, inner_kernel, inner_bias, outer_kernel, outer_bias, gamma, beta, epsilon=1e-8):
    """Kyubyong's repository's `feedforward`: `normalize(x + relu(x W_1 + b_1) W_2 + b_2)`."""
    return feedforward(x, inner_kernel, inner_bias, outer_kernel, outer_bias, gamma, beta, epsilon, normalize=True)


def embedding(ids, table, scale=True):
    """The tutorial's `embedding(zero_pad=True, scale)`: row 0 replaced by zeros, times sqrt(D)."""
    table = np.asarray(table, np.float64)
    lookup_table = np.concatenate([np.zeros((1, table.shape[1])), table[1:, :]], axis=0)  # (V, D)
    outputs = lookup_table[np.asarray(ids)]  # (B, T, D)
    if scale:
        outputs = outputs * table.shape[1] ** 0.5
    return outputs


def positional_encoding(length, depth):
    """The paper's sinusoids, `[length, depth]`.

    `PE(pos, 2i) = sin(pos / 10000^(2i / depth))`, `PE(pos, 2i + 1) = cos(pos / 10000^(2i / depth))`.
    """
    encoding = np.zeros((length, depth))
    for pos in range(length):
        for i in range((depth + 1) // 2):
            angle = pos / 10000.0 ** (2 * i / depth)
            encoding[pos, 2 * i] = np.sin(angle)
            if 2 * i + 1 < depth:
                encoding[pos, 2 * i + 1] = np.cos(angle)
    return encoding


def tutorial_positional_encoding(length, depth):
    """The tutorial code's sinusoids, `[length, depth]`, as its `positional_encoding` writes them.

    `position_enc[pos, i] = pos / 10000^(2 i / depth)` for every column `i`, then the sine of the
    even columns and the cosine of the odd ones: a pair's two columns have different frequencies.
    """
    position_enc = np.array([[pos / np.power(10000, 2.0 * i / depth) for i in range(depth)] for pos in range(length)])
    position_enc[:, 0::2] = np.sin(position_enc[:, 0::2])  # dim 2i
    position_enc[:, 1::2] = np.cos(position_enc[:, 1::2])  # dim 2i+1
    return position_enc
