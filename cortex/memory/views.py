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
from .validity import shown

__all__ = ["MemoryView", "no_memory"]


@dataclass(frozen=True)
class MemoryView:
    """An agent's memory as `memory inspect` shows it. `text` is its memory.org (None: it has none) without the
    items that do not hold at `at` (a moment, or some time of a day; None: now, and not replaced), or whole with
    `every`; `apart` lists those items, as (type, item), in file order; `context` holds every item."""

    agent: str
    text: str | None
    context: MemoryContext
    logs: tuple[date, ...]
    apart: tuple[tuple[str, MemoryItem], ...] = ()
    at: datetime | date | None = None
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
            held = "no longer current" if self.at is None else f"not valid {_when(self.at)}"
            line += f"; {counted(len(self.apart), 'item')} {held}" + ("" if self.every else ", left out")
        return line

    def notes(self) -> list[str]:
        """A line for each item apart: its title, :ID: and why it does not hold."""
        return [f"{item.title} [{item.id or item.key(kind)}]: {item.validity.why_not(self.at)}"
                for kind, item in self.apart]


def no_memory(agent: str) -> NotFound:
    """The error that says an agent has no memory.org."""
    return NotFound(f"{memory_path(agent)}: agent {agent!r} has no memory.org")


def _when(at: datetime | date) -> str:
    return f"at {shown(at)}" if isinstance(at, datetime) else f"on {shown(at)}"
