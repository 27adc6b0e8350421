"""Typed memory events and the in-process bus that delivers them.

Payloads hold operation names, static reasons, counts and hashed keys only, never
turn text: every field is checked when the event is built, so an event cannot leak
what a user said to whoever listens.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import ClassVar

from .health import Health, check_transition

__all__ = ["IDENTITY_PARTS", "OPERATIONS", "Event", "EventBus", "Handler", "HealthChanged", "IdentityRejected",
           "ItemDeleted", "ItemPut", "Reason", "RecoveryDropped", "log"]

log = logging.getLogger(__name__)

OPERATIONS = frozenset({
    "add_turn", "get_llm_context", "estimate_tokens", "flush", "health", "snapshot", "restore", "put", "delete",
})
IDENTITY_PARTS = ("tenant", "user", "session")
_HASHED_KEY = re.compile(r"[0-9a-f]{64}")


class Reason(StrEnum):
    """Why the memory changed state: a fixed vocabulary, never free text."""

    SUMMARIZER_FAILED = "summarizer_failed"
    SUMMARIZER_SUCCEEDED = "summarizer_succeeded"
    RETRIES_EXHAUSTED = "retries_exhausted"
    RECOVERY_STARTED = "recovery_started"
    RECOVERY_FAILED = "recovery_failed"
    BACKLOG_DRAINED = "backlog_drained"
    BACKLOG_OVERFLOW = "backlog_overflow"
    STATE_RESET = "state_reset"


@dataclass(frozen=True)
class Event:
    """Base of memory events; `name` is the event type subscribers filter on."""

    name: ClassVar[str] = ""

    def __post_init__(self):
        for field in fields(self):
            _check_payload(self.name, field.name, getattr(self, field.name))


@dataclass(frozen=True)
class IdentityRejected(Event):
    """A call came without a full identity; `missing` names the absent parts."""

    name: ClassVar[str] = "memory.identity_rejected"
    operation: str
    missing: tuple[str, ...]


@dataclass(frozen=True)
class HealthChanged(Event):
    """An identity's memory moved from `prior` to `new` health."""

    name: ClassVar[str] = "memory.health_changed"
    identity_key: str
    prior: Health
    new: Health
    reason: Reason

    def __post_init__(self):
        super().__post_init__()
        check_transition(self.prior, self.new)  # so no event can announce a move the machine forbids


@dataclass(frozen=True)
class RecoveryDropped(Event):
    """The recovery backlog overflowed: its oldest batch of `turns` turns will never be summarized."""

    name: ClassVar[str] = "memory.recovery_dropped"
    identity_key: str
    reason: Reason
    turns: int


@dataclass(frozen=True)
class ItemPut(Event):
    """An administrator stored one turn, named by its key."""

    name: ClassVar[str] = "memory.item_put"
    identity_key: str
    item_key: str


@dataclass(frozen=True)
class ItemDeleted(Event):
    """An administrator deleted one turn, named by its key."""

    name: ClassVar[str] = "memory.item_deleted"
    identity_key: str
    item_key: str


def _check_payload(event: str, field: str, value) -> None:
    if field.endswith("_key"):
        ok = isinstance(value, str) and _HASHED_KEY.fullmatch(value) is not None
    elif field == "operation":
        ok = value in OPERATIONS
    elif field == "missing":
        ok = isinstance(value, tuple) and all(part in IDENTITY_PARTS for part in value)
    elif field in ("prior", "new"):
        ok = isinstance(value, Health)
    elif field == "reason":
        ok = isinstance(value, Reason)
    elif field == "turns":
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = False
    if not ok:
        raise TypeError(f"{event}: field {field!r} must be a hashed key, a count or a static name, got {value!r}")


Handler = Callable[[Event], object]


class EventBus:
    """Synchronous in-process publish/subscribe, safe to share across threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._subscribers: list[tuple[Handler, frozenset[str]]] = []

    def subscribe(self, handler: Handler, *names: str) -> Callable[[], None]:
        """Call `handler` for every event (or only those named); return a function that unsubscribes."""
        entry = (handler, frozenset(names))
        with self._lock:
            self._subscribers.append(entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._subscribers:
                    self._subscribers.remove(entry)

        return unsubscribe

    def publish(self, event: Event) -> None:
        """Deliver `event` to every matching subscriber, in subscription order."""
        with self._lock:
            targets = [handler for handler, names in self._subscribers if not names or event.name in names]
        for handler in targets:
            try:
                handler(event)
            except Exception:
                # A broken observer must not break the memory it observes (the change already happened).
                log.exception("memory event handler %r failed on %s", handler, event.name)
