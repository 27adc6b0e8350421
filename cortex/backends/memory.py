"""An in-process engine: dicts, a lock, and an undo log for atomic transactions."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from .base import ENGINE_TABLES, Engine

T = TypeVar("T")


class MemoryEngine(Engine):
    """Tables as dicts; a transaction that raises is undone."""

    def __init__(self):
        self._tables: dict[str, dict[bytes, bytes]] = {name: {} for name in ENGINE_TABLES}
        self._lock = threading.RLock()
        self._undo: list[tuple[str, bytes, bytes | None]] | None = None

    def get(self, table: str, key: bytes) -> bytes | None:
        with self._lock:
            return self._tables[table].get(bytes(key))

    def put(self, table: str, key: bytes, value: bytes) -> None:
        with self._lock:
            self._remember(table, key)
            self._tables[table][bytes(key)] = bytes(value)

    def delete(self, table: str, key: bytes) -> bool:
        with self._lock:
            self._remember(table, key)
            return self._tables[table].pop(bytes(key), None) is not None

    def _remember(self, table: str, key: bytes) -> None:
        if self._undo is not None:
            self._undo.append((table, bytes(key), self._tables[table].get(bytes(key))))

    def scan(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        with self._lock:
            items = sorted(kv for kv in self._tables[table].items() if kv[0].startswith(prefix))
        return iter(items)

    def count(self, table: str) -> int:
        with self._lock:
            return len(self._tables[table])

    def transact(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._undo is not None:
                return fn()
            self.check_writable()
            self._undo = []
            try:
                result = fn()
            except BaseException:
                for table, key, old in reversed(self._undo):
                    if old is None:
                        self._tables[table].pop(key, None)
                    else:
                        self._tables[table][key] = old
                raise
            finally:
                self._undo = None
            return result

    @contextmanager
    def reading(self):
        with self._lock:
            yield

    def close(self) -> None:
        pass
