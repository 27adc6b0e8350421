"""What `memory inspect` shows of an agent: its memory.org with the items that hold at a moment (by default the
current ones: holding now, nothing replaced them), the items that do not and why, and its counts and daily logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from ..errors import NotFound
from ..words import counted, memory_summary
from .changes import MemoryContext
from .items import MemoryItem
from .layout import memory_path
from .validity import Validity

__all__ = ["MemoryView", "no_memory", "why_not"]


@dataclass(frozen=True)
class MemoryView:
    """An agent's memory as `memory inspect` shows it. `text` is its memory.org (None: it has none) without the
    items that do not hold at `at` (None: now, and not replaced), or whole with `every`; `apart` lists those
    items, as (type, item), in file order; `context` holds every item."""

    agent: str
    text: str | None
    context: MemoryContext
    logs: tuple[date, ...]
    apart: tuple[tuple[str, MemoryItem], ...] = ()
    at: datetime | None = None
    every: bool = False

    @property
    def org(self) -> str:
        """`text`; NotFound when the agent has no memory.org."""
        if self.text is None:
            raise no_memory(self.agent)
        return self.text

    @property
    def summary(self) -> str:
        """`assistant: 3 facts, ...; 4 daily logs, ...; 2 items no longer current, left out`."""
        line = memory_summary(self.agent, self.context, list(self.logs))
        if self.apart:
            held = "no longer current" if self.at is None else f"not valid at {_moment(self.at)}"
            line += f"; {counted(len(self.apart), 'item')} {held}" + ("" if self.every else ", left out")
        return line

    def notes(self) -> list[str]:
        """A line for each item apart: its title, :ID: and why it does not hold."""
        return [f"{item.title} [{item.id or item.key(kind)}]: {why_not(item.validity, self.at)}"
                for kind, item in self.apart]


def no_memory(agent: str) -> NotFound:
    """The error that says an agent has no memory.org."""
    return NotFound(f"{memory_path(agent)}: agent {agent!r} has no memory.org")


def why_not(validity: Validity, at: datetime | None = None) -> str:
    """Why an item does not hold at `at` (None: is not current): `superseded by mem-x on 2026-11-03`,
    `invalid from 2026-11-03`, `valid from 2027-01-01`."""
    if validity.start is not None and (at or datetime.now()) < validity.start:
        return f"valid from {_moment(validity.start)}"
    ended = "" if validity.end is None else f" on {_moment(validity.end)}"
    if validity.replaced_by and (at is None or validity.end is None or validity.end <= at):
        return f"superseded by {', '.join(validity.replaced_by)}{ended}"
    return f"invalid from {_moment(validity.end)}" if validity.end is not None else "does not hold"


def _moment(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M}".removesuffix(" 00:00")
