"""Conversation memory on LMDB: add_turn throughput by identity count, context latency by history length.

    .venv/bin/python bench/conversation.py [--turns 1000] [--history 10000]

Baselines are measured in the same run: a bare one-key LMDB commit for add_turn, and
an identity with 10 turns for get_llm_context (the target ratio is about 1: the
context costs the window, not the history).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
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


def context_latency(memory, identity: Identity, calls: int = 300) -> float:
    """Median get_llm_context latency in microseconds."""
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        memory.get_llm_context(identity)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def filled(memory, identity: Identity, turns: int, config: MemoryConfig, deps: Deps) -> None:
    """Give `identity` `turns` turns: built in memory, moved over as one snapshot (one LMDB transaction)."""
    with open_memory(replace(config, driver="memory", path=None), deps) as scratch:
        for n in range(turns):
            scratch.add_turn(identity, make_turn(n))
        memory.restore(identity, scratch.snapshot(identity))


def main() -> None:
    """Run both measurements and print figures with their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1000, help="add_turn calls per identity count")
    parser.add_argument("--history", type=int, default=10_000, help="turns stored for the long identity")
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
            with open_memory(replace(config, path=str(root / config.strategy)), deps) as memory:
                filled(memory, long, args.history, config, deps)
                filled(memory, short, 10, config, deps)
                window = len(memory.get_llm_context(long).turns)
                slow, fast = context_latency(memory, long), context_latency(memory, short)
            report(f"get_llm_context {config.strategy}, 10 turns (baseline)", fast, fast, "us")
            report(f"get_llm_context {config.strategy}, {args.history} turns, window {window}", slow, fast, "us",
                   "target ~1")

if __name__ == "__main__":
    main()
