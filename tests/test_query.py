"""Reading a state: lookup, find, outline, show, stats and fsck."""

import pytest

from cortex.backends.base import OBJECTS
from cortex.errors import NotFound


def test_lookup_and_outline_path(cortex):
    node = cortex.lookup("task-staging-migration")
    assert node.path == "notes/projects.org" and node.line == 37
    assert node.outline == ("Deploy pipeline", "Staging database migration")
    assert node.headline.todo == "WAITING" and node.headline.tags == ("db",)
    with pytest.raises(NotFound, match="no headline with :ID: nope"):
        cortex.lookup("nope")


def test_find_by_each_criterion(cortex):
    assert [n.title for n in cortex.find(todo="NEXT")] == ["Snapshot before every compaction"]
    assert [n.title for n in cortex.find(tag="rag")] == ["Retrieval-augmented generation"]
    assert [n.title for n in cortex.find(prop="YEAR=2009")] == ["Reciprocal rank fusion"]
    assert len(cortex.find(prop="YEAR")) == 2
    assert [n.id for n in cortex.find(text="webhook SECRETS")] == ["task-rotate-secrets"]
    assert cortex.find(todo="DONE", tag="parser")[0].id == "task-parse-org"


def test_show_renders_a_subtree_exactly(cortex, org):
    text = (org / "notes" / "projects.org").read_text()
    start = text.index("* Deploy pipeline")
    assert cortex.show(cortex.lookup("proj-deploy")) == text[start:text.index("* Ideas")]
    assert cortex.show("notes/projects.org") == text


def test_stats_count_what_is_there(cortex):
    stats = cortex.stats()
    assert stats["files"] == 5 and stats["headlines"] == len(cortex.headlines())
    assert stats["ids"] == sum(1 for n in cortex.headlines() if n.id)


def test_fsck_reports_damage_with_expected_and_found(cortex):
    assert cortex.fsck() == []
    node = cortex.lookup("read-rrf")
    other = cortex.lookup("read-rag").headline
    cortex.store.transact(lambda: cortex.store.engine.put(OBJECTS, node.oid, other.encoded))
    problems = cortex.fsck()
    assert [p.oid for p in problems] == [node.oid.hex()]
    assert f"hashes to {other.oid.hex()}" in problems[0].problem
