"""Where bytes live: key-value engines (memory, LMDB) under one object/ref/table layer."""

from .base import (Engine, ObjectStore, RefLogEntry, RefStore, Store, StoreBusy, StoreDamaged, StoreFull,
                   StoreLocked, StoreUnreachable, Table)
from .memory import MemoryEngine


URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location) -> bool:
    """Whether `location` names a database server (postgresql://...) rather than a store folder."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def open_store(location=None, **options) -> Store:
    """Open a store: in memory when `location` is None, a PostgreSQL database for a postgresql:// URL,
    else an LMDB store in that folder."""
    if location is None:
        return Store(MemoryEngine())
    if is_database_url(location):
        from .postgres import PostgresEngine

        return Store(PostgresEngine(location, **options))
    from .lmdb import LmdbEngine

    return Store(LmdbEngine(location, **options))


__all__ = [
    "Engine", "MemoryEngine", "ObjectStore", "RefLogEntry", "RefStore", "Store", "StoreBusy", "StoreDamaged",
    "StoreFull", "StoreLocked", "StoreUnreachable", "Table", "is_database_url", "open_store",
]
