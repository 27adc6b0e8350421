"""Where bytes live: key-value engines (memory, LMDB) under one object/ref/table layer."""

from .base import (Engine, ObjectStore, RefLogEntry, RefStore, Store, StoreBusy, StoreDamaged, StoreFull,
                   StoreLocked, Table)
from .memory import MemoryEngine


def open_store(location=None, **options) -> Store:
    """Open a store: in memory when `location` is None, else an LMDB store in that folder."""
    if location is None:
        return Store(MemoryEngine())
    from .lmdb import LmdbEngine

    return Store(LmdbEngine(location, **options))


__all__ = [
    "Engine", "MemoryEngine", "ObjectStore", "RefLogEntry", "RefStore", "Store", "StoreBusy", "StoreDamaged",
    "StoreFull", "StoreLocked", "Table", "open_store",
]
