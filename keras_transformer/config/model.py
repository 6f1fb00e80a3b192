"""The model configs and their presets: `ModelConfig` (translation) and `LanguageModelConfig` (GPT / BERT).

Both share the sizes (`d_model`, `num_heads`, `num_blocks`, `d_ff`, `dropout_rate`), the
attention options (`_ATTENTION_OPTIONS`: the projections' initialization, the score function, its implementation)
and the variant with its switches (`variant`, `VARIANT_SWITCHES`: where the paper, the
document's tutorial code and Kyubyong's repository differ): the options and the switches are
declared once (`_with_model_options` adds them to both classes) and every shared field is checked
once (`_check_model_sizes`). `variant_switches` resolves a config's switches: an explicit field,
else its variant's value. `PRESETS` names model sizes; `preset` and `language_model_preset` build a validated config
of a named size with overrides.
"""

import dataclasses

from keras_transformer.checks import check_bool, check_choice, check_int, check_rate
from keras_transformer.config.base import _field, _JsonConfig

ATTENTION_INITIALIZATIONS = ("glorot", "per_head")  # MultiheadAttention's `initialization`
# The score functions s(x, q) of `keras_transformer.layers.AttentionScore`, the paper's first.
ATTENTION_SCORES = ("scaled_dot", "dot", "additive", "bilinear", "cosine")
# How `MultiheadAttention` computes scaled dot-product attention (`attention_implementation`).
ATTENTION_IMPLEMENTATIONS = ("auto", "fused", "explicit")


PROJECTION_ACTIVATIONS = ("linear", "relu")
# The frequencies of the sinusoidal positional encodings: the paper's, or the tutorial code's.
POSITIONAL_FREQUENCIES = ("paper", "tutorial")
# Which of a translation model's [V, D] tables are one (`ModelConfig.embedding_sharing`).
EMBEDDING_SHARING = ("none", "decoder", "all")
# How a model's sub-layers find padding: from the token ids, or from their inputs by a sign rule.
PADDING_MASKS = ("ids", "abs_sum", "sum")
# The attention options of every model kind: (default, help, choices) of each field.
_ATTENTION_OPTIONS = {
    "attention_initialization": (
        "glorot",
        "Initialization of the attention projections: glorot (tutorial) or per_head (Glorot with the fans of the "
        "[D, H, K] per-head kernel views: smaller, a faster start).",
        ATTENTION_INITIALIZATIONS,
    ),
    "attention_score": (
        "scaled_dot",
        "Score function of every attention sublayer: scaled_dot (paper), dot or bilinear (Luong et al. 2015), "
        "additive (Bahdanau et al. 2015), cosine (cosine similarity times a learned per-head scale).",
        ATTENTION_SCORES,
    ),
    "attention_implementation": (
        "auto",
        "How every attention sublayer computes scaled dot-product attention: auto (one fused "
        "keras.ops.dot_product_attention call on a GPU from 256 keys, 1,024 with causality, and on PyTorch's CPU; "
        "explicit elsewhere), "
        "fused (always, where no weights are requested; needs scaled_dot and no attention dropout) or explicit "
        "(scores, masked softmax, weighted sum).",
        ATTENTION_IMPLEMENTATIONS,
    ),
}


def _attention_field(name):
    """The dataclass field of the attention option `name`, the same in every model config."""
    default, help, choices = _ATTENTION_OPTIONS[name]
    return _field(default, help, choices=choices)


# The sources this port follows, which differ in small ways: "paper" (Vaswani et al. 2017),
# "document" (the tutorial code of the source document) and "repository" (Kyubyong/transformer's
# modules.py, of which the document's code is a variant). "library" is this package's default
# before variants existed: the paper's layers with the tutorial's dropout placement.
VARIANTS = ("library", "paper", "document", "repository")
# A switch's value "dropout_rate" means the config's `dropout_rate`.
DROPOUT_RATE = "dropout_rate"
# Every switch where the sources differ, and each variant's value: the one table of the variants.
# (switch: (help, choices or None, {variant: value}))
VARIANT_SWITCHES = {
    "use_output_projection": (
        "Apply the attention output projection W^O (the paper; neither version of the tutorial code has it).",
        None,
        {"library": True, "paper": True, "document": False, "repository": False},
    ),
    "projection_activation": (
        "Activation of the Q/K/V projections: linear (the paper, the document) or relu (the repository).",
        PROJECTION_ACTIVATIONS,
        {"library": "linear", "paper": "linear", "document": "linear", "repository": "relu"},
    ),
    "normalize": (
        "LayerNorm after each residual connection (the paper, the repository; the document has it commented out).",
        None,
        {"library": True, "paper": True, "document": False, "repository": True},
    ),
    "positional_frequencies": (
        "Frequencies of the sinusoidal positional encodings: paper (columns 2i and 2i+1 share 1/10000^(2i/D)) or "
        "tutorial (both versions of the tutorial code: column j has its own, 1/10000^(2j/D)).",
        POSITIONAL_FREQUENCIES,
        {"library": "paper", "paper": "paper", "document": "tutorial", "repository": "tutorial"},
    ),
    "attention_dropout_rate": (
        "Dropout on the attention weights (both versions of the tutorial code, at --dropout-rate; not the paper).",
        None,
        {"library": DROPOUT_RATE, "paper": 0.0, "document": DROPOUT_RATE, "repository": DROPOUT_RATE},
    ),
    "attention_residual_dropout_rate": (
        "Dropout on each attention sublayer's output before its residual connection (the paper's residual "
        "dropout, at --dropout-rate; neither version of the tutorial code).",
        None,
        {"library": 0.0, "paper": DROPOUT_RATE, "document": 0.0, "repository": 0.0},
    ),
    "feed_forward_dropout_rate": (
        "Dropout on the feed-forward sublayer's output FFN(x) before its residual connection (the paper, at "
        "--dropout-rate; the document: 0.2; the repository: none).",
        None,
        {"library": DROPOUT_RATE, "paper": DROPOUT_RATE, "document": 0.2, "repository": 0.0},
    ),
    "inner_dropout_rate": (
        "Dropout on the feed-forward sublayer's inner relu activation (the document: 0.2; the paper and the "
        "repository: none).",
        None,
        {"library": 0.0, "paper": 0.0, "document": 0.2, "repository": 0.0},
    ),
    "padding_masks": (
        "How every sublayer finds padding: ids (masks from the token ids, and padding rows set to zero after "
        "each sublayer, so real positions never depend on padding), or the tutorial code's sign masks of each "
        "attention sublayer's inputs, abs_sum (the document: an all-zero vector is padding) or sum (the "
        "repository: a vector summing to zero), with padding rows left as the sublayers leave them.",
        PADDING_MASKS,
        {"library": "ids", "paper": "ids", "document": "abs_sum", "repository": "sum"},
    ),
    "learned_positions": (
        "Learn position embeddings instead of the fixed sinusoids (the repository's default, sinusoid = False; "
        "the paper and the document: sinusoids).",
        None,
        {"library": False, "paper": False, "document": False, "repository": True},
    ),
    "embedding_sharing": (
        "Embedding tables that are one (paper section 3.4): none (three tables: source, target, output logits); "
        "decoder (the target embedding table also computes the logits, h E^T); all (one table for source, target "
        "and logits: the paper's, over one vocabulary for both sides, which a run then learns).",
        EMBEDDING_SHARING,
        {"library": "none", "paper": "all", "document": "none", "repository": "none"},
    ),
}
# The switches of a translation model only (a language model has `tie_embeddings` instead).
TRANSLATION_SWITCHES = ("embedding_sharing",)
# The switches of the embeddings, not of the blocks (`keras_transformer.layers.blocks.block_arguments`).
EMBEDDING_SWITCHES = ("positional_frequencies", "learned_positions", "embedding_sharing")


def _switch_field(name):
    """The dataclass field of the variant switch `name`: None, the variant's value, unless set."""
    help, choices, _ = VARIANT_SWITCHES[name]
    return _field(None, help, choices=choices)


def _with_model_options(cls):
    """Give a model config class the fields every model config shares, declared once here.

    They are the attention options (`_ATTENTION_OPTIONS`), `variant` and its switches
    (`VARIANT_SWITCHES`; `TRANSLATION_SWITCHES` only where the class is `ModelConfig`), appended
    after the class's own fields; apply it under `@dataclasses.dataclass`, which then makes them
    fields like the others.
    """
    fields = {name: (str, _attention_field(name)) for name in _ATTENTION_OPTIONS}
    fields["variant"] = (
        str,
        _field(
            "library",
            "Which source every switch below follows where they differ: paper (Vaswani et al. 2017), document (the "
            "source document's tutorial code), repository (Kyubyong/transformer), or library (this package's "
            "default: the paper's layers, the tutorial's dropout placement). An explicit switch overrides it.",
            choices=VARIANTS,
        ),
    )
    for name, (_, choices, _) in VARIANT_SWITCHES.items():
        if name in TRANSLATION_SWITCHES and cls.__name__ != "ModelConfig":
            continue
        kind = float if name.endswith("_rate") else bool if choices is None else str
        fields[name] = (kind, _switch_field(name))
    for name, (kind, field) in fields.items():
        cls.__annotations__[name] = kind
        setattr(cls, name, field)
    return cls


def variant_switches(config):
    """The switches a model config sets: each explicit field, else its variant's value.

    Args:
        config: a `ModelConfig` or `LanguageModelConfig`.

    Returns:
        dict of switch name (a key of `VARIANT_SWITCHES`, the blocks' argument of that name) to
        its value; the rates are floats.
    """
    switches = {}
    for name, (_, _, by_variant) in VARIANT_SWITCHES.items():
        if not hasattr(config, name):  # a switch of the other kind of model
            continue
        value = getattr(config, name)
        value = by_variant[config.variant] if value is None else value
        switches[name] = config.dropout_rate if value == DROPOUT_RATE else value
    return switches


def _check_model_sizes(config):
    """Check the fields every model config has: sizes, dropout and the attention options.

    Raises:
        ValueError: a value is out of range or not one of its choices (the message names it).
    """
    for name in ("d_model", "num_heads", "num_blocks", "d_ff"):
        check_int(name, getattr(config, name), 1)
    check_rate("dropout_rate", config.dropout_rate)
    if config.d_model % config.num_heads:
        raise ValueError(
            f"`d_model` must be divisible by `num_heads`. Received: d_model={config.d_model}, "
            f"num_heads={config.num_heads}"
        )
    check_choice("attention_initialization", config.attention_initialization, ATTENTION_INITIALIZATIONS)
    check_choice("attention_score", config.attention_score, ATTENTION_SCORES)
    check_choice("variant", config.variant, VARIANTS)
    check_choice("projection_activation", config.projection_activation, (None, *PROJECTION_ACTIVATIONS))
    for name in ("use_output_projection", "normalize", "learned_positions"):
        if getattr(config, name) is not None:
            check_bool(name, getattr(config, name))
    if config.padding_masks is not None:
        check_choice("padding_masks", config.padding_masks, PADDING_MASKS)
    for name in VARIANT_SWITCHES:
        if name.endswith("_rate") and getattr(config, name) is not None:
            check_rate(name, getattr(config, name))
    attention_dropout = variant_switches(config).get("attention_dropout_rate")
    check_attention_implementation(
        config.attention_implementation,
        config.attention_score,
        config.dropout_rate if attention_dropout is None else attention_dropout,
    )


def check_attention_implementation(
    implementation, score, dropout_rate, score_name="attention_score", dropout_name="attention_dropout_rate"
):
    """Check an attention implementation against the score and the dropout it must compute.

    The one check of the rule of `"fused"` (the scaled dot-product score, no dropout on the
    attention weights), for the configs and for `MultiheadAttention`, which name the dropout
    differently.

    Args:
        implementation: the `attention_implementation` given: one of `ATTENTION_IMPLEMENTATIONS`.
        score: the score function the attention computes.
        dropout_rate: the rate of dropout on the attention weights.
        score_name: str, the caller's name of the score (`attention_score`, in a config as in
            the layer).
        dropout_name: str, the caller's name of that rate (`attention_dropout_rate` in a config,
            `dropout_rate` in the layer).

    Returns:
        `implementation`.

    Raises:
        ValueError: an unknown implementation, or `"fused"` with another score than `"scaled_dot"`
            or with attention dropout; the message names the arguments and their values.
    """
    check_choice("attention_implementation", implementation, ATTENTION_IMPLEMENTATIONS)
    if implementation == "fused" and (score != "scaled_dot" or dropout_rate):
        raise ValueError(
            f"`attention_implementation='fused'` needs {score_name}='scaled_dot' and {dropout_name}=0 (it computes "
            "the scaled dot-product score without dropout on the attention weights; use 'auto' or 'explicit' "
            f"otherwise). Received: {score_name}={score!r}, {dropout_name}={dropout_rate!r}"
        )
    return implementation


@dataclasses.dataclass
@_with_model_options
class ModelConfig(_JsonConfig):
    """Everything needed to rebuild the network. The default sizes are the paper's base model.

    Each field's help text (its `help` metadata, also shown by `keras-transformer train --help`)
    documents it; `validate` checks them.
    """

    source_vocab_size: int = _field(8000, "Source vocabulary size V_s (set from the learned vocabulary).", cli=False)
    target_vocab_size: int = _field(8000, "Target vocabulary size V_t (set from the learned vocabulary).", cli=False)
    d_model: int = _field(512, "Width D of embeddings and of every block's output.")
    num_heads: int = _field(8, "Attention heads H; d_model must be divisible by it.")
    num_blocks: int = _field(6, "Encoder blocks, and as many decoder blocks.")
    d_ff: int = _field(2048, "Inner width F of the feed-forward sublayers.")
    dropout_rate: float = _field(
        0.1, "Dropout on the embeddings; the variant's other dropouts at --dropout-rate follow it (see --variant)."
    )
    max_source_len: int = _field(64, "Longest source in tokens; longer training pairs are dropped.")
    max_target_len: int = _field(64, "Longest target in tokens, end token included; also the decoding limit.")

    def validate(self):
        for name in ("source_vocab_size", "target_vocab_size", "max_source_len", "max_target_len"):
            check_int(name, getattr(self, name), 1)
        _check_model_sizes(self)
        if self.embedding_sharing is not None:
            check_choice("embedding_sharing", self.embedding_sharing, EMBEDDING_SHARING)
        if variant_switches(self)["embedding_sharing"] == "all" and self.source_vocab_size != self.target_vocab_size:
            origin = "" if self.embedding_sharing else f" (the {self.variant} variant's)"
            raise ValueError(
                f"embedding_sharing='all'{origin} uses one table for both sides, so the vocabularies must be one (a "
                f"joint vocabulary). Received: source_vocab_size={self.source_vocab_size}, "
                f"target_vocab_size={self.target_vocab_size}; set embedding_sharing='decoder' or 'none' to keep two"
            )
        return self


# Named model sizes. "small" is the default of `python train.py` on the built-in corpus.
PRESETS = {
    "tiny": dict(d_model=32, num_heads=2, num_blocks=1, d_ff=64, dropout_rate=0.0),
    "small": dict(d_model=128, num_heads=4, num_blocks=2, d_ff=512, dropout_rate=0.1),
    "medium": dict(d_model=256, num_heads=4, num_blocks=3, d_ff=1024, dropout_rate=0.1),
    "base": dict(d_model=512, num_heads=8, num_blocks=6, d_ff=2048, dropout_rate=0.1),
}


def preset(name, **overrides):
    """`ModelConfig` of a named size with overrides: what a new run builds.

    Args:
        name: `tiny`, `small`, `medium` or `base` (see `PRESETS`).
        **overrides: `ModelConfig` fields that replace the preset's (or the defaults).

    Returns:
        The validated `ModelConfig`.

    Raises:
        ValueError: an unknown preset, or an invalid combination (e.g. `d_model` not divisible
            by the preset's `num_heads`).
    """
    check_choice("preset", name, PRESETS)
    return ModelConfig(**{**PRESETS[name], **overrides}).validate()


# The two language-model families built from the same layers: GPT-style and BERT-style.
LANGUAGE_MODEL_KINDS = ("decoder", "encoder")


@dataclasses.dataclass
@_with_model_options
class LanguageModelConfig(_JsonConfig):
    """Everything needed to rebuild a language model: decoder-only (GPT) or encoder-only (BERT).

    `kind="decoder"` is a causal language model (each position predicts the next token from the
    ones before it); `kind="encoder"` is a bidirectional masked language model (each position sees
    the whole sequence), with an optional classification head on its first position. The sizes
    and attention options mean what they mean in `ModelConfig`; each field's help text documents
    it, and `validate` checks them.
    """

    kind: str = _field(
        "decoder",
        "decoder: a causal (GPT-style) language model; encoder: a bidirectional (BERT-style) masked language model.",
        cli=False,
        choices=LANGUAGE_MODEL_KINDS,
    )
    vocab_size: int = _field(8000, "Vocabulary size V (set from the learned vocabulary).", cli=False)
    d_model: int = _field(512, "Width D of embeddings and of every block's output.")
    num_heads: int = _field(8, "Attention heads H; d_model must be divisible by it.")
    num_blocks: int = _field(6, "Transformer blocks.")
    d_ff: int = _field(2048, "Inner width F of the feed-forward sublayers.")
    dropout_rate: float = _field(
        0.1, "Dropout on the embeddings; the variant's other dropouts at --dropout-rate follow it (see --variant)."
    )
    max_length: int = _field(128, "Longest sequence in tokens (training and generation, prompt included).")
    tie_embeddings: bool = _field(
        True, "Compute the output logits with the token embedding matrix (one [V, D] table) instead of their own."
    )
    num_classes: int = _field(
        0, "Classes of the encoder's classification head on the first position; 0 = no head.", cli=False
    )

    def validate(self):
        check_choice("kind", self.kind, LANGUAGE_MODEL_KINDS)
        check_int("vocab_size", self.vocab_size, 1)
        check_int("max_length", self.max_length, 1)
        _check_model_sizes(self)
        check_bool("tie_embeddings", self.tie_embeddings)
        check_int("num_classes", self.num_classes, 0)
        if self.num_classes and self.kind != "encoder":
            raise ValueError(
                f"Only an encoder has a classification head. Received: kind={self.kind!r}, "
                f"num_classes={self.num_classes}"
            )
        return self


def language_model_preset(name, kind, **overrides):
    """`LanguageModelConfig` of a named size (the sizes of `PRESETS`) and kind, with overrides.

    Args:
        name: `tiny`, `small`, `medium` or `base` (see `PRESETS`).
        kind: `"decoder"` (GPT-style) or `"encoder"` (BERT-style).
        **overrides: `LanguageModelConfig` fields that replace the preset's (or the defaults).

    Returns:
        The validated `LanguageModelConfig`.

    Raises:
        ValueError: an unknown preset or kind, or an invalid combination.
    """
    check_choice("preset", name, PRESETS)
    return LanguageModelConfig(**{**PRESETS[name], **overrides, "kind": kind}).validate()
