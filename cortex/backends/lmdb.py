"""The LMDB engine: one environment per store folder, a growing map, thread-bound transactions."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import lmdb

from ..errors import UserError
from .base import ENGINE_TABLES, Engine

T = TypeVar("T")

INITIAL_MAP_SIZE = 256 << 20
_open_envs: dict[str, "LmdbEngine"] = {}
_open_lock = threading.Lock()


class StoreLocked(UserError):
    """The store folder cannot be opened (missing permissions, not a folder, ...)."""


class LmdbEngine(Engine):
    """Tables as LMDB sub-databases; writes go through `transact`, which grows the map when full."""

    def __init__(self, location, map_size: int = INITIAL_MAP_SIZE):
        self.path = Path(location).expanduser().resolve()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.env = lmdb.open(str(self.path), map_size=map_size, max_dbs=len(ENGINE_TABLES) + 1)
        except (OSError, lmdb.Error) as exc:
            raise StoreLocked(f"{self.path}: cannot open the store: {exc}") from None
        with _open_lock:
            if str(self.path) in _open_envs:
                self.env.close()
                raise StoreLocked(f"{self.path}: this store is already open in this process")
            _open_envs[str(self.path)] = self
        self._dbs = {name: self.env.open_db(name.encode()) for name in ENGINE_TABLES}
        self._local = threading.local()
        self._closed = False

    @property
    def _txn(self) -> lmdb.Transaction | None:
        return getattr(self._local, "txn", None)

    def _begin(self, write: bool) -> lmdb.Transaction:
        try:
            return self.env.begin(write=write)
        except lmdb.MapResizedError:
            self.env.set_mapsize(0)  # another process grew the map: adopt its size
            return self.env.begin(write=write)

    @contextmanager
    def _reader(self):
        txn = self._txn
        if txn is not None:
            yield txn
            return
        txn = self._begin(write=False)
        try:
            yield txn
        finally:
            txn.abort()

    def get(self, table: str, key: bytes) -> bytes | None:
        txn = self._txn
        if txn is not None:  # the hot path: inside reading() or transact()
            return txn.get(key, db=self._dbs[table])
        txn = self._begin(write=False)
        try:
            return txn.get(key, db=self._dbs[table])
        finally:
            txn.abort()

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self._in_write(lambda txn: txn.put(key, value, db=self._dbs[table]))

    def delete(self, table: str, key: bytes) -> bool:
        return self._in_write(lambda txn: txn.delete(key, db=self._dbs[table]))

    def _in_write(self, op: Callable[[lmdb.Transaction], T]) -> T:
        if getattr(self._local, "writing", False):
            return op(self._txn)
        return self.transact(lambda: op(self._txn))

    def scan(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        with self._reader() as txn:
            cursor = txn.cursor(db=self._dbs[table])
            if not cursor.set_range(prefix):
                return
            for key, value in cursor:
                if not key.startswith(prefix):
                    return
                yield key, value

    def count(self, table: str) -> int:
        with self._reader() as txn:
            return txn.stat(self._dbs[table])["entries"]

    def transact(self, fn: Callable[[], T]) -> T:
        if getattr(self._local, "writing", False):
            return fn()
        if self._txn is not None:
            raise RuntimeError("cannot write inside a reading() block")
        while True:
            txn = self._begin(write=True)
            self._local.txn, self._local.writing = txn, True
            try:
                result = fn()
                txn.commit()
                return result
            except lmdb.MapFullError:
                txn.abort()
                self._local.txn, self._local.writing = None, False
                self.env.set_mapsize(self.env.info()["map_size"] * 2)
            except BaseException:
                txn.abort()
                raise
            finally:
                self._local.txn, self._local.writing = None, False

    @contextmanager
    def reading(self):
        if self._txn is not None:
            yield
            return
        txn = self._begin(write=False)
        self._local.txn = txn
        try:
            yield
        finally:
            self._local.txn = None
            txn.abort()

    def compact(self) -> None:
        """Rewrite the data file with live pages only: LMDB's freed pages keep deleted bytes until reused.

        Needs the only open environment of this store (another process would go on using the old file).
        """
        others = {line.split()[0] for line in self.env.readers().splitlines()[1:] if line.split()}
        others.discard(str(os.getpid()))
        if others:
            raise StoreLocked(f"{self.path}: open in other processes ({', '.join(sorted(others))}); "
                              "close them to compact the store")
        if self._txn is not None:
            raise RuntimeError("cannot compact inside a transaction")
        scratch = Path(tempfile.mkdtemp(prefix=".compact-", dir=self.path))
        map_size = self.env.info()["map_size"]
        try:
            self.env.copy(str(scratch), compact=True)
            self.env.close()
            os.replace(scratch / "data.mdb", self.path / "data.mdb")
            _fsync_folder(self.path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            self.env = lmdb.open(str(self.path), map_size=map_size, max_dbs=len(ENGINE_TABLES) + 1)
            self._dbs = {name: self.env.open_db(name.encode()) for name in ENGINE_TABLES}

    def size_bytes(self) -> int:
        info, stat = self.env.info(), self.env.stat()
        return (info["last_pgno"] + 1) * stat["psize"]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _open_lock:
            _open_envs.pop(str(self.path), None)
        self.env.close()


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
