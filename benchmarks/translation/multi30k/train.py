"""Training in a wall-clock budget for the Multi30k study: the clock, the BLEU curve, the summary.

The budget is `--minutes` of training clock (`TrainingClock`): the clock starts when `fit`
starts (graph tracing is training time), pauses while the model is scored for the curve, and
`fit` stops after the step that reaches the budget. `fit` runs in chunks of `--steps-per-epoch`
steps (its epochs), the unit of the throughput figures.

The curve (`BleuCurve`) is the greedy sacreBLEU of the first `--curve-sentences` sentences of
test_2016_flickr (or, with `--curve-split validation`, of the validation split: the one to choose
settings by) at `--curve-points` evenly spaced moments of the budget, the last at its end. With
weight averaging (our model by default), a point scores the moving average of the weights, those
the run would end with there, and records the weights as trained too (`bleu_trained_weights`).

Our model's schedule can change on the way: `CooldownToBudget` ends the learning-rate cooldown of
`--lr-cooldown` where the clock will reach the budget, and `late_dropout` raises the dropout rate
after `--late-dropout-epochs` passes over the training pairs.

`training_summary` reads the run. "target tokens/s" counts real target tokens (labels that are
not padding, the `target_tokens` metric) per second of training clock: the median over the
complete chunks (the first includes graph tracing; the last, cut by the budget, is left out),
and the mean. "epochs" is target tokens trained on / target tokens in the training pairs. The
per-chunk times are kept too: minutes on a shared machine are noisy.
"""

import contextlib
import time

import keras
import numpy as np
import sacrebleu

from keras_transformer.data.translation_batches import make_dataset
from keras_transformer.evaluation import translate_texts
from keras_transformer.training import LateDropout, averaged_weights

MAX_CHUNKS = 1_000_000  # `fit` epochs; the budget stops training long before


class TrainingClock(keras.callbacks.Callback):
    """Training wall clock, paused while the model is scored; stops `fit` at the budget.

    The clock runs from the start of `fit` (the first step's tracing included) to its end, except
    inside `with clock.paused():`. After every step it checks the budget and sets
    `model.stop_training`, so training ends after the step that reaches it. It also records
    the clock seconds and steps of every `fit` epoch (chunk).
    """

    def __init__(self, budget_seconds):
        super().__init__()
        self.budget_seconds = budget_seconds
        self.steps = 0
        self.chunk_seconds, self.chunk_steps = [], []
        self._elapsed, self._running_since = 0.0, None

    def seconds(self):
        running = time.perf_counter() - self._running_since if self._running_since is not None else 0.0
        return self._elapsed + running

    @contextlib.contextmanager
    def paused(self):
        running = self._running_since is not None
        self._elapsed, self._running_since = self.seconds(), None
        try:
            yield
        finally:
            if running:
                self._running_since = time.perf_counter()

    def on_train_begin(self, logs=None):
        self._running_since = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._chunk_start, self._chunk_start_steps = self.seconds(), self.steps

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.seconds() >= self.budget_seconds:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self.chunk_seconds.append(self.seconds() - self._chunk_start)
        self.chunk_steps.append(self.steps - self._chunk_start_steps)

    def on_train_end(self, logs=None):
        self._elapsed, self._running_since = self.seconds(), None


class CooldownToBudget(keras.callbacks.Callback):
    """Ends the optimizer's learning-rate cooldown at the step where the clock will reach the budget.

    A budget in minutes is a number of steps only once the machine's speed is known, and that
    speed moves. So the end step (`AveragingAdam.cooldown_end_step`) is 0, not known, until the
    first chunk ends, and after every chunk it is re-estimated as the steps taken plus the budget
    left times the steps per clock second of the chunks so far (all but the first, which
    includes graph tracing, once there are two). Run it after the `TrainingClock` in `fit`'s
    callbacks, so that the clock has closed the chunk.

    Args:
        clock: the run's `TrainingClock`.
    """

    def __init__(self, clock):
        super().__init__()
        self.clock = clock
        self.end_steps = []  # the estimate after each chunk

    def on_train_begin(self, logs=None):
        self.model.optimizer.cooldown_end_step.assign(0.0)

    def on_epoch_end(self, epoch, logs=None):
        seconds, steps = self.clock.chunk_seconds, self.clock.chunk_steps
        if len(seconds) > 1:
            seconds, steps = seconds[1:], steps[1:]
        rate = sum(steps) / max(sum(seconds), 1e-9)
        left = max(self.clock.budget_seconds - self.clock.seconds(), 0.0)
        end = int(self.model.optimizer.iterations) + round(left * rate)
        self.model.optimizer.cooldown_end_step.assign(float(end))
        self.end_steps.append(end)


class BleuCurve(keras.callbacks.Callback):
    """Greedy BLEU of a fixed set of sentences at given moments of the training clock.

    Args:
        clock: the run's `TrainingClock` (paused while scoring).
        translator: object with `translate(string[B]) -> {"translation": string[B]}`.
        text: `ParallelText` to translate and score.
        moments: clock seconds at which to score during training. One more point is scored at
            the step that ends the budget (`clock` stops training there); call `score()` for
            any other.

    With weight averaging on (`--ema-momentum`), a point scores the averaged weights, those
    training would end with there, and, as `bleu_trained_weights`, the weights training reached.
    """

    def __init__(self, clock, translator, text, moments):
        super().__init__()
        self.clock, self.translator, self.text = clock, translator, text
        self.moments = sorted(moments)
        self.points = []
        self.scoring_seconds = 0.0
        self.scored_budget_end = False

    def on_train_batch_end(self, batch, logs=None):
        if self.model.stop_training and not self.scored_budget_end:  # the clock ended training
            self.scored_budget_end = True
            self.score()
        elif self.moments and self.clock.seconds() >= self.moments[0]:
            while self.moments and self.clock.seconds() >= self.moments[0]:
                self.moments.pop(0)
            self.score()

    def _bleu(self):
        hypotheses = translate_texts(self.translator, self.text.sources)
        return round(sacrebleu.metrics.BLEU().corpus_score(hypotheses, [self.text.targets]).score, 2)

    def score(self):
        with self.clock.paused():
            start = time.perf_counter()
            with averaged_weights(self.model) as averaged:
                point = {"minutes": round(self.clock.seconds() / 60, 3), "steps": self.clock.steps}
                point["bleu"] = self._bleu()
            if averaged:
                point["bleu_trained_weights"] = self._bleu()
            seconds = time.perf_counter() - start
            self.scoring_seconds += seconds
            self.points.append({**point, "scoring_seconds": round(seconds, 1)})
            print(
                f"  curve: {point['minutes']:.2f} min, step {point['steps']}, greedy BLEU {point['bleu']:.2f}"
                + (f" (averaged weights; trained weights {point['bleu_trained_weights']:.2f})" if averaged else ""),
                flush=True,
            )


def late_dropout(args, name, model_config, pairs):
    """Our model's `LateDropout` callback of `--late-dropout`, or None (off, or the keras-hub model).

    `--late-dropout-epochs` becomes a step: that many times the batches of one pass over `pairs`.
    """
    if name != "ours" or not args.late_dropout:
        return None
    one_pass = make_dataset(pairs, batch_size=args.batch_size, batch_tokens=args.batch_tokens)
    steps_per_pass = sum(1 for _ in one_pass)
    return LateDropout(
        args.late_dropout, round(args.late_dropout_epochs * steps_per_pass), from_rate=model_config.dropout_rate
    )


def train_in_budget(args, model, train_data, greedy, curve_text, extra_callbacks=()):
    """`model.fit` until the training clock reaches `--minutes`, scoring the curve on the way.

    Returns:
        `(history, clock, curve, fit_seconds, cooldown_end_steps)`: `fit`'s history, the
        `TrainingClock`, the `BleuCurve` (its last point at the end of training), `fit`'s wall
        seconds, the curve's scoring pauses included, and the learning-rate cooldown's end-step
        estimates, one per chunk (empty without a cooldown).
    """
    budget = args.minutes * 60
    clock = TrainingClock(budget)
    curve = BleuCurve(
        clock,
        greedy,
        curve_text,
        [budget * i / args.curve_points for i in range(1, args.curve_points)],
    )
    cooldown = [CooldownToBudget(clock)] if model.optimizer.cooldown else []
    fit_start = time.perf_counter()
    history = model.fit(
        train_data,
        epochs=MAX_CHUNKS,
        steps_per_epoch=args.steps_per_epoch,
        shuffle=False,  # the dataset shuffles itself
        callbacks=[clock, *cooldown, curve, *extra_callbacks],
        verbose=2,
    )
    fit_seconds = time.perf_counter() - fit_start
    if not curve.scored_budget_end:  # fit ran out of chunks before the budget
        curve.score()
    return history, clock, curve, fit_seconds, cooldown[0].end_steps if cooldown else []


def training_summary(args, history, clock, pairs):
    """The JSON's `train` section: clock minutes, steps, epochs, tokens/s, per-chunk times, last loss."""
    pair_target_tokens = len(pairs) * pairs.mean_target_tokens()  # </s> included, as in the labels
    tokens = np.array(history.history["target_tokens"])  # per chunk
    seconds = np.array(clock.chunk_seconds)
    per_second = tokens / seconds
    # The median leaves out the last chunk, cut short by the budget (unless no chunk is complete).
    complete = np.array(clock.chunk_steps) == args.steps_per_epoch
    median_chunks = per_second[complete] if complete.any() else per_second
    return {
        "minutes": round(clock.seconds() / 60, 3),
        "steps": clock.steps,
        "epochs": round(float(tokens.sum()) / pair_target_tokens, 3),
        "target_tokens": int(tokens.sum()),
        "target_tokens_per_second_median": round(float(np.median(median_chunks))),
        "target_tokens_per_second_mean": round(float(tokens.sum()) / clock.seconds()),
        "chunk_seconds": [round(s, 2) for s in seconds.tolist()],
        "chunk_steps": clock.chunk_steps,
        "chunk_target_tokens": [int(t) for t in tokens],
        "final_loss": round(float(history.history["loss"][-1]), 4),
        "final_accuracy": round(float(history.history["accuracy"][-1]), 4),
    }
