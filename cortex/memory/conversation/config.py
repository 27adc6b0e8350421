"""How a conversation memory is opened: the driver, the strategy and its knobs, and what it is given."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

from ...backends import Store
from ...errors import UserError
from .events import EventBus
from .summarizers import Summarizer

__all__ = ["ConfigError", "Deps", "MemoryConfig"]


class ConfigError(UserError):
    """A memory configuration value is missing or out of range."""


@dataclass(frozen=True)
class MemoryConfig:
    """Which driver and strategy to open, with the strategy's limits.

    `budget_tokens` bounds the context: the truncation window, and the rolling
    summary's turns and summary (its window alone while degraded); `recent_turns` is how many turns the rolling summary keeps
    verbatim; a summarizer that fails `retry_attempts` writes in a row degrades the
    identity; `backlog_max` bounds the batches queued for recovery; while degraded,
    every `recovery_every`-th write tries to drain the backlog; a summarizer call that
    has not answered after `summarizer_timeout` seconds counts as a failure; `path` is
    where the lmdb driver keeps its store and `url` (postgresql://...) the database the
    postgres driver keeps it in, when they are not given one.
    """

    driver: str | None = None
    strategy: str = "truncation"
    budget_tokens: int = 4096
    recent_turns: int = 8
    retry_attempts: int = 3
    backlog_max: int = 16
    recovery_every: int = 1
    summarizer_timeout: float = 30.0
    path: str | None = None
    url: str | None = None

    def __post_init__(self):
        for name in ("budget_tokens", "recent_turns", "retry_attempts", "backlog_max", "recovery_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"memory config: {name} must be a positive integer, got {value!r}")
        timeout = self.summarizer_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ConfigError(f"memory config: summarizer_timeout must be a positive number of seconds, "
                              f"got {timeout!r}")
        for name in ("driver", "path", "url"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"memory config: {name} must be text, got {value!r}")
        if not isinstance(self.strategy, str):
            raise ConfigError(f"memory config: strategy must be text, got {self.strategy!r}")

    @classmethod
    def from_mapping(cls, mapping: Mapping) -> MemoryConfig:
        """Build a config from plain data (a parsed settings file), refusing unknown keys."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ConfigError(f"memory config: unknown setting(s) {', '.join(map(str, unknown))}; "
                              f"known: {', '.join(sorted(known))}")
        return cls(**mapping)


@dataclass(frozen=True)
class Deps:
    """What a driver is handed: the event bus, the summarizer, and a cortex store to live in."""

    bus: EventBus | None = None
    summarizer: Summarizer | None = None
    store: Store | None = None
