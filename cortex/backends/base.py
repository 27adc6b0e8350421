"""The store: objects, refs with a reflog, and named tables, over a key-value engine.

An engine offers byte tables with transactions; `ObjectStore`, `RefStore` and `Table`
are written once on top of it, so every backend behaves the same by construction and
the contract suite (`cortex.backends.contract`) checks what differs: durability,
isolation and atomicity.
"""

from __future__ import annotations

import struct
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from ..codec import FORMAT_VERSION, decode, encode
from ..errors import ChecksumMismatch, FormatError, IntegrityError, NotFound, RefConflict, UserError
from ..hashing import OID_SIZE, Oid, hash_bytes
from ..objects import OrgObject, Tree
from ..objects import decode as decode_object

T = TypeVar("T")

OBJECTS, REFS, REFLOG, META, TABLES = "objects", "refs", "reflog", "meta", "tables"
ENGINE_TABLES = (OBJECTS, REFS, REFLOG, META, TABLES)


class StoreLocked(UserError):
    """The store folder cannot be opened (missing permissions, not a folder, already open here, ...)."""


class StoreBusy(StoreLocked):
    """Other processes have the store open, so this one cannot hold it alone (to compact it, say)."""

    def __init__(self, message: str, pids: tuple[int, ...] = ()):
        super().__init__(message)
        self.pids = pids


class NoStore(NotFound):
    """No store where one was to be opened, and none is made there (a read, a read-only store)."""


class StoreUnreachable(UserError):
    """The database server holding the store cannot be reached (down, wrong address or credentials, no database)."""


class StoreDamaged(IntegrityError):
    """The store's files are not what the engine wrote: truncated, or overwritten with other bytes."""


class ReadOnlyStore(UserError):
    """A write to a store opened read-only."""


class StoreFull(UserError):
    """A write found no room on the disk (or could not be written); it was rolled back."""

    def __init__(self, message: str, free: int | None = None):
        super().__init__(message)
        self.free = free


class Engine(ABC):
    """Named byte tables with atomic, isolated transactions."""

    remote = False  # reads cross a network, so a batch costs about what one read does
    read_only = False  # set on a store opened read-only: `transact` refuses every write
    location: str | None = None  # where the store is, as it is opened again (no password); None: in memory

    def check_writable(self) -> None:
        """Raise ReadOnlyStore when this engine may not write (each engine's `transact` asks first)."""
        if self.read_only:
            raise ReadOnlyStore("this store is open read-only: nothing is written to it")

    @abstractmethod
    def get(self, table: str, key: bytes) -> bytes | None:
        """The value under `key`, or None."""

    @abstractmethod
    def put(self, table: str, key: bytes, value: bytes) -> None:
        """Write `key`; inside `transact` it commits with the rest."""

    @abstractmethod
    def delete(self, table: str, key: bytes) -> bool:
        """Remove `key`; True if it was there."""

    @abstractmethod
    def scan(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Key-ordered (key, value) pairs whose key starts with `prefix`."""

    @abstractmethod
    def count(self, table: str) -> int:
        """Number of keys in a table."""

    @abstractmethod
    def transact(self, fn: Callable[[], T]) -> T:
        """Run `fn` in one write transaction: all of its writes land, or none do."""

    @abstractmethod
    def reading(self) -> AbstractContextManager:
        """Pin one consistent view for every read in the block."""

    @abstractmethod
    def close(self) -> None:
        """Release the engine; idempotent."""

    def get_many(self, table: str, keys: list[bytes]) -> list[bytes | None]:
        """The values under `keys`, in order (None where absent), from one consistent view."""
        with self.reading():
            return [self.get(table, key) for key in keys]

    def put_many(self, table: str, items: list[tuple[bytes, bytes]]) -> None:
        """Write the pairs, in one transaction."""
        self.transact(lambda: [self.put(table, key, value) for key, value in items])

    def delete_many(self, table: str, keys: list[bytes]) -> int:
        """Remove the keys, in one transaction; return how many were there."""
        return self.transact(lambda: sum(self.delete(table, key) for key in keys))

    def put_new(self, table: str, items: list[tuple[bytes, bytes]]) -> int:
        """Write the pairs whose key is absent, in one transaction; return how many were new."""
        def write() -> int:
            new = 0
            for key, value in items:
                if self.get(table, key) is None:
                    self.put(table, key, value)
                    new += 1
            return new

        return self.transact(write)

    def swap(self, table: str, key: bytes, expected: bytes | None, new: bytes | None) -> bool:
        """Set `key` to `new` (None: delete it) if it holds `expected` (None: absent); False if it does not."""
        def move() -> bool:
            if self.get(table, key) != expected:
                return False
            if new is None:
                self.delete(table, key)
            else:
                self.put(table, key, new)
            return True

        return self.transact(move)

    @property
    def local_folder(self) -> Path | None:
        """Where this machine keeps files derived from the store (search indexes, exports); None: nowhere."""
        return None

    def size_bytes(self) -> int:
        """Bytes the engine occupies (0 when not on disk)."""
        return 0

    @contextmanager
    def exclusively(self) -> Iterator[None]:
        """Hold the store alone for the block (no other process has it open); raise StoreBusy if others do."""
        yield

    def compact(self) -> None:
        """Give the space of deleted data back to the disk; a no-op where nothing is on disk."""

    def verify(self) -> list[str]:
        """Problems in how the engine's files are laid out, found without trusting them; [] when sound."""
        return []


class ObjectStore:
    """Immutable objects by oid: `oid in s`, `s[oid]`, `add`, `add_many`.

    Decoded objects are cached: they never change, so a cached one is always right.
    """

    CACHE_SIZE = 200_000

    def __init__(self, engine: Engine):
        self._engine = engine
        self._cache: dict[bytes, OrgObject] = {}

    def __contains__(self, oid: bytes) -> bool:
        return self._engine.get(OBJECTS, oid) is not None

    def __getitem__(self, oid: bytes) -> OrgObject:
        obj = self._cache.get(oid)
        if obj is None:
            obj = self._decoded(oid, self._engine.get(OBJECTS, oid))
        return obj

    def _decoded(self, oid: bytes, data: bytes | None) -> OrgObject:
        """The object stored as `data` under `oid`, checked against its oid, decoded and cached."""
        if data is None:
            raise NotFound(f"no object {bytes(oid).hex()}")
        found = hash_bytes(data)
        if found != oid:
            raise ChecksumMismatch(bytes(oid).hex(), found.hex())
        obj = decode_object(data)
        obj.__dict__.update(encoded=data, oid=found)  # primes the cached properties
        if isinstance(obj, Tree):  # its folders are read from here, when opened
            obj.bind(self.__getitem__)
        self.remember(obj)
        return obj

    def remember(self, obj: OrgObject) -> None:
        """Cache an object already stored (committed), so that reading it back decodes nothing."""
        if isinstance(obj, Tree):
            obj.mark_stored()
        if len(self._cache) >= self.CACHE_SIZE:
            self._cache.clear()
        self._cache[bytes(obj.oid)] = obj

    def get(self, oid: bytes) -> OrgObject | None:
        """The object named `oid`, or None."""
        try:
            return self[oid]
        except NotFound:
            return None

    def raw(self, oid: bytes) -> bytes:
        """The encoded bytes of an object, verified against its oid."""
        data = self._engine.get(OBJECTS, oid)
        if data is None:
            raise NotFound(f"no object {bytes(oid).hex()}")
        found = hash_bytes(data)
        if found != oid:
            raise ChecksumMismatch(bytes(oid).hex(), found.hex())
        return data

    def add(self, obj: OrgObject) -> Oid:
        """Store one object (a no-op when present); return its oid."""
        self.add_many([obj])
        return obj.oid

    def add_many(self, objs: Iterable[OrgObject]) -> int:
        """Store objects in one transaction; return how many were new."""
        pending = {}
        for obj in objs:
            pending[obj.oid] = obj.encoded
            pending.update((part.oid, part.encoded) for part in obj.parts())
        return self.add_raw(pending.items())

    def add_raw(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        """Store already-encoded objects (oid, bytes) in one transaction; return how many were new."""
        return self._engine.put_new(OBJECTS, [(bytes(oid), data) for oid, data in items])

    def load_many(self, oids: Iterable[bytes], missing_ok: bool = False) -> list[OrgObject]:
        """The objects named `oids`, those not cached read in one batch; a missing one is NotFound, or
        left out when `missing_ok`."""
        oids = [bytes(oid) for oid in oids]
        # Taken from the cache first: decoding the others may clear it (when full), and an object that was
        # cached must not then count as missing (gc would collect what it reaches).
        known = {oid: obj for oid in dict.fromkeys(oids) if (obj := self._cache.get(oid)) is not None}
        missing = [oid for oid in dict.fromkeys(oids) if oid not in known]
        for oid, data in zip(missing, self._engine.get_many(OBJECTS, missing)):
            if data is not None:
                known[oid] = self._decoded(oid, data)
        found = []
        for oid in oids:
            if (obj := known.get(oid)) is not None:
                found.append(obj)
            elif not missing_ok:
                raise NotFound(f"no object {oid.hex()}")
        return found

    def preload(self, roots: Iterable[bytes]) -> None:
        """On a network engine, read everything `roots` reach in one batch per level, so that walking it
        reads nothing more; elsewhere a no-op (a walk reads as it goes, and may not need everything)."""
        if not self._engine.remote:
            return
        level = [bytes(oid) for oid in roots]
        seen: set[bytes] = set()
        while level:
            level = [oid for oid in dict.fromkeys(level) if oid not in seen]
            seen.update(level)
            level = [bytes(ref) for obj in self.load_many(level, missing_ok=True) for ref in obj.references]

    def delete_many(self, oids: Iterable[bytes]) -> int:
        """Remove objects (used by gc); return how many were removed."""
        oids = list(oids)
        for oid in oids:
            self._cache.pop(bytes(oid), None)
        return self._engine.transact(lambda: sum(self._engine.delete(OBJECTS, o) for o in oids))

    def __iter__(self) -> Iterator[Oid]:
        return (Oid(key) for key, _ in self._engine.scan(OBJECTS))

    def __len__(self) -> int:
        return self._engine.count(OBJECTS)


@dataclass(frozen=True)
class RefLogEntry:
    """One move of a ref: from `old` to `new` at `time_ns`, and why."""

    name: str
    old: Oid | None
    new: Oid | None
    time_ns: int
    message: str


class RefStore:
    """Named pointers to oids that move only by compare-and-swap; every move is logged."""

    def __init__(self, engine: Engine):
        self._engine = engine

    def get(self, name: str) -> Oid | None:
        """Where `name` points, or None."""
        value = self._engine.get(REFS, name.encode())
        return None if value is None else Oid(value)

    def set_if_equals(self, name: str, new: bytes | None, expected: bytes | None, message: str = "",
                      logged: bool = True) -> None:
        """Move `name` from `expected` to `new` atomically, or raise RefConflict; `logged`: add a reflog entry."""

        def move() -> None:
            if not self._engine.swap(REFS, name.encode(), expected and bytes(expected), new and bytes(new)):
                raise RefConflict(name, _as_oid(expected), self.get(name))
            if logged:
                self._log(RefLogEntry(name, _as_oid(expected), _as_oid(new), time.time_ns(), message))

        self._engine.transact(move)

    def _log(self, entry: RefLogEntry) -> None:
        prefix = entry.name.encode() + b"\0"
        seq = self._next_seq(prefix)
        self._engine.put(REFLOG, prefix + struct.pack(">Q", seq), _record(entry))

    def _next_seq(self, prefix: bytes) -> int:
        counter = b"seq\0" + prefix
        current = self._engine.get(META, counter)
        seq = 0 if current is None else struct.unpack(">Q", current)[0] + 1
        self._engine.put(META, counter, struct.pack(">Q", seq))
        return seq

    def expire(self, name: str, keep: Callable[[RefLogEntry], bool]) -> int:
        """Drop reflog entries of `name` that `keep` rejects; return how many went."""

        def prune() -> int:
            prefix = name.encode() + b"\0"
            dropped = [key for key, value in self._engine.scan(REFLOG, prefix)
                       if not keep(RefLogEntry(name, *_entry(value)))]
            for key in dropped:
                self._engine.delete(REFLOG, key)
            return len(dropped)

        return self._engine.transact(prune)

    def rewrite_log(self, name: str, fn: Callable[[RefLogEntry], RefLogEntry]) -> int:
        """Replace each reflog entry of `name` by `fn(entry)`, in place and order; return how many changed."""

        def rewrite() -> int:
            changed = 0
            for key, value in list(self._engine.scan(REFLOG, name.encode() + b"\0")):
                entry = RefLogEntry(name, *_entry(value))
                new = fn(entry)
                if new != entry:
                    self._engine.put(REFLOG, key, _record(new))
                    changed += 1
            return changed

        return self._engine.transact(rewrite)

    def reflog(self, name: str) -> list[RefLogEntry]:
        """Every move of `name`, oldest first."""
        return [RefLogEntry(name, *_entry(value)) for _, value in self._engine.scan(REFLOG, name.encode() + b"\0")]

    def names(self) -> list[str]:
        """Every ref name, sorted."""
        return [key.decode() for key, _ in self._engine.scan(REFS)]

    def reflog_oids(self) -> Iterator[Oid]:
        """Every oid any reflog entry mentions (gc keeps what they reach)."""
        for _, value in self._engine.scan(REFLOG):
            old, new, _, _ = _entry(value)
            yield from (oid for oid in (old, new) if oid is not None)


class Table(MutableMapping):
    """A named bytes -> bytes table for derived data (ingest state, caches, logs)."""

    def __init__(self, engine: Engine, name: str):
        if "\0" in name:
            raise ValueError("table names cannot contain NUL")
        self._engine = engine
        self._prefix = name.encode() + b"\0"

    def __getitem__(self, key: bytes) -> bytes:
        value = self._engine.get(TABLES, self._prefix + key)
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: bytes, default: bytes | None = None) -> bytes | None:
        value = self._engine.get(TABLES, self._prefix + key)
        return default if value is None else value

    def get_many(self, keys: Iterable[bytes]) -> list[bytes | None]:
        """The values under `keys`, in order (None where absent), in one batch read."""
        return self._engine.get_many(TABLES, [self._prefix + key for key in keys])

    def put_new(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        """Write the pairs whose key is absent, in one batch; return how many were new."""
        return self._engine.put_new(TABLES, [(self._prefix + key, value) for key, value in items])

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self._engine.transact(lambda: self._engine.put(TABLES, self._prefix + key, value))

    def __delitem__(self, key: bytes) -> None:
        if not self._engine.transact(lambda: self._engine.delete(TABLES, self._prefix + key)):
            raise KeyError(key)

    def delete_many(self, keys: Iterable[bytes]) -> int:
        """Remove the keys there are of `keys`, in one batch; return how many there were."""
        return self._engine.delete_many(TABLES, [self._prefix + key for key in keys])

    def update(self, other=(), **kwargs) -> None:  # type: ignore[override]
        """Write many keys in one batch."""
        self._engine.put_many(TABLES, [(self._prefix + k, v) for k, v in dict(other, **kwargs).items()])

    def items(self, prefix: bytes = b""):  # type: ignore[override]
        """(key, value) pairs in key order, optionally under a key prefix."""
        start = len(self._prefix)
        return [(k[start:], v) for k, v in self._engine.scan(TABLES, self._prefix + prefix)]

    def __iter__(self) -> Iterator[bytes]:
        return iter([key for key, _ in self.items()])

    def keys_in_order(self) -> Iterator[bytes]:
        """Keys in key order, each read as it is taken, so stopping early reads few; write nothing meanwhile."""
        start = len(self._prefix)
        return (key[start:] for key, _ in self._engine.scan(TABLES, self._prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self._engine.scan(TABLES, self._prefix))

    def clear(self) -> None:
        keys = [self._prefix + k for k in self]
        self._engine.transact(lambda: [self._engine.delete(TABLES, k) for k in keys])


class Overlay(MutableMapping):
    """A table read through, its writes kept in memory: a cache of derived data over a store open read-only."""

    def __init__(self, table: Table):
        self._table = table
        self._added: dict[bytes, bytes] = {}

    def __getitem__(self, key: bytes) -> bytes:
        return self._added[key] if key in self._added else self._table[key]

    def get_many(self, keys: Iterable[bytes]) -> list[bytes | None]:
        keys = list(keys)
        return [self._added.get(key, found) for key, found in zip(keys, self._table.get_many(keys))]

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self._added[key] = value

    def __delitem__(self, key: bytes) -> None:
        raise ReadOnlyStore("this store is open read-only: nothing is removed from it")

    def __iter__(self) -> Iterator[bytes]:
        return iter(set(self._table) | self._added.keys())

    def __len__(self) -> int:
        return len(set(self._table) | self._added.keys())


class Store:
    """One store: objects, refs and tables sharing an engine and its transactions; `read_only`: every write is
    refused (ReadOnlyStore), and what a reader would cache is kept in memory instead."""

    def __init__(self, engine: Engine, read_only: bool = False):
        self.engine = engine
        self.objects = ObjectStore(engine)
        self.refs = RefStore(engine)
        engine.read_only = read_only
        self._check_format()

    @property
    def read_only(self) -> bool:
        return self.engine.read_only

    def _check_format(self) -> None:
        stored = self.engine.get(META, b"format")
        if stored is None and not self.read_only:
            self.engine.transact(lambda: self.engine.put(META, b"format", encode(FORMAT_VERSION)))
        elif decode(stored) > FORMAT_VERSION:
            self.close()
            raise FormatError(
                f"this store was written by cortex format {decode(stored)}; this version reads up to "
                f"{FORMAT_VERSION}: upgrade cortex to open it"
            )

    @cached_property
    def id(self) -> str:
        """This store's identity, a random name made on its first use: working copies record it."""
        def made() -> bytes:
            if (found := self.engine.get(META, b"id")) is not None:
                return found
            self.engine.put(META, b"id", new := uuid.uuid4().hex.encode())
            return new

        return (self.engine.get(META, b"id") or self.engine.transact(made)).decode()

    def table(self, name: str) -> Table:
        """The named table (created on first write)."""
        return Table(self.engine, name)

    def transact(self, fn: Callable[[], T]) -> T:
        """Run `fn` in one write transaction across objects, refs and tables."""
        return self.engine.transact(fn)

    def reading(self) -> AbstractContextManager:
        """A consistent view for every read in the block."""
        return self.engine.reading()

    def close(self) -> None:
        """Close the store; idempotent."""
        self.engine.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _record(entry: RefLogEntry) -> bytes:
    return encode([entry.old and bytes(entry.old), entry.new and bytes(entry.new), entry.time_ns, entry.message])


def _entry(value: bytes) -> tuple:
    old, new, time_ns, message = decode(value)
    return _as_oid(old), _as_oid(new), time_ns, message


def _as_oid(value: bytes | None) -> Oid | None:
    if value is None:
        return None
    if len(value) != OID_SIZE:
        raise ValueError("not an oid")
    return value if isinstance(value, Oid) else Oid(value)
