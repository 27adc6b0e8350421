"""Syncing a working copy against re-ingesting a folder, in one run: a one-headline edit on each side of a
1 MB Org file (one in the copy, one committed to the store meanwhile) merged by `sync`, against a one-line
edit of the same file re-ingested. The merge reads only the headlines that changed, so the bar is 2x.

The bar is measured on a file of 6,000 top-level headlines, the hardest shape for it (a document lists
them all: its every version is 200 KB of oids to encode, compare and store); then, when the corpus is
there, on its largest file, as people write them (1.2 MB, 1,783 headlines under 4 top-level ones).

The two run on two stores, taking turns by blocks of rounds, so that both meet the same load of the
machine and its disk (a disk busy with other work slows each commit's fsync several times over) while
each mostly follows its own kind (right after a sync, a commit's fsync waits for the sync's writes).
Each is timed around the call, as its caller waits for it (a sync's lock on its folder included).

    .venv/bin/python bench/sync.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import CORPUS, report

import cortex.api as cx
from cortex.ingest import commit_files
from cortex.query import render_file

HEADLINES = 6000  # about 1 MB
ROUNDS = int(os.environ.get("ROUNDS", 30))
BLOCK = 5  # rounds of one kind in a row

Edit = Callable[[str, int], str]  # the text after the n-th edit


@dataclass
class Case:
    text: str
    reingested: Edit  # a one-line edit, re-ingested
    mine: Edit  # one headline, in the copy
    theirs: Edit  # another, in the store


def big_file() -> str:
    """An Org file of about 1 MB: top-level headlines with :ID:s and a few lines each."""
    parts = ["#+TITLE: Big\n"]
    for n in range(HEADLINES):
        parts.append(f"* Topic {n}\n:PROPERTIES:\n:ID: topic-{n}\n:END:\n"
                     f"Notes on topic {n}: what was decided, by whom, and what is left to do about it.\n"
                     f"- a point about {n}\n- another point about {n}\n")
    return "".join(parts)


def flat() -> Case:
    """The file of 6,000 top-level headlines; the two sides edit far from either end."""
    def note(text: str, n: int) -> str:
        line = f"Notes on topic {HEADLINES // 2 + n}:"
        return text.replace(line, line.replace(":", " (edited):"))

    def mine(text: str, n: int) -> str:
        return text.replace(f"- a point about {HEADLINES // 3 + n}\n", f"- a point about {HEADLINES // 3 + n}!\n")

    def theirs(text: str, n: int) -> str:
        point = f"- another point about {2 * HEADLINES // 3 - n}"
        return text.replace(point + "\n", point + ", agent\n")

    return Case(big_file(), note, mine, theirs)


def headline_at(fraction: float, mark: str) -> Edit:
    """An edit of the title of the headline that far into the file."""
    def edit(text: str, n: int) -> str:
        lines = text.split("\n")
        headlines = [i for i, line in enumerate(lines) if line.startswith("*")]
        lines[headlines[int(len(headlines) * fraction) + n]] += f" {mark}{n}"
        return "\n".join(lines)

    return edit


def line_at_middle(text: str, n: int) -> str:
    lines = text.split("\n")
    lines[len(lines) // 2] += f" edited {n}"
    return "\n".join(lines)


def measure(case: Case) -> tuple[float, float]:
    """The median seconds of a sync and of a re-ingest, each after its edits."""
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-sync-"))
    try:
        for folder in ("org", "shared"):
            (work / folder).mkdir()
            (work / folder / "big.org").write_text(case.text)
        with cx.open(work / "store", work / "org") as tracked, cx.open(work / "shared-store", work / "shared") as c:
            tracked.ingest()
            c.ingest()
            copy = work / "copy"
            c.checkout(copy)
            reingest, sync = [], []
            for block in range(0, ROUNDS, BLOCK):
                for n in range(block, min(block + BLOCK, ROUNDS)):
                    path = work / "org" / "big.org"
                    path.write_text(case.reingested(path.read_text(), n))
                    start = time.perf_counter()
                    tracked.ingest()
                    reingest.append(time.perf_counter() - start)
                for n in range(block, min(block + BLOCK, ROUNDS)):
                    (copy / "big.org").write_text(case.mine((copy / "big.org").read_text(), n))
                    change = case.theirs(render_file(c.store, c.working(), "big.org"), n).encode()
                    commit_files(c.store, lambda tree: {"big.org": change}, "an agent's edit")
                    start = time.perf_counter()
                    synced = c.sync(copy)
                    sync.append(time.perf_counter() - start)
                    assert synced.merged == ["big.org"] and not synced.conflicts, synced
        return statistics.median(sync), statistics.median(reingest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    sync, reingest = measure(flat())
    print(f"a {len(big_file().encode()) / 1e6:.1f} MB Org file of {HEADLINES:,} top-level headlines; "
          f"median of {ROUNDS} rounds")
    report("sync, one headline edited on each side, vs one-line edit re-ingest", sync * 1e3, reingest * 1e3, "ms",
           target="(bar <= 2)")
    largest = CORPUS / "worg" / "doc.org"
    if largest.exists():
        text = largest.read_text()
        sync, reingest = measure(Case(text, line_at_middle, headline_at(1 / 3, "mine"), headline_at(2 / 3, "theirs")))
        print(f"the corpus's largest file, {largest.relative_to(CORPUS)} ({len(text.encode()) / 1e6:.1f} MB)")
        report("sync, one headline edited on each side, vs one-line edit re-ingest", sync * 1e3, reingest * 1e3, "ms")


if __name__ == "__main__":
    main()
