"""Ingest: folders into the store, incrementally, surviving bad files and a killed process."""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

import cortex.api as cx
import cortex.ingest as ingesting
from cortex.ingest import WORKING


def unadopted(org, tmp_path):
    """A copy of the Org folder `org` that no store tracks yet (it is a working copy of the one that does)."""
    return shutil.copytree(org, tmp_path / "fresh-org", ignore=shutil.ignore_patterns(".cortex"))


def test_ingest_records_every_org_file(cortex, org):
    tree = cortex.working()
    assert sorted(tree.entries) == sorted(p.relative_to(org).as_posix() for p in org.rglob("*.org"))
    for path in tree.entries:
        assert cortex.show(path) == (org / path).read_text()


def test_unchanged_reingest_parses_and_writes_nothing(cortex):
    before = cortex.store.refs.get(WORKING)
    report = cortex.ingest()
    assert report.parsed == [] and report.new_objects == 0 and report.problems == []
    assert cortex.store.refs.get(WORKING) == before


@pytest.fixture
def opened(monkeypatch):
    """The paths the ingest opens, in order."""
    paths = []

    def spy(path, *args, **kwargs):
        paths.append(os.path.basename(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(ingesting, "open", spy, raising=False)
    return paths


def test_a_file_whose_stat_is_unchanged_is_not_read_again(cortex, org, opened, monkeypatch):
    monkeypatch.setattr(ingesting, "RACY_SECONDS", 0)  # as if the files were written long ago
    cortex.ingest()
    opened.clear()
    assert cortex.ingest().parsed == [] and opened == []
    path = org / "notes" / "projects.org"
    stat = path.stat()
    time.sleep(0.05)  # past the timestamp tick of the read (RACY_SECONDS is what guards against that)
    path.write_text(path.read_text().replace("Blocked", "Stalled"))  # same size, ...
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ... same modification time
    assert cortex.ingest().parsed == ["notes/projects.org"] and opened == ["projects.org"]
    assert "Stalled on the schema review." in cortex.show("notes/projects.org")


def test_the_stats_are_kept_in_the_store_for_the_next_process(tmp_path, org, opened, monkeypatch):
    monkeypatch.setattr(ingesting, "RACY_SECONDS", 0)
    with cx.open(tmp_path / "store", org) as first:
        first.ingest()
    opened.clear()
    with cx.open(tmp_path / "store", org) as later:  # as a new process would open it
        assert later.ingest().parsed == [] and opened == []
        (org / "notes" / "projects.org").unlink()
        assert later.ingest().removed == ["notes/projects.org"]
        assert later.store.table(ingesting.STATS).get(os.fsencode(org / "notes" / "projects.org")) is None


def test_a_file_read_soon_after_it_changed_is_read_every_time(cortex, org, opened, monkeypatch):
    # a change within the same timestamp tick as the read would leave its stat as it was
    monkeypatch.setattr(ingesting, "RACY_SECONDS", 10**6)  # every file changed "just now", however slow the run
    cortex.ingest()
    opened.clear()
    assert cortex.ingest().parsed == []
    assert sorted(opened) == sorted(p.name for p in org.rglob("*.org"))


def test_bytes_just_written_are_taken_as_read_and_the_file_is_read_next_time(cortex, org, opened):
    path = org / "notes" / "projects.org"
    written = path.read_text().replace("Blocked", "Stalled").encode()
    path.write_bytes(written)
    opened.clear()
    report = cortex.ingest(org / "notes", written={"notes/projects.org": written})
    assert report.parsed == ["notes/projects.org"] and "projects.org" not in opened
    assert cortex.show("notes/projects.org").encode() == written
    path.write_text(path.read_text().replace("Stalled", "Waiting"))  # a hand edit right after
    assert cortex.ingest().parsed == ["notes/projects.org"]
    assert "Waiting on the schema review." in cortex.show("notes/projects.org")


def test_edit_stores_only_the_changed_headline_and_its_ancestors(cortex, org):
    path = org / "notes" / "projects.org"
    text = path.read_text()
    path.write_text(text.replace("Blocked on the schema review.", "Unblocked: review passed."))
    report = cortex.ingest()
    assert report.parsed == ["notes/projects.org"]
    # the edited headline, its parent, the document, its folder and the tree
    assert report.new_objects == 5
    node = cortex.lookup("task-staging-migration")
    assert "Unblocked: review passed." in cortex.show(node)
    assert cortex.show("notes/projects.org") == path.read_text()


def test_edits_of_a_large_file_store_what_a_fresh_ingest_would(cortex, org, tmp_path):
    path = org / "big.org"
    path.write_text("".join(f"* Topic {n}\n** Note {n}\nSome text about topic {n}.\n" for n in range(2000)))
    cortex.ingest()
    for old, new in [("topic 700.", "topic 700, edited."), ("* Topic 701\n", "* Topic 701\n** Added\n"),
                     ("** Note 5\n", "*** Note 5\n")]:
        path.write_text(path.read_text().replace(old, new))
        report = cortex.ingest()
        assert report.parsed == ["big.org"] and report.new_objects <= 5
    with cx.open(tmp_path / "fresh", unadopted(org, tmp_path)) as fresh:
        fresh.ingest()
        assert fresh.working().entries["big.org"] == cortex.working().entries["big.org"]
    assert cortex.show("big.org") == path.read_text()


def test_an_edit_after_its_last_version_was_collected_parses_again(cortex, org, tmp_path):
    path = org / "big.org"
    original = "".join(f"* Topic {n}\nSome text about topic {n}.\n" for n in range(3000))
    path.write_text(original)
    cortex.ingest()
    path.write_text(original.replace("topic 9.", "topic 9, edited."))
    cortex.ingest()
    edited_doc = cortex.working().entries["big.org"]
    path.write_text(original)
    cortex.ingest()
    # What a gc does once the reflog no longer holds the edited version.
    cortex.store.transact(lambda: cortex.store.objects.delete_many([edited_doc]))
    path.write_text(original.replace("topic 2999.", "the last topic."))
    assert cortex.ingest().parsed == ["big.org"]
    assert cortex.show("big.org") == path.read_text()
    with cx.open(tmp_path / "fresh", unadopted(org, tmp_path)) as fresh:
        fresh.ingest()
        assert fresh.working().entries["big.org"] == cortex.working().entries["big.org"]


def test_deleted_and_renamed_files_are_noticed(cortex, org):
    (org / "notes" / "reading.org").rename(org / "notes" / "books.org")
    (org / "agents" / "reviewer" / "memory.org").unlink()
    report = cortex.ingest()
    assert report.removed == ["agents/reviewer/memory.org", "notes/reading.org"]
    assert report.parsed == []  # a rename costs a hash: the bytes were known
    assert "notes/books.org" in cortex.working().entries


def test_bad_files_are_reported_and_the_rest_ingested(cortex, org):
    (org / "latin1.org").write_bytes(b"* ok\n* caf\xe9\n")
    (org / "binary.org").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (org / "vanished.org").symlink_to(org / "missing.org")
    (org / "new.org").write_text("* New headline\n")
    report = cortex.ingest()
    problems = {p.path: str(p) for p in report.problems}
    assert problems["latin1.org"] == "latin1.org:2: not UTF-8 (byte 0xe9)"
    assert problems["binary.org"] == "binary.org:3: binary file (NUL byte), not Org text"
    assert problems["vanished.org"] == "vanished.org: a broken symbolic link (No such file or directory)"
    assert "new.org" in cortex.working().entries and "latin1.org" not in cortex.working().entries


def test_ingest_of_one_file_leaves_the_others(cortex, org):
    before = cortex.working().entries
    (org / "notes" / "reading.org").write_text("* Only this\n")
    report = cortex.ingest(org / "notes" / "reading.org")
    after = cortex.working().entries
    assert report.files == 1 and report.parsed == ["notes/reading.org"]
    assert {p: o for p, o in after.items() if p != "notes/reading.org"} == \
        {p: o for p, o in before.items() if p != "notes/reading.org"}


def test_killed_ingest_leaves_the_last_committed_state(tmp_path, org):
    store = tmp_path / "store"
    with cx.open(store, org) as c:
        c.ingest()
        committed = c.store.refs.get(WORKING)
    (org / "notes" / "projects.org").write_text("* Rewritten\n" * 500)
    script = textwrap.dedent(f"""
        import os, signal
        import cortex.api as cx
        from cortex.backends.base import ObjectStore
        original = ObjectStore.add_raw
        def add_then_die(self, items):
            original(self, items)
            os.kill(os.getpid(), signal.SIGKILL)
        ObjectStore.add_raw = add_then_die
        cx.open({str(store)!r}, {str(org)!r}).ingest()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, env={**os.environ})
    assert proc.returncode == -9, proc.stderr.decode()
    with cx.open(store, org) as c:
        assert c.store.refs.get(WORKING) == committed
        assert c.fsck() == []
        assert c.ingest().parsed == ["notes/projects.org"]
