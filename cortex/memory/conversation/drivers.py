"""The driver registry: a name -> factory(config, deps) map, with the built-in `memory`, `lmdb` and `postgres`
drivers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from ...backends import MemoryEngine, is_database_url, open_store
from ...errors import CortexError, UserError
from .config import ConfigError, Deps, MemoryConfig
from .protocol import MemoryStore
from .store import ConversationMemory
from .strategies import make_strategy

__all__ = ["DEFAULT_DRIVER", "DriverAlreadyRegistered", "DriverRegistry", "Factory", "UnknownDriver", "lmdb_driver",
           "memory_driver", "open", "postgres_driver", "register", "registry"]

Factory = Callable[[MemoryConfig, Deps], MemoryStore]
DEFAULT_DRIVER = "memory"


class UnknownDriver(UserError):
    """No driver is registered under the configured name."""

    def __init__(self, name: str, registered: list[str]):
        super().__init__(f"no conversation-memory driver named {name!r}; registered: {', '.join(registered)}")
        self.name = name
        self.registered = registered


class DriverAlreadyRegistered(CortexError):
    """A second factory was registered under a taken name."""


class DriverRegistry:
    """Named driver factories; `open` builds a MemoryStore from a config and its dependencies."""

    def __init__(self, default: str = DEFAULT_DRIVER):
        self.default = default
        self._factories: dict[str, Factory] = {}
        self._lock = threading.Lock()

    def register(self, name: str, factory: Factory) -> None:
        """Add a driver; registering a taken name raises DriverAlreadyRegistered."""
        if not isinstance(name, str) or not name:
            raise ValueError("a driver name is non-empty text")
        with self._lock:
            if name in self._factories:
                raise DriverAlreadyRegistered(f"a conversation-memory driver named {name!r} is already registered")
            self._factories[name] = factory

    def names(self) -> list[str]:
        """The registered driver names, sorted."""
        with self._lock:
            return sorted(self._factories)

    def open(self, config: MemoryConfig | Mapping | None = None, deps: Deps | None = None) -> MemoryStore:
        """Open the driver `config.driver` names (the default when unset); raise UnknownDriver if none is."""
        if config is None:
            config = MemoryConfig()
        elif not isinstance(config, MemoryConfig):
            config = MemoryConfig.from_mapping(config)
        name = config.driver or self.default
        with self._lock:
            factory = self._factories.get(name)
        if factory is None:
            raise UnknownDriver(name, self.names())
        return factory(config, deps or Deps())


def memory_driver(config: MemoryConfig, deps: Deps) -> ConversationMemory:
    """In-process memory, gone when the process ends: in `deps.store` when that store is in process, so
    handles given the same one share their conversations; else in a private store of its own."""
    strategy = make_strategy(config, deps.summarizer)
    # An on-disk store is not shared: this driver's promise is that nothing outlives the process.
    if deps.store is not None and isinstance(deps.store.engine, MemoryEngine):
        return ConversationMemory(deps.store, strategy, deps.bus)
    return ConversationMemory(open_store(None), strategy, deps.bus, owns_store=True)


def lmdb_driver(config: MemoryConfig, deps: Deps) -> ConversationMemory:
    """Memory in a cortex LMDB store: the one in `deps.store`, or one it opens (and closes) at `config.path`."""
    if is_database_url(config.path):
        raise ConfigError(f"lmdb driver: path {config.path!r} is a database URL; give it as url to the postgres "
                          "driver")
    return _persistent("lmdb", "path", config, deps)


def postgres_driver(config: MemoryConfig, deps: Deps) -> ConversationMemory:
    """Memory in a cortex PostgreSQL store: the one in `deps.store`, or one it opens (and closes) at
    `config.url`, shared by every process and machine using that database."""
    if config.url is not None and not is_database_url(config.url):
        raise ConfigError(f"postgres driver: url must be a postgresql:// URL "
                          f"(postgresql://user:password@host:5432/database), got {config.url!r}")
    return _persistent("postgres", "url", config, deps)


def _persistent(driver: str, setting: str, config: MemoryConfig, deps: Deps) -> ConversationMemory:
    """Memory in `deps.store`, or in a store opened (and closed) at the config's `setting`."""
    strategy = make_strategy(config, deps.summarizer)  # before opening: a bad strategy opens nothing
    location = getattr(config, setting)
    if deps.store is not None and location is not None:
        raise ConfigError(f"{driver} driver: give a store in deps or a {setting} in config, not both")
    if deps.store is not None:
        return ConversationMemory(deps.store, strategy, deps.bus)
    if location is None:
        raise ConfigError(f"{driver} driver: needs a store in deps or a {setting} in config")
    return ConversationMemory(open_store(location), strategy, deps.bus, owns_store=True)


registry = DriverRegistry()
registry.register("memory", memory_driver)
registry.register("lmdb", lmdb_driver)
registry.register("postgres", postgres_driver)
register = registry.register
open = registry.open  # the registry's verb, reached as drivers.open
