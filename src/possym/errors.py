"""The library's error types. The ``possym`` command turns exactly these into a one-line message and
exit code 2; any other exception is a bug and keeps its traceback.

Each is a :class:`ValueError`, since each says that an input (a config value, a run directory, a
file's content) is not what the library can work with, and names what is wrong and what is allowed.

Example:
    >>> issubclass(RunError, PossymError) and issubclass(PossymError, ValueError)
    True
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


class PossymError(ValueError):
    """An input the library refuses; the message says what is wrong and what is allowed."""


class RunError(PossymError):
    """A run directory is missing, incomplete or corrupt; the message says which file and why."""


class IdentityError(RunError):
    """A file in a run directory that belongs to another run (another seed, another config), or a
    ``config.yaml`` edited after the run was created; the message names the file and both identities."""


class DivergedError(RunError):
    """Training met a non-finite loss (or non-finite weights) and stopped (``train.on_nonfinite=stop``); the
    message names the step and the likely cause. ``runs`` holds the paths of the runs that diverged, so that
    a call that trained several (a group) fails those alone."""

    def __init__(self, message: str, runs: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.runs = tuple(runs)

    def __reduce__(self) -> tuple[Any, ...]:  # an engine's worker pickles it back to the executor
        return (type(self), (str(self), self.runs))


class EarlierLayoutError(RunError):
    """A directory (or a run's saved config) that an earlier possym wrote: nothing on the run path reads it; the
    message names it and ``possym migrate DIR``, which upgrades it once (:mod:`possym.experiment.migrate`)."""


class LockError(PossymError):
    """A directory is being written by another process (:mod:`possym.locks`); the message names it."""


class ConfigError(PossymError):
    """A configuration value is wrong; the message names the field and what is allowed."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'X'?"`` naming the known name closest to a mistyped ``name`` (:mod:`difflib`), or ``""``
    when none is close.

    >>> did_you_mean("train.lrr", ["train.lr", "train.steps"]), did_you_mean("zzz", ["train.lr"])
    ("; did you mean 'train.lr'?", '')
    """
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


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
    """Make a call with an unknown keyword option an :class:`OptionError` that lists the allowed ones and
    suggests the closest (:func:`did_you_mean`).

    >>> @named_options
    ... def open_thing(path, step="final", *, allow_unfinished=False): ...
    >>> open_thing("runs/x", stpe=3)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    possym.errors.OptionError: open_thing() got ... 'stpe'; its options: path, step, ...; did you mean 'step'?
    """
    signature = inspect.signature(fn)
    named = [p.name for p in signature.parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            unknown = [k for k in kwargs if k not in named]
            hint = did_you_mean(unknown[0], named) if unknown else ""
            raise OptionError(f"{fn.__name__}() {str(exc).removeprefix(fn.__name__ + '()').strip()}; its options: "
                              f"{', '.join(named)}{hint}") from None
        return fn(*args, **kwargs)

    return call  # type: ignore[return-value]
