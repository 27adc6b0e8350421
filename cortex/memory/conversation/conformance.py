"""The behaviour every conversation-memory driver shares, as a pytest mixin.

Subclass `MemoryStoreContract` in a test module and give it a `memory_factory` fixture
returning a function `(MemoryConfig, Deps) -> MemoryStore` that opens a fresh, empty
store of your driver at each call (or, when `deps.store` is set, a handle over that
store), and a `shared_store` fixture: a cortex `Store` that several handles of your
driver share through `Deps(store=...)`. pytest then runs every test below against it,
and the suite closes every handle it opened.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import fields

import pytest

from ...hashing import Oid
from .config import Deps, MemoryConfig
from .events import (
    EventBus,
    HealthChanged,
    IdentityRejected,
    ItemDeleted,
    ItemPut,
    Reason,
    RecoveryDropped,
)
from .health import Health, check_transition
from .identity import Identity, IdentityRequired
from .protocol import InvalidSnapshot, MemoryStore, Snapshot, StoreClosed
from .strategies import StrategyNotImplemented, SummarizerRequired
from .summarizers import ExtractiveSummarizer
from .turns import CHARS_PER_TOKEN, InvalidTurn, TrajectoryDigest, Turn

__all__ = ["OTHER", "SECRET", "WHO", "JoiningSummarizer", "MemoryStoreContract", "StallingSummarizer",
           "assert_no_turn_lost", "health_moves", "join_numbers", "make_turn", "number", "write_concurrently"]

WHO = Identity("acme", "ada", "session-1")
OTHER = Identity("acme", "bob", "session-1")
SECRET = "zebra-7f3-unlisted"


def make_turn(n: int, who: str = "ada", secret: str = "") -> Turn:
    """A distinct, deterministic turn: its text names the owner and the number."""
    return Turn(f"{who} asks question {n} about the report. {secret}".strip(),
                f"Answer {n} for {who}: the report is due on day {n}. {secret}".strip(),
                TrajectoryDigest(("search",), f"found {n} {secret}", f"because {n} {secret}", (f"ref-{n}",)),
                (f"shown-{n}",), (f"hidden-{n}",), timestamp_ns=1_700_000_000_000_000_000 + n)


def number(turn: Turn) -> int:
    """The number `make_turn` gave a turn."""
    return int(turn.user_message.split()[3])


class JoiningSummarizer:
    """Appends each folded turn's number to the summary, and fails while `down` is set.

    `pause` seconds of sleep per call stand in for a model's latency, which is when
    concurrent writers overtake each other.
    """

    def __init__(self, pause: float = 0.0):
        self.down = False
        self.pause = pause
        self.calls: list[tuple[str, list[Turn]]] = []

    def summarize(self, previous_summary, turns):
        """Fold `turns` by appending their numbers; raise when down."""
        self.calls.append((previous_summary, list(turns)))
        time.sleep(self.pause)
        if self.down:
            raise ConnectionError("summarizer unreachable")
        return join_numbers(previous_summary, turns)


def join_numbers(previous_summary: str, turns) -> str:
    """`previous_summary` followed by the number of each turn: the summary the test summarizers write."""
    return " ".join([previous_summary] + [str(number(t)) for t in turns]).strip()


class StallingSummarizer:
    """Hangs like a model that stopped answering: each call waits for `release` (at most `limit` seconds)."""

    def __init__(self, limit: float = 3.0):
        self.limit = limit
        self.entered = threading.Event()
        self.release = threading.Event()

    def summarize(self, previous_summary, turns):
        """Wait, then fold like JoiningSummarizer."""
        self.entered.set()
        self.release.wait(self.limit)
        return join_numbers(previous_summary, turns)


def assert_no_turn_lost(memories: Sequence[MemoryStore], identity: Identity, written: Sequence[Sequence[Turn]],
                        puts: Sequence[tuple[Oid, Turn]], strategy: str) -> None:
    """Check what concurrent writers left, then flush it: every turn kept exactly once, each writer's turns in
    its order, every handle seeing the same, distinct keys, and a delete removing exactly the turn it names.

    `written[w]` are the turns of writer w in the order it added them (all distinct, from `make_turn`);
    `puts` the (key, turn) pairs their `put` calls returned.
    """
    patches = [memory.get_llm_context(identity) for memory in memories]
    assert all(patch == patches[0] for patch in patches)
    if strategy == "none":
        assert patches[0].turns == () and memories[0].flush(identity) == []
        return
    everything = sorted(number(t) for turns in written for t in turns)
    shown = [number(t) for t in patches[0].turns] + [int(n) for n in patches[0].summary.split()]
    # Each turn summarized or shown, exactly once (messages: pytest does not rewrite asserts in this module).
    assert sorted(shown) == everything, f"{strategy}: {len(set(shown))} of {len(everything)} turns kept"
    assert len({key for key, _ in puts}) == len(puts), f"{strategy}: keys repeat"
    key, victim = puts[0]
    assert memories[-1].delete(identity, key) is True and memories[0].delete(identity, key) is False
    kept = memories[0].flush(identity)
    assert sorted(map(number, kept)) == [n for n in everything if n != number(victim)], \
        f"{strategy}: deleting turn {number(victim)} by its key did not remove exactly that turn"
    for turns in written:
        mine = set(turns)
        assert [t for t in kept if t in mine] == [t for t in turns if t != victim], f"{strategy}: order differs"


def write_concurrently(memories: Sequence[MemoryStore], identity: Identity, count: int) -> tuple[list, list]:
    """Each memory adds `count` turns from a thread of its own, every other one by `put`; (written, puts)."""
    written = [[make_turn(1000 * w + n) for n in range(count)] for w in range(len(memories))]
    puts, errors = [], []

    def write(memory: MemoryStore, turns: list[Turn]) -> None:
        try:
            for n, turn in enumerate(turns):
                if n % 2:
                    puts.append((memory.put(identity, turn), turn))
                else:
                    memory.add_turn(identity, turn)
        except Exception as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=write, args=pair) for pair in zip(memories, written)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return written, puts


def health_moves(events) -> list[tuple[str, str, str]]:
    """(prior, new, reason) of every health event, in order."""
    return [(e.prior.value, e.new.value, e.reason.value) for e in events if isinstance(e, HealthChanged)]


class MemoryStoreContract:
    """Behaviour shared by every driver: identity, strategies, health, events, snapshots, lifecycle, threads."""

    @pytest.fixture
    def bus(self):
        """The bus every store of a test publishes on."""
        return EventBus()

    @pytest.fixture
    def events(self, bus):
        """Every event published during the test, in order."""
        seen = []
        bus.subscribe(seen.append)
        return seen

    @pytest.fixture
    def open_memory(self, memory_factory, bus):
        """open_memory(strategy, summarizer, store=None, **limits) -> a fresh store of the driver under test,
        or a handle over `store`."""
        opened = []

        def open_(strategy="truncation", summarizer=None, store=None, **options) -> MemoryStore:
            deps = Deps(bus=bus, summarizer=summarizer, store=store)
            memory = memory_factory(MemoryConfig(strategy=strategy, **options), deps)
            opened.append(memory)
            return memory

        yield open_
        for memory in opened:
            memory.close()

    def test_is_a_memory_store(self, open_memory):
        assert isinstance(open_memory(), MemoryStore)

    def test_truncation_returns_turns_oldest_first(self, open_memory):
        memory = open_memory()
        turns = [make_turn(n) for n in range(5)]
        for turn in turns:
            memory.add_turn(WHO, turn)
        patch = memory.get_llm_context(WHO)
        assert patch.turns == tuple(turns) and patch.summary == "" and patch.strategy == "truncation"
        assert patch.tokens == sum(t.tokens for t in turns) == memory.estimate_tokens(WHO)

    def test_truncation_drops_oldest_until_the_estimate_fits(self, open_memory):
        turns = [make_turn(n) for n in range(12)]
        budget = sum(t.tokens for t in turns[-4:]) + turns[0].tokens // 2
        memory = open_memory(budget_tokens=budget)
        for turn in turns:
            memory.add_turn(WHO, turn)
        patch = memory.get_llm_context(WHO)
        assert patch.turns == tuple(turns[-4:])
        assert patch.tokens <= budget < patch.tokens + turns[-5].tokens

    def test_truncation_never_exceeds_the_budget(self, open_memory):
        memory = open_memory(budget_tokens=10)
        memory.add_turn(WHO, make_turn(1))
        assert make_turn(1).tokens > 10
        assert memory.get_llm_context(WHO).turns == () and memory.estimate_tokens(WHO) == 0

    def test_a_rolling_summary_fits_the_budget_newest_turns_first(self, open_memory):
        turns = [make_turn(n) for n in range(12)]
        budget = sum(t.tokens for t in turns[-2:]) + 3
        memory = open_memory("rolling_summary", ExtractiveSummarizer(max_sentences=50), recent_turns=4,
                             budget_tokens=budget)
        for turn in turns:
            memory.add_turn(WHO, turn)
        patch = memory.get_llm_context(WHO)
        assert patch.turns == tuple(turns[-2:]) and patch.tokens <= budget
        assert patch.summary.endswith("…") and len(patch.summary) <= 3 * CHARS_PER_TOKEN
        assert open_memory("rolling_summary", ExtractiveSummarizer(), budget_tokens=1).get_llm_context(WHO).tokens <= 1

    def test_none_remembers_nothing(self, open_memory):
        memory = open_memory("none")
        memory.add_turn(WHO, make_turn(1))
        patch = memory.get_llm_context(WHO)
        assert (patch.strategy, patch.summary, patch.turns, patch.tokens) == ("none", "", (), 0)
        assert memory.flush(WHO) == []

    def test_unknown_strategy_fails_at_open(self, open_memory):
        with pytest.raises(StrategyNotImplemented, match="truncation"):
            open_memory("sliding_window")

    def test_rolling_summary_without_summarizer_fails_at_open(self, open_memory):
        with pytest.raises(SummarizerRequired):
            open_memory("rolling_summary")

    def test_identities_do_not_share_turns(self, open_memory):
        memory = open_memory()
        runs = Identity("acme", "ada", "session-1", run="r2")
        memory.add_turn(WHO, make_turn(1))
        memory.add_turn(OTHER, make_turn(1, "bob"))
        memory.add_turn(runs, make_turn(2))
        assert memory.get_llm_context(WHO).turns == (make_turn(1),)
        assert memory.get_llm_context(OTHER).turns == (make_turn(1, "bob"),)
        assert memory.get_llm_context(runs).turns == (make_turn(2),)

    @pytest.mark.parametrize("identity, missing", [
        (Identity("", "ada", "s"), ("tenant",)),
        (Identity("acme", " ", "s"), ("user",)),
        (Identity("acme", "ada", ""), ("session",)),
        (Identity("", "", "", "run"), ("tenant", "user", "session")),
        (None, ("tenant", "user", "session")),
    ])
    def test_every_call_requires_an_identity_and_says_so_twice(self, open_memory, events, identity, missing):
        memory = open_memory()
        snap = memory.snapshot(WHO)
        calls = {
            "add_turn": lambda: memory.add_turn(identity, make_turn(1)),
            "get_llm_context": lambda: memory.get_llm_context(identity),
            "estimate_tokens": lambda: memory.estimate_tokens(identity),
            "flush": lambda: memory.flush(identity),
            "health": lambda: memory.health(identity),
            "snapshot": lambda: memory.snapshot(identity),
            "restore": lambda: memory.restore(identity, snap),
            "put": lambda: memory.put(identity, make_turn(1)),
            "delete": lambda: memory.delete(identity, make_turn(1).key),
        }
        for operation, call in calls.items():
            with pytest.raises(IdentityRequired) as err:
                call()
            assert err.value.missing == missing and all(part in str(err.value) for part in missing)
            assert events[-1] == IdentityRejected(operation=operation, missing=missing)
        assert len(events) == len(calls)
        assert memory.get_llm_context(WHO).turns == ()

    def test_rolling_summary_keeps_a_window_and_folds_the_rest(self, open_memory):
        summarizer = JoiningSummarizer()
        memory = open_memory("rolling_summary", summarizer, recent_turns=3)
        turns = [make_turn(n) for n in range(7)]
        for turn in turns:
            memory.add_turn(WHO, turn)
        patch = memory.get_llm_context(WHO)
        assert patch.turns == tuple(turns[-3:]) and patch.summary == "0 1 2 3"
        assert [(prev, [t.timestamp_ns for t in batch]) for prev, batch in summarizer.calls] == [
            ("", [turns[0].timestamp_ns]), ("0", [turns[1].timestamp_ns]),
            ("0 1", [turns[2].timestamp_ns]), ("0 1 2", [turns[3].timestamp_ns])]
        assert patch.tokens == len("0 1 2 3") // 4 + 1 + sum(t.tokens for t in turns[-3:])
        assert memory.health(WHO) is Health.HEALTHY

    def test_extractive_summarizer_folds_into_a_bounded_summary(self, open_memory):
        memory = open_memory("rolling_summary", ExtractiveSummarizer(max_sentences=2), recent_turns=2)
        for n in range(6):
            memory.add_turn(WHO, make_turn(n))
        summary = memory.get_llm_context(WHO).summary
        assert 0 < summary.count(".") <= 2 and "report" in summary

    def test_health_walks_retry_degraded_recovering_healthy(self, open_memory, events):
        summarizer = JoiningSummarizer()
        memory = open_memory("rolling_summary", summarizer, recent_turns=2, retry_attempts=2, backlog_max=2,
                             budget_tokens=10_000)
        turns = [make_turn(n) for n in range(10)]
        memory.add_turn(WHO, turns[0])
        memory.add_turn(WHO, turns[1])
        summarizer.down = True
        memory.add_turn(WHO, turns[2])  # evicts 0: the summarizer fails once
        assert memory.health(WHO) is Health.RETRY
        assert memory.get_llm_context(WHO).turns == tuple(turns[:3])  # nothing evicted is lost meanwhile
        memory.add_turn(WHO, turns[3])  # second failure in a row: degraded, turns 0-1 queued
        patch = memory.get_llm_context(WHO)
        assert patch.health is Health.DEGRADED and patch.summary == "" and patch.turns == tuple(turns[:4])
        memory.add_turn(WHO, turns[4])  # queues 2, recovery fails
        memory.add_turn(WHO, turns[5])  # queues 3: overflow drops the batch of 0-1
        dropped = [e for e in events if isinstance(e, RecoveryDropped)]
        assert dropped == [RecoveryDropped(WHO.key.hex(), Reason.BACKLOG_OVERFLOW, 2)]
        summarizer.down = False
        memory.add_turn(WHO, turns[6])  # queues 4, then drains 2, 3, 4
        assert memory.health(WHO) is Health.HEALTHY
        assert memory.get_llm_context(WHO).summary == "2 3 4"
        assert memory.get_llm_context(WHO).turns == tuple(turns[5:7])
        failed = ("degraded", "recovering", "recovery_started"), ("recovering", "degraded", "recovery_failed")
        assert health_moves(events) == [
            ("healthy", "retry", "summarizer_failed"), ("retry", "degraded", "retries_exhausted"),
            *failed, *failed,
            ("degraded", "recovering", "recovery_started"), ("recovering", "healthy", "backlog_drained")]
        assert all(e.identity_key == WHO.key.hex() for e in events)

    def test_a_retry_that_succeeds_returns_to_healthy(self, open_memory, events):
        summarizer = JoiningSummarizer()
        memory = open_memory("rolling_summary", summarizer, recent_turns=1, retry_attempts=3)
        memory.add_turn(WHO, make_turn(0))
        summarizer.down = True
        memory.add_turn(WHO, make_turn(1))
        summarizer.down = False
        memory.add_turn(WHO, make_turn(2))
        assert memory.get_llm_context(WHO).summary == "0 1"
        assert health_moves(events) == [("healthy", "retry", "summarizer_failed"),
                                        ("retry", "healthy", "summarizer_succeeded")]

    def test_snapshot_restores_into_another_identity_and_store(self, open_memory):
        for strategy in ("truncation", "rolling_summary"):
            source = open_memory(strategy, JoiningSummarizer(), recent_turns=2)
            for n in range(5):
                source.add_turn(WHO, make_turn(n))
            snap = source.snapshot(WHO)
            target = open_memory(strategy, JoiningSummarizer(), recent_turns=2)
            target.add_turn(OTHER, make_turn(99, "bob"))
            target.restore(OTHER, snap)
            assert snap.strategy == strategy and isinstance(snap.data, bytes)
            assert target.get_llm_context(OTHER) == source.get_llm_context(WHO)
            assert target.flush(OTHER) == [make_turn(n) for n in range(5)]

    def test_restored_rolling_summary_refolds_queued_turns(self, open_memory):
        summarizer = JoiningSummarizer()
        source = open_memory("rolling_summary", summarizer, recent_turns=1, retry_attempts=1)
        for n in range(3):
            source.add_turn(WHO, make_turn(n))
        summarizer.down = True
        source.add_turn(WHO, make_turn(3))  # turn 2 goes to the backlog
        assert source.health(WHO) is Health.DEGRADED
        target = open_memory("rolling_summary", JoiningSummarizer(), recent_turns=1)
        target.restore(WHO, source.snapshot(WHO))
        assert target.health(WHO) is Health.HEALTHY
        target.add_turn(WHO, make_turn(4))
        assert target.get_llm_context(WHO).summary == "0 1 2 3"

    def test_restoring_another_strategys_snapshot_is_refused(self, open_memory):
        truncation = open_memory()
        truncation.add_turn(WHO, make_turn(1))
        rolling = open_memory("rolling_summary", JoiningSummarizer())
        rolling.add_turn(WHO, make_turn(2))
        with pytest.raises(InvalidSnapshot, match="truncation"):
            rolling.restore(WHO, truncation.snapshot(WHO))
        for damaged in (Snapshot("rolling_summary", b"\xc1garbage"), Snapshot("rolling_summary", b"\x90"),
                        "not a snapshot"):
            with pytest.raises(InvalidSnapshot):
                rolling.restore(WHO, damaged)
        assert rolling.get_llm_context(WHO).turns == (make_turn(2),)

    def test_admin_put_and_delete_announce_hashed_keys(self, open_memory, events):
        memory = open_memory()
        turn = make_turn(1)
        key = memory.put(WHO, turn)
        assert isinstance(key, Oid)
        assert memory.get_llm_context(WHO).turns == (turn,)
        assert events == [ItemPut(WHO.key.hex(), key.hex())]
        assert memory.delete(WHO, key.hex()) is True
        assert memory.delete(WHO, key) is False and memory.delete(OTHER, key) is False
        assert memory.get_llm_context(WHO).turns == ()
        assert events == [ItemPut(WHO.key.hex(), key.hex()), ItemDeleted(WHO.key.hex(), key.hex())]

    def test_identical_turns_are_both_kept_under_keys_of_their_own(self, open_memory):
        memory = open_memory()
        turn = make_turn(1)
        memory.add_turn(WHO, turn)
        memory.add_turn(WHO, turn)
        first, second = memory.put(WHO, turn), memory.put(WHO, turn)
        assert memory.get_llm_context(WHO).turns == (turn,) * 4 and first != second
        assert memory.delete(WHO, second) is True and memory.delete(WHO, second) is False
        assert memory.flush(WHO) == [turn] * 3

    def test_a_key_never_names_a_later_turn(self, open_memory):
        memory = open_memory()
        turn = make_turn(1)
        old = memory.put(WHO, turn)
        memory.flush(WHO)
        new = memory.put(WHO, turn)  # the same turn again, at the same place of a new conversation
        assert new != old and memory.delete(WHO, old) is False
        assert memory.get_llm_context(WHO).turns == (turn,)

    def test_bad_turns_are_refused(self, open_memory):
        memory = open_memory()
        with pytest.raises(InvalidTurn, match="expected a Turn"):
            memory.add_turn(WHO, "hello")

    def test_flush_returns_the_turns_and_forgets_them(self, open_memory):
        memory = open_memory("rolling_summary", JoiningSummarizer(), recent_turns=1)
        for n in range(3):
            memory.add_turn(WHO, make_turn(n))
        memory.add_turn(OTHER, make_turn(0, "bob"))
        assert memory.flush(WHO) == [make_turn(n) for n in range(3)]
        patch = memory.get_llm_context(WHO)
        assert (patch.summary, patch.turns) == ("", ())
        assert memory.get_llm_context(OTHER).turns == (make_turn(0, "bob"),)

    def test_close_is_idempotent_and_final(self, open_memory):
        memory = open_memory()
        memory.add_turn(WHO, make_turn(1))
        snap = memory.snapshot(WHO)
        memory.close()
        memory.close()
        calls = [lambda: memory.add_turn(WHO, make_turn(2)), lambda: memory.get_llm_context(WHO),
                 lambda: memory.estimate_tokens(WHO), lambda: memory.flush(WHO), lambda: memory.health(WHO),
                 lambda: memory.snapshot(WHO), lambda: memory.restore(WHO, snap),
                 lambda: memory.put(WHO, make_turn(3)), lambda: memory.delete(WHO, make_turn(1).key),
                 lambda: memory.add_turn(None, "not even a turn")]
        for call in calls:
            with pytest.raises(StoreClosed):
                call()

    @pytest.mark.parametrize("strategy", ["truncation", "rolling_summary"])
    def test_threads_share_one_store_without_loss_or_leak(self, open_memory, strategy):
        memory = open_memory(strategy, JoiningSummarizer(), budget_tokens=1_000_000, recent_turns=3)
        owners = [Identity("acme", f"user{k}", "session-1") for k in range(24)]
        shared = Identity("acme", "everyone", "session-1")
        errors = []

        def work(worker: int) -> None:
            try:
                for n in range(6):
                    for owner in owners[worker::8]:
                        memory.add_turn(owner, make_turn(n, owner.user))
                        seen = memory.get_llm_context(owner).turns
                        assert all(t.user_message.startswith(owner.user + " ") for t in seen)
                    memory.add_turn(shared, make_turn(100 * worker + n, "someone"))
            except Exception as exc:  # surfaced below: a thread's failure must fail the test
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        everything = sorted(100 * w + n for w in range(8) for n in range(6))
        patch = memory.get_llm_context(shared)
        shown = [int(n) for n in patch.summary.split()] + [int(t.user_message.split()[3]) for t in patch.turns]
        assert sorted(shown) == everything  # each turn summarized or shown, exactly once
        assert sorted(t.timestamp_ns - make_turn(0).timestamp_ns for t in memory.flush(shared)) == everything
        for owner in owners:
            patch = memory.get_llm_context(owner)
            assert (patch.summary, patch.turns) == (("0 1 2", tuple(make_turn(n, owner.user) for n in (3, 4, 5)))
                                                     if strategy == "rolling_summary" else
                                                     ("", tuple(make_turn(n, owner.user) for n in range(6))))
            assert memory.flush(owner) == [make_turn(n, owner.user) for n in range(6)]

    def test_no_turn_text_ever_reaches_an_event(self, open_memory, events):
        summarizer = JoiningSummarizer()
        memory = open_memory("rolling_summary", summarizer, recent_turns=1, retry_attempts=1, backlog_max=1)
        secret_who = Identity(f"tenant-{SECRET}", f"user-{SECRET}", f"session-{SECRET}", f"run-{SECRET}")
        turns = [make_turn(n, secret=SECRET) for n in range(6)]
        for turn in turns[:2]:
            memory.add_turn(secret_who, turn)
        summarizer.down = True
        for turn in turns[2:5]:
            memory.add_turn(secret_who, turn)
        summarizer.down = False
        key = memory.put(secret_who, turns[5])
        memory.delete(secret_who, key)
        with pytest.raises(IdentityRequired):
            memory.add_turn(Identity(SECRET, SECRET, ""), turns[0])
        memory.restore(secret_who, memory.snapshot(secret_who))
        memory.flush(secret_who)
        kinds = {type(e) for e in events}
        assert kinds == {HealthChanged, RecoveryDropped, ItemPut, ItemDeleted, IdentityRejected}
        words = {w for t in turns for w in (t.user_message + " " + t.assistant_response).split()
                 if not w.isdigit() and len(w) > 3} | {SECRET}
        for event in events:
            for field in fields(event):
                value = str(getattr(event, field.name))
                assert [w for w in words if w in value] == [], event

    @pytest.mark.parametrize("strategy", ["none", "truncation", "rolling_summary"])
    def test_two_handles_on_one_store_lose_no_turn(self, open_memory, shared_store, strategy):
        # Each handle has its own locks: only the store can keep them from overwriting each other.
        summarizer = JoiningSummarizer(pause=0.002)
        memories = [open_memory(strategy, summarizer, store=shared_store, recent_turns=2, budget_tokens=10**6)
                    for _ in range(2)]
        written, puts = write_concurrently(memories, WHO, 24)
        assert_no_turn_lost(memories, WHO, written, puts, strategy)

    @pytest.mark.parametrize("strategy", ["truncation", "rolling_summary"])
    def test_a_handle_sees_what_another_changed_since_it_read(self, open_memory, shared_store, strategy):
        # A handle may remember what it read: deletes, flushes and restores by another must still show.
        reader, writer = (open_memory(strategy, JoiningSummarizer(), store=shared_store, recent_turns=3,
                                      budget_tokens=10**6) for _ in range(2))
        keys = [writer.put(WHO, make_turn(n)) for n in range(3)]
        assert reader.get_llm_context(WHO).turns == tuple(make_turn(n) for n in range(3))
        writer.delete(WHO, keys[1])
        assert reader.get_llm_context(WHO).turns == (make_turn(0), make_turn(2))
        writer.flush(WHO)
        for n in (5, 6, 7):  # as many turns as before, under the same numbers
            writer.add_turn(WHO, make_turn(n))
        assert reader.get_llm_context(WHO).turns == tuple(make_turn(n) for n in (5, 6, 7))
        snap = writer.snapshot(WHO)
        writer.add_turn(WHO, make_turn(8))
        assert len(reader.get_llm_context(WHO).turns) == (4 if strategy == "truncation" else 3)
        writer.restore(WHO, snap)
        assert reader.get_llm_context(WHO).turns == tuple(make_turn(n) for n in (5, 6, 7))

    def test_the_summarizer_runs_outside_write_transactions(self, open_memory, shared_store):
        other = open_memory(store=shared_store)
        finished = []

        class WritingSummarizer(JoiningSummarizer):
            def summarize(self, previous_summary, turns):
                # Another thread writes while the summarizer works: it would wait if a transaction were open.
                writer = threading.Thread(target=other.add_turn, args=(OTHER, make_turn(len(finished), "bob")))
                writer.start()
                writer.join(5)
                finished.append(not writer.is_alive())
                return super().summarize(previous_summary, turns)

        memory = open_memory("rolling_summary", WritingSummarizer(), store=shared_store, recent_turns=1)
        for n in range(3):
            memory.add_turn(WHO, make_turn(n))
        assert finished == [True, True] and memory.get_llm_context(WHO).summary == "0 1"

    def test_none_restores_only_an_empty_snapshot(self, open_memory):
        memory = open_memory("none")
        memory.add_turn(WHO, make_turn(1))
        snap = memory.snapshot(WHO)
        assert snap == Snapshot("none", b"")
        memory.restore(WHO, snap)
        truncation = open_memory()
        truncation.add_turn(WHO, make_turn(1))
        full = Snapshot("none", truncation.snapshot(WHO).data)
        empty = open_memory().snapshot(OTHER)  # an empty snapshot in the encoded form
        memory.restore(WHO, Snapshot("none", empty.data))
        with pytest.raises(InvalidSnapshot, match="none strategy keeps nothing.*1 turn"):
            memory.restore(WHO, full)
        for refused in (truncation.snapshot(WHO), Snapshot("none", b"\xc1garbage"), Snapshot("truncation", b"")):
            with pytest.raises(InvalidSnapshot):
                memory.restore(WHO, refused)

    def test_none_flush_touches_nothing(self, open_memory, shared_store):
        kept = open_memory(store=shared_store)
        kept.add_turn(WHO, make_turn(1))
        none = open_memory("none", store=shared_store)
        assert none.flush(WHO) == [] and none.health(WHO) is Health.HEALTHY
        assert kept.get_llm_context(WHO).turns == (make_turn(1),)

    @pytest.mark.parametrize("reset", ["flush", "restore"])
    def test_resetting_a_degraded_identity_announces_only_allowed_moves(self, open_memory, events, reset):
        summarizer = JoiningSummarizer()
        memory = open_memory("rolling_summary", summarizer, recent_turns=1, retry_attempts=1)
        memory.add_turn(WHO, make_turn(0))
        snap = memory.snapshot(WHO)
        summarizer.down = True
        memory.add_turn(WHO, make_turn(1))
        assert memory.health(WHO) is Health.DEGRADED
        del events[:]
        memory.flush(WHO) if reset == "flush" else memory.restore(WHO, snap)
        moves = [(e.prior, e.new) for e in events if isinstance(e, HealthChanged)]
        assert all(check_transition(prior, new) for prior, new in moves)
        assert moves[0][0] is Health.DEGRADED and moves[-1][1] is Health.HEALTHY
        assert memory.health(WHO) is Health.HEALTHY

    def test_a_summarizer_timeout_is_a_failure(self, open_memory, events):
        summarizer = StallingSummarizer()
        memory = open_memory("rolling_summary", summarizer, recent_turns=1, summarizer_timeout=0.05)
        try:
            memory.add_turn(WHO, make_turn(0))
            started = time.monotonic()
            memory.add_turn(WHO, make_turn(1))
            assert time.monotonic() - started < summarizer.limit / 2
            assert memory.health(WHO) is Health.RETRY
            assert health_moves(events) == [("healthy", "retry", "summarizer_failed")]
            assert memory.get_llm_context(WHO).turns == (make_turn(0), make_turn(1))  # nothing lost meanwhile
        finally:
            summarizer.release.set()

    def test_close_gives_up_on_a_summarizer_in_flight(self, open_memory, shared_store):
        summarizer = StallingSummarizer()
        memory = open_memory("rolling_summary", summarizer, store=shared_store, recent_turns=1)
        memory.add_turn(WHO, make_turn(0))
        writer = threading.Thread(target=memory.add_turn, args=(WHO, make_turn(1)))
        writer.start()
        try:
            assert summarizer.entered.wait(5)
            started = time.monotonic()
            memory.close()
            writer.join(5)
            assert time.monotonic() - started < summarizer.limit / 2 and not writer.is_alive()
        finally:
            summarizer.release.set()
        again = open_memory("rolling_summary", JoiningSummarizer(), store=shared_store, recent_turns=1)
        assert again.health(WHO) is Health.HEALTHY  # a close is not a summarizer failure
        assert again.get_llm_context(WHO).turns == (make_turn(0), make_turn(1))  # the turn was kept
