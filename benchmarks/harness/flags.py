"""Flags every study shares, made the same way, and the checks of their values.

- Config flags: `add_config_flags` offers fields of `TrainConfig`, `ModelConfig` or
  `LanguageModelConfig` under the fields' own names (`--warmup-steps`, `--learning-rate-scale`,
  `--jit-compile`, `--dropout-rate`, ...), made by the generator of the `keras-transformer` command
  line with the study's defaults; `config_from_flags` builds the config from them and checks it
  with the config's own `validate()`, so a value is checked by the rule the package applies.
- Shared groups: `add_seed_flags` (`--seed`, or `--seeds` for several runs) and `add_output_flags`
  (`--out`, the folder of the results JSON and figures, the study's own `results/` by default;
  `--name`, the stem of their file names).
- The parser and its parse: `study_parser` (`python -m <study>`, the first paragraph of the
  study's docstring, the defaults shown by `DefaultsHelpFormatter`) and `parse` (the flags, the
  flags as given kept as `args.argv` for the JSON and the workers, `--name` checked).
- `parse_list`, an argparse type of comma-separated values; `boolean`, the config flags' type of
  true or false; the checks `check_at_least` and `check_tensorflow`.
"""

import argparse
import dataclasses
import importlib
import re
import sys
from pathlib import Path

# The studies' one generator of config flags, and its type of booleans (true/false, yes/no, 1/0).
from keras_transformer.cli.parser import add_config_flags, boolean  # noqa: F401

# The repository's root: the studies' default output folders lie under it, whatever the working directory.
REPOSITORY = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"[A-Za-z0-9_-]+")


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except `None` (those flags say in words what happens without them) and where the help has one."""

    def _get_help_string(self, action):
        if action.default is None or "(default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def study_parser(package, doc=None, **options):
    """A study's `argparse.ArgumentParser`: run as `python -m <package>`, described by a docstring's first paragraph.

    Args:
        package: the study's `__package__` (or the module it runs as), e.g. `"benchmarks.speed.decode"`.
        doc: the text whose first paragraph heads `--help`; the package's docstring when None.
        **options: more of `ArgumentParser`'s arguments, e.g. `epilog`.

    Returns:
        The parser, its help showing the defaults (`DefaultsHelpFormatter`).
    """
    doc = importlib.import_module(package).__doc__ if doc is None else doc
    return argparse.ArgumentParser(
        prog=f"python -m {package}",
        description=doc.split("\n\n")[0],
        formatter_class=DefaultsHelpFormatter,
        **options,
    )


def parse(parser, argv=None):
    """The flags of `argv` parsed by `parser`, with the flags as given as `args.argv` and `--name` checked.

    Args:
        parser: the study's parser.
        argv: the flags, `sys.argv[1:]` when None.

    Returns:
        The parsed flags; `args.argv` is the list of the flags given (the JSON's command, the
        workers' flags). A parser with `--name` (`add_output_flags`) has it checked (`check_name`).
    """
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if hasattr(args, "name"):
        check_name(parser, args)
    return args


def parse_list(kind, choices=None, unique=True):
    """An argparse type: comma-separated values of `kind`, in the order given, duplicates dropped if `unique`.

    Args:
        kind: the type of each value (`int`, `float`, `str`).
        choices: the allowed values, or None for any.
        unique: drop repeated values (keeping the first).

    Returns:
        A function `text -> list`, raising `argparse.ArgumentTypeError` on a bad value.
    """

    def parse(text):
        try:
            values = [kind(part.strip()) for part in text.split(",") if part.strip()]
            values = list(dict.fromkeys(values)) if unique else values
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s; got {text!r}") from None
        if not values or (choices and any(v not in choices for v in values)):
            allowed = ", ".join(map(str, choices)) if choices else f"{kind.__name__}s"
            raise argparse.ArgumentTypeError(f"expected comma-separated values of {allowed}; got {text!r}")
        return values

    return parse


def check_at_least(parser, args, names, minimum):
    """`parser.error` unless every flag of `names` (attribute names of `args`) is >= `minimum`.

    Args:
        parser: the `argparse.ArgumentParser` that parsed `args`.
        args: the parsed flags.
        names: attribute names, e.g. `("batch_size",)` for `--batch-size`.
        minimum: the smallest value allowed.
    """
    for name in names:
        value = getattr(args, name)
        if not value >= minimum:  # NaN is refused too
            parser.error(f"--{name.replace('_', '-')} must be >= {minimum}. Received: {value}")


def check_tensorflow(parser):
    """`parser.error` unless Keras runs on TensorFlow (a study that needs TensorFlow's own functions)."""
    import keras

    if keras.backend.backend() != "tensorflow":
        parser.error(f"needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: {keras.backend.backend()}")


def config_from_flags(parser, args, config_class, **values):
    """The config of `config_class` from the flags named after its fields, checked by its own `validate()`.

    Args:
        parser: the parser of `args` (its `error` reports a bad value, exit status 2).
        args: the parsed flags; every attribute named after a field of `config_class` is used.
        config_class: a config dataclass (`TrainConfig`, `ModelConfig`, `LanguageModelConfig`).
        **values: fields the study sets itself, overriding the flags.

    Returns:
        The validated config.
    """
    names = {field.name for field in dataclasses.fields(config_class)}
    fields = {name: value for name, value in vars(args).items() if name in names}
    try:
        return config_class(**{**fields, **values}).validate()
    except (TypeError, ValueError) as error:
        parser.error(str(error))


def add_seed_flags(parser, default=0, several=False, help="Seed of the weights and the data."):
    """`--seed` (one int), or with `several` `--seeds` (comma-separated ints, each a run of its own).

    Args:
        parser: the study's parser.
        default: the seed, or with `several` the seeds as a list.
        several: offer `--seeds` instead of `--seed`.
        help: what the seed decides.
    """
    if several:
        parser.add_argument(
            "--seeds", type=parse_list(int), default=list(default), help=f"Comma-separated seeds. {help}"
        )
    else:
        parser.add_argument("--seed", type=int, default=default, help=help)


def results_folder(package):
    """A study's own folder of committed results: `benchmarks/<area>/<study>/results` for its `__package__`."""
    return REPOSITORY.joinpath(*package.split("."), "results")


def add_output_flags(parser, package, name):
    """`--out` (the folder of the results JSON and figures) and `--name` (the stem of their file names).

    Args:
        parser: the study's parser.
        package: the study's `__package__` (`benchmarks.<area>.<study>`): `--out` defaults to its `results/`.
        name: the default stem, e.g. `"decode"` for `decode.json`.
    """
    folder = results_folder(package)
    shown = folder.relative_to(REPOSITORY).as_posix()
    parser.add_argument(
        "--out", type=Path, default=folder, help=f"Folder of the results JSON and figures (default: {shown})."
    )
    parser.add_argument("--name", default=name, help="Stem of the results' file names (letters, digits, _ and -).")


def check_name(parser, args):
    """`parser.error` unless `--name` is letters, digits, _ and - (a file name in `--out`, never a path)."""
    if not _NAME.fullmatch(args.name):
        parser.error(f"--name must be letters, digits, _ and -. Received: {args.name!r}")


def output_path(args, suffix=".json", extra=""):
    """The path of one results file: `--out` / (`--name` + `extra` + `suffix`)."""
    return Path(args.out) / f"{args.name}{extra}{suffix}"
