"""The weights' moving averages, kept by the optimizer: swapping them in and out of a model.

An optimizer built with `use_ema` (`keras_transformer.training.optimizers.AveragingAdam` under
`TrainConfig.ema_momentum > 0`) keeps a moving average of every trainable weight, and `model.fit`
replaces the weights with their averages when it returns. `averaged_weights` scores with the
averages during training, `finalize_after_fit` does what `fit` does on return, and
`training_weights_kept` keeps a `fit` that is not a run's last from doing it. `base_optimizer`
sees through the `LossScaleOptimizer` of `mixed_float16`.
"""

import contextlib

from keras import ops


def base_optimizer(optimizer):
    """`optimizer` itself, or the one a `LossScaleOptimizer` wraps (under `mixed_float16`)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


@contextlib.contextmanager
def averaged_weights(model):
    """Inside, the model's trainable weights are the optimizer's moving averages of them.

    That is when the optimizer keeps them (`TrainConfig.ema_momentum > 0`); on exit the trained
    weights are put back. For scoring during training the weights that training will end with:
    `model.fit` replaces the weights with their averages when it returns (Keras's
    `finalize_variable_values`).

    Args:
        model: a compiled Keras model.

    Yields:
        True when averages were swapped in, False when the model has none (yet).
    """
    optimizer = base_optimizer(model.optimizer)
    if optimizer is None or not optimizer.use_ema or not optimizer.built:
        yield False
        return
    trained = [ops.convert_to_numpy(variable) for variable in model.trainable_weights]
    optimizer.finalize_variable_values(model.trainable_weights)
    try:
        yield True
    finally:
        for variable, value in zip(model.trainable_weights, trained):
            variable.assign(value)


def finalize_after_fit(model):
    """What `model.fit` does when it returns: weights become their moving averages, if kept."""
    model.optimizer.finalize_variable_values(model.trainable_weights)


@contextlib.contextmanager
def training_weights_kept(model):
    """Inside, `model.fit` returns with the trained weights, not their moving averages.

    For a `fit` that is not the last of a run (a resumed run finishing an interrupted epoch): the
    averages are swapped in once, when the run's last `fit` returns.
    """
    optimizer = model.optimizer
    optimizer.finalize_variable_values = lambda var_list: None  # shadows the method on this instance
    try:
        yield
    finally:
        del optimizer.finalize_variable_values
