"""The library's error types. The ``possym`` command turns exactly these into a one-line message and
exit code 2; any other exception is a bug and keeps its traceback.

Each is a :class:`ValueError`, since each says that an input (a config value, a run directory, a
file's content) is not what the library can work with, and names what is wrong and what is allowed.

Example:
    >>> issubclass(RunError, PossymError) and issubclass(PossymError, ValueError)
    True
"""

from __future__ import annotations


class PossymError(ValueError):
    """An input the library refuses; the message says what is wrong and what is allowed."""


class RunError(PossymError):
    """A run directory is missing, incomplete or corrupt; the message says which file and why."""


class LockError(PossymError):
    """A directory is being written by another process (:mod:`possym.locks`); the message names it."""


class ConfigError(PossymError):
    """A configuration value is wrong; the message names the field and what is allowed."""


def require(ok: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``ok``: the one way configs validate a field."""
    if not ok:
        raise ConfigError(message)


class RecordError(PossymError):
    """A row of a CSV artifact does not fit its record type (a missing column, a value of the wrong type)."""
