"""The interface every conversation-memory driver implements, and the values it exchanges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ...errors import UserError
from ...hashing import Oid
from ...words import counted
from .health import Health
from .identity import Identity
from .turns import Turn

__all__ = ["ContextPatch", "InvalidSnapshot", "MemoryStore", "Snapshot", "StoreClosed"]


@dataclass(frozen=True)
class ContextPatch:
    """What an LLM call adds to its prompt: a summary, the recent turns (oldest first), their token estimate."""

    strategy: str
    summary: str
    turns: tuple[Turn, ...]
    tokens: int
    health: Health = Health.HEALTHY

    def repl_view(self, renderer):
        """The REPL's view: strategy, health and tokens, the summary, then the turns as a table."""
        head = (f"{self.strategy}: {counted(len(self.turns), 'turn')}, {counted(self.tokens, 'token')} "
                f"({self.health.value})")
        parts = [renderer.text(head, "dim")]
        if self.summary:
            parts.append(renderer.text(f"summary: {self.summary}"))
        turns = [turn.repl_row(renderer, n) for n, turn in enumerate(self.turns)]
        parts.append(renderer.records(turns) if turns else renderer.text("no turns"))
        return renderer.group(*parts)


@dataclass(frozen=True)
class Snapshot:
    """An identity's memory as portable bytes, tagged with the strategy that wrote it."""

    strategy: str
    data: bytes


class StoreClosed(UserError):
    """A memory store was used after `close()`."""

    def __init__(self, operation: str):
        super().__init__(f"{operation}: this conversation memory is closed; open a new one")
        self.operation = operation


class InvalidSnapshot(UserError):
    """A snapshot cannot be restored here: another strategy wrote it, or its bytes are damaged."""


@runtime_checkable
class MemoryStore(Protocol):
    """Identity-scoped conversation memory; every call takes a full identity."""

    @property
    def strategy(self) -> str:
        """The strategy name this store runs (none, truncation, rolling_summary)."""

    def add_turn(self, identity: Identity, turn: Turn) -> None:
        """Remember one exchange."""

    def get_llm_context(self, identity: Identity) -> ContextPatch:
        """The summary and recent turns an LLM call should see."""

    def estimate_tokens(self, identity: Identity) -> int:
        """The token estimate of `get_llm_context(identity)`."""

    def flush(self, identity: Identity) -> list[Turn]:
        """End the conversation: forget its turns, summary and backlog; return the turns, oldest first (the
        none strategy touches nothing)."""

    def health(self, identity: Identity) -> Health:
        """Where the identity's memory stands in the health state machine."""

    def snapshot(self, identity: Identity) -> Snapshot:
        """The identity's memory as a portable snapshot."""

    def restore(self, identity: Identity, snapshot: Snapshot) -> None:
        """Replace the identity's memory by a snapshot of the same strategy (none: only an empty one)."""

    def put(self, identity: Identity, turn: Turn) -> Oid:
        """Administer: store one turn as the newest (the none strategy keeps nothing); return its key, which
        no other turn ever gets."""

    def delete(self, identity: Identity, key: Oid | str) -> bool:
        """Administer: delete the turn `key` names; True if it was there."""

    def close(self) -> None:
        """Give up on summarizer calls in flight and release the store; idempotent; every later call raises
        StoreClosed."""
