"""Where bytes live: key-value engines (memory, LMDB) under one object/ref/table layer."""

from __future__ import annotations

from cortex.lazy import lazy_names

TYPE_CHECKING = False  # typing's, without loading typing before the REPL's prompt

if TYPE_CHECKING:
    from .base import Store

# Loaded on first use: a command that only asks whether a location is a server's (the REPL, before its prompt) loads
# no engine.
_NAMES = {
    ".base": ("Engine", "NoStore", "ObjectStore", "ReadOnlyStore", "RefLogEntry", "RefStore", "Store", "StoreBusy",
              "StoreDamaged", "StoreFull", "StoreLocked", "StoreUnreachable", "Table"),
    ".memory": ("MemoryEngine",),
}
URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location) -> bool:
    """Whether `location` names a database server (postgresql://...) rather than a store folder."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def open_store(location=None, read_only: bool = False, **options) -> Store:
    """Open a store: in memory when `location` is None, a PostgreSQL database for a postgresql:// URL,
    else an LMDB store in that folder; `read_only`: every write is refused (see `Store`); `create=False`: where
    there is no store, NoStore rather than a new one."""
    from .base import Store

    if location is None:
        from .memory import MemoryEngine

        return Store(MemoryEngine(), read_only)
    if is_database_url(location):
        from .postgres import PostgresEngine

        return Store(PostgresEngine(location, **options), read_only)
    from .lmdb import LmdbEngine

    return Store(LmdbEngine(location, **options), read_only)


__all__, __getattr__, __dir__ = lazy_names(__name__, _NAMES)
__all__ += ["is_database_url", "open_store"]
