"""What every config dataclass shares: fields that become CLI flags, JSON round trips, validation helpers.

`_field` declares a dataclass field with the help text and choices that `keras_transformer.cli`
turns into a flag; `_JsonConfig` gives a config `validate`, `to_dict` / `from_dict` and
`save` / `load` (JSON, written atomically). The configs' `validate` methods are made of the
package's argument checks, `keras_transformer.checks`.
"""

import dataclasses
import json
from pathlib import Path

from keras_transformer.files import write_text_atomically


def _field(default, help, cli=True, choices=None):
    """A dataclass field whose metadata the CLI turns into a flag.

    Args:
        default: the field's default value (its type is the flag's type).
        help: one-sentence help text, shown by `--help`.
        cli: whether `train` offers the field as a flag.
        choices: allowed values of the flag, or None for any.

    Returns:
        A `dataclasses.field`.
    """
    return dataclasses.field(default=default, metadata={"help": help, "cli": cli, "choices": choices})


class _JsonConfig:
    """JSON round trip and validation shared by the config dataclasses."""

    def validate(self):
        """Check the field values.

        Returns:
            `self`, so that `Config(...).validate()` can be chained.

        Raises:
            ValueError: a value is out of range or inconsistent with another (the message names it).
        """
        return self

    def to_dict(self):
        """The fields as JSON types.

        Returns:
            dict of field name to value, tuples as lists.
        """
        return {
            key: list(value) if isinstance(value, tuple) else value for key, value in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_dict(cls, values):
        """A validated config from a dict, e.g. the output of `to_dict`.

        Args:
            values: dict of field name to value; fields left out keep their defaults.

        Returns:
            The validated config.

        Raises:
            ValueError: an unknown key or an invalid value.
        """
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown {cls.__name__} keys: {unknown}. Known keys: {sorted(known)}")
        return cls(**values).validate()

    def save(self, path):
        """Write the config as JSON, atomically (a reader never sees half a file).

        Args:
            path: the JSON file to write; missing parent folders are made.
        """
        write_text_atomically(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path):
        """Read a config written by `save`.

        Args:
            path: the JSON file.

        Returns:
            The validated config.

        Raises:
            FileNotFoundError: no file at `path`.
            ValueError: the file is not a JSON object of valid fields.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"No {cls.__name__} file at {path}")
        try:
            values = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON: {error}") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path} must hold a JSON object, not {type(values).__name__}")
        return cls.from_dict(values)
