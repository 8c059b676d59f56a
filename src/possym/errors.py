"""The library's error types. The ``possym`` command turns exactly these into a one-line message and
exit code 2; any other exception is a bug and keeps its traceback.

Each is a :class:`ValueError`, since each says that an input (a config value, a run directory, a
file's content) is not what the library can work with, and names what is wrong and what is allowed.

Example:
    >>> issubclass(RunError, PossymError) and issubclass(PossymError, ValueError)
    True
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


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


class OptionError(PossymError, TypeError):
    """A call with an option the function does not take (or too many arguments); the message lists the
    options it does take. A :class:`TypeError` too, as Python's own would be."""


def named_options(fn: _F) -> _F:
    """Make a call with an unknown keyword option an :class:`OptionError` that lists the allowed ones.

    >>> @named_options
    ... def open_thing(path, step="final", *, allow_unfinished=False): ...
    >>> open_thing("runs/x", stpe=3)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    possym.errors.OptionError: open_thing() got an unexpected keyword argument 'stpe'; its options: path, ...
    """
    signature = inspect.signature(fn)
    named = [p.name for p in signature.parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise OptionError(f"{fn.__name__}() {str(exc).removeprefix(fn.__name__ + '()').strip()}; its options: "
                              f"{', '.join(named)}") from None
        return fn(*args, **kwargs)

    return call  # type: ignore[return-value]
