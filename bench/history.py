"""History costs as ratios measured in one run: snapshot and diff at 10k vs 100k objects, a diff's patch vs
the diff, one headline's history across 100 snapshots at 100k vs 10k, rollback vs a naive deep copy, and cortex vs
git on the shared corpus."""

from __future__ import annotations

import copy
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _common import best_of, corpus_copy, report

import cortex.api as cx


def synthetic(org: Path, headlines: int, per_file: int = 500) -> None:
    """Org files holding `headlines` headlines in all (two levels), each file's first with the :ID: topic-FILE."""
    org.mkdir(parents=True)
    for f in range(headlines // per_file):
        lines = [f"* Topic {f}\n:PROPERTIES:\n:ID: topic-{f}\n:END:\n"]
        for h in range(per_file // 2):
            lines.append(f"* Topic {f}.{h}\n** Note {f}.{h}\nBody text {f} {h} about memory {h % 97}.\n")
        (org / f"file{f:04}.org").write_text("".join(lines))


def store_with(work: Path, headlines: int):
    """A store of `headlines` headlines, its Org folder, and the seconds its cold ingest and first snapshot took."""
    org = work / f"org{headlines}"
    synthetic(org, headlines)
    c = cx.open(work / f"store{headlines}", org)
    start = time.perf_counter()
    c.ingest()
    ingested = time.perf_counter()
    c.snapshot("base")
    return c, org, ingested - start, time.perf_counter() - ingested


def one_edit(c, org: Path, n: int) -> None:
    path = org / "file0000.org"
    path.write_text(path.read_text().replace("Body text 0 7 ", f"Body text 0 7 edit{n} ", 1).replace(
        f"edit{n - 1} ", ""))
    c.ingest(path)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-"))
    small, small_org, _, _ = store_with(work, 10_000)
    large, large_org, ingest_s, first_s = store_with(work, 100_000)
    print(f"objects: {len(small.store.objects):,} vs {len(large.store.objects):,}")
    report("first snapshot of 100k headlines (200 new files) vs their cold ingest", first_s, ingest_s)

    snap_small = best_of(lambda: small.snapshot("s"), repeat=5)
    snap_large = best_of(lambda: large.snapshot("s"), repeat=5)
    report("snapshot at 100k objects vs at 10k", snap_large, snap_small, target="(about 1: O(1))")

    counter = iter(range(1, 1000))
    one_edit(small, small_org, next(counter))
    one_edit(large, large_org, next(counter))
    diff_small = best_of(lambda: small.diff("HEAD", None), repeat=5)
    diff_large = best_of(lambda: large.diff("HEAD", None), repeat=5)
    report("diff after one edit at 100k vs at 10k", diff_large, diff_small, target="(about 1: O(changed))")
    patched = best_of(lambda: large.patch(large.diff("HEAD", None)), repeat=5)
    report("diff --patch after one edit at 100k vs the diff alone", patched, diff_large,
           target="(about 1: the text of what changed only)")

    for c, org in ((small, small_org), (large, large_org)):  # 100 snapshots, each after one file's edit
        for _ in range(100):
            one_edit(c, org, next(counter))
            c.workspace.snapshot("one edit")
    last = f"topic-{100_000 // 500 - 1}", f"topic-{10_000 // 500 - 1}"  # in the last file (by path) of each
    history_large = best_of(lambda: large.history(last[0]), repeat=3)
    history_small = best_of(lambda: small.history(last[1]), repeat=3)
    report("one headline's history across 100 snapshots at 100k vs at 10k", history_large, history_small,
           target="(about 1: only the files each snapshot changed are read)")

    large.snapshot("edited")
    objects = {oid: large.store.objects.raw(oid) for oid in large.store.objects}
    naive = best_of(lambda: copy.deepcopy(objects), repeat=2)
    rollback = best_of(lambda: (large.rollback("HEAD~1", force=True), large.rollback("HEAD@{1}", force=True)),
                       repeat=2) / 2
    report("rollback at 100k vs deep copy of the object map", rollback, naive)
    small.close()
    large.close()

    corpus = work / "corpus"
    corpus_copy(corpus)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-C", str(corpus)]
    subprocess.run(["git", "init", "-q", str(corpus)], check=True)

    def git_commit():
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", "state", "--allow-empty"], check=True)

    started = time.perf_counter()
    git_commit()
    git_s = time.perf_counter() - started
    started = time.perf_counter()
    with cx.open(work / "corpus-store", corpus) as c:
        c.ingest()
        c.snapshot("state")
        cortex_s = time.perf_counter() - started
        report("cortex ingest + snapshot vs git add -A && git commit", cortex_s, git_s)
        largest = max(corpus.rglob("*.org"), key=lambda p: p.stat().st_size)
        largest.write_text(largest.read_text().replace("\n", " edited\n", 1))
        git_diff = best_of(lambda: subprocess.run(git + ["diff", "--stat"], check=True, capture_output=True),
                           repeat=3)
        c.ingest(largest)
        cortex_diff = best_of(lambda: c.diff("HEAD", None), repeat=3)
        report("cortex diff vs git diff --stat after a one-line edit", cortex_diff, git_diff)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
