"""Ingest cost on the shared corpus, as ratios against orgparse and the cold ingest, in one run."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from _common import CORPUS, best_of, corpus_files, report

import orgparse

import cortex.api as cx


def orgparse_alone(files: list[Path]) -> None:
    for path in files:
        orgparse.loadi(path.read_text().split("\n"))


def main() -> None:
    files = corpus_files()
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-"))
    org = work / "org"
    shutil.copytree(CORPUS, org, ignore=shutil.ignore_patterns("oracle", "*.md", "*.sh", "*.py"))
    size = sum(p.stat().st_size for p in org.rglob("*.org"))
    print(f"corpus: {len(files)} files, {size / 1e6:.2f} MB")

    baseline = best_of(lambda: orgparse_alone(files), repeat=2)
    report("orgparse.loadi over the corpus (baseline)", baseline, baseline)

    def cold():
        store = work / "store-cold"
        shutil.rmtree(store, ignore_errors=True)
        with cx.open(store, org) as c:
            c.ingest()

    cold_s = best_of(cold, repeat=2)
    report("cortex cold ingest vs orgparse alone", cold_s, baseline, target="(bar <= 1.5)")

    with cx.open(work / "store-cold", org) as c:
        unchanged = best_of(lambda: c.ingest(), repeat=3)
        report("re-ingest, nothing changed, vs cold ingest", unchanged, cold_s, target="(bar <= 0.05)")

        largest = max(org.rglob("*.org"), key=lambda p: p.stat().st_size)
        original = largest.read_text()
        lines = original.split("\n")
        middle = len(lines) // 2

        def one_line_edit(n: int) -> float:
            """Seconds to re-ingest the file after an edit (saving it, the editor's part, is not timed)."""
            lines[middle] = lines[middle] + f" edited {n}"
            largest.write_text("\n".join(lines))
            start = time.perf_counter()
            c.ingest(largest)
            return time.perf_counter() - start

        # The first edit a process sees parses the file whole (as a one-shot `cortex ingest` does);
        # later ones start from the layout it kept and read only the edited sections.
        first_edit_s = one_line_edit(0)
        edit_s = min(one_line_edit(n) for n in range(1, 8))
        largest.write_text(original)
        c.ingest(largest)

    def cold_single():
        store = work / "store-single"
        shutil.rmtree(store, ignore_errors=True)
        with cx.open(store, org) as single:
            single.ingest(largest)

    single_s = best_of(cold_single, repeat=3)
    print(f"largest file: {largest.relative_to(org)} ({largest.stat().st_size / 1e6:.2f} MB)")
    report("first edit in a process: re-ingest vs cold ingest", first_edit_s, single_s)
    report("one-line edit re-ingest vs cold ingest of that file", edit_s, single_s, target="(bar < 0.05)")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
