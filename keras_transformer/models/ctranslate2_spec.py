"""A trained translation model as CTranslate2's Transformer: the same weights, for that inference engine.

CTranslate2 (the OpenNMT project's C++ engine, `pip install "keras-transformer[ctranslate2]"`)
runs a Transformer given as its `TransformerSpec`: post-norm here (LayerNorm after each residual,
as the paper and this package), relu feed-forward, embeddings scaled by `sqrt(D)`, fused
query/key/value projections. `transformer_spec` fills one with a model's weights:

    source_embedding.embeddings [V_s, D]            encoder.embeddings[0].weight
    positions (sinusoids or learned) [P, D]         encoder/decoder.position_encodings.encodings
    block.self_attention  W^Q, W^K, W^V  [D, D]     self_attention.linear[0]  ([3D, D], transposed)
                          W^O [D, D] (or identity)  self_attention.linear[1]
                          LayerNorm beta, gamma     self_attention.layer_norm
    block.cross_attention W^Q; W^K, W^V; W^O        attention.linear[0]; linear[1] ([2D, D]); linear[2]
    block.feed_forward    inner, outer Conv1D       ffn.linear_0, ffn.linear_1 (kernels [1, D, F] -> [F, D])
    logits kernel [D, V_t] (or the target table)    decoder.projection ([V_t, D])

The positional encodings are written as tables (the paper's or the tutorial code's frequencies,
or the learned ones), so the engine adds exactly what the model adds; without an output
projection (the tutorial code's `use_output_projection=False`) `W^O` is the identity. What the
engine cannot compute is refused before anything is built (`conversion_problems`): another score
than the scaled dot product, relu projections, no LayerNorm, and the tutorial code's sign masks
(whose outputs depend on padding, which the engine never adds).

Backend-neutral (the weights are read with `keras.ops`); `keras_transformer.export.ctranslate2_export`
writes the result as an export and translates text with it.
"""

import numpy as np
from keras import ops

from keras_transformer.config import variant_switches
from keras_transformer.data.special_tokens import END_ID, RESERVED_TOKENS, START_ID, UNK_ID
from keras_transformer.layers.embedding import sinusoidal_encoding
from keras_transformer.models.translation import TransformerLayers

INSTALL_HINT = 'CTranslate2 is not installed: pip install "keras-transformer[ctranslate2]"'


class UnsupportedModelError(ValueError):
    """The model computes something CTranslate2's Transformer cannot; the message says what."""


def import_ctranslate2():
    """The `ctranslate2` module, or an `ImportError` that says how to install it."""
    try:
        import ctranslate2
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    return ctranslate2


def conversion_problems(model_config):
    """What keeps a translation model from running as CTranslate2's Transformer.

    Args:
        model_config: the model's `ModelConfig`.

    Returns:
        list of short sentences, empty when it converts (the library and paper variants do, with
        any sizes, positional encodings and embedding sharing).
    """
    switches = variant_switches(model_config)
    problems = []
    if model_config.attention_score != "scaled_dot":
        problems.append(f"attention_score={model_config.attention_score!r} (the engine has scaled_dot only)")
    if switches["projection_activation"] != "linear":
        problems.append(f"projection_activation={switches['projection_activation']!r} (the engine's are linear)")
    if not switches["normalize"]:
        problems.append("normalize=False (the engine's post-norm blocks always apply LayerNorm)")
    if switches["padding_masks"] != "ids":
        problems.append(
            f"padding_masks={switches['padding_masks']!r} (sign masks make outputs depend on padding, which the "
            "engine never adds)"
        )
    return problems


def _numpy(tensor):
    return np.asarray(ops.convert_to_numpy(tensor), dtype=np.float32)


def _set_linear(spec, kernel, bias):
    """A `LinearSpec` from a Keras kernel `[in, out]` (the engine's weight is `[out, in]`) and bias `[out]`."""
    spec.weight = np.ascontiguousarray(_numpy(kernel).T)
    if bias is not None:
        spec.bias = _numpy(bias)


def _set_layer_norm(spec, layer_norm):
    spec.gamma = _numpy(layer_norm.gamma)
    spec.beta = _numpy(layer_norm.beta)


def _set_attention(spec, attention, self_attention):
    """The engine's attention from a `MultiheadAttention`: fused projections, `W^O`, LayerNorm."""
    dense = [attention.query_dense, attention.key_dense, attention.value_dense]
    kernels = [_numpy(layer.kernel) for layer in dense]  # each (D, D)
    biases = [_numpy(layer.bias) for layer in dense]
    if self_attention:  # linear[0] = [W^Q; W^K; W^V]
        _set_linear(spec.linear[0], np.concatenate(kernels, axis=1), np.concatenate(biases))
    else:  # linear[0] = W^Q, linear[1] = [W^K; W^V]
        _set_linear(spec.linear[0], kernels[0], biases[0])
        _set_linear(spec.linear[1], np.concatenate(kernels[1:], axis=1), np.concatenate(biases[1:]))
    if attention.use_output_projection:
        _set_linear(spec.linear[-1], attention.output_dense.kernel, attention.output_dense.bias)
    else:  # the tutorial code: the heads' concatenation is the output
        width = kernels[0].shape[1]
        _set_linear(spec.linear[-1], np.eye(width, dtype=np.float32), np.zeros(width, np.float32))
    _set_layer_norm(spec.layer_norm, attention.layer_norm)


def _set_feed_forward(spec, feed_forward):
    _set_linear(spec.linear_0, _numpy(feed_forward.inner_conv.kernel)[0], feed_forward.inner_conv.bias)
    _set_linear(spec.linear_1, _numpy(feed_forward.outer_conv.kernel)[0], feed_forward.outer_conv.bias)
    _set_layer_norm(spec.layer_norm, feed_forward.layer_norm)


def _position_table(positions, length, depth):
    """The `[length, D]` encodings a `PositionalEncoding` adds at positions `0 .. length - 1`."""
    if positions.learned:
        return _numpy(positions.position_embeddings)[:length]
    return _numpy(sinusoidal_encoding(length, depth, "float32", frequencies=positions.frequencies))


def transformer_spec(model, model_config, source_tokens, target_tokens):
    """CTranslate2's `TransformerSpec` of a trained translation model, its weights and vocabularies set.

    Args:
        model: a model from `build_transformer` (trained).
        model_config: its `ModelConfig`.
        source_tokens: the source vocabulary, one distinct token per id (`V_s` of them).
        target_tokens: the target vocabulary (`V_t` tokens).

    Returns:
        a `ctranslate2.specs.TransformerSpec`, validated.

    Raises:
        UnsupportedModelError: `conversion_problems` found some (the message lists them).
        ValueError: a vocabulary's size is not the model's.
        ImportError: CTranslate2 is not installed (the message says how to install it).
    """
    problems = conversion_problems(model_config)
    if problems:
        raise UnsupportedModelError("CTranslate2 cannot run this model: " + "; ".join(problems))
    for side, tokens, size in (
        ("source", source_tokens, model_config.source_vocab_size),
        ("target", target_tokens, model_config.target_vocab_size),
    ):
        if len(tokens) != size:
            raise ValueError(f"The {side} vocabulary has {len(tokens)} tokens; the model has {size} {side} ids")
    import_ctranslate2()
    from ctranslate2.specs import transformer_spec as specs

    layers = TransformerLayers.from_model(model)
    spec = specs.TransformerSpec.from_config(
        (len(layers.encoder_blocks), len(layers.decoder_blocks)), model_config.num_heads, pre_norm=False
    )
    spec.config.layer_norm_epsilon = float(layers.encoder_blocks[0].epsilon)
    for name, token_id in (("unk_token", UNK_ID), ("bos_token", START_ID), ("eos_token", END_ID)):
        setattr(spec.config, name, RESERVED_TOKENS[token_id])
    spec.config.decoder_start_token = RESERVED_TOKENS[START_ID]
    depth = model_config.d_model
    encoder, decoder = spec.encoder, spec.decoder
    encoder.embeddings[0].weight = _numpy(layers.source_embedding.embeddings)
    decoder.embeddings.weight = _numpy(layers.target_embedding.embeddings)
    encoder.position_encodings.encodings = _position_table(layers.source_positions, model_config.max_source_len, depth)
    decoder.position_encodings.encodings = _position_table(layers.target_positions, model_config.max_target_len, depth)
    for block_spec, block in zip(encoder.layer, layers.encoder_blocks):
        _set_attention(block_spec.self_attention, block.self_attention, self_attention=True)
        _set_feed_forward(block_spec.ffn, block.feed_forward)
    for block_spec, block in zip(decoder.layer, layers.decoder_blocks):
        _set_attention(block_spec.self_attention, block.self_attention, self_attention=True)
        _set_attention(block_spec.attention, block.cross_attention, self_attention=False)
        _set_feed_forward(block_spec.ffn, block.feed_forward)
    _set_linear(decoder.projection, *layers.logits_weights())
    spec.register_source_vocabulary(list(source_tokens))
    spec.register_target_vocabulary(list(target_tokens))
    spec.validate()
    return spec
