"""The one override syntax, ``section.key=value``, and the one way plain data becomes a config dataclass.

Every config (a run's ``task``, ``model``, ``train``, ``seeds``; a stage's settings; the canonical grid) is a
frozen dataclass set by the same words from the command line (``possym score RUN score.n_inputs=50``), YAML
(``stages: {score: {n_inputs: 50}}``) or Python (``overrides=[...]``, ``run.scores(n_inputs=50)``,
``load_config(..., train__steps=500)``). A value is read as YAML, then :func:`from_dict` checks it against the
field's type, converting only the unambiguous cases (``3`` or ``"1e-4"`` for a float, a list for a tuple); an
unknown key names the known ones and the closest (:func:`~possym.errors.did_you_mean`). See docs/choices.md,
"One override syntax".

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class CountConfig:
    ...     n: int = 3
    ...     tau: float = 1e-4
    ...     steps: tuple[int, ...] | None = None
    >>> values = section_values(["count.tau=1e-3", "count.steps=[0, 10]"], "count")
    >>> from_dict(CountConfig, values, "count")
    CountConfig(n=3, tau=0.001, steps=(0, 10))
    >>> from_dict(CountConfig, {"tua": 1}, "count")   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    possym.errors.ConfigError: unknown key 'count.tua'; known count keys: [...]; did you mean 'count.tau'?"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any, Literal, TypeVar

import yaml
import yaml.constructor

from possym.errors import ConfigError, PossymError, did_you_mean

C = TypeVar("C")

__all__ = ["PLAIN", "check_overrides", "defaults_help", "from_dict", "keyword_overrides", "parse_override",
           "parse_value", "section_values", "take_section"]


def parse_value(text: str) -> Any:
    """An override's value as YAML reads it: ``3.0e-4`` -> 0.0003, ``null`` or ``none`` -> None, ``true`` -> True,
    ``[1, 2]`` -> [1, 2]; anything else stays a string (``3e-4`` too, which YAML 1.1 does not read as a
    number; a float field converts it in :func:`from_dict`).

    A value YAML cannot read (a bracket left open, a tag such as ``!!python/object``, a byte that is not
    UTF-8 in the command line) is a :class:`~possym.errors.ConfigError` naming it.

    >>> parse_value("50"), parse_value("none"), parse_value("[best, final]"), parse_value("0-2@9-16")
    (50, None, ['best', 'final'], '0-2@9-16')
    >>> parse_value("!!python/object/apply:os.system [ls]")   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    possym.errors.ConfigError: value '!!python/...' has a YAML tag (!!python/object/apply...); give a plain value: ...
    """
    try:
        value = yaml.safe_load(text)
    except yaml.constructor.ConstructorError:
        raise ConfigError(f"value {text!r} has a YAML tag ({text.strip().split(':')[0].split()[0]}...); give a plain "
                          "value: a number, true/false, null, text or a [list]") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise ConfigError(f"value {text!r} is not a value YAML reads ({problem}); give a number, true/false, null, "
                          "text or a [list]") from None
    return None if isinstance(value, str) and text.strip().lower() == "none" else value


def check_overrides(overrides: Any) -> None:
    """Overrides are a list of ``section.key=value`` strings; a lone string would be read one character at a time.

    >>> check_overrides("train.lr=3e-4")
    Traceback (most recent call last):
    ...
    possym.errors.ConfigError: overrides='train.lr=3e-4' is one string; give a list of them, e.g. ['train.lr=3e-4']
    """
    if isinstance(overrides, str | bytes):
        raise ConfigError(f"overrides={overrides!r} is one string; give a list of them, e.g. [{overrides!r}]")
    if not isinstance(overrides, list | tuple) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(f"overrides={overrides!r} must be a list of section.key=value strings, "
                          "e.g. ['train.lr=3e-4']")


def parse_override(item: str) -> tuple[str, str, Any]:
    """``"section.key=value"`` -> ``(section, key, value)``, the value read by :func:`parse_value`.

    >>> parse_override("score.n_inputs=50")
    ('score', 'n_inputs', 50)
    """
    key, sep, text = item.partition("=")
    section, _, name = key.strip().partition(".")
    if not sep or not section or not name or "." in name:
        raise ConfigError(f"override {item!r} must look like section.key=value, e.g. train.lr=3e-4")
    try:
        return section, name, parse_value(text)
    except ConfigError as exc:
        raise ConfigError(f"override {key.strip()}: {exc}") from None


def keyword_overrides(keys: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """Keyword arguments ``section__key=value`` as the overrides ``section.key=value`` they stand for
    (Python cannot spell a dot in a keyword).

    >>> keyword_overrides({"train__steps": 500})
    [('train', 'steps', 500)]
    """
    out = []
    for key, value in keys.items():
        section, sep, name = key.partition("__")
        if not sep or not section or not name:
            raise ConfigError(f"config key {key!r}: write section__key, e.g. train__steps=500 for train.steps=500")
        out.append((section, name, value))
    return out


def section_values(overrides: Iterable[str], section: str, known: Iterable[str] | None = None) -> dict[str, Any]:
    """The values of ``section.key=value`` overrides that must all name ``section`` (a command that takes one
    config), as plain data for :func:`from_dict`; ``known`` lists the section's keys for the error message."""
    overrides = list(overrides)
    check_overrides(overrides)
    values: dict[str, Any] = {}
    for item in overrides:
        got, name, value = parse_override(item)
        if got != section:
            keys = f"; known {section} keys: {list(known)}" if known is not None else ""
            raise ConfigError(f"override {item!r}: this command takes {section}.KEY=VALUE{keys}")
        values[name] = value
    return values


def take_section(cls: type[C], overrides: Iterable[str], section: str) -> tuple[C, list[str]]:
    """Split ``section.key=value`` overrides off the rest: the config ``cls`` they make, and the others in order
    (for a command that takes one config of its own beside a run's or an experiment's sections).

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class PoolConfig:
    ...     workers: int = 1
    >>> take_section(PoolConfig, ["pool.workers=4", "train.steps=50"], "pool")
    (PoolConfig(workers=4), ['train.steps=50'])
    """
    overrides = list(overrides)
    check_overrides(overrides)
    mine = [o for o in overrides if o.split("=", 1)[0].split(".", 1)[0].strip() == section]
    known = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    return from_dict(cls, section_values(mine, section, known), section), [o for o in overrides if o not in mine]


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):  # a class whose annotations name something its module cannot see
        return {}


class _Mismatch(Exception):
    """A value that does not fit a type; ``allowed`` says what would."""

    def __init__(self, allowed: str = "") -> None:
        super().__init__(allowed)
        self.allowed = allowed


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """``value`` as type ``hint``, converting only where nothing is lost or guessed; :class:`_Mismatch` otherwise."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise _Mismatch()
        for arm in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arm, where)
            except _Mismatch:
                continue
        raise _Mismatch()
    if value is None:
        raise _Mismatch()
    if origin is Literal:
        if value in args:
            return value
        raise _Mismatch(f"allowed: {list(args)}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch()
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise _Mismatch()
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise _Mismatch()
    if hint is str:
        if isinstance(value, str):
            return value
        raise _Mismatch()
    if isinstance(hint, type) and issubclass(hint, PurePath):
        if isinstance(value, str | PurePath):
            return hint(value)
        raise _Mismatch()
    if origin is tuple or hint is tuple:
        if not isinstance(value, list | tuple):
            raise _Mismatch("give a list, e.g. [0, 10]")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], where) for v in value)
        if args:
            if len(args) != len(value):
                raise _Mismatch(f"give a list of {len(args)}")
            return tuple(_coerce(v, a, where) for v, a in zip(value, args, strict=True))
        return tuple(value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if isinstance(value, hint):
            return value
        if isinstance(value, dict):
            return from_dict(hint, value, where)
        raise _Mismatch()
    return value  # a type this reader does not know (dict, a callable): the config's own check decides


# A field's metadata key naming the function ``(value, where) -> field value`` that reads its plain form, for a
# field whose plain form is not its type's (an experiment's stages: a mapping of names to settings).
PLAIN = "settings.plain"


def from_dict(cls: type[C], data: Mapping[str, Any] | None, where: str, also: Iterable[str] = (),
              error: type[PossymError] = ConfigError) -> C:
    """``cls(**data)`` for a config dataclass, from plain data (a parsed YAML mapping, parsed overrides or
    keyword arguments): each value checked against its field's type and converted where that is
    unambiguous (see the module docstring), or read by the function its field's metadata names under
    :data:`PLAIN`. An unknown key is an ``error`` naming it as ``where.key`` with the known ones (``also``: keys
    the caller takes itself); a wrong type names the type it must have."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: give settings as a mapping of config keys, e.g. {{key: value}}; got {data!r}")
    fields = [f for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    known = [f.name for f in fields]
    unknown = [k for k in data if k not in known]
    if unknown:
        names = ", ".join(repr(f"{where}.{k}") for k in unknown)
        hint = did_you_mean(f"{where}.{unknown[0]}", [f"{where}.{k}" for k in [*known, *also]])
        raise error(f"unknown key{'s' if len(unknown) > 1 else ''} {names}; known {where} keys: "
                    f"{[*known, *also]}{hint}")
    hints = _hints(cls)
    values = {}
    for f in fields:
        if f.name not in data:
            continue
        value, hint = data[f.name], hints.get(f.name, Any)
        if PLAIN in f.metadata:  # a field whose plain form is not its type's (a mapping of stages, say)
            values[f.name] = f.metadata[PLAIN](value, f"{where}.{f.name}")
            continue
        try:
            values[f.name] = _coerce(value, hint, f"{where}.{f.name}")
        except _Mismatch as exc:
            declared = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
            null = " must not be null" if value is None else f"={value!r} has the wrong type"
            advice = f"; {exc.allowed}" if exc.allowed else ""
            raise ConfigError(f"{where}.{f.name}{null}; expected {declared}{advice}") from None
    return cls(**values)


def defaults_help(section: str, defaults: Mapping[str, Any]) -> str:
    """The keys of a config section with their defaults, one ``section.key=default`` a line, for a command's help.

    >>> print(defaults_help("score", {"n_inputs": 100, "steps": None, "grid": [0, 10]}))
      score.n_inputs=100
      score.steps=null
      score.grid=[0, 10]
    """
    def text(value: Any) -> str:
        return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("\n...").strip()

    return "\n".join(f"  {section}.{k}={text(v)}" for k, v in defaults.items())
