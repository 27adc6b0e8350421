"""Syncing a working copy against re-ingesting a folder, in one run: a one-headline edit on each side of a
1 MB Org file (one in the copy, one committed to the store meanwhile) merged by `sync`, against a one-line
edit of the same file re-ingested. The merge reads only the headlines that changed, so the bar is 2x.

    .venv/bin/python bench/sync.py
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path

from _common import report

import cortex.api as cx
from cortex.ingest import commit_files
from cortex.query import render_file

HEADLINES = 6000  # about 1 MB
ROUNDS = int(__import__("os").environ.get("ROUNDS", 15))


def big_file() -> str:
    """An Org file of about 1 MB: top-level headlines with :ID:s and a few lines each."""
    parts = ["#+TITLE: Big\n"]
    for n in range(HEADLINES):
        parts.append(f"* Topic {n}\n:PROPERTIES:\n:ID: topic-{n}\n:END:\n"
                     f"Notes on topic {n}: what was decided, by whom, and what is left to do about it.\n"
                     f"- a point about {n}\n- another point about {n}\n")
    return "".join(parts)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-sync-"))
    try:
        (work / "org").mkdir()
        (work / "org" / "big.org").write_text(big_file())
        with cx.open(work / "store", work / "org") as c:
            c.ingest()
            target = work / "org" / "big.org"
            reingest = []
            for n in range(ROUNDS):
                target.write_text(target.read_text().replace(f"Notes on topic {n}:", f"Notes on topic {n} (edited):"))
                reingest.append(c.ingest().seconds)
            copy = work / "copy"
            c.checkout(copy)
            sync = []
            for n in range(ROUNDS):
                mine, theirs = 100 + n, HEADLINES - 100 - n
                path = copy / "big.org"
                path.write_text(path.read_text().replace(f"- a point about {mine}\n", f"- a point about {mine}!\n"))

                def store_side(tree, theirs=theirs):
                    text = render_file(c.store, tree, "big.org")
                    return {"big.org": text.replace(f"- another point about {theirs}\n",
                                                    f"- another point about {theirs}, from an agent\n").encode()}

                commit_files(c.store, store_side, "an agent's edit")
                report_ = c.sync(copy)
                assert report_.merged == ["big.org"] and not report_.conflicts, report_
                sync.append(report_.seconds)
        size = len(big_file().encode()) / 1e6
        print(f"a {size:.1f} MB Org file of {HEADLINES:,} headlines; median of {ROUNDS} rounds")
        report("sync, one headline edited on each side, vs one-line edit re-ingest",
               statistics.median(sync) * 1e3, statistics.median(reingest) * 1e3, "ms", target="(bar <= 2)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
