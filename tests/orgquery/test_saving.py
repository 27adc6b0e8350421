"""The working state's query index saved beside the store: restored as it was, following edits as a rebuild
gives them, reading a row's headline only when asked; never trusted when damaged or made before a purge."""

from __future__ import annotations

import random
import shutil

import pytest

import cortex.api as cx
from cortex.backends import open_store
from cortex.orgquery import Index, parse_query, saving
from cortex.orgquery.index import DAY_KINDS, KEYS
from cortex.orgquery.saving import QUERY_FILE
from tests.orgquery.test_index import edit, random_file, signature
from tests.orgquery.test_predicates import tree_of


def collect_some(index: Index, rng: random.Random) -> None:
    """Some kinds of postings and days, and the validity or not, as a session's queries would have."""
    for kind in rng.sample(sorted(KEYS), rng.randrange(len(KEYS))):
        index.keys(kind)
    for kind in rng.sample(DAY_KINDS, rng.randrange(len(DAY_KINDS))):
        index.days(kind)
    if rng.random() < 0.5:
        index.not_holding(None)


def rebuilt(store, tree) -> Index:
    index = Index(store)
    index.follow(tree)
    return index


@pytest.mark.parametrize("seed", range(4))
def test_a_saved_index_is_restored_as_it_was_and_follows_edits_as_a_rebuild_does(seed, tmp_path):
    rng = random.Random(seed)
    files = {f"f{n}.org": random_file(rng, rng.randint(5, 25), n * 100) for n in range(4)}
    counter = [len(files)]
    store = open_store(None)
    tree = tree_of(store, {p: f.text() for p, f in files.items()})
    session = rebuilt(store, tree)
    collect_some(session, rng)
    saving.save(session, tmp_path)
    restored = saving.load(store, tmp_path, session.purged)
    assert restored is not None and restored.root == tree.oid and restored.state() == session.state()
    assert not any(row._headline for row in restored.rows)  # nothing read yet
    assert signature(saving.load(store, tmp_path, session.purged)) == signature(session)
    for step in range(24):
        edit(rng, files, counter)
        tree = tree_of(store, {p: f.text() for p, f in files.items()})
        restored.follow(tree)
        if step % 8 == 7:
            assert restored.root == tree.oid
            assert signature(restored) == signature(rebuilt(store, tree)), f"seed {seed}, step {step}"


def test_a_query_reads_only_the_headlines_it_answers_with(tmp_path):
    rng = random.Random(9)
    store = open_store(None)
    tree = tree_of(store, {f"f{n}.org": random_file(rng, 30, n * 100).text() for n in range(3)})
    session = rebuilt(store, tree)
    query = parse_query('(and (tags "ops") (todo))')
    expected = session.nodes(query)
    saving.save(session, tmp_path)
    restored = saving.load(store, tmp_path, session.purged)
    read = []
    for state in restored.files.values():
        state.read = lambda oid, get=state.read: read.append(oid) or get(oid)
    assert restored.select(query) and read == []  # from the saved postings
    assert restored.nodes(query) == expected
    assert sorted(read) == sorted(node.oid for node in expected)


def test_damaged_or_of_another_version_it_is_not_trusted(tmp_path):
    store = open_store(None)
    session = rebuilt(store, tree_of(store, {"a.org": "* TODO A :ops:\n"}))
    session.keys("tag")
    saving.save(session, tmp_path)
    assert saving.load(store, tmp_path, session.purged) is not None
    assert saving.load(store, tmp_path, b"a later purge") is None
    whole = (tmp_path / QUERY_FILE).read_bytes()
    (tmp_path / QUERY_FILE).write_bytes(whole[: len(whole) // 2])
    assert saving.load(store, tmp_path, session.purged) is None
    (tmp_path / QUERY_FILE).write_bytes(b"\x92\x02\x00")
    assert saving.load(store, tmp_path, session.purged) is None


@pytest.fixture
def org(tmp_path):
    folder = tmp_path / "org"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "a.org").write_text("* TODO Rotate the key :ops:\n* Plans\n** TODO Deploy :ops:\n")
    (folder / "agents" / "old").mkdir(parents=True)
    (folder / "agents" / "old" / "memory.org").write_text("* Facts\n** TODO Secret plan :ops:\n")
    return folder


def titles(c, q='(tags "ops")') -> list[str]:
    return [n.title for n in c.query(q)]


def test_a_new_session_answers_from_what_the_last_one_saved(tmp_path, org, monkeypatch):
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        first = titles(c)
        assert titles(c, "(todo)") == ["Secret plan", "Rotate the key", "Deploy"]
        saved = c._index_folder() / QUERY_FILE
    assert first == ["Secret plan", "Rotate the key", "Deploy"] and saved.exists()
    made = saved.stat().st_ino
    with cx.open(tmp_path / "store", org) as c:
        assert titles(c) == first
        assert sum(row._headline is None for row in c._query_index(None).rows) == 2  # "Facts", "Plans": none
    assert saved.stat().st_ino == made  # nothing changed: not saved again
    with cx.open(tmp_path / "store", org) as c:
        assert titles(c, '(priority "A")') == []  # a kind of postings the copy lacks: saved again
    assert saved.stat().st_ino != made
    made = saved.stat().st_ino
    (org / "notes" / "a.org").write_text("* DONE Rotate the key :ops:\n* Plans :ops:\n")
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        assert titles(c) == ["Secret plan", "Rotate the key", "Plans"]
        assert titles(c, "(todo)") == ["Secret plan"]
    assert saved.stat().st_ino == made  # one file changed: the next session follows it from the copy
    monkeypatch.setattr(saving, "SAVE_AFTER", 1)
    with cx.open(tmp_path / "store", org) as c:
        assert titles(c, "(todo)") == ["Secret plan"]
    assert saved.stat().st_ino != made  # as many as SAVE_AFTER: saved again
    with cx.open(tmp_path / "store", org) as c:
        assert c._query_index(None).changed == 0 and titles(c, "(todo)") == ["Secret plan"]
    with cx.open(tmp_path / "store", org, read_only=True) as c:
        assert titles(c, "(todo)") == ["Secret plan"]


def test_a_copy_saved_before_a_purge_is_not_trusted_after_it(tmp_path, org):
    """As on another machine, whose folder still holds it: the purge it was made after is not the newest."""
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        titles(c)
    with cx.open(tmp_path / "store", org) as c:
        saved = c._index_folder() / QUERY_FILE
        shutil.copy(saved, tmp_path / "kept")
        c.memory.purge("old", hard=True)
        assert not saved.exists()  # dropped with the search indexes
        saved.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "kept", saved)
    with cx.open(tmp_path / "store", org) as c:
        assert titles(c) == ["Rotate the key", "Deploy"]
    assert b"Secret plan" not in saved.read_bytes()
