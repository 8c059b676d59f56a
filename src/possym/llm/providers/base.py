"""What every provider shares: the settings it sends, the interface it implements, its errors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from possym.errors import PossymError

REASONING_MODES = ("off", "default")


class MissingAPIKeyError(PossymError):
    """An API key the provider needs is not in the environment (raised before any request)."""


@dataclass(frozen=True)
class GenerationSettings:
    """What every provider sends: greedy-like decoding, few tokens, reasoning off.

    ``temperature=None`` leaves the API's default; ``reasoning='default'`` sends no reasoning setting.
    """

    max_tokens: int = 16
    temperature: float | None = 0.0
    reasoning: str = "off"
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise PossymError(f"max_tokens={self.max_tokens} must be >= 1")
        if self.reasoning not in REASONING_MODES:
            raise PossymError(f"reasoning={self.reasoning!r}; allowed: {REASONING_MODES}")
        if self.timeout_s <= 0:
            raise PossymError(f"timeout_s={self.timeout_s} must be > 0")


class Provider(Protocol):
    name: str
    model: str
    batch_size: int

    def params(self) -> dict[str, Any]:
        """The settings that change a reply; part of the store key. Never holds a secret."""
        ...

    def complete(self, prompts: Sequence[str]) -> list[str]:
        """One reply per prompt, in order; raises on failure."""
        ...

    def is_retryable(self, exc: BaseException) -> bool: ...

    def retry_after(self, exc: BaseException) -> float | None: ...

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be written anywhere (the runner redacts them from error messages)."""
        ...


def reply_settings(settings: GenerationSettings) -> dict[str, Any]:
    """The settings that can change a reply (the time-out cannot)."""
    return {k: v for k, v in asdict(settings).items() if k != "timeout_s"}
