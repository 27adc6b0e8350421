"""How long an agent's daily logs are kept (the DSL's `defmemory :retention`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from ..errors import UserError

__all__ = ["DEFAULT_MAX_AGE", "RetentionPolicy"]

DEFAULT_MAX_AGE = timedelta(days=90)


@dataclass(frozen=True)
class RetentionPolicy:
    """Daily logs older than `max_age` are deleted by compaction (after their marked items moved)."""

    max_age: timedelta = DEFAULT_MAX_AGE

    def __post_init__(self):
        if not isinstance(self.max_age, timedelta):
            raise UserError(f"retention: max_age must be a timedelta (like timedelta(days=90)), "
                            f"not {type(self.max_age).__name__}")
        if self.max_age < timedelta(0):
            raise UserError(f"retention: max_age {self.max_age} is negative")

    @classmethod
    def from_definition(cls, definition) -> RetentionPolicy:
        """The policy a `defmemory` definition declares (its `retention`)."""
        return cls(definition.retention)

    def expired(self, day: date, today: date) -> bool:
        """Whether the log of `day` is older than the retention on `today`."""
        return today - day > self.max_age
