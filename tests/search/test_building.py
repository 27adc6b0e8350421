"""Searches never wait for a whole index build: they answer by the vectors there are and by words, say what
is missing, and vectors are built in batches (by a budgeted search, `cortex ingest`, or a background thread)
that an interruption never loses."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import cortex.api as cx
from cortex.search import HashingEmbedder
from cortex.search.embedders import CachedEmbedder
from cortex.search.building import BATCH
from cortex.search.embeddings import EMBEDDINGS, cached_embedder
from cortex.search.index import QUERIES_KEPT, QueryVectors, SearchIndex
from tests.repl.test_app import CTRL_D, ENTER, Until, drive, screen_until

REPO = Path(__file__).resolve().parents[2]
CORTEX = [sys.executable, "-c", "import sys; from cortex.cli import main; sys.exit(main())"]  # as the installed script
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def notes(folder: Path, count: int, long: int = 0) -> Path:
    """An Org folder of `count` short notes, then `long` long ones about quokkas (their texts embed last)."""
    folder.mkdir(parents=True, exist_ok=True)
    short = "".join(f"* Note {n} about topic {n}\n" for n in range(count))
    body = " ".join(f"word{n}" for n in range(60))
    longer = "".join(f"* Long note {n}\nQuokkas live on Rottnest island {n}. {body}\n" for n in range(long))
    (folder / "notes.org").write_text(short + longer)
    return folder


class Counting:
    """The hashing embedder, counting the texts it is asked for."""

    def __init__(self, inner=None):
        self.inner = inner or HashingEmbedder()
        self.name, self.dim, self.degraded = self.inner.name, self.inner.dim, self.inner.degraded
        self.texts = []

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)


class Gated(Counting):
    """The hashing embedder, embedding a batch only once the test lets it (`let`)."""

    def __init__(self):
        super().__init__()
        self.asked, self.allowed = threading.Semaphore(0), threading.Semaphore(0)

    def embed(self, texts):
        self.asked.release()
        assert self.allowed.acquire(timeout=20)
        return super().embed(texts)

    def let(self) -> None:
        assert self.asked.acquire(timeout=20), "no batch was asked for"
        self.allowed.release()


def index_over(c, embedder) -> SearchIndex:
    index = SearchIndex(c.store, cached_embedder(c.store, embedder), c.store.engine.local_folder / "index")
    index.follow(c.working())
    return index


def test_a_search_before_any_vector_answers_by_words_and_says_what_is_missing(tmp_path, monkeypatch):
    embedded = []
    embed = CachedEmbedder.embed
    monkeypatch.setattr(CachedEmbedder, "embed", lambda self, texts: embedded.append(texts) or embed(self, texts))
    with cx.open(tmp_path / "store", notes(tmp_path / "org", 30, long=3)) as c:
        c.ingest()
        results = c.search("where do quokkas live?", budget=0)
        assert embedded == [] and list(c.store.table(EMBEDDINGS).items()) == []  # nothing embedded, not even the query
        assert str(results.status) == "vectors: 0 of 33 items" and not results.status.complete
        assert {r.outline[-1] for r in results} == {"Long note 0", "Long note 1", "Long note 2"}
        assert not results[0].has_vector and results[0].pending and results[0].hit.vector_norm == 1.0  # the best by BM25
        assert results[0].explain().startswith("no vector yet, ranked by its words among the items without one: ")


def test_items_without_a_vector_are_interleaved_by_the_share_each_list_holds(tmp_path):
    with cx.open(tmp_path / "store", notes(tmp_path / "org", 2 * BATCH - 6, long=50)) as c:
        c.ingest()
        index = index_over(c, HashingEmbedder())
        stop = threading.Event()
        # stopped once a batch is done: the batch under way is finished, so two are embedded
        status = index.build(progress=lambda done, total: done and stop.set(), stop=stop)
        assert (status.vectors, status.items) == (2 * BATCH, 2 * BATCH + 44)  # the 44 longest texts wait
        results = index.search("quokkas Rottnest", limit=10)
        # 256 of 300 items have a vector: the best without one stands at 0.5 / (44 / 300) = 3.4, after 3
        assert [r.has_vector for r in results] == [True, True, True, False, True, True, True, True, True, True]
        assert "Quokkas" in results[3].text


def test_a_build_resumes_where_it_stopped_and_a_saved_index_keeps_its_pending_items(tmp_path):
    with cx.open(tmp_path / "store", notes(tmp_path / "org", 3 * BATCH)) as c:
        c.ingest()
        first = Counting()
        index = index_over(c, first)
        assert index.build(budget=0).vectors == 0 and first.texts == []
        stop = threading.Event()
        index.build(progress=lambda done, total: done and stop.set(), stop=stop)
        assert len(first.texts) == 2 * BATCH
        index.save()  # as a session closes mid-build
        again = Counting()
        loaded = SearchIndex.load(c.store, cached_embedder(c.store, again), index.folder)
        assert len(loaded.pending) == BATCH and len(loaded.items) == 3 * BATCH
        assert loaded.build().complete and len(again.texts) == BATCH  # only what was missing
        fresh = Counting()  # no saved index: the vectors come from the store's cache
        assert index_over(c, fresh).build().complete and fresh.texts == []


def test_a_background_build_lets_searches_run_between_batches_and_stops_after_the_batch_under_way(tmp_path):
    with cx.open(tmp_path / "store", notes(tmp_path / "org", 3 * BATCH)) as c:
        c.ingest()
        gated = Gated()
        index = SearchIndex(c.store, cached_embedder(c.store, gated), c.store.engine.local_folder / "index")
        index.follow(c.working())  # as a search does: items are pending, and the background build starts at once
        told = []
        index.build_in_background(c.working, progress=lambda done, total: told.append((done, total)))
        gated.let()  # the first batch is being embedded: searches answer meanwhile
        while (status := index.status()).vectors < BATCH:
            results = index.search("Note 7 about topic 7", limit=3)
            assert results and results.status.building
            time.sleep(0.01)
        assert str(status) == f"vectors: {BATCH} of {3 * BATCH} items, building"
        assert gated.asked.acquire(timeout=20)  # the second batch is asked for: stop while it waits
        stopping = threading.Thread(target=index.stop_building)
        stopping.start()
        gated.allowed.release()
        stopping.join(20)
        assert not stopping.is_alive() and not index.building
        assert index.status().vectors == 2 * BATCH
        assert told == [(0, 3 * BATCH), (BATCH, 3 * BATCH), (2 * BATCH, 3 * BATCH)]


def test_query_vectors_are_kept_in_memory_only_and_bounded(cortex):
    cortex.search("deploy")
    table = cortex.store.table(EMBEDDINGS)
    before = len(table)
    for n in range(50):
        cortex.search(f"question number {n} about deploys")
    assert len(table) == before
    counting = Counting()
    queries = QueryVectors(counting)
    queries("deploy")
    queries("deploy")
    assert counting.texts == ["deploy"]
    for n in range(QUERIES_KEPT):
        queries(f"query {n}")
    queries("deploy")
    assert counting.texts.count("deploy") == 2  # forgotten after QUERIES_KEPT others


def test_the_repl_builds_vectors_in_the_background_and_closing_keeps_them(tmp_path):
    org = notes(tmp_path / "org", 1000)
    status, shown = drive(tmp_path / "store", org, '(get (stats) "headlines")' + ENTER, Until("1000\n"),
                          '(search "Note 7 about topic 7" :limit 2)' + ENTER, Until("building"), CTRL_D)
    assert status == 0
    assert re.search(r"vectors: [\d,]+ of 1,000 items, building: those without one were found by their words",
                     shown), shown
    with cx.open(tmp_path / "store", org) as c:
        assert 0 < c.search_status().vectors < 1000  # the batch under way when it closed, at least


def test_ctrl_c_during_the_embedding_of_an_ingest_keeps_what_is_embedded(tmp_path):
    org, store = notes(tmp_path / "org", 1000), tmp_path / "store"
    program, typist = os.openpty()
    ingest = subprocess.Popen([*CORTEX, "ingest", "--store", str(store), "--org", str(org)],
                              stdin=program, stdout=program, stderr=program, env=ENV)
    try:
        screen_until(typist, lambda text: re.search(r"embedding for search\D*[1-9]\d*/1000", text), seconds=60)
        ingest.send_signal(signal.SIGINT)  # what Ctrl-C on its terminal sends
        shown = screen_until(typist, lambda text: "the next `cortex ingest`" in text)
        assert ingest.wait(20) == 130
    finally:
        ingest.kill()
        os.close(program)
        os.close(typist)
    kept = int(re.search(r"interrupted: vectors: ([\d,]+) of 1,000 items kept", shown)[1].replace(",", ""))
    assert 0 < kept < 1000
    with cx.open(store, org) as c:
        assert c.search_status().vectors >= kept  # the next ingest or search goes on from there


def test_serve_builds_vectors_in_the_background(tmp_path, org):
    store = tmp_path / "store"
    with cx.open(store, org) as c:
        c.ingest()
        items = c.search_status().items
    secrets = {"GITHUB_WEBHOOK_SECRET": "s1", "STRIPE_WEBHOOK_SECRET": "s2"}  # those org/definitions.hy names
    serve = subprocess.Popen([*CORTEX, "serve", "--store", str(store), "--port", "0"], env={**ENV, **secrets},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and serve.poll() is None:
            with cx.open(store, org) as c:  # its vectors reach this process through the store's cache
                if c.search_status().vectors == items:
                    break
            time.sleep(0.2)
        assert serve.poll() is None, serve.stderr.read()
        serve.send_signal(signal.SIGINT)
        assert serve.wait(20) == 0  # stopped, as asked (Ctrl-C is how a server is stopped)
    finally:
        serve.kill()
    assert time.monotonic() < deadline, "serve embedded nothing"
