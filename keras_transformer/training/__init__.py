"""Training pieces for `model.compile` / `model.fit`.

The tutorial's label-smoothed loss that ignores padding (`losses`), masked token accuracy and
the target token count (`metrics`), the paper's learning-rate schedule (section 5.3,
`schedules`), Adam with weight averaging and cooldown (`optimizers`; its fused TensorFlow update
in `fused_adam`), the averaged weights swapped in and out (`averaging`), callbacks for `fit`
(`callbacks`), and `compile_transformer` with the dtype policy a model is built in (`compile`).
Every public name is importable from here.

`packed` is the Transformer's training step at the real target positions only (TensorFlow):
`compile_transformer` attaches it to the model it compiles (`packed.attach`), and importing a
module changes no model's step. Its CPU threads, one training tower per core, are `threads`
(`configure_cpu_threads`, which `train.py` calls first).

`lookup` trains `keras_transformer.models.lookup.KeyValueLookup` for the studies of soft against
hard attention and of every score function on the key-value lookup task (`compare_variants`,
`compare_scores`; TensorFlow, imported only from there).
"""

from keras_transformer.training.averaging import (
    averaged_weights,
    base_optimizer,
    finalize_after_fit,
    training_weights_kept,
)
from keras_transformer.training.callbacks import AccuracyCurve, LateDropout
from keras_transformer.training.compile import compile_transformer, dtype_policy
from keras_transformer.training.losses import (
    MaskedLabelSmoothedLoss,
    smoothed_cross_entropy,
    smoothed_cross_entropy_forward,
)
from keras_transformer.training.metrics import MaskedAccuracy, TargetTokens, argmax_hits, predicted_ids
from keras_transformer.training.optimizers import EMA_EVERY, AveragingAdam
from keras_transformer.training.schedules import NoamSchedule

__all__ = [
    "EMA_EVERY",
    "AccuracyCurve",
    "AveragingAdam",
    "LateDropout",
    "MaskedAccuracy",
    "MaskedLabelSmoothedLoss",
    "NoamSchedule",
    "TargetTokens",
    "argmax_hits",
    "averaged_weights",
    "base_optimizer",
    "compile_transformer",
    "dtype_policy",
    "finalize_after_fit",
    "predicted_ids",
    "smoothed_cross_entropy",
    "smoothed_cross_entropy_forward",
    "training_weights_kept",
]
