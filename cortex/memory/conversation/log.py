"""One identity's turns, in append order, with a key index and the strategy's state, in a cortex table.

Keys start with a kind byte and the identity's hashed key, so one identity's data is
one key range; turns are numbered in append order, so the newest ones are read by
counting down from the head, in batches of exact lookups (one round trip each on a
database server): reading a window costs the window, however long the conversation.

Every change is made inside one write transaction that reads the state it changes:
two handles or two processes on one store then append one after the other, never
over each other.

A handle remembers the window it last read of each conversation, so the next read
fetches only the state and the turns appended since, in one batch read. A committed
turn never changes: it is only deleted, and every delete counts in the state, as every
new conversation draws a new `epoch`; a window read under the same epoch and delete
count is still the store's.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import NamedTuple, TypeVar

from ...backends import Store
from ...codec import decode, encode
from ...errors import IntegrityError
from ...hashing import Oid, hash_bytes
from .turns import Turn

__all__ = ["FIRST_BATCH", "GLANCE", "T", "TABLE", "WINDOWS_MAX", "TurnLog", "Window"]

T = TypeVar("T")

TABLE = "conversation"
_STATE, _TURN, _KEY = b"s", b"t", b"k"
FIRST_BATCH = 16  # turns read by the first lookup past a remembered window; each further batch doubles
GLANCE = 4  # turns appended since a handle's last read that `TurnLog.view` fetches with the state
WINDOWS_MAX = 1024  # conversations whose last window a handle remembers; it starts over when full
_SEQ_OF, _TURN_OF, _TOKENS = itemgetter(0), itemgetter(1), attrgetter("tokens")  # of a pair, of a turn
_number = struct.Struct(">Q").pack  # a turn number as 8 big-endian bytes: keys sort in append order


class Window(NamedTuple):
    """What a read saw of a conversation: every stored turn numbered low <= n < high, oldest first."""

    basis: tuple  # (epoch, deletes): while the state shows the same, these turns are still stored
    low: int
    high: int
    pairs: list[tuple[int, Turn]]


class TurnLog:
    """An identity's view of the conversation table; `windows` is where its handle remembers what it read."""

    def __init__(self, store: Store, identity_key: Oid, windows: dict[bytes, Window] | None = None):
        self.store = store
        self.identity_key = identity_key
        self._table = store.table(TABLE)
        self._windows = {} if windows is None else windows
        self._writing = False
        self._glanced: tuple[bytes | None, dict[int, bytes | None]] | None = None  # see `view`

    def transact(self, fn: Callable[[], T]) -> T:
        """Run `fn` in one write transaction of the underlying store."""

        def run() -> T:
            outer, self._writing = self._writing, True  # nested calls leave it set for the outer one
            try:
                return fn()
            finally:
                self._writing = outer

        return self.store.transact(run)

    def reading(self):
        """A consistent read view of the underlying store."""
        return self.store.reading()

    def view(self, read: Callable[[], T]) -> T:
        """`read()` on one consistent view of the conversation: one batch read of the state and the turns that
        may follow the remembered window, when `read` needs no more (one round trip on a database server),
        else a read view of the store."""
        window = self._windows.get(self.identity_key)
        if window is not None:
            seqs = range(window.high, window.high + GLANCE)
            rows = self._table.get_many([_STATE + self.identity_key, *self._row_keys(seqs)])
            self._glanced = rows[0], dict(zip(seqs, rows[1:]))
            try:
                return read()
            except _Unseen:
                pass  # it needs turns the batch did not read: read them all in one view
            finally:
                self._glanced = None
        with self.reading():
            return read()

    def state(self) -> dict:
        """The identity's state: `next` (the next turn number) and whatever the strategy keeps."""
        data = self._table.get(_STATE + self.identity_key) if self._glanced is None else self._glanced[0]
        return {"next": 0} if data is None else decode(data)

    def save(self, state: dict) -> None:
        """Write the identity's state."""
        self._table[_STATE + self.identity_key] = encode(state)

    def append(self, state: dict, turn: Turn) -> Oid:
        """Store `turn` as the newest and advance `state`; return its key, which no other turn ever gets."""
        seq = state["next"]
        state["next"] = seq + 1
        # Drawn when a conversation starts: turn numbers restart after a flush, keys do not repeat.
        epoch = state.setdefault("epoch", os.urandom(8))
        key = hash_bytes(_KEY + self.identity_key + epoch + _number(seq))
        rows = [(self._turn_key(seq), encode(turn.record())), (_KEY + self.identity_key + key, _number(seq))]
        # Both keys are new (a flush deletes the conversation's every key): one batch insert, one round trip.
        if self._table.put_new(rows) != len(rows):
            raise IntegrityError(f"conversation {self.identity_key.hex()}: turn number {seq} is already stored")
        return key

    def newest(self, state: dict, stop: int = 0, budget: int | None = None) -> list[tuple[int, Turn]]:
        """(number, turn) pairs, oldest first: the newest turns down to number `stop`, or fewer, as many as
        fit in `budget` tokens; deleted turns are skipped."""
        low, pairs = self._remembered(state)
        size = FIRST_BATCH
        while True:
            candidates = pairs[bisect_left(pairs, stop, key=_SEQ_OF):]  # a remembered window may reach below
            kept = candidates if budget is None else candidates[len(candidates) - _fitting(candidates, budget):]
            if low <= stop or len(kept) < len(candidates):  # read down to `stop`, or cut by the budget
                break
            start = max(stop, low - size)
            pairs = self.between(start, low) + pairs
            low, size = start, size * 2
        # Reads inside a write transaction may see writes that roll back: only committed views are remembered.
        if not self._writing:
            if len(self._windows) >= WINDOWS_MAX:
                self._windows.clear()
            # With the turn the budget cut, if any: the next read sees the cut without reading further down.
            remembered, high = candidates[max(0, len(candidates) - len(kept) - 1):], state["next"]
            low = remembered[0][0] if remembered else high
            self._windows[self.identity_key] = Window(_basis(state), low, high, remembered)
        return kept

    def _remembered(self, state: dict) -> tuple[int, list[tuple[int, Turn]]]:
        """(low, pairs): every stored turn numbered low <= n < next, from the window remembered of this
        conversation and one batch read of the turns appended since; (next, []) when none is remembered."""
        high = state["next"]
        window = None if self._writing else self._windows.get(self.identity_key)
        if window is None or window.basis != _basis(state):
            return high, []
        top = min(window.high, high)  # this view may be older than the one the window was read in
        known = window.pairs if top == window.high else window.pairs[:bisect_left(window.pairs, top, key=_SEQ_OF)]
        return min(window.low, top), known + self.between(top, high)

    def between(self, low: int, high: int) -> list[tuple[int, Turn]]:
        """(number, turn) pairs numbered low <= n < high that still exist, oldest first (one batch read)."""
        if low >= high:
            return []
        rows = self._rows(range(low, high))
        return [(seq, _turn(data)) for seq, data in zip(range(low, high), rows) if data is not None]

    def stored(self, seqs: list[int]) -> bool:
        """Whether every turn numbered in `seqs` is stored (one batch read)."""
        return None not in self._rows(seqs)

    def seq_of(self, key: bytes) -> int | None:
        """The number of the turn with key `key`, or None."""
        data = self._table.get(_KEY + self.identity_key + bytes(key))
        return None if data is None else struct.unpack(">Q", data)[0]

    def remove(self, key: bytes) -> bool:
        """Delete the turn with key `key` and its index entry (inside the caller's transaction); True if stored."""
        seq = self.seq_of(key)
        if seq is None:
            return False
        del self._table[_KEY + self.identity_key + bytes(key)]
        if self._table.pop(self._turn_key(seq), None) is None:
            return False
        state = self.state()
        state["deleted"] = state.get("deleted", 0) + 1  # windows remembered before this delete are stale
        self.save(state)
        return True

    def all(self) -> list[tuple[int, Turn]]:
        """Every stored (number, turn) pair, oldest first."""
        start = len(_TURN) + len(self.identity_key)
        return [(struct.unpack(">Q", key[start:])[0], _turn(value))
                for key, value in self._table.items(_TURN + self.identity_key)]

    def clear(self) -> list[Turn]:
        """Delete every turn, key and the state of the identity (inside the caller's transaction); return the
        turns, oldest first."""
        turns = [turn for _, turn in self.all()]
        # By key range, not by recomputing keys: index entries written by older versions go too.
        for kind in (_TURN, _KEY):
            for key, _ in self._table.items(kind + self.identity_key):
                del self._table[key]
        self._table.pop(_STATE + self.identity_key, None)
        return turns

    def _turn_key(self, seq: int) -> bytes:
        return _TURN + self.identity_key + _number(seq)

    def _rows(self, seqs) -> list[bytes | None]:
        if self._glanced is not None:
            try:
                return [self._glanced[1][seq] for seq in seqs]
            except KeyError:
                raise _Unseen from None
        return self._table.get_many(self._row_keys(seqs))

    def _row_keys(self, seqs) -> list[bytes]:
        """The table's keys of the turns numbered `seqs`."""
        prefix = _TURN + self.identity_key
        return [prefix + _number(seq) for seq in seqs]


class _Unseen(Exception):
    """A read inside `TurnLog.view` asked for a turn its batch read did not fetch."""


def _turn(data: bytes) -> Turn:
    return Turn.from_record(decode(data))


def _fitting(pairs: list[tuple[int, Turn]], budget: int) -> int:
    """How many of the newest turns in `pairs` fit in `budget` tokens together."""
    return bisect_right(list(accumulate(map(_TOKENS, map(_TURN_OF, reversed(pairs))))), budget)


def _basis(state: dict) -> tuple:
    """What a remembered window holds true under: the conversation (its epoch) and how many deletes it saw."""
    return state.get("epoch"), state.get("deleted", 0)

