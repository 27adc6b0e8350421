"""Reading a state: lookup, find, outline, show and stats."""

import pytest

from cortex.errors import NotFound, UserError


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


def test_stats_count_what_is_there(cortex, org):
    stats = cortex.stats()
    assert stats["files"] == 5 and stats["headlines"] == len(cortex.headlines())
    assert stats["ids"] == sum(1 for n in cortex.headlines() if n.id) and stats["duplicate ids"] == []
    copied = (org / "notes" / "projects.org").read_text()
    (org / "notes" / "copy.org").write_text(copied[copied.index("* Deploy pipeline"):copied.index("* Ideas")])
    cortex.ingest()
    again = cortex.stats()
    assert again["ids"] > stats["ids"] and len(again["duplicate ids"]) == again["ids"] - stats["ids"]
    assert "task-staging-migration" in again["duplicate ids"]


def test_working_oid_moves_only_when_the_working_state_changes(cortex, org):
    before = cortex.working_oid
    assert before == cortex.working().oid
    cortex.ingest()
    assert cortex.working_oid == before
    projects = org / "notes" / "projects.org"
    projects.write_text(projects.read_text() + "* One more\n")
    cortex.ingest()
    assert cortex.working_oid not in (None, before) and cortex.working_oid == cortex.working().oid


def test_org_files_todo_keywords_and_object_count(cortex, org):
    assert sorted(p.relative_to(org).as_posix() for p in cortex.org_files()) == sorted(cortex.working().entries)
    assert cortex.todo_keywords("notes/projects.org") == (("TODO", "NEXT", "WAITING"), ("DONE", "CANCELLED"))
    assert cortex.todo_keywords("notes/reading.org") == (("TODO",), ("DONE",))
    assert cortex.todo_keywords("notes/absent.org") is None
    assert cortex.object_count == cortex.stats()["objects"] > 0


def test_show_takes_a_headline_by_its_oid(cortex):
    node = cortex.lookup("proj-deploy")
    assert cortex.show(node.oid) == cortex.show(node)
    document = cortex.working().entries["notes/projects.org"]
    with pytest.raises(UserError, match=f"{document.hex()[:12]}: not a headline"):
        cortex.show(document)


ROAM_NOTE = ":PROPERTIES:\n:ID:       5f1c-roam-note\n:ROAM_ALIASES: Caching\n:END:\n#+title: Caches\n\n* Eviction\n"


def test_a_file_level_id_names_its_file(cortex, org):
    (org / "notes" / "caches.org").write_text(ROAM_NOTE)
    cortex.ingest()
    assert cortex.file_ids() == {"5f1c-roam-note": "notes/caches.org"}
    assert cortex.show("5f1c-roam-note") == ROAM_NOTE
    with pytest.raises(NotFound, match="5f1c-roam-note is the :ID: of the file notes/caches.org"):
        cortex.lookup("5f1c-roam-note")
    assert cortex.stats()["ids"] == 1 + sum(1 for n in cortex.headlines() if n.id)


def test_lookup_follows_an_id_moved_to_another_file(cortex, org):
    assert cortex.lookup("task-rotate-secrets").path == "notes/projects.org"
    source = org / "notes" / "projects.org"
    text = source.read_text()
    start = text.index("** TODO [#A] Rotate the webhook secrets")
    end = text.index("\n*", start + 1) + 1  # the next headline
    source.write_text(text[:start] + text[end:])
    (org / "notes" / "moved.org").write_text("* Moved here\n" + text[start:end])
    cortex.ingest()
    node = cortex.lookup("task-rotate-secrets")
    assert node.path == "notes/moved.org" and node.outline == ("Moved here", "Rotate the webhook secrets")
