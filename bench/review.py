"""Writes under review, in one run against baselines measured alike: a fact added under review (kept as a
proposal) against the same add written directly, with an Org folder and without one; accepting a one-headline
proposal on a 1 MB Org file against a sync bringing the same change from a working copy; listing 1,000 pending
proposals (the bar: 50 ms), and the same among 10,000 decided ones.

Each pair runs on two stores, taking turns by blocks of rounds, so that both meet the same load of the machine.

    .venv/bin/python bench/review.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

from _common import best_of, examples_copy, report

import cortex.api as cx
from cortex import org
from cortex.history import proposals
from cortex.memory.agents import MemoryContext
from cortex.objects import Tree

NOW = datetime(2026, 11, 21, 10, 0)
ROUNDS = int(os.environ.get("ROUNDS", 30))
BLOCK = 5  # rounds of one kind in a row
HEADLINES = 6000  # about 1 MB
PENDING = 1000


def opened(work: Path, name: str, folder: bool, review: bool) -> cx.Cortex:
    """A store (with a copy of the examples as its Org folder, or none) whose agent holds 100 facts."""
    root = examples_copy(work / f"org-{name}") if folder else None
    with cx.open(work / f"store-{name}", root, folder=folder) as c:
        if folder:
            c.ingest()
        c.memory.save_context("agent", MemoryContext(facts=[
            f"Fact {n}: a sentence of ordinary length about something." for n in range(100)]), now=NOW)
    return cx.open(work / f"store-{name}", root, folder=folder, review=review)


def adds(work: Path, folder: bool) -> tuple[float, float]:
    """The median seconds of adding a fact under review, and directly, into a memory of 100 facts."""
    handles = {review: opened(work, f"adds-{folder}-{review}", folder, review) for review in (True, False)}
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        for block in range(0, ROUNDS, BLOCK):
            for review, c in handles.items():
                for n in range(block, min(block + BLOCK, ROUNDS)):
                    start = time.perf_counter()
                    c.memory.add_item("agent", "fact", f"Fact {n} added now, a sentence of ordinary length.", now=NOW)
                    times[review].append(time.perf_counter() - start)
        assert len(handles[True].proposals()) == ROUNDS and handles[False].proposals() == []
        return statistics.median(times[True]), statistics.median(times[False])
    finally:
        for c in handles.values():
            c.close()


def big_file() -> str:
    """An Org file of about 1 MB: top-level headlines with :ID:s and a few lines each."""
    return "#+TITLE: Big\n" + "".join(
        f"* Topic {n}\n:PROPERTIES:\n:ID: topic-{n}\n:END:\nNotes on topic {n}: what was decided, by whom, and what "
        f"is left to do about it.\n- a point about {n}\n- another point about {n}\n" for n in range(HEADLINES))


def edited(text: str, n: int) -> str:
    """The file with the n-th round's one-headline edit."""
    point = f"- a point about {HEADLINES // 3 + n}\n"
    return text.replace(point, point.replace("\n", f" (round {n})\n"))


def accepts(work: Path) -> tuple[float, float]:
    """The median seconds of accepting a one-headline proposal on a 1 MB file, and of a sync that brings the same
    edit from a working copy; neither store changed meanwhile."""
    text = big_file()
    for name in ("accept", "sync"):
        (work / name).mkdir()
    with cx.open(work / "accept-store", folder=False, review=True) as reviewed, \
            cx.open(work / "sync-store", work / "sync") as synced:
        reviewed.workspace.change_files("seed", {"big.org": lambda current: text.encode()})
        (work / "sync" / "big.org").write_text(text)
        synced.ingest()
        synced.checkout(work / "copy")
        copy = work / "copy" / "big.org"
        accept, sync = [], []
        for block in range(0, ROUNDS, BLOCK):
            for n in range(block, min(block + BLOCK, ROUNDS)):
                change = edited(reviewed.show("big.org"), n).encode()
                made = reviewed.memory.workspace.change_files("an edit", {"big.org": lambda current: change}).proposal
                start = time.perf_counter()
                done = reviewed.accept_proposal(made.id)
                accept.append(time.perf_counter() - start)
                assert done.paths == ["big.org"] and not done.conflicts
            for n in range(block, min(block + BLOCK, ROUNDS)):
                copy.write_text(edited(copy.read_text(), n))
                start = time.perf_counter()
                report_ = synced.sync(work / "copy")
                sync.append(time.perf_counter() - start)
                assert report_.sent == ["big.org"] and not report_.conflicts
        return statistics.median(accept), statistics.median(sync)


def listing(work: Path) -> tuple[float, float]:
    """The best seconds of listing 1,000 pending proposals, alone and among 10,000 decided ones."""
    with cx.open(work / "list-store", folder=False) as c:
        base = c.working()

        def propose(n: int):
            parsed = org.parse(f"* Fact {n}\nA proposed fact.\n")
            tree = Tree({**base.entries, f"agents/agent-{n % 10}/memory.org": parsed.document.oid})
            return proposals.propose(c.store, base, tree, agent=f"agent-{n % 10}", message="saved the memory",
                                     operation="add", objects=parsed.objects)

        for n in range(PENDING):
            propose(n)
        alone = best_of(lambda: c.proposals(), repeat=5)
        assert len(c.proposals()) == PENDING
        for n in range(PENDING, 11 * PENDING):
            proposals.reject(c.store, propose(n).id, "not now")
        among = best_of(lambda: c.proposals(), repeat=5)
        return alone, among


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-review-"))
    try:
        print(f"median of {ROUNDS} rounds")
        for folder in (True, False):
            reviewed, direct = adds(work, folder)
            where = "with an Org folder" if folder else "with no Org folder"
            report(f"a fact added under review vs directly, {where}", reviewed * 1e3, direct * 1e3, "ms",
                   target="(bar <= 1.3)")
        accept, sync = accepts(work)
        report("accepting a one-headline proposal on 1 MB vs its sync", accept * 1e3, sync * 1e3, "ms",
               target="(bar <= 1.2)")
        alone, among = listing(work)
        report(f"listing {PENDING:,} pending proposals vs the 50 ms bar", alone * 1e3, 50, "ms", target="(bar <= 1)")
        report(f"the same among {10 * PENDING:,} decided ones vs alone", among * 1e3, alone * 1e3, "ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
