"""One identity's turns, in append order, with a key index and the strategy's state, in a cortex table.

Keys start with a kind byte and the identity's hashed key, so one identity's data is
one key range; turns are numbered in append order, so the newest ones are read by
counting down from the head, one exact lookup each: reading a window costs the
window, however long the conversation.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import TypeVar

from ...backends import Store
from ...codec import decode, encode
from ...hashing import Oid
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

    def append(self, state: dict, turn: Turn) -> int | None:
        """Store `turn` as the newest and advance `state`; None (nothing written) if it is already stored."""
        if self.seq_of(turn.key) is not None:
            return None
        seq = state["next"]
        state["next"] = seq + 1
        self._table[self._turn_key(seq)] = encode(turn.record())
        self._table[_KEY + self.identity_key + turn.key] = _number(seq)
        return seq

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

    def between(self, low: int, high: int) -> list[Turn]:
        """The turns numbered low <= n < high that still exist, oldest first."""
        return [t for t in map(self.turn, range(low, high)) if t is not None]

    def seq_of(self, key: bytes) -> int | None:
        """The number of the turn with content key `key`, or None."""
        data = self._table.get(_KEY + self.identity_key + bytes(key))
        return None if data is None else struct.unpack(">Q", data)[0]

    def remove(self, seq: int, turn: Turn) -> None:
        """Delete one turn and its key."""
        del self._table[self._turn_key(seq)]
        del self._table[_KEY + self.identity_key + turn.key]

    def all(self) -> list[tuple[int, Turn]]:
        """Every stored (number, turn) pair, oldest first."""
        start = len(_TURN) + len(self.identity_key)
        return [(struct.unpack(">Q", key[start:])[0], Turn.from_record(decode(value)))
                for key, value in self._table.items(_TURN + self.identity_key)]

    def clear(self) -> list[Turn]:
        """Delete every turn, key and state of the identity; return the turns, oldest first."""

        def wipe() -> list[Turn]:
            pairs = self.all()
            for seq, turn in pairs:
                self.remove(seq, turn)
            self._table.pop(_STATE + self.identity_key, None)
            return [turn for _, turn in pairs]

        return self.transact(wipe)

    def _turn_key(self, seq: int) -> bytes:
        return _TURN + self.identity_key + _number(seq)


def _number(seq: int) -> bytes:
    return struct.pack(">Q", seq)
