"""Every store engine passes the contract (`cortex.backends.contract`): in memory, LMDB on real files,
PostgreSQL on a real server."""

import pytest

from cortex.backends import open_store
from cortex.backends.contract import StoreContract


class TestMemoryBackend(StoreContract):
    @pytest.fixture
    def store(self):
        with open_store() as s:
            yield s


class TestLmdbBackend(StoreContract):
    @pytest.fixture
    def store(self, tmp_path):
        with open_store(tmp_path / "store") as s:
            yield s


class TestPostgresBackend(StoreContract):
    @pytest.fixture
    def store(self, pg_url):
        with open_store(pg_url) as s:
            yield s
