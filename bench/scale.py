"""cortex at scale: a made-up team's memory of N headlines (bench/scale_corpus.py), each figure against a baseline
measured on the same data in the same run, and the targets at the largest N.

    .venv/bin/python bench/scale.py 100000 1000000
    SCALE_SKIP=orgparse,history,query,search .venv/bin/python bench/scale.py 1000000   (those steps left out)

Each N runs in a process of its own (a fresh heap); its steps, in order:
  cold ingest vs orgparse over the same files; a one-line edit re-ingested vs the cold ingest; snapshot and diff
  (compared across the sizes: O(1) and O(changed)); Org queries p50/p95 (indexed predicates and match strings)
  vs a scan; hybrid search p50/p95 vs the sum of its parts (query embedding + keyword alone + vector alone);
  memory add vs the same add on a store of one agent; sync of a one-headline edit vs its one-file re-ingest;
  gc with 1,000 snapshots (one in ten after an edit); the REPL's prompt on the store vs `hy -c 1`.
Peak RSS of a step: the process's VmHWM, reset (/proc/self/clear_refs) before the step once what earlier steps
left is let go: a full gc.collect(), glibc's malloc_trim(0) (free heap pages back to the system), and the pages
of read-only shared file mappings (the store's LMDB file, saved indexes) dropped from the process (madvise
MADV_DONTNEED: they stay in the page cache, and a read maps them again). So it is the step's own peak, plus what
the session holds for good at that point (the store's handle, its object cache, the ingest's stat cache), and it
counts the pages of the store the step reads. Its private part (RssAnon: heap, arrays, indexes; not file pages,
which the kernel takes back when memory runs short) is sampled every SAMPLE seconds, the kernel keeping no peak of
it. A session's derived indexes are dropped once their steps are done (the query index after the query steps, the
search index after the search step), as a session that never asks does not build them. The query scan's
baseline (a second, fresh query index) runs in a process of its own: its time is a figure, its memory no step's.

The search index is built with the feature-hashing embedder at 384 dimensions (MiniLM's), not MiniLM: embedding
a million texts with MiniLM on two cores takes hours. Queries are embedded by MiniLM, as a user's are.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from _common import best_of, percentiles

TARGETS = {  # figure -> (bound, unit, what it is compared with)
    "query p50": (5.0, "ms", "at most"),
    "hybrid search p50": (20.0, "ms", "at most"),
    "memory add": (20.0, "ms", "at most"),
    "REPL prompt / hy -c 1": (0.5, "x", "at most"),
    "snapshot / the smallest N's": (1.1, "x", "at most"),
    "peak RSS of any step": (4096.0, "MiB", "at most"),
    "peak private RSS of any step": (4096.0, "MiB", "at most"),
}
NOW = datetime(2026, 11, 23, 12, 0)
SEARCHES = [f"{a} {b} {c}" for a, b, c in zip(
    "deploy staging rollout incident budget invoice latency schema token owner".split() * 3,
    "cluster release database backup retry queue cache index design review".split() * 3,
    "train limit migration customer meeting token owner rollout queue cache".split()[::-1] * 3)]
RUNS = 20
SAMPLE = 0.05  # seconds between samples of a step's private RSS
SKIPPED = set(filter(None, os.environ.get("SCALE_SKIP", "").split(",")))  # steps left out of the run
LIBC = ctypes.CDLL(None)
MALLOC_TRIM = getattr(LIBC, "malloc_trim", None)  # glibc's: free heap pages back to the system
MADV_DONTNEED = 4  # madvise: drop these pages from the process (a shared file's stay in the page cache)


# --- measuring -------------------------------------------------------------------------------

def release() -> None:
    """Free what is no longer referenced, give the heap's free pages back to the system (glibc), and unmap the
    pages of read-only shared file mappings (the store's LMDB file, saved indexes) from this process, so that a
    peak measured next starts from what is held, not from what earlier steps once needed or read. Unmapped pages
    stay in the page cache: the next read maps them again."""
    gc.collect()
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, perms, *rest = line.split(maxsplit=5)
        if perms == "r--s" and len(rest) == 4:  # offset, device, inode, path: a file shared read-only
            start, end = (int(n, 16) for n in span.split("-"))
            LIBC.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), MADV_DONTNEED)


def reset_peak() -> None:
    """Start a new peak RSS (Linux: VmHWM falls back to the present RSS)."""
    Path("/proc/self/clear_refs").write_text("5")


def status(field: str) -> float:
    """A size from /proc/self/status (VmHWM, RssAnon), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class PrivatePeak(threading.Thread):
    """The largest private RSS (RssAnon: the heap, arrays, indexes; not the pages of mapped files) seen while a step
    runs, sampled every SAMPLE seconds, as the kernel keeps no high-water mark of it."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self._done = 0.0, threading.Event()
        self.start()

    def run(self) -> None:
        while not self._done.wait(SAMPLE):
            self.peak = max(self.peak, status("RssAnon"))

    def stop(self) -> float:
        self._done.set()
        self.join()
        return max(self.peak, status("RssAnon"))


class Figures(dict):
    """Figures of one size, each printed as it is measured: name -> (value, unit, baseline name, baseline)."""

    def step(self, name: str, fn):
        """Run one step, keeping its wall time, peak RSS and peak private RSS."""
        release()
        reset_peak()
        private = PrivatePeak()
        started = time.perf_counter()
        result = fn()
        took, private = time.perf_counter() - started, private.stop()
        self[f"{name}: peak RSS"] = (status("VmHWM"), "MiB", "", 0.0)
        self[f"{name}: peak private RSS"] = (private, "MiB", "", 0.0)
        print(f"  [{name}: {took:.1f} s, peak RSS {status('VmHWM'):,.0f} MiB, private {private:,.0f} MiB]",
              flush=True)
        return result

    def add(self, name: str, value: float, unit: str, baseline_name: str = "", baseline: float = 0.0) -> None:
        self[name] = (value, unit, baseline_name, baseline)
        ratio = f"  ratio {value / baseline:8.3f} vs {baseline_name} ({baseline:.4g} {unit})" if baseline else ""
        print(f"  {name:44} {value:12.4f} {unit:3}{ratio}", flush=True)


def median_ms(fn, arguments) -> tuple[float, float]:
    """p50 and p95 in ms of `fn(argument)` over the arguments."""
    times = []
    for argument in arguments:
        started = time.perf_counter()
        fn(argument)
        times.append(time.perf_counter() - started)
    return percentiles(times)


def edit_line(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new, 1))


# --- the steps -------------------------------------------------------------------------------

def ingest_steps(f: Figures, corpus, store: Path):
    """Orgparse over every file (the baseline), the cold ingest, a one-line edit re-ingested."""
    import orgparse

    import cortex.api as cx

    files, orgparse_s = sorted(corpus.root.rglob("*.org")), 0.0
    if "orgparse" not in SKIPPED:
        orgparse_s = f.step("orgparse", lambda: best_of(
            lambda: [orgparse.loadi(p.read_text().split("\n")) for p in files], repeat=1))
        f.add("orgparse over every file", orgparse_s, "s")
    c = cx.open(store, corpus.root)
    cold = f.step("cold ingest", lambda: best_of(c.ingest, repeat=1))
    f.add("cold ingest", cold, "s", "orgparse", orgparse_s)
    f.add("re-ingest, nothing changed", f.step("unchanged re-ingest", lambda: best_of(c.ingest, repeat=1)), "s",
          "cold ingest", cold)

    def one_line_edit(n: int) -> None:
        edit_line(corpus.note, "Some text of the entry", f"Some edited ({n}) text of the entry")
        c.ingest(corpus.note)

    edits = f.step("one-line edit", lambda: [best_of(lambda n=n: one_line_edit(n), repeat=1) for n in range(5)])
    f.add("one-line edit re-ingest (median of 5)", statistics.median(edits), "s", "cold ingest", cold)
    return c, cold


def history_steps(f: Figures, c, corpus) -> None:
    """Snapshot (the store's: one small object and a ref move; then as the CLI takes it, the Org folder synced
    first), then diff after a one-line edit (compared across the sizes by the parent)."""
    c.snapshot("base")
    f.add("snapshot", f.step("snapshot", lambda: best_of(lambda: c.workspace.snapshot("s"), repeat=5)) * 1e3, "ms")
    unchanged = best_of(c.ingest, repeat=1)
    f.add("snapshot with the Org folder synced first", best_of(lambda: c.snapshot("s"), repeat=3), "s",
          "an unchanged re-ingest", unchanged)
    edit_line(corpus.note, "Some text of the entry", "Some text, edited for the diff, of the entry")
    c.ingest(corpus.note)
    f.add("diff after a one-line edit", f.step("diff", lambda: best_of(lambda: c.diff("HEAD", None), repeat=5))
          * 1e3, "ms")

    def edited_snapshot(n: int) -> float:
        edit_line(corpus.note, "Some text of the entry", f"Some text of the entry ({n})")
        c.ingest(corpus.note)
        started = time.perf_counter()
        c.workspace.snapshot(f"edit {n}")
        return time.perf_counter() - started

    f.add("snapshot after a one-line edit (median of 5)", statistics.median(map(edited_snapshot, range(5))) * 1e3,
          "ms")


def query_steps(f: Figures, c, corpus) -> None:
    """Org queries through the api (p50/p95 over RUNS each) vs a scan: a fresh index walking every headline."""
    from query import QUERIES

    f.add("query index build (first query)", f.step("query index", lambda: best_of(
        lambda: c.query(QUERIES[0]), repeat=1)), "s")
    scan_s = scan_elsewhere(c.location, c.root)
    print(f"  [query scan, in a process of its own: {scan_s:.1f} s]", flush=True)
    for q in QUERIES:
        c.query(q)  # its postings collected
    p50s, p95s = [], []
    for q in QUERIES:
        p50, p95 = median_ms(c.query, [q] * RUNS)
        p50s.append(p50)
        p95s.append(p95)
    f.add("query p50 (median over the queries)", statistics.median(p50s), "ms", "a scan", scan_s * 1e3)
    f.add("query p50, slowest query", max(p50s), "ms", "a scan", scan_s * 1e3)
    f.add("query p95, slowest query", max(p95s), "ms", "a scan", scan_s * 1e3)
    c.__dict__.pop("_query_indexes")  # the steps after it measure their own memory, not the index's


def scan_elsewhere(store: Path, root: Path) -> float:
    """Seconds a fresh query index takes to walk every headline for the first query, in a process of its own
    (a second index beside the session's would be the largest figure of the run, and no step's)."""
    done = subprocess.run([sys.executable, __file__, "--scan", str(store), str(root)], capture_output=True,
                          text=True, check=True)
    return float(done.stdout)


def scan(store: Path, root: Path) -> float:
    """The baseline of `scan_elsewhere`, in this process."""
    from query import QUERIES

    import cortex.api as cx
    from cortex.orgquery import Index, parse_query

    with cx.open(store, root, read_only=True) as c:
        tree, predicate = c.working(), parse_query(QUERIES[0])

        def fresh() -> None:
            index = Index(c.store)
            index.follow(tree)
            index.nodes(predicate)

        return best_of(fresh, repeat=2)  # the second over the object cache the first filled, as in the session


def hashing_build_embedder() -> None:
    """Build vectors with the feature-hashing embedder at MiniLM's 384 dimensions (see the module)."""
    import cortex.search.embeddings as embeddings
    from cortex.search.embedders import HashingEmbedder

    build = HashingEmbedder(384)
    embeddings.shared_embedder = lambda: build


def search_steps(f: Figures, c) -> None:
    """The index build, then hybrid search p50/p95 vs the sum of its parts, queries embedded by MiniLM."""
    from cortex.search.embedders import default_embedder
    from cortex.search.index import QueryVectors

    build = f.step("search build", lambda: best_of(c.build_search, repeat=1))
    index = c._search_index
    f.add(f"search index build ({len(index.items):,} items)", build, "s")
    minilm = default_embedder()
    minilm.embed(["warm up"])
    index.queries = QueryVectors(minilm)
    hybrid = f.step("hybrid search", lambda: median_ms(c.search, SEARCHES))
    embedding = median_ms(lambda q: minilm.embed([q + " again"]), SEARCHES)
    keyword = median_ms(lambda q: index.keyword.search(q, 10), SEARCHES)
    vectors = [minilm.embed([q])[0] for q in SEARCHES]
    vector = median_ms(lambda v: index.vector.search(v, 10), vectors)
    parts = [e + k + v for e, k, v in zip(embedding, keyword, vector)]
    f.add("hybrid search p50", hybrid[0], "ms", "its parts", parts[0])
    f.add("hybrid search p95", hybrid[1], "ms", "its parts", parts[1])
    f.add("  query embedding (MiniLM) p50", embedding[0], "ms")
    f.add("  keyword alone p50", keyword[0], "ms")
    f.add("  vector alone p50", vector[0], "ms")
    index.stop_building()
    del c.__dict__["_search_index"], index  # the steps after it measure their own memory, not the index's
    gc.collect()


def memory_steps(f: Figures, c, work: Path) -> None:
    """A fact added to one agent (median of 15) vs the same add on a store holding that one agent alone."""
    import cortex.api as cx

    agent = "agent-50"
    adds = f.step("memory add", lambda: median_ms(
        lambda n: c.memory.add_item(agent, "fact", f"Scale fact {n}, a sentence of ordinary length.", now=NOW),
        range(15)))
    (work / "small" / "agents").mkdir(parents=True)
    shutil.copytree(c.root / "agents" / agent, work / "small" / "agents" / agent)
    with cx.open(work / "small-store", work / "small") as small:
        small.ingest()
        alone = median_ms(lambda n: small.memory.add_item(agent, "fact", f"Small fact {n}, ordinary.", now=NOW),
                          range(15))
    f.add("memory add", adds[0], "ms", "a store of that agent alone", alone[0])


def sync_steps(f: Figures, c, corpus) -> None:
    """A one-headline edit synced (the Org root: every file looked at) vs the same edit re-ingested by its file."""
    def edited(n: int, sync: bool) -> float:
        edit_line(corpus.note, "Some text of the entry", f"Some text of the entry, synced {n}")
        started = time.perf_counter()
        c.sync() if sync else c.ingest(corpus.note)
        return time.perf_counter() - started

    synced = f.step("sync", lambda: statistics.median(edited(n, True) for n in range(3)))
    alone = statistics.median(edited(n, False) for n in range(3, 6))
    f.add("sync of a one-headline edit", synced, "s", "its file re-ingested", alone)


def gc_steps(f: Figures, c, corpus) -> None:
    """1,000 snapshots, one in ten after a one-line edit of a daily log, then gc keeping the newest 20. A store's
    first snapshot counts every headline (later ones count what differs from HEAD's), so one is made first, untimed,
    as the history steps do when they run."""
    c.workspace.snapshot("before the edits")
    started = time.perf_counter()
    edit_line(corpus.log, "\n", "\nEdit 0.\n")
    for n in range(1, 1001):
        if n % 10 == 0:
            edit_line(corpus.log, f"Edit {n - 10}.", f"Edit {n}.")
            c.ingest(corpus.log)
        c.workspace.snapshot(f"edit {n}")
    made = time.perf_counter() - started
    f.add("1,000 snapshots made (100 edits)", made, "s")
    dropped = f.step("gc", lambda: best_of(lambda: c.gc(keep_last=20), repeat=1))
    f.add("gc after 1,000 snapshots (keep 20)", dropped, "s", "making them", made)


def repl_steps(f: Figures, store: Path, root: Path) -> None:
    """The REPL's prompt drawn on the store (median of 3) vs `hy -c 1`, interleaved. The REPL is started from a
    small process of its own: `pty.fork` from this one, which holds gigabytes by now, would time the copy of its
    page tables (0.2 s at 1M), not the REPL."""
    from startup import BIN, timed

    prompts, baseline = [], []
    measure = ("import json, sys; from pathlib import Path; from startup import interactive; "
               "print(json.dumps(interactive(Path(sys.argv[1]), Path(sys.argv[2]))))")
    for _ in range(3):
        baseline.append(timed([str(BIN / "hy"), "-c", "1"]))
        done = subprocess.run([sys.executable, "-c", measure, str(store), str(root)], capture_output=True, text=True,
                              cwd=Path(__file__).parent)
        if done.returncode != 0:  # e.g. its start-up ingest took longer than the 30 s it is given
            print(f"  the REPL: {done.stderr.strip()[-200:]}")
            return
        prompts.append(json.loads(done.stdout)[0])
    f.add("REPL prompt drawn", statistics.median(prompts), "s", "hy -c 1", statistics.median(baseline))


def measure(size: int, out: Path) -> None:
    """Every step at one size, the figures written to `out` as JSON."""
    from scale_corpus import generate

    import cortex.api as cx

    hashing_build_embedder()
    work = Path(tempfile.mkdtemp(prefix=f"cortex-scale-{size}-"))
    f = Figures()
    try:
        started = time.perf_counter()
        corpus = generate(work / "org", size)
        mb = sum(p.stat().st_size for p in corpus.root.rglob("*.org")) / 1e6
        print(f"N={size:,}: {corpus.headlines:,} headlines in {corpus.files:,} files, {mb:,.0f} MB, "
              f"written in {time.perf_counter() - started:.0f} s", flush=True)
        c, _ = ingest_steps(f, corpus, work / "store")
        for name, steps in (("history", history_steps), ("query", query_steps)):
            if name not in SKIPPED:
                steps(f, c, corpus)
        memory_steps(f, c, work)
        sync_steps(f, c, corpus)
        gc_steps(f, c, corpus)
        c.close()
        del c  # its caches go before the steps after it
        repl_steps(f, work / "store", corpus.root)
        if "search" not in SKIPPED:
            with cx.open(work / "store", corpus.root) as c:  # last: at 1M the longest step by far
                search_steps(f, c)
    finally:
        out.write_text(json.dumps(f))
        shutil.rmtree(work, ignore_errors=True)


# --- the run ------------------------------------------------------------------------------------

def checks(sizes: list[int], figures: dict[int, dict]) -> list[tuple[str, float, str]]:
    """The targeted figures at the largest size: (name, value, unit)."""
    big, small = figures[sizes[-1]], figures[sizes[0]]

    def value(name: str, at=big) -> float:
        return at.get(name, (float("nan"),))[0]

    return [
        ("query p50", value("query p50 (median over the queries)"), "ms"),
        ("hybrid search p50", value("hybrid search p50"), "ms"),
        ("memory add", value("memory add"), "ms"),
        ("REPL prompt / hy -c 1", value("REPL prompt drawn") / big.get("REPL prompt drawn", (0, 0, 0, 1))[3], "x"),
        ("snapshot / the smallest N's", value("snapshot") / value("snapshot", small), "x"),
        ("peak RSS of any step", max((v[0] for k, v in big.items() if k.endswith(": peak RSS")), default=0), "MiB"),
        ("peak private RSS of any step",
         max((v[0] for k, v in big.items() if k.endswith(": peak private RSS")), default=0), "MiB"),
    ]


def table(sizes: list[int], figures: dict[int, dict]) -> None:
    """Every figure at every size, then each target MET or MISSED at the largest."""
    names = list(dict.fromkeys(name for f in figures.values() for name in f))
    print(f"\n{'figure':46}" + "".join(f"{size:>16,}" for size in sizes) + "   unit  (ratio at the largest)")
    for name in names:
        cells = "".join(f"{figures[s][name][0]:16.4g}" if name in figures[s] else f"{'-':>16}" for s in sizes)
        value, unit, against, baseline = figures[sizes[-1]].get(name, (0, "", "", 0))
        ratio = f"   ({value / baseline:.3g}x {against})" if baseline else ""
        print(f"{name:46}{cells}   {unit}{ratio}")
    print(f"\ntargets at N={sizes[-1]:,}")
    for name, value, unit in checks(sizes, figures):
        bound = TARGETS[name][0]
        verdict = "MET" if value <= bound else "MISSED" if value == value else "not measured"
        print(f"  {name:32} {value:10.3f} {unit:4} target <= {bound:g} {unit:4} {verdict}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        return measure(int(argv[1]), Path(argv[2]))
    if argv[:1] == ["--scan"]:
        return print(scan(Path(argv[1]), Path(argv[2])))
    sizes = sorted(int(float(a)) for a in argv) or [100_000]
    figures, started = {}, time.perf_counter()
    for size in sizes:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            begun = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--one", str(size), out.name])
            figures[size] = json.loads(Path(out.name).read_text() or "{}")
            print(f"N={size:,} took {(time.perf_counter() - begun) / 60:.1f} min", flush=True)
    table(sizes, figures)
    print(f"\nthe whole run took {(time.perf_counter() - started) / 60:.1f} min")


if __name__ == "__main__":
    main(sys.argv[1:])
