"""What safety costs, each against the same work done without it in this run: a write confined to the
Org root vs a plain atomic write, opening a store (shared lock, size check) vs opening its LMDB file,
and scanning an Org folder (links checked, leftovers found) vs listing it with os.walk."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import lmdb
from _common import CORPUS, best_of, report

from cortex.backends import open_store
from cortex.files import write_atomically, write_under
from cortex.scan import scan_folder


def plain_atomic_write(path: Path, data: bytes) -> None:
    """The write without its safety: temporary file, fsync, rename, fsync of the folder (no mode kept, no root
    or link checked, no folder walked)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def walk(folder: Path) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(".org")]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-"))
    root = work / "org"
    target = root / "agents" / "assistant" / "memory.org"
    target.parent.mkdir(parents=True)
    data = b"* Facts\n" + b"- a sentence of ordinary length about something.\n" * 400
    target.write_bytes(data)
    confined = best_of(lambda: [write_under(root, "agents/assistant/memory.org", data) for _ in range(20)], 5)
    plain = best_of(lambda: [plain_atomic_write(target, data) for _ in range(20)], 5)
    report("confined write (20 kB) vs a plain atomic write", confined, plain, target="(about 1)")
    unchecked = best_of(lambda: [write_atomically(target, data) for _ in range(20)], 5)
    report("confined write vs an unconfined one keeping mode and links", confined, unchecked)

    store = work / "store"
    open_store(store).close()
    opened = best_of(lambda: [open_store(store).close() for _ in range(50)], 5)
    raw = best_of(lambda: [lmdb.open(str(store), max_dbs=8).close() for _ in range(50)], 5)
    report("open a store (lock, size check) vs open its LMDB file", opened, raw)

    if CORPUS.is_dir():
        corpus = work / "corpus"
        shutil.copytree(CORPUS, corpus, ignore=shutil.ignore_patterns("oracle"))
        scanned = best_of(lambda: scan_folder(corpus), 5)
        listed = best_of(lambda: walk(corpus), 5)
        report(f"scan the corpus ({len(scan_folder(corpus).paths)} files) vs os.walk", scanned, listed)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
