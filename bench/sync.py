"""Syncing a working copy against re-ingesting a folder, in one run: a one-headline edit on each side of a
1 MB Org file (one in the copy, one committed to the store meanwhile) merged by `sync`, against a one-line
edit of the same file re-ingested. The merge reads only the headlines that changed, so the bar is 2x.

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
from pathlib import Path

from _common import report

import cortex.api as cx
from cortex.ingest import commit_files
from cortex.query import render_file

HEADLINES = 6000  # about 1 MB
ROUNDS = int(os.environ.get("ROUNDS", 30))
BLOCK = 5  # rounds of one kind in a row


def big_file() -> str:
    """An Org file of about 1 MB: top-level headlines with :ID:s and a few lines each."""
    parts = ["#+TITLE: Big\n"]
    for n in range(HEADLINES):
        parts.append(f"* Topic {n}\n:PROPERTIES:\n:ID: topic-{n}\n:END:\n"
                     f"Notes on topic {n}: what was decided, by whom, and what is left to do about it.\n"
                     f"- a point about {n}\n- another point about {n}\n")
    return "".join(parts)


def edit(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new))


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-sync-"))
    try:
        for folder in ("org", "shared"):
            (work / folder).mkdir()
            (work / folder / "big.org").write_text(big_file())
        with cx.open(work / "store", work / "org") as tracked, cx.open(work / "shared-store", work / "shared") as c:
            tracked.ingest()
            c.ingest()
            copy = work / "copy"
            c.checkout(copy)
            reingest, sync = [], []
            for block in range(0, ROUNDS, BLOCK):
                for n in range(block, min(block + BLOCK, ROUNDS)):
                    line = f"Notes on topic {HEADLINES // 2 + n}:"
                    edit(work / "org" / "big.org", line, line.replace(":", " (edited):"))
                    start = time.perf_counter()
                    tracked.ingest()
                    reingest.append(time.perf_counter() - start)
                for n in range(block, min(block + BLOCK, ROUNDS)):
                    mine, theirs = HEADLINES // 3 + n, 2 * HEADLINES // 3 - n  # far from either end
                    edit(copy / "big.org", f"- a point about {mine}\n", f"- a point about {mine}!\n")
                    text = render_file(c.store, c.working(), "big.org")
                    change = text.replace(f"- another point about {theirs}\n",
                                          f"- another point about {theirs}, agent\n")
                    commit_files(c.store, lambda tree: {"big.org": change.encode()}, "an agent's edit")
                    start = time.perf_counter()
                    synced = c.sync(copy)
                    sync.append(time.perf_counter() - start)
                    assert synced.merged == ["big.org"] and not synced.conflicts, synced
        size = len(big_file().encode()) / 1e6
        print(f"a {size:.1f} MB Org file of {HEADLINES:,} headlines; median of {ROUNDS} rounds")
        report("sync, one headline edited on each side, vs one-line edit re-ingest",
               statistics.median(sync) * 1e3, statistics.median(reingest) * 1e3, "ms", target="(bar <= 2)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
