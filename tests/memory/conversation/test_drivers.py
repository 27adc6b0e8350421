"""The drivers' registry, persistence and portability (each driver passes the conformance suite in
tests/oracle/test_memorystore_contract.py)."""

import itertools
from dataclasses import replace

import pytest

import cortex.api as cx
from cortex.backends import open_store
from cortex.memory.conversation import (
    ConfigError,
    Deps,
    DriverAlreadyRegistered,
    DriverRegistry,
    EventBus,
    Health,
    MemoryConfig,
    StrategyNotImplemented,
    SummarizerRequired,
    UnknownDriver,
    open_memory,
    register,
    registry,
)
from cortex.memory.conversation.conformance import (
    WHO,
    JoiningSummarizer,
    assert_no_turn_lost,
    make_turn,
    write_concurrently,
)
from cortex.memory.conversation.drivers import memory_driver

DRIVERS = ("memory", "lmdb", "postgres")


@pytest.mark.parametrize("driver", ["lmdb", "postgres"])
def test_memory_survives_closing_and_reopening(locate, driver):
    config = MemoryConfig(driver=driver, strategy="rolling_summary", recent_turns=2, **locate(driver))
    summarizer = JoiningSummarizer()
    with open_memory(config, Deps(summarizer=summarizer)) as memory:
        for n in range(5):
            memory.add_turn(WHO, make_turn(n))
        summarizer.down = True
        memory.add_turn(WHO, make_turn(5))
        before = memory.get_llm_context(WHO)
    with open_memory(config, Deps(summarizer=JoiningSummarizer())) as memory:
        assert memory.get_llm_context(WHO) == before
        assert before.summary == "0 1 2" and memory.health(WHO) is Health.RETRY
        memory.add_turn(WHO, make_turn(6))
        assert memory.get_llm_context(WHO).summary == "0 1 2 3 4" and memory.health(WHO) is Health.HEALTHY
        assert memory.flush(WHO) == [make_turn(n) for n in range(7)]


def test_lmdb_driver_shares_a_given_store_and_leaves_it_open(tmp_path):
    with open_store(tmp_path / "store") as store:
        memory = open_memory(MemoryConfig(driver="lmdb"), Deps(store=store))
        memory.add_turn(WHO, make_turn(1))
        memory.close()
        assert len(store.table("conversation")) > 0  # the store is still usable
        again = open_memory(MemoryConfig(driver="lmdb"), Deps(store=store))
        assert again.get_llm_context(WHO).turns == (make_turn(1),)


@pytest.mark.parametrize("source, target", list(itertools.product(DRIVERS, DRIVERS)))
def test_snapshots_are_portable_across_drivers(locate, source, target):
    def opened(driver):
        config = MemoryConfig(driver=driver, strategy="rolling_summary", recent_turns=2, **locate(driver))
        return open_memory(config, Deps(summarizer=JoiningSummarizer()))

    with opened(source) as a, opened(target) as b:
        for n in range(6):
            a.add_turn(WHO, make_turn(n))
        b.restore(WHO, a.snapshot(WHO))
        assert b.get_llm_context(WHO) == a.get_llm_context(WHO)
        assert b.snapshot(WHO) == a.snapshot(WHO)
        b.add_turn(WHO, make_turn(6))  # the restored memory carries on where the source was
        assert b.get_llm_context(WHO).summary == "0 1 2 3 4"
        assert b.flush(WHO) == [make_turn(n) for n in range(7)]


@pytest.mark.parametrize("driver", ["lmdb", "memory"])
def test_two_cortex_conversation_handles_lose_no_turn(tmp_path, org, driver):
    # Each conversations() call makes a handle with locks of its own, over the Cortex's one store.
    with cx.open(tmp_path / "store", org, in_memory=driver == "memory") as c:
        summarizer = JoiningSummarizer(pause=0.002)
        memories = [c.conversations("rolling_summary", driver=driver, summarizer=summarizer, recent_turns=2)
                    for _ in range(2)]
        written, puts = write_concurrently(memories, WHO, 30)
        assert_no_turn_lost(memories, WHO, written, puts, "rolling_summary")


def test_the_memory_driver_never_writes_to_disk(tmp_path):
    with open_store(tmp_path / "store") as store:
        memory = open_memory(MemoryConfig(driver="memory"), Deps(store=store))
        memory.add_turn(WHO, make_turn(1))
        assert memory.get_llm_context(WHO).turns == (make_turn(1),) and len(store.table("conversation")) == 0
        memory.close()


def test_registry_opens_the_default_driver():
    memory = open_memory()
    assert registry.default == "memory" and memory.strategy == "truncation"
    assert set(DRIVERS) <= set(registry.names())
    memory.close()


def test_unknown_driver_lists_the_registered_ones():
    expected = "no conversation-memory driver named 'redis'.*lmdb, memory, postgres"
    with pytest.raises(UnknownDriver, match=expected) as err:
        open_memory(MemoryConfig(driver="redis"))
    assert err.value.registered == registry.names()


def test_registering_a_name_twice_raises():
    with pytest.raises(DriverAlreadyRegistered, match="memory"):
        register("memory", memory_driver)
    local = DriverRegistry(default="mine")
    local.register("mine", memory_driver)
    with pytest.raises(DriverAlreadyRegistered):
        local.register("mine", memory_driver)
    local.open().close()


def test_a_registered_factory_receives_config_and_deps():
    seen = []
    local = DriverRegistry()
    local.register("spy", lambda config, deps: seen.append((config, deps)) or memory_driver(config, deps))
    bus = EventBus()
    local.open({"driver": "spy", "strategy": "none"}, Deps(bus=bus)).close()
    assert seen[0][0] == MemoryConfig(driver="spy", strategy="none") and seen[0][1].bus is bus


def test_config_errors_say_what_is_wrong(tmp_path):
    with pytest.raises(ConfigError, match="unknown setting.*budget"):
        open_memory({"budget": 10})
    with pytest.raises(ConfigError, match="budget_tokens must be a positive integer"):
        MemoryConfig(budget_tokens=0)
    for timeout in (0, -1.0, float("inf"), "10", True):
        with pytest.raises(ConfigError, match="summarizer_timeout must be a positive number of seconds"):
            MemoryConfig(summarizer_timeout=timeout)
    assert MemoryConfig.from_mapping({"summarizer_timeout": 2.5}).summarizer_timeout == 2.5
    with pytest.raises(ConfigError, match="needs a store"):
        open_memory(MemoryConfig(driver="lmdb"))
    with open_store(tmp_path / "s") as store, pytest.raises(ConfigError, match="not both"):
        open_memory(MemoryConfig(driver="lmdb", path=str(tmp_path / "t")), Deps(store=store))
    with pytest.raises(ConfigError, match="postgres driver: needs a store in deps or a url"):
        open_memory(MemoryConfig(driver="postgres"))
    for url in ("mysql://db.example/conversations", str(tmp_path / "folder"), "postgresql:/typo"):
        with pytest.raises(ConfigError, match="url must be a postgresql:// URL"):
            open_memory(MemoryConfig(driver="postgres", url=url))
    with pytest.raises(ConfigError, match="is a database URL; give it as url to the postgres driver"):
        open_memory(MemoryConfig(driver="lmdb", path="postgresql://db.example/conversations"))
    with pytest.raises(ConfigError, match="url must be text"):
        MemoryConfig(url=5432)
    assert not (tmp_path / "folder").exists()


def test_strategy_errors_fail_before_anything_is_opened(tmp_path):
    path = tmp_path / "never"
    with pytest.raises(StrategyNotImplemented, match="none, truncation, rolling_summary"):
        open_memory(MemoryConfig(driver="lmdb", path=str(path), strategy="vector"))
    with pytest.raises(SummarizerRequired):
        open_memory(MemoryConfig(driver="lmdb", path=str(path), strategy="rolling_summary"))
    with pytest.raises(SummarizerRequired, match="summarize"):
        open_memory(MemoryConfig(strategy="rolling_summary"), Deps(summarizer=object()))
    assert not path.exists()


@pytest.mark.parametrize("driver", ["lmdb", "postgres"])
def test_switching_strategy_keeps_the_conversation(locate, driver):
    truncation = MemoryConfig(driver=driver, **locate(driver))
    with open_memory(truncation) as memory:
        for n in range(5):
            memory.add_turn(WHO, make_turn(n))
    rolling = replace(truncation, strategy="rolling_summary", recent_turns=2)
    with open_memory(rolling, Deps(summarizer=JoiningSummarizer())) as memory:
        assert memory.get_llm_context(WHO).turns == tuple(make_turn(n) for n in range(5))
        memory.add_turn(WHO, make_turn(5))
        patch = memory.get_llm_context(WHO)
        assert patch.summary == "0 1 2 3" and patch.turns == (make_turn(4), make_turn(5))
    with open_memory(truncation) as memory:
        assert memory.get_llm_context(WHO).turns == tuple(make_turn(n) for n in range(6))
