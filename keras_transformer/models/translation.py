"""The encoder-decoder Transformer as a functional `keras.Model` (paper figure 1).

`build_transformer(config)` wires the layers of `keras_transformer.layers` the way the
tutorial's `Graph` does:

    source_ids -> TokenEmbedding -> PositionalEncoding -> dropout -> EncoderBlock x N  = memory
    target_in_ids -> TokenEmbedding -> PositionalEncoding -> dropout
                  -> DecoderBlock x N (causal self-attention, attention over memory, FFN)
                  -> Dense(V_t) = logits

With `ModelConfig.embedding_sharing`, tables are shared as in the paper (section 3.4): "decoder"
computes the logits with the target embedding table (`h E_t^T`, no Dense), "all" also embeds the
source with it (one `[V, D]` table, one vocabulary for both sides).

The wiring is written once, in `encode` and `decode`, which run on Keras symbolic tensors to
build the model and on real tensors to decode step by step or to collect attention weights.
Padding masks come from the token ids (id 0), passed to every block explicitly; the layers'
own sign masks agree with them at every depth because padding rows stay exactly zero. Under the
tutorial variants' `padding_masks` ("abs_sum", "sum") the blocks ignore them and every attention
sublayer finds padding from its inputs, as the tutorial code does.
"""

import dataclasses

import keras
from keras import ops

from keras_transformer.config import ModelConfig, variant_switches
from keras_transformer.layers import DecoderBlock, Dropout, EncoderBlock, PositionalEncoding, TokenEmbedding
from keras_transformer.layers.blocks import block_arguments
from keras_transformer.masks import padding_mask, sign_mask

SHARED = "embedding"  # the one table's layer name under embedding_sharing="all"


@dataclasses.dataclass
class TransformerLayers:
    """The layers of one Transformer, by role.

    Create them with `create`, or find them in a built model with `from_model`.
    `output_projection` is None when the logits use the target embedding table, and
    `source_embedding` is `target_embedding` (one layer, named "embedding") when all are shared.
    """

    source_embedding: TokenEmbedding
    target_embedding: TokenEmbedding
    source_positions: PositionalEncoding
    target_positions: PositionalEncoding
    source_dropout: Dropout
    target_dropout: Dropout
    encoder_blocks: list
    decoder_blocks: list
    output_projection: keras.layers.Dense | None

    @classmethod
    def create(cls, config: ModelConfig):
        switches = variant_switches(config)

        def positions(name, max_length):
            return PositionalEncoding(
                learned=switches["learned_positions"],
                max_length=max_length,
                frequencies=switches["positional_frequencies"],
                name=name,
            )

        block_args = block_arguments(config)
        sharing = switches["embedding_sharing"]
        if sharing == "all":
            source_embedding = target_embedding = TokenEmbedding(config.target_vocab_size, config.d_model, name=SHARED)
        else:
            source_embedding = TokenEmbedding(config.source_vocab_size, config.d_model, name="source_embedding")
            target_embedding = TokenEmbedding(config.target_vocab_size, config.d_model, name="target_embedding")
        output_projection = None
        if sharing == "none":
            # Logits stay float32 under mixed precision, for a stable softmax and loss.
            output_projection = keras.layers.Dense(config.target_vocab_size, dtype="float32", name="logits")
        return cls(
            source_embedding=source_embedding,
            target_embedding=target_embedding,
            source_positions=positions("source_positions", config.max_source_len),
            target_positions=positions("target_positions", config.max_target_len),
            source_dropout=Dropout(config.dropout_rate, name="source_dropout"),
            target_dropout=Dropout(config.dropout_rate, name="target_dropout"),
            encoder_blocks=[EncoderBlock(**block_args, name=f"encoder_block_{i}") for i in range(config.num_blocks)],
            decoder_blocks=[DecoderBlock(**block_args, name=f"decoder_block_{i}") for i in range(config.num_blocks)],
            output_projection=output_projection,
        )

    @classmethod
    def from_model(cls, model: keras.Model):
        layers = {layer.name: layer for layer in model.layers}
        return cls(
            source_embedding=layers.get("source_embedding", layers.get(SHARED)),
            target_embedding=layers.get("target_embedding", layers.get(SHARED)),
            **{
                name: layers[name]
                for name in ("source_positions", "target_positions", "source_dropout", "target_dropout")
            },
            encoder_blocks=[layer for name, layer in layers.items() if name.startswith("encoder_block_")],
            decoder_blocks=[layer for name, layer in layers.items() if name.startswith("decoder_block_")],
            output_projection=layers.get("logits"),
        )

    def logits(self, hidden):
        """The output logits of decoder states: `[B, T, D]` -> float32 `[B, T, V_t]`."""
        if self.output_projection is None:
            return self.target_embedding(hidden, reverse=True)
        return self.output_projection(hidden)

    def logits_weights(self):
        """What `logits` computes with: `(kernel, bias)`, logits = `hidden @ kernel + bias`.

        Returns:
            the float32 kernel `[D, V_t]` (the target embedding table transposed when the logits
            use it) and the bias `[V_t]`, or None when there is none.
        """
        if self.output_projection is None:
            return ops.transpose(self.target_embedding.embeddings), None
        return self.output_projection.kernel, self.output_projection.bias


def _collect_weights(block_outputs, weights, return_attention_scores):
    """Split a block's `(hidden, weights)` when weights were asked for; return `hidden`."""
    if not return_attention_scores:
        return block_outputs
    hidden, block_weights = block_outputs
    weights.append(block_weights)
    return hidden


def encode(layers: TransformerLayers, source_ids, training=None, return_attention_scores=False):
    """Run the encoder.

    Args:
        layers: `TransformerLayers`.
        source_ids: int tensor `[B, S]`, 0 = padding.
        training: bool, whether dropout is active.
        return_attention_scores: also return a list (one per block) of dicts of weights.

    Returns:
        `(memory, source_mask)`: float `[B, S, D]` and bool `[B, S]`, the padding mask the
        encoder-decoder attention uses (under a sign rule, the rule's mask of `memory`); plus the
        weights if asked.
    """
    source_mask = padding_mask(source_ids)  # (B, S)
    hidden = layers.source_embedding(source_ids)  # (B, S, D)
    hidden = layers.source_positions(hidden, mask=source_mask)
    hidden = layers.source_dropout(hidden, training=training)
    weights = []
    for block in layers.encoder_blocks:
        outputs = block(hidden, training=training, mask=source_mask, return_attention_scores=return_attention_scores)
        hidden = _collect_weights(outputs, weights, return_attention_scores)  # (B, S, D)
    rule = layers.decoder_blocks[0].padding_masks
    if rule != "ids":  # what the encoder-decoder attention finds in `memory`
        source_mask = sign_mask(hidden, rule)
    if return_attention_scores:
        return hidden, source_mask, weights
    return hidden, source_mask


def decoder_states(
    layers: TransformerLayers, target_in_ids, memory, source_mask, training=None, return_attention_scores=False
):
    """Run the decoder's blocks over a whole (teacher-forced or partial) target prefix.

    `decode` without the output projection: the states the logits are computed from.

    Args:
        layers: `TransformerLayers`.
        target_in_ids: int tensor `[B, T]`: `<s>` then the target tokens, 0 = padding.
        memory: float tensor `[B, S, D]` from `encode`.
        source_mask: bool tensor `[B, S]` from `encode`.
        training: bool, whether dropout is active.
        return_attention_scores: also return a list (one per block) of dicts of weights.

    Returns:
        The last block's output, float `[B, T, D]` (zero at padding); plus the weights if asked.
    """
    target_mask = padding_mask(target_in_ids)  # (B, T)
    hidden = layers.target_embedding(target_in_ids)  # (B, T, D)
    hidden = layers.target_positions(hidden, mask=target_mask)
    hidden = layers.target_dropout(hidden, training=training)
    weights = []
    for block in layers.decoder_blocks:
        outputs = block(
            hidden,
            memory,
            training=training,
            inputs_mask=target_mask,
            memory_mask=source_mask,
            return_attention_scores=return_attention_scores,
        )
        hidden = _collect_weights(outputs, weights, return_attention_scores)  # (B, T, D)
    if return_attention_scores:
        return hidden, weights
    return hidden


def decode(layers: TransformerLayers, target_in_ids, memory, source_mask, training=None, return_attention_scores=False):
    """Run the decoder over a whole (teacher-forced or partial) target prefix: `decoder_states`, then logits.

    Args: as `decoder_states`.

    Returns:
        logits, float32 `[B, T, V_t]`; plus the weights if asked.
    """
    states = decoder_states(layers, target_in_ids, memory, source_mask, training, return_attention_scores)
    if return_attention_scores:
        hidden, weights = states
        return layers.logits(hidden), weights  # (B, T, V_t)
    return layers.logits(states)  # (B, T, V_t)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    """The functional encoder-decoder model of `build_transformer`, with a leaner training step.

    Under TensorFlow, `model.fit` computes the logits, the loss and the metrics only at the real
    target positions when the model is compiled by `training.compile_transformer` (or compiled
    alike and given the packed step by `training.packed.attach`) and runs without XLA
    (`keras_transformer.training.packed` says when and how): the same loss,
    gradients and metrics as Keras's own step, without the output projection, loss and their
    gradients over padding. Elsewhere, and with `pack_targets = False`, it trains with Keras's
    step. Calling, evaluating and predicting are those of any functional model.

    The model does not import training code: the packed step is the model's attribute
    `packed_training`, which the training code that compiles it sets explicitly
    (`training.compile_transformer` does, under TensorFlow, through
    `keras_transformer.training.packed.attach`). It is None until then, and `fit` takes Keras's
    step, whatever was imported; once attached, an object with `applies(model, data)`, whether
    its step is the same as Keras's on this batch, and `train_step(model, data)`, which takes
    that step; both are looked up on it at every trace of the step.
    """

    pack_targets = True  # set False on a model to train it with Keras's own step
    packed_training = None  # the packed step, attached to a model by `keras_transformer.training.packed.attach`

    def train_step(self, *args, **kwargs):
        hook = self.packed_training
        if self.pack_targets and hook is not None and hook.applies(self, *args):
            return hook.train_step(self, *args)
        return super().train_step(*args, **kwargs)


def build_transformer(config: ModelConfig) -> keras.Model:
    """Build the encoder-decoder Transformer described by `config`.

    Args:
        config: `ModelConfig`.

    Returns:
        A functional `Transformer` (a `keras.Model`) with inputs `[source_ids, target_in_ids]`
        (int32 `[B, S]` and `[B, T]`, 0 = padding, `target_in_ids` starting with `<s>`) and
        output logits `[B, T, V_t]` (float32). Trained with `model.fit` on `((source_ids,
        target_in_ids), target_out_ids)`.

    Example:
    >>> model = build_transformer(preset("tiny", source_vocab_size=50, target_vocab_size=40))
    >>> model([np.ones((2, 5), "int32"), np.ones((2, 4), "int32")]).shape
    (2, 4, 40)
    """
    config.validate()
    layers = TransformerLayers.create(config)
    source_ids = keras.Input(shape=(None,), dtype="int32", name="source_ids")
    target_in_ids = keras.Input(shape=(None,), dtype="int32", name="target_in_ids")
    memory, source_mask = encode(layers, source_ids)
    logits = decode(layers, target_in_ids, memory, source_mask)
    return Transformer([source_ids, target_in_ids], logits, name="transformer")


def attention_weights(model: keras.Model, source_ids, target_in_ids):
    """Attention weights of a built model, for plots (inference mode, no dropout).

    Returns:
        dict with `encoder` (list per block of `{"self_attention": [B, H, S, S]}`) and
        `decoder` (list per block of `{"self_attention": [B, H, T, T],
        "cross_attention": [B, H, T, S]}`).
    """
    layers = TransformerLayers.from_model(model)
    memory, source_mask, encoder_weights = encode(layers, source_ids, training=False, return_attention_scores=True)
    _, decoder_weights = decode(
        layers, target_in_ids, memory, source_mask, training=False, return_attention_scores=True
    )
    return {"encoder": encoder_weights, "decoder": decoder_weights}
