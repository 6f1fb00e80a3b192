"""Configuration dataclasses: `ModelConfig` rebuilds the network, `TrainConfig` says how to train.

`LanguageModelConfig` rebuilds a decoder-only or encoder-only language model from the same sizes
(`language_model_preset`) and attention options.

Every hyperparameter has one name everywhere: the dataclass field, the CLI flag (`--d-model`,
also accepted as `--d_model`), the JSON key saved beside checkpoints and exports, and the layer
argument. Help texts live in the field metadata and become the CLI's `--help`.

The modules: `base` (the field declaration and the JSON round trip every config shares; the
checks their `validate` methods are made of are `keras_transformer.checks`), `model` (the model
configs, their attention options and `check_attention_implementation`, the rule of the fused
implementation, the variants and their switches, and presets), `train` (`TrainConfig` and the
choices of its fields). Every public name is importable from here.
"""

from keras_transformer.config.model import (
    ATTENTION_IMPLEMENTATIONS,
    ATTENTION_INITIALIZATIONS,
    ATTENTION_SCORES,
    EMBEDDING_SHARING,
    EMBEDDING_SWITCHES,
    LANGUAGE_MODEL_KINDS,
    PADDING_MASKS,
    POSITIONAL_FREQUENCIES,
    PRESETS,
    PROJECTION_ACTIVATIONS,
    TRANSLATION_SWITCHES,
    VARIANT_SWITCHES,
    VARIANTS,
    LanguageModelConfig,
    ModelConfig,
    check_attention_implementation,
    language_model_preset,
    preset,
    variant_switches,
)
from keras_transformer.config.train import (
    DECODING_FIELDS,
    LM_SAMPLERS,
    NORMALIZATION_CHOICES,
    PRECISIONS,
    STRATEGIES,
    TASKS,
    TrainConfig,
)

__all__ = [
    "ATTENTION_INITIALIZATIONS",
    "ATTENTION_IMPLEMENTATIONS",
    "ATTENTION_SCORES",
    "DECODING_FIELDS",
    "EMBEDDING_SHARING",
    "EMBEDDING_SWITCHES",
    "LANGUAGE_MODEL_KINDS",
    "LM_SAMPLERS",
    "NORMALIZATION_CHOICES",
    "PADDING_MASKS",
    "POSITIONAL_FREQUENCIES",
    "PRECISIONS",
    "PRESETS",
    "PROJECTION_ACTIVATIONS",
    "STRATEGIES",
    "TASKS",
    "TRANSLATION_SWITCHES",
    "VARIANTS",
    "VARIANT_SWITCHES",
    "LanguageModelConfig",
    "ModelConfig",
    "TrainConfig",
    "check_attention_implementation",
    "language_model_preset",
    "preset",
    "variant_switches",
]
