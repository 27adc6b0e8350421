"""`ConversationMemory`: the MemoryStore both built-in drivers return, over any cortex store."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ...backends import Store
from ...errors import UserError
from ...hashing import Oid
from .events import Event, EventBus, HealthChanged, ItemDeleted, ItemPut, Reason
from .health import Health
from .identity import Identity, require_identity
from .log import TurnLog, Window
from .protocol import ContextPatch, InvalidSnapshot, Snapshot, StoreClosed
from .strategies import Strategy
from .turns import InvalidTurn, Turn

__all__ = ["RESET_PATH", "ConversationMemory"]

# A flushed or restored identity starts over healthy; observers follow it there by allowed moves only.
RESET_PATH = {Health.RETRY: (Health.HEALTHY,), Health.DEGRADED: (Health.RECOVERING, Health.HEALTHY),
              Health.RECOVERING: (Health.HEALTHY,)}


class ConversationMemory:
    """Identity-scoped conversation memory in a cortex store table; one instance serves many threads.

    Writes to one identity are serialized by a lock of its own, writes to different
    identities only share the store's write transactions (a group commit: one durable
    commit for the writes of many threads), and reads run in a consistent read view
    without locks, reading again only what changed since the handle's last read. Other handles and processes on the same store
    are kept apart by the store alone: every write re-reads what it changes inside its
    transaction (see `strategies`), so the locks only spare duplicate summarizer calls.
    """

    def __init__(self, store: Store, strategy: Strategy, bus: EventBus | None = None, *, owns_store: bool = False):
        self.bus = bus if bus is not None else EventBus()
        self._store = store
        self._strategy = strategy
        self._owns_store = owns_store
        self._writers: dict[bytes, list] = {}  # identity key -> [lock, holders and waiters]
        self._windows: dict[bytes, Window] = {}  # identity key -> the turns last read (see `log`)
        self._gate = threading.Condition(threading.Lock())  # never taken twice by one thread
        self._active = 0
        self._closed = False

    @property
    def strategy(self) -> str:
        """The strategy name this store runs."""
        return self._strategy.name

    def add_turn(self, identity: Identity, turn: Turn) -> None:
        """Remember one exchange, as the newest turn (an identical earlier one is kept too)."""
        with self._call("add_turn", identity, write=True) as (turn_log, events):
            _require_turn(turn, "add_turn")
            self._strategy.add(turn_log, turn, events)

    def get_llm_context(self, identity: Identity) -> ContextPatch:
        """The summary and recent turns an LLM call should see."""
        with self._call("get_llm_context", identity) as (turn_log, _):
            return turn_log.view(lambda: self._strategy.context(turn_log))

    def estimate_tokens(self, identity: Identity) -> int:
        """The token estimate of the identity's LLM context."""
        with self._call("estimate_tokens", identity) as (turn_log, _):
            return turn_log.view(lambda: self._strategy.context(turn_log)).tokens

    def flush(self, identity: Identity) -> list[Turn]:
        """End the conversation: forget its turns, summary and backlog; return the turns, oldest first."""
        with self._call("flush", identity, write=True) as (turn_log, events):
            prior, turns = self._strategy.reset(turn_log)
            _announce_reset(turn_log, prior, events)
            return turns

    def health(self, identity: Identity) -> Health:
        """Where the identity's memory stands in the health state machine."""
        with self._call("health", identity) as (turn_log, _):
            return self._strategy.health(turn_log)

    def snapshot(self, identity: Identity) -> Snapshot:
        """The identity's memory as portable bytes, restorable by any driver running the same strategy."""
        with self._call("snapshot", identity) as (turn_log, _), turn_log.reading():
            return Snapshot(self.strategy, self._strategy.snapshot(turn_log))

    def restore(self, identity: Identity, snapshot: Snapshot) -> None:
        """Replace the identity's memory by `snapshot`; raise InvalidSnapshot if another strategy wrote it."""
        with self._call("restore", identity, write=True) as (turn_log, events):
            if not isinstance(snapshot, Snapshot):
                raise InvalidSnapshot(f"restore: expected a Snapshot, got {type(snapshot).__name__}")
            if snapshot.strategy != self.strategy:
                raise InvalidSnapshot(f"restore: this snapshot was taken by the {snapshot.strategy!r} strategy; "
                                      f"this memory runs {self.strategy!r}")
            prior, _ = self._strategy.reset(turn_log, self._strategy.read_snapshot(snapshot.data))
            _announce_reset(turn_log, prior, events)

    def put(self, identity: Identity, turn: Turn) -> Oid:
        """Administer: store one turn as the newest, announce it, and return its key (never another turn's)."""
        with self._call("put", identity, write=True) as (turn_log, events):
            _require_turn(turn, "put")
            key = self._strategy.add(turn_log, turn, events)
            if key is None:
                return turn.key  # the none strategy keeps nothing: a key that names no stored turn
            events.append(ItemPut(turn_log.identity_key.hex(), key.hex()))
            return key

    def delete(self, identity: Identity, key: Oid | bytes | str) -> bool:
        """Administer: delete the turn `put` returned `key` for; True (and announced) if it was there."""
        with self._call("delete", identity, write=True) as (turn_log, events):
            oid = _parse_key(key)
            if not turn_log.transact(lambda: turn_log.remove(oid)):
                return False
            events.append(ItemDeleted(turn_log.identity_key.hex(), oid.hex()))
            return True

    def close(self) -> None:
        """Give up on summarizer calls in flight, wait for the calls they served, then release the store if
        this memory opened it; idempotent."""
        with self._gate:
            if self._closed:
                return
            self._closed = True
        self._strategy.cancel()
        with self._gate:
            self._gate.wait_for(lambda: self._active == 0)
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> ConversationMemory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _call(self, operation: str, identity: Identity, write: bool = False) -> Iterator[tuple[TurnLog, list]]:
        with self._gate:
            if self._closed:
                raise StoreClosed(operation)
            self._active += 1
        try:
            key = require_identity(identity, self.bus, operation)
            events: list[Event] = []
            turn_log = TurnLog(self._store, key, self._windows)
            if not write:
                yield turn_log, events
                return
            # Events go out before the lock is released, so one identity's events arrive in order.
            with self._exclusive(key):
                try:
                    yield turn_log, events
                finally:
                    for event in events:
                        self.bus.publish(event)
        finally:
            with self._gate:
                self._active -= 1
                self._gate.notify_all()

    @contextmanager
    def _exclusive(self, key: bytes) -> Iterator[None]:
        # One lock per identity being written, dropped when nobody holds or awaits it: a slow
        # summarizer call for one identity never stalls another.
        with self._gate:
            entry = self._writers.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._gate:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._writers[key]


def _announce_reset(turn_log: TurnLog, prior: Health, events: list[Event]) -> None:
    for new in RESET_PATH.get(prior, ()):
        events.append(HealthChanged(turn_log.identity_key.hex(), prior, new, Reason.STATE_RESET))
        prior = new


def _require_turn(turn, operation: str) -> None:
    if not isinstance(turn, Turn):
        raise InvalidTurn(f"{operation}: expected a Turn, got {type(turn).__name__}")


def _parse_key(key) -> Oid:
    try:
        return Oid.from_hex(key) if isinstance(key, str) else Oid(bytes(key))
    except (ValueError, TypeError):
        raise UserError(f"delete: {key!r} is not a turn key (32 bytes or 64 hex characters)") from None
