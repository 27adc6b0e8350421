"""Every conversation-memory driver passes the conformance suite (Harbor's MemoryStore contract,
`cortex.memory.conversation.conformance`), a fresh store at each open."""

from dataclasses import replace

import pytest

from cortex.backends import open_store
from cortex.memory.conversation import open_memory
from cortex.memory.conversation.conformance import MemoryStoreContract


class DriverContract(MemoryStoreContract):
    """The conformance suite on the driver named `driver`, a fresh store at each open."""

    driver = ""

    @pytest.fixture
    def memory_factory(self, locate):
        def factory(config, deps):
            where = {} if deps.store is not None else locate(self.driver)
            return open_memory(replace(config, driver=self.driver, **where), deps)

        return factory


class TestMemoryDriver(DriverContract):
    driver = "memory"

    @pytest.fixture
    def shared_store(self):
        return open_store(None)


class TestLmdbDriver(DriverContract):
    driver = "lmdb"

    @pytest.fixture
    def shared_store(self, tmp_path):
        with open_store(tmp_path / "shared") as store:
            yield store


class TestPostgresDriver(DriverContract):
    driver = "postgres"

    @pytest.fixture
    def shared_store(self, pg_url):
        with open_store(pg_url) as store:
            yield store
