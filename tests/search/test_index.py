"""Search over the store: follows every change, embeds each text once, persists, filters, time travel."""

import pytest

import cortex.api as cx
from cortex.errors import UserError
from cortex.search import items
from cortex.search.embeddings import cached_embedder, shared_embedder
from cortex.search.index import Filters, SearchIndex

PROJECTS = "notes/projects.org"


class CountingEmbedder:
    """The real default embedder, counting the texts it is asked to embed."""

    def __init__(self):
        self.inner = shared_embedder()
        self.name, self.dim, self.degraded = self.inner.name, self.inner.dim, self.inner.degraded
        self.texts = []

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def counting(monkeypatch):
    embedder = CountingEmbedder()
    monkeypatch.setattr("cortex.search.embeddings.shared_embedder", lambda: embedder)
    return embedder


def top(results):
    return [(r.path, r.outline[-1]) for r in results]


def test_finds_by_meaning_and_by_identifier(cortex):
    assert top(cortex.search("credentials that leaked must be replaced", limit=1)) == [
        (PROJECTS, "Rotate the webhook secrets")]
    hit = cortex.search("E1042", limit=1)[0]
    assert "E1042" in hit.text and hit.exact > 0 and hit.hit.evidence == 1.0
    w = hit.hit.weights
    assert hit.score == pytest.approx(w.vector * hit.vector_norm + w.keyword * hit.keyword_norm)


def test_a_search_right_after_an_edit_sees_it_and_embeds_only_the_edit(tmp_path, org, counting):
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.search("anything")
        first = len(counting.texts)
        path = org / PROJECTS
        path.write_text(path.read_text().replace("Blocked on the schema review.",
                                                 "The zebra migration is blocked."))
        c.ingest()
        assert top(c.search("zebra", limit=1)) == [(PROJECTS, "Staging database migration")]
        assert len(counting.texts) - first == 2  # the edited headline, and the query
        c.ingest()  # nothing changed: nothing to embed
        c.search("zebra")
        assert len(counting.texts) - first == 2


def test_index_is_saved_and_trusted_only_for_its_root(tmp_path, org, counting):
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.search("deploy")
    assert (tmp_path / "store" / "index" / "state.msgpack").exists()
    with cx.open(tmp_path / "store", org) as c:  # a change made without searching
        (org / "notes" / "new.org").write_text("* Quokka sightings in the office\n")
        c.ingest()
    counting.texts.clear()
    with cx.open(tmp_path / "store", org) as c:
        assert top(c.search("quokka", limit=1)) == [("notes/new.org", "Quokka sightings in the office")]
        assert counting.texts == ["Quokka sightings in the office", "quokka"]


DAMAGES = {
    "vectors garbled": lambda folder: (folder / "vectors.usearch").write_bytes(b"garbage"),
    "records of another save": lambda folder: (folder / "items.records").write_bytes(
        bytes(16) + (folder / "items.records").read_bytes()[16:]),
    "records cut short": lambda folder: (folder / "items.records").write_bytes(
        (folder / "items.records").read_bytes()[:-1]),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_index_is_rebuilt(tmp_path, org, damage):
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.search("deploy")
    with cx.open(tmp_path / "store", org) as c:  # as saved: trusted, its items packed until looked up
        assert len(c._search_index.items._keys) == len(c._search_index.items) > 0
    DAMAGES[damage](tmp_path / "store" / "index")
    with cx.open(tmp_path / "store", org) as c:
        assert len(c._search_index.items._keys) == 0  # rebuilt from the store
        assert top(c.search("dark theme", limit=1)) == [("agents/assistant/memory.org", "User prefers dark mode in every app.")]


def test_filters(cortex):
    facts = cortex.search("deploy", agent="assistant", type="fact")
    assert facts and all(r.item.agent == "assistant" and r.item.type == "fact" for r in facts)
    assert all(r.path.startswith("notes/") for r in cortex.search("deploy", source="notes"))
    assert all(r.path == "notes/reading.org" for r in cortex.search("fusion", path="notes/reading.org"))
    assert {r.outline[-1] for r in cortex.search("task", todo="TODO")} == {
        "Rotate the webhook secrets", "Designing Data-Intensive Applications"}
    assert top(cortex.search("secrets", tag="security")) == [(PROJECTS, "Rotate the webhook secrets")]
    assert cortex.search("deploy", agent="nobody") == []
    with pytest.raises(UserError, match="unknown memory type"):
        cortex.search("x", type="opinion")


def test_list_items_of_memory_sections_are_items(cortex):
    hit = cortex.search("Which region hosts staging?", agent="assistant", limit=1)[0]
    assert hit.text == "The staging cluster lives in eu-west-1." and hit.outline == ("Facts",)


def test_time_travel_and_rollback(cortex, org):
    cortex.snapshot("before")
    path = org / PROJECTS
    path.write_text(path.read_text().replace("Blocked on the schema review.", "Now about capybaras."))
    cortex.ingest()
    assert top(cortex.search("capybaras", limit=1)) == [(PROJECTS, "Staging database migration")]
    past = cortex.search("capybaras", limit=1, as_of="HEAD")[0]
    assert "capybaras" not in past.text and "schema review" in cortex.search("schema review", as_of="HEAD")[0].text
    cortex.rollback("HEAD", force=True)
    assert "capybaras" not in cortex.search("capybaras", limit=1)[0].text


def test_rrf_and_weights(cortex):
    rrf = cortex.search("E1042", fusion="rrf", limit=3)
    w = rrf[0].hit.weights
    assert rrf[0].score == pytest.approx(w.vector * rrf[0].vector_norm + w.keyword * rrf[0].keyword_norm)
    words = cortex.search("E1042", fusion="keyword", limit=3)  # no vectors at all: BM25 and the exact evidence
    assert words and all(not r.has_vector for r in words) and "by keyword" in words[0].explain()
    vector_only = cortex.search("E1042", vector_weight=1.0, keyword_weight=0.0, limit=3)
    assert all(r.score == pytest.approx(r.vector) for r in vector_only)
    with pytest.raises(UserError, match="unknown fusion"):
        cortex.search("x", fusion="borda")


def notes(numbers) -> str:
    return "".join(f"** Note {n} about topic {n}\n" for n in numbers)


def big_notes(inbox, archive, extra: str = "") -> str:
    return f"#+TITLE: Notes\n\n* Inbox\n{notes(inbox)}\n* Archive\n{notes(archive)}{extra}"


def test_an_edit_in_a_large_file_reads_only_what_it_changed_and_keeps_the_index_exact(tmp_path, org, counting,
                                                                                     monkeypatch):
    path = org / "notes" / "big.org"
    path.write_text(big_notes(range(80), range(80, 160)))
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        index = SearchIndex(c.store, cached_embedder(c.store))
        index.follow(c.working())
        read = []
        units = items.units
        monkeypatch.setattr(items, "units",
                            lambda path, outline, *rest: read.append(outline) or units(path, outline, *rest))
        edits = [
            big_notes(range(80), range(80, 160), "** A note about zebras\n"),
            big_notes(range(81), range(80, 160), "** A note about zebras\n"),  # the same note twice under Inbox
            "* Top\n** Quokkas\n" + big_notes([1, 2, 3, *range(5, 81)], range(80, 160)),  # Note 4 gone, lines moved
            big_notes(range(81), range(80, 160), "* Inbox\n** Note 3 about topic 3\n"),  # a second Inbox holds Note 3
            big_notes([n for n in range(81) if n != 3], range(80, 160), "* Inbox\n** Note 3 about topic 3\n"),
            big_notes([*range(81), 200, 3, 200], range(80, 160)),  # a new note twice, an old one again
        ]
        for n, text in enumerate(edits):
            path.write_text(text)
            c.ingest()
            read.clear()
            index.follow(c.working())
            assert len(read) < 12, (n, read)  # the headlines that changed and their parents, not 160 notes
            index.build()
            whole = SearchIndex(c.store, cached_embedder(c.store))
            whole.follow(c.working())
            assert index.items.keys() == whole.items.keys(), n
            hit = index.search("Note 3 about topic 3", limit=1, filters=Filters(path="notes/big.org"))[0]
            assert text.splitlines()[hit.line - 1] == "** Note 3 about topic 3", n
            zebras = index.search("zebras", limit=1)[0].outline
            assert (zebras == ("Archive", "A note about zebras")) == ("zebras" in text), n


def test_a_result_names_its_line_after_headlines_were_added_above_it(cortex, org):
    path = org / PROJECTS
    query = "credentials that leaked must be replaced"
    assert cortex.search(query, limit=1)[0].outline[-1] == "Rotate the webhook secrets"
    path.write_text("* A new first section\nwith some text\n\n" + path.read_text())
    cortex.ingest()
    hit = cortex.search(query, limit=1)[0]
    assert "Rotate the webhook secrets" in path.read_text().splitlines()[hit.line - 1]


COLLECT_ELSEWHERE = """
import sys
from cortex.backends import open_store
from cortex.history import gc
with open_store(sys.argv[1]) as store:
    for name in store.refs.names():
        store.refs.expire(name, lambda entry: False)
    print(gc(store))
"""


def test_an_index_whose_state_was_collected_by_another_process_starts_over(tmp_path, org):
    import subprocess
    import sys

    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.search("anything")
        before = c.read_state()
        path = org / PROJECTS
        path.write_text(path.read_text().replace("Blocked on the schema review.", "The zebra migration is blocked."))
        c.ingest()
        collected = subprocess.run([sys.executable, "-c", COLLECT_ELSEWHERE, str(tmp_path / "store")],
                                   capture_output=True, text=True, check=True).stdout
        assert int(collected) > 0 and before.entries[PROJECTS] not in c.store.objects
        # this process still holds the old tree, not the document it names (as a cache that filled drops it)
        c.store.objects._cache.pop(bytes(before.entries[PROJECTS]), None)
        assert top(c.search("zebra", limit=1)) == [(PROJECTS, "Staging database migration")]
