"""One identity's turns, in append order, with a key index and the strategy's state, in a cortex table.

Keys start with a kind byte and the identity's hashed key, so one identity's data is
one key range; turns are numbered in append order, so the newest ones are read by
counting down from the head, one exact lookup each: reading a window costs the
window, however long the conversation.

Every change is made inside one write transaction that reads the state it changes:
two handles or two processes on one store then append one after the other, never
over each other.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from typing import TypeVar

from ...backends import Store
from ...codec import decode, encode
from ...hashing import Oid, hash_bytes
from .turns import Turn

T = TypeVar("T")

TABLE = "conversation"
_STATE, _TURN, _KEY = b"s", b"t", b"k"


class TurnLog:
    """An identity's view of the conversation table."""

    def __init__(self, store: Store, identity_key: Oid):
        self.store = store
        self.identity_key = identity_key
        self._table = store.table(TABLE)

    def transact(self, fn: Callable[[], T]) -> T:
        """Run `fn` in one write transaction of the underlying store."""
        return self.store.transact(fn)

    def reading(self):
        """A consistent read view of the underlying store."""
        return self.store.reading()

    def state(self) -> dict:
        """The identity's state: `next` (the next turn number) and whatever the strategy keeps."""
        data = self._table.get(_STATE + self.identity_key)
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
        self._table[self._turn_key(seq)] = encode(turn.record())
        self._table[_KEY + self.identity_key + key] = _number(seq)
        return key

    def turn(self, seq: int) -> Turn | None:
        """The turn numbered `seq`, or None if it was deleted."""
        data = self._table.get(self._turn_key(seq))
        return None if data is None else Turn.from_record(decode(data))

    def newest(self, state: dict, stop: int = 0) -> Iterator[tuple[int, Turn]]:
        """(number, turn) pairs from the newest down to number `stop`, skipping deleted ones."""
        for seq in range(state["next"] - 1, stop - 1, -1):
            turn = self.turn(seq)
            if turn is not None:
                yield seq, turn

    def between(self, low: int, high: int) -> list[tuple[int, Turn]]:
        """(number, turn) pairs numbered low <= n < high that still exist, oldest first."""
        return [(seq, turn) for seq in range(low, high) if (turn := self.turn(seq)) is not None]

    def has(self, seq: int) -> bool:
        """Whether the turn numbered `seq` is stored."""
        return self._table.get(self._turn_key(seq)) is not None

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
        return self._table.pop(self._turn_key(seq), None) is not None

    def all(self) -> list[tuple[int, Turn]]:
        """Every stored (number, turn) pair, oldest first."""
        start = len(_TURN) + len(self.identity_key)
        return [(struct.unpack(">Q", key[start:])[0], Turn.from_record(decode(value)))
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


def _number(seq: int) -> bytes:
    return struct.pack(">Q", seq)
