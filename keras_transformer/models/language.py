"""Decoder-only (GPT-style) and encoder-only (BERT-style) language models as functional `keras.Model`s.

Both are the Transformer's own layers without the other half:

    token_ids -> TokenEmbedding -> PositionalEncoding -> dropout
              -> DecoderOnlyBlock x N (causal self-attention, FFN)  -> logits        decoder-only
              -> EncoderBlock x N (bidirectional self-attention, FFN) -> logits      encoder-only
                                                     first position -> class_logits  (optional)

The logits are a `Dense(V)` layer, or, with `tie_embeddings`, the token embedding table itself
(`TokenEmbedding(reverse=True)`, one `[V, D]` variable). The wiring is written once, in `embed` and
`run`, which run on Keras symbolic tensors to build the models and on real tensors in
`keras_transformer.decoding.generation`. Padding masks come from the token ids (id 0).
"""

import dataclasses

import keras

from keras_transformer.config import LanguageModelConfig, variant_switches
from keras_transformer.layers import DecoderOnlyBlock, Dropout, EncoderBlock, PositionalEncoding, TokenEmbedding
from keras_transformer.layers.blocks import block_arguments
from keras_transformer.masks import padding_mask

BLOCK_PREFIX = "block_"


@dataclasses.dataclass
class LanguageModelLayers:
    """The layers of one language model, by role.

    Create them with `create`, or find them in a built model with `from_model`.
    `output_projection` is None when the logits use the token embedding table (tied), and
    `classifier` is None without a classification head.
    """

    token_embedding: TokenEmbedding
    positions: PositionalEncoding
    embedding_dropout: Dropout
    blocks: list
    output_projection: keras.layers.Dense | None
    classifier_dropout: Dropout | None
    classifier: keras.layers.Dense | None

    @classmethod
    def create(cls, config: LanguageModelConfig):
        block_class = DecoderOnlyBlock if config.kind == "decoder" else EncoderBlock
        block_args = block_arguments(config)
        switches = variant_switches(config)
        # Logits stay float32 under mixed precision, for a stable softmax and loss.
        untied = None
        if not config.tie_embeddings:
            untied = keras.layers.Dense(config.vocab_size, dtype="float32", name="logits")
        classifier_dropout = classifier = None
        if config.num_classes:
            classifier_dropout = Dropout(config.dropout_rate, name="classifier_dropout")
            classifier = keras.layers.Dense(config.num_classes, dtype="float32", name="class_logits")
        return cls(
            token_embedding=TokenEmbedding(config.vocab_size, config.d_model, name="token_embedding"),
            positions=PositionalEncoding(
                learned=switches["learned_positions"],
                max_length=config.max_length,
                frequencies=switches["positional_frequencies"],
                name="positions",
            ),
            embedding_dropout=Dropout(config.dropout_rate, name="embedding_dropout"),
            blocks=[block_class(**block_args, name=f"{BLOCK_PREFIX}{i}") for i in range(config.num_blocks)],
            output_projection=untied,
            classifier_dropout=classifier_dropout,
            classifier=classifier,
        )

    @classmethod
    def from_model(cls, model: keras.Model):
        layers = {layer.name: layer for layer in model.layers}
        return cls(
            token_embedding=layers["token_embedding"],
            positions=layers["positions"],
            embedding_dropout=layers["embedding_dropout"],
            blocks=[layer for name, layer in layers.items() if name.startswith(BLOCK_PREFIX)],
            output_projection=layers.get("logits"),
            classifier_dropout=layers.get("classifier_dropout"),
            classifier=layers.get("class_logits"),
        )

    @property
    def causal(self):
        """Whether the blocks are causal (a decoder-only model)."""
        return all(isinstance(block, DecoderOnlyBlock) for block in self.blocks)

    def logits(self, hidden):
        """The language-model logits of hidden states: `[B, T, D]` -> float32 `[B, T, V]`."""
        if self.output_projection is None:
            return self.token_embedding(hidden, reverse=True)
        return self.output_projection(hidden)


def embed(layers: LanguageModelLayers, token_ids, training=None):
    """Embed token ids: token embedding, positional encoding, dropout.

    Args:
        layers: `LanguageModelLayers`.
        token_ids: int tensor `[B, T]`, 0 = padding.
        training: bool, whether dropout is active.

    Returns:
        `(hidden, mask)`: float `[B, T, D]` and bool `[B, T]` (True at real tokens).
    """
    mask = padding_mask(token_ids)  # (B, T)
    hidden = layers.token_embedding(token_ids)  # (B, T, D)
    hidden = layers.positions(hidden, mask=mask)
    return layers.embedding_dropout(hidden, training=training), mask


def run(layers: LanguageModelLayers, token_ids, training=None):
    """Run the blocks over whole sequences.

    Args:
        layers: `LanguageModelLayers`.
        token_ids: int tensor `[B, T]`, 0 = padding.
        training: bool, whether dropout is active.

    Returns:
        `(hidden, mask)`: float `[B, T, D]`, the last block's output (zero at padding), and bool
        `[B, T]`.
    """
    hidden, mask = embed(layers, token_ids, training=training)
    for block in layers.blocks:
        hidden = block(hidden, training=training, mask=mask)  # (B, T, D)
    return hidden, mask


def _check_kind(config, kind, builder):
    config.validate()
    if config.kind != kind:
        raise ValueError(f"`{builder}` builds kind={kind!r} models. Received: kind={config.kind!r}")


def build_decoder_only(config: LanguageModelConfig) -> keras.Model:
    """Build a decoder-only (GPT-style) causal language model.

    Position `t` attends to positions `0 .. t` only, so its logits predict token `t + 1` from the
    tokens before it. Trained with `model.fit` on `(token_ids[:, :-1], token_ids[:, 1:])`-style
    pairs and the masked loss of `keras_transformer.training` (label 0 is ignored); generates with
    `keras_transformer.decoding.generation.generate`.

    Args:
        config: `LanguageModelConfig` with `kind="decoder"`.

    Returns:
        A functional `keras.Model` from int32 `token_ids` `[B, T]` (0 = padding, right-padded) to
        float32 logits `[B, T, V]`.

    Raises:
        ValueError: `config` is invalid or not of kind `"decoder"`.

    Example:
    >>> model = build_decoder_only(language_model_preset("tiny", "decoder", vocab_size=50))
    >>> model(np.ones((2, 5), "int32")).shape
    (2, 5, 50)
    """
    _check_kind(config, "decoder", "build_decoder_only")
    layers = LanguageModelLayers.create(config)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    hidden, _ = run(layers, token_ids)  # (B, T, D)
    return keras.Model(token_ids, layers.logits(hidden), name="decoder_only")


def build_encoder_only(config: LanguageModelConfig) -> keras.Model:
    """Build an encoder-only (BERT-style) masked language model, with an optional classification head.

    Every position attends to every real position, before and after it. The language-model head
    gives logits at every position (trained on the masked positions only: label 0 is ignored by
    the masked loss). With `config.num_classes > 0`, a classification head reads the first
    position (a `[CLS]`-style token the data puts there): dropout, then `Dense(num_classes)`.

    Args:
        config: `LanguageModelConfig` with `kind="encoder"`.

    Returns:
        A functional `keras.Model` from int32 `token_ids` `[B, T]` (0 = padding) to float32
        logits `[B, T, V]`; with a classification head, to a dict of those (`"logits"`) and
        float32 `"class_logits"` `[B, num_classes]`.

    Raises:
        ValueError: `config` is invalid or not of kind `"encoder"`.

    Example:
    >>> config = language_model_preset("tiny", "encoder", vocab_size=50, num_classes=3)
    >>> outputs = build_encoder_only(config)(np.ones((2, 5), "int32"))
    >>> outputs["logits"].shape, outputs["class_logits"].shape
    ((2, 5, 50), (2, 3))
    """
    _check_kind(config, "encoder", "build_encoder_only")
    layers = LanguageModelLayers.create(config)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    hidden, _ = run(layers, token_ids)  # (B, T, D)
    logits = layers.logits(hidden)  # (B, T, V)
    if layers.classifier is None:
        return keras.Model(token_ids, logits, name="encoder_only")
    first = layers.classifier_dropout(hidden[:, 0, :])  # (B, D)
    outputs = {"logits": logits, "class_logits": layers.classifier(first)}  # (B, T, V), (B, C)
    return keras.Model(token_ids, outputs, name="encoder_only")


def build_language_model(config: LanguageModelConfig) -> keras.Model:
    """`build_decoder_only` or `build_encoder_only`, as `config.kind` says.

    Args:
        config: `LanguageModelConfig`.

    Returns:
        The functional `keras.Model`.

    Raises:
        ValueError: `config` is invalid.
    """
    config.validate()
    return build_decoder_only(config) if config.kind == "decoder" else build_encoder_only(config)
