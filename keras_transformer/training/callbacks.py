"""Callbacks for `model.fit`: a held-out accuracy curve and late dropout.

`AccuracyCurve` records an accuracy that a subclass measures every few training steps (the
studies plot them); `LateDropout` raises the model's dropout rate once training reaches a step.
"""

import keras
from keras import ops

from keras_transformer.checks import check_int, check_rate


class AccuracyCurve(keras.callbacks.Callback):
    """Record a held-out accuracy every `every` training steps (and before the first).

    Subclasses define `measure()`, the accuracy of `self.model` now. Attributes after training:
    `steps` (list of int), the optimizer steps taken, and `accuracy` (list of float), the
    accuracy then.

    Args:
        every: int, steps between two measurements.
    """

    def __init__(self, every):
        super().__init__()
        self.every = every
        self.steps, self.accuracy = [], []

    def measure(self):
        raise NotImplementedError

    def _record(self, step):
        self.steps.append(step)
        self.accuracy.append(self.measure())

    def on_train_begin(self, logs=None):
        self._step, self.steps, self.accuracy = 0, [], []
        self._record(0)

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self._step % self.every == 0:
            self._record(self._step)


class LateDropout(keras.callbacks.Callback):
    """Raise the model's dropout rate once training reaches a step ("late dropout").

    A model that trains for many epochs on a small corpus overfits in the second half of the
    run, but a high dropout rate from the start slows its first epochs. Here the model trains at
    its own rate until optimizer step `start_step`; from then on every `keras.layers.Dropout` of
    the model (nested layers included) whose rate is `from_rate` drops at `rate`, and the
    training step is traced once more to take it. Dropout layers at other rates (e.g. a
    feed-forward inner dropout of 0) keep theirs. Inference is unchanged: dropout is off there.
    A saved model keeps `from_rate` in this project's layers (their `dropout_rate`), the raised
    rate in the `Dropout` layers the model holds directly (e.g. the embeddings' dropout). On a
    resumed run already past `start_step` the rate is raised when training begins. Liu et al.
    (2023), "Dropout Reduces Underfitting", study this schedule.

    Args:
        rate: float in [0, 1), the dropout rate from `start_step` on.
        start_step: int >= 0, the optimizer step (`optimizer.iterations`) to raise it at.
        from_rate: float in (0, 1), the rate of the layers to raise: the model's
            `ModelConfig.dropout_rate`.

    Attributes:
        raised_at: the optimizer step the rate was raised at, or None.

    Raises:
        ValueError: a rate out of range, or, when training begins, a model with no
            `Dropout` layer at `from_rate`.
    """

    def __init__(self, rate, start_step, from_rate):
        super().__init__()
        self.rate = check_rate("rate", rate)
        self.start_step = check_int("start_step", start_step, 0)
        self.from_rate = check_rate("from_rate", from_rate, allow_zero=False)  # the model's dropout rate
        self.raised_at = None

    def on_train_begin(self, logs=None):
        if self.raised_at is not None:  # a later `fit` of the same model: it keeps the raised rate
            return
        self._layers = [
            layer
            for layer in self.model._flatten_layers(include_self=False)
            if isinstance(layer, keras.layers.Dropout) and layer.rate == self.from_rate
        ]
        if not self._layers:
            raise ValueError(
                f"LateDropout: the model has no Dropout layer at rate {self.from_rate} to raise; pass the "
                "model's dropout rate as `from_rate` (a model built with dropout 0 has none)."
            )
        # Steps are counted from here on, not read from the optimizer at every step: on JAX its
        # variables are brought up to date only between epochs.
        self._steps_done = int(ops.convert_to_numpy(self.model.optimizer.iterations))
        self._maybe_raise()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = self._steps_done

    def on_train_batch_end(self, batch, logs=None):
        self._steps_done = self._epoch_start + batch + 1  # `batch`: the epoch's last step run
        self._maybe_raise()

    def _maybe_raise(self):
        if self.raised_at is not None or self._steps_done < self.start_step:
            return
        for layer in self._layers:
            layer.rate = self.rate
        self.raised_at = self._steps_done
        self.model.make_train_function(force=True)
