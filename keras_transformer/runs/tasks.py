"""The tasks a run can train (`TrainConfig.task`): the `Task` protocol and the registry that maps a name to one.

The job (`runs.job`) trains every task the same way and asks the task object for what differs:
the data, the model, its evaluation and its export. A task is one module that defines a class
with the methods of `Task` and registers it:

    @register_task("translate")
    class TranslationTask:
        ...

`task_of(train_config)` then makes `TranslationTask("translate")` for a run of that task. The
package `keras_transformer.runs` imports its task modules, so importing the package registers
every task.
"""

from typing import Protocol

from keras_transformer.runs.directory import RunError

_TASKS = {}  # task name -> the class registered for it


class Task(Protocol):
    """What the job asks of a task; its class is made with the task's name (`task_of`).

    Attributes:
        name: the task's name, a `TrainConfig.task` value.
        config_class: the model's config dataclass (`ModelConfig`, `LanguageModelConfig`), which
            saves and loads RUN_DIR/model_config.json.
    """

    name: str
    config_class: type

    def model_config(self, preset_name, model_overrides):
        """The model config of a new run: the preset with the overrides (raises `RunError`)."""

    def check_global_batch(self, train_config, model_config, replicas):
        """Raise `RunError` unless the global batch gives every replica at least one example."""

    def settle_new_run(self, train_config, model_config):
        """The train config of a new run, its settings that follow the model settled.

        Raises `RunError` for settings that cannot start a new run together.
        """

    def read_and_encode(self, train_config, model_config, log):
        """The run's data: splits read, vocabularies settled (their sizes saved in model_config.json), encoded."""

    def tokenizers(self, data):
        """The tokenizers of `read_and_encode`'s data, as `serving_module` takes them."""

    def load_tokenizers(self, run_dir, train_config):
        """The run's tokenizers, read from RUN_DIR."""

    def build_model(self, model_config):
        """A new, uncompiled Keras model."""

    def train_dataset(self, data, train_config):
        """The repeated, shuffled global batches of one seed's training stream."""

    def validation_dataset(self, data, train_config):
        """One finite pass over the validation batches."""

    def callbacks(self, model, model_config, train_config, data):
        """The task's Keras callbacks for `model.fit`, before TensorBoard."""

    def data_summary(self, data):
        """The summary's entries about the training data."""

    def serving_module(self, model, model_config, tokenizers, run_dir, train_config):
        """The `tf.Module` that the run exports, with the run's decoding settings."""

    def evaluate(self, module, train_config, log):
        """Score `module` on the test split; returns the summary's `test` dict."""

    def export(self, module, train_config, export_dir=None, ids_only=False):
        """Export `module` as the next version under the export root; returns its `Path`."""


def register_task(*names):
    """A class decorator: `task_of` makes the class for runs of each of `names`.

    Args:
        *names: `TrainConfig.task` values; the class is made with the one of the run.

    Returns:
        The decorator, which returns the class unchanged.

    Raises:
        ValueError: another class is registered under one of the names already.
    """

    def register(task_class):
        for name in names:
            known = _TASKS.get(name)
            # The same class again (its module reloaded) replaces itself.
            if known is not None and _qualified_name(known) != _qualified_name(task_class):
                raise ValueError(f"Task {name!r} is registered already, by {_qualified_name(known)}")
            _TASKS[name] = task_class
        return task_class

    return register


def _qualified_name(task_class):
    return f"{task_class.__module__}.{task_class.__qualname__}"


def registered_tasks():
    """The names of the registered tasks, sorted."""
    return sorted(_TASKS)


def task_of(train_config):
    """The task object of a run: the class registered for `train_config.task`, made with that name.

    Raises:
        RunError: no task is registered under that name.
    """
    task_class = _TASKS.get(train_config.task)
    if task_class is None:
        raise RunError(
            f"Unknown task {train_config.task!r}: no module registered it; registered tasks: "
            f"{', '.join(registered_tasks())}"
        )
    return task_class(train_config.task)
