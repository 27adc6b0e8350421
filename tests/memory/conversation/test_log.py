"""TurnLog: a handle reads what it remembers of a conversation again only past it, and never trusts it wrongly."""

import pytest

from cortex.backends import open_store
from cortex.memory.conversation.conformance import WHO, make_turn
from cortex.memory.conversation.log import TurnLog


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "store") as store:
        yield store


@pytest.fixture
def reads(store, monkeypatch):
    """The number of turns each batch read asks for, in order."""
    seen = []
    get_many = store.engine.get_many
    monkeypatch.setattr(store.engine, "get_many", lambda table, keys: seen.append(len(keys)) or get_many(table, keys))
    return seen


def appended(turn_log: TurnLog, numbers, keys: list | None = None) -> dict:
    """Append make_turn(n) for each n in one transaction, their keys to `keys`; the state after."""

    def append() -> dict:
        state = turn_log.state()
        for n in numbers:
            key = turn_log.append(state, make_turn(n))
            if keys is not None:
                keys.append(key)
        turn_log.save(state)
        return state

    return turn_log.transact(append)


def tokens(numbers) -> int:
    """The token estimate of make_turn(n) for each n together."""
    return sum(make_turn(n).tokens for n in numbers)


def test_a_remembered_window_is_read_again_only_past_its_top(store, reads):
    turn_log = TurnLog(store, WHO.key, {})
    state = appended(turn_log, range(40))
    budget = tokens(range(35, 40)) + 1
    assert turn_log.newest(state, budget=budget) == [(n, make_turn(n)) for n in range(35, 40)]
    del reads[:]
    assert turn_log.newest(state, budget=budget) == [(n, make_turn(n)) for n in range(35, 40)]
    state = appended(turn_log, [40, 41])
    assert turn_log.newest(state, budget=budget) == [(n, make_turn(n)) for n in range(37, 42)]
    assert reads == [2]  # the cut by the budget was remembered: nothing older is read again


def test_a_window_reaches_below_what_it_remembers_when_asked(store):
    turn_log = TurnLog(store, WHO.key, {})
    state = appended(turn_log, range(40))
    assert turn_log.newest(state, budget=make_turn(39).tokens) == [(39, make_turn(39))]
    assert turn_log.newest(state, stop=3) == [(n, make_turn(n)) for n in range(3, 40)]
    assert turn_log.newest(state, stop=38) == [(38, make_turn(38)), (39, make_turn(39))]


def test_an_older_view_sees_none_of_the_newer_turns_remembered(store):
    turn_log = TurnLog(store, WHO.key, {})
    older = appended(turn_log, range(5))
    newer = appended(turn_log, range(5, 8))
    assert len(turn_log.newest(newer)) == 8
    assert turn_log.newest(older) == [(n, make_turn(n)) for n in range(5)]


def test_deletes_and_new_conversations_make_a_window_stale(store):
    turn_log, keys = TurnLog(store, WHO.key, {}), []
    state = appended(turn_log, range(3), keys)
    assert len(turn_log.newest(state)) == 3
    assert turn_log.transact(lambda: turn_log.remove(keys[0]))
    assert turn_log.newest(turn_log.state()) == [(1, make_turn(1)), (2, make_turn(2))]
    turn_log.transact(turn_log.clear)
    state = appended(turn_log, [7, 8, 9])  # the same numbers, another conversation
    assert turn_log.newest(state) == [(0, make_turn(7)), (1, make_turn(8)), (2, make_turn(9))]


def test_reads_inside_a_write_transaction_are_not_remembered(store):
    windows = {}
    turn_log = TurnLog(store, WHO.key, windows)

    def doomed() -> None:
        state = appended(turn_log, [1])
        assert turn_log.newest(state) == [(0, make_turn(1))]
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        turn_log.transact(doomed)
    assert windows == {}
    state = appended(turn_log, [2])
    assert turn_log.newest(state) == [(0, make_turn(2))]
