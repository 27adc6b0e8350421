"""Snapshots, rollback, diff, log, history, retention, gc, export and import on a real LMDB store."""

import subprocess
import sys
import textwrap

import pytest

import cortex.api as cx
from cortex.org import parse
from cortex.backends.base import ObjectStore
from cortex.errors import NotFound, UserError
from cortex.history import DamagedExport, DirtyWorkingFiles

PROJECTS = "notes/projects.org"


def edit(org, path, old, new):
    file = org / path
    text = file.read_text()
    assert old in text
    file.write_text(text.replace(old, new))


def test_a_snapshot_of_many_new_files_commits_once(cortex, org, monkeypatch):
    for n in range(30):
        (org / f"note-{n}.org").write_text(f"* Note {n}\n** Detail {n}\n")
    cortex.ingest()
    engine, commits, depth = cortex.store.engine, [], []
    transact = type(engine).transact

    def outermost(self, fn):  # a transaction inside another commits with it
        commits.extend([fn] if not depth else [])
        depth.append(fn)
        try:
            return transact(self, fn)
        finally:
            depth.pop()

    monkeypatch.setattr(type(engine), "transact", outermost)
    snap = cortex.snapshot("many files")
    assert snap.counts == {"files": 35, "headlines": len(cortex.headlines())}
    assert len(commits) == 2  # the files' counts, then the snapshot and HEAD


def test_snapshot_addressing(cortex, org):
    first = cortex.snapshot("first")
    edit(org, PROJECTS, "Blocked on", "Waiting for")
    cortex.ingest()
    second = cortex.snapshot("second")
    assert cortex.resolve("HEAD") == cortex.resolve(0) == cortex.resolve("0") == second
    assert cortex.resolve("HEAD~1") == cortex.resolve(1) == first
    assert cortex.resolve(second.oid.hex()[:8]) == second
    assert cortex.resolve(first.oid.hex()) == first
    assert second.parent == first.oid and second.counts["files"] == 5
    with pytest.raises(NotFound, match="HEAD has only 1 snapshot before it"):
        cortex.resolve("HEAD~2")
    with pytest.raises(UserError, match="not a snapshot"):
        cortex.resolve("yesterday")


def test_rollback_restores_exact_bytes_and_can_be_undone(cortex, org):
    original = (org / PROJECTS).read_bytes()
    first = cortex.snapshot("first")
    edit(org, PROJECTS, "Blocked on", "Waiting for")
    (org / "notes" / "new.org").write_text("* Created later\n")
    cortex.ingest()
    second = cortex.snapshot("second")
    report = cortex.rollback("HEAD~1")
    assert report.written == [PROJECTS] and report.removed == ["notes/new.org"]
    assert (org / PROJECTS).read_bytes() == original and not (org / "notes" / "new.org").exists()
    assert cortex.resolve("HEAD") == first and cortex.working().oid == first.root
    cortex.rollback("HEAD@{1}")  # where HEAD was before the rollback
    assert cortex.resolve("HEAD") == second and "Waiting for" in (org / PROJECTS).read_text()
    assert (org / "notes" / "new.org").read_text() == "* Created later\n"


def test_rollback_refuses_to_lose_unsnapshotted_edits(cortex, org):
    cortex.snapshot("first")
    edit(org, PROJECTS, "Blocked on", "My unsaved words")
    with pytest.raises(DirtyWorkingFiles) as err:
        cortex.rollback("HEAD")
    assert err.value.paths == [PROJECTS] and "--keep" in str(err.value)
    assert "My unsaved words" in (org / PROJECTS).read_text()

    report = cortex.rollback("HEAD", keep=True)
    assert report.kept is not None and "My unsaved words" not in (org / PROJECTS).read_text()
    cortex.rollback(report.kept.oid.hex())
    assert "My unsaved words" in (org / PROJECTS).read_text()


def test_rollback_force_discards(cortex, org):
    cortex.snapshot("first")
    edit(org, PROJECTS, "Blocked on", "Throwaway")
    cortex.rollback("HEAD", force=True)
    assert "Throwaway" not in (org / PROJECTS).read_text()


def test_diff_reports_added_removed_changed_and_moved(cortex, org):
    cortex.snapshot("base")
    edit(org, PROJECTS, "Blocked on the schema review.", "Review done.")
    edit(org, PROJECTS, "** DONE Deploys happen every Tuesday after the standup\n"
                        "CLOSED: [2026-11-10 Tue 10:00]\n", "")
    edit(org, "notes/reading.org", "* Books", "* Books\n** A new book")
    reading = (org / "notes" / "reading.org").read_text()
    rrf_start = reading.index("** Reciprocal rank fusion")
    rrf = reading[rrf_start:reading.index("* Books")]
    (org / "notes" / "reading.org").write_text(reading.replace(rrf, ""))
    (org / "notes" / "search.org").write_text("* Search\n" + rrf)
    cortex.ingest()
    changes = {(c.kind, c.path, c.outline[-1]): c for c in cortex.diff()}
    assert set(changes) == {
        ("changed", PROJECTS, "Staging database migration"),
        ("removed", PROJECTS, "Deploys happen every Tuesday after the standup"),
        ("added", "notes/reading.org", "A new book"),
        ("added", "notes/search.org", "Search"),
        ("moved", "notes/search.org", "Reciprocal rank fusion"),
    }
    moved = changes[("moved", "notes/search.org", "Reciprocal rank fusion")]
    assert moved.id == "read-rrf" and moved.old_path == "notes/reading.org"
    assert changes[("changed", PROJECTS, "Staging database migration")].fields == ("text",)


def test_diff_opens_only_what_changed(tmp_path):
    org = tmp_path / "org"
    org.mkdir()
    for n in range(40):
        (org / f"f{n}.org").write_text("".join(f"* H{n}.{i}\n** child\nbody {i}\n" for i in range(50)))
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.snapshot("base")
        (org / "f7.org").write_text((org / "f7.org").read_text().replace("body 3\n", "body three\n"))
        c.ingest()
        reads = []
        original = ObjectStore.__getitem__
        ObjectStore.__getitem__ = lambda self, oid: reads.append(oid) or original(self, oid)
        try:
            changes = c.diff()
        finally:
            ObjectStore.__getitem__ = original
    assert [(ch.kind, ch.path, ch.outline) for ch in changes] == [("changed", "f7.org", ("H7.3", "child"))]
    assert len(reads) < 20  # 4000 headlines in the store; only one path is opened


def test_diff_before_any_snapshot_adds_everything_and_refuses_an_unknown_ref(cortex):
    assert {change.kind for change in cortex.diff()} == {"added"}
    for ref, message in [("HEAD~3", "HEAD~3: no snapshot yet"), ("f00d", "no snapshot f00d"),
                         ("ZZZ", "'ZZZ' is not a snapshot")]:
        with pytest.raises(UserError, match=message):
            cortex.diff(ref)


def test_log_and_headline_history(cortex, org):
    cortex.snapshot("first")
    edit(org, PROJECTS, "* WAITING Staging", "* DONE Staging")
    cortex.ingest()
    cortex.snapshot("second")
    entries = cortex.log()
    assert [e.snapshot.message for e in entries] == ["second", "first"]
    assert entries[0].changes == {"changed": 1}
    versions = cortex.history("task-staging-migration")
    assert [(v.snapshot.message, v.headline.todo, v.change) for v in versions] == [
        ("second", "DONE", "todo"), ("first", "WAITING", "added")]  # newest first, as the log


def test_retention_and_gc_keep_what_is_reachable(cortex, org):
    for n in range(4):
        edit(org, PROJECTS, "Blocked on" if n == 0 else f"Version {n - 1}", f"Version {n}")
        cortex.ingest()
        cortex.snapshot(f"v{n}")
    objects_before = len(cortex.store.objects)
    with pytest.raises(UserError, match="the number of snapshots to keep must be 0 or more, got -1"):
        cortex.gc(keep_last=-1)  # a typo must not drop every snapshot but HEAD
    with pytest.raises(UserError, match="log limit must be 0 or more"):
        cortex.log(-1)
    assert len(cortex.snapshots()) == 4 and len(cortex.log(2)) == 2
    dropped, deleted = cortex.gc(keep_last=2)
    assert dropped == 2 and deleted > 0 and len(cortex.store.objects) == objects_before - deleted
    assert [s.message for s in cortex.snapshots()] == ["v3", "v2"]
    assert cortex.fsck() == []
    assert cortex.show(PROJECTS) == (org / PROJECTS).read_text()
    cortex.rollback("HEAD~1")
    assert "Version 2" in (org / PROJECTS).read_text()


def test_gc_keeps_unsnapshotted_working_state(cortex, org):
    cortex.snapshot("s")
    edit(org, PROJECTS, "Blocked on", "Not yet snapshotted")
    cortex.ingest()
    cortex.gc(keep_last=1)
    assert "Not yet snapshotted" in cortex.show(PROJECTS)
    assert cortex.fsck() == []


def test_export_import_round_trip_and_damage(cortex, tmp_path):
    snap = cortex.snapshot("to carry")
    path, count = cortex.export("HEAD", tmp_path / "snap.cortex")
    assert count == len(cortex.store.objects)  # everything here is reachable from the snapshot
    with cx.open(tmp_path / "other", tmp_path / "other-org") as other:
        imported = other.import_(path)
        assert imported == snap and other.snapshots() == [snap]
        report = other.rollback(snap.oid.hex(), force=True)
        assert (tmp_path / "other-org" / PROJECTS).read_text() == cortex.show(PROJECTS)
        assert report.folder == tmp_path / "other-org" and report.created  # the folder written is named
    data = path.read_bytes()
    (tmp_path / "flipped.cortex").write_bytes(data[:200] + bytes([data[200] ^ 1]) + data[201:])
    (tmp_path / "short.cortex").write_bytes(data[: len(data) // 2])
    with cx.open(tmp_path / "third", tmp_path / "third-org") as third:
        for bad in ("flipped.cortex", "short.cortex"):
            with pytest.raises(DamagedExport, match="damaged or truncated"):
                third.import_(tmp_path / bad)
        assert len(third.store.objects) == 0 and third.snapshots() == []


def test_reader_keeps_its_view_while_another_process_writes(cortex, org):
    snap = cortex.snapshot("before")
    (org / "notes" / "extra.org").write_text("* Written by another process\n")
    script = textwrap.dedent(f"""
        import cortex.api as cx
        with cx.open({str(cortex.store_folder())!r}, {str(org)!r}) as c:
            c.ingest()
            c.snapshot("from the other process")
    """)
    with cortex.store.reading():
        working = cortex.working()
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()
        assert cortex.working() == working and cortex.resolve("HEAD") == snap
    assert cortex.resolve("HEAD").message == "from the other process"
    assert "notes/extra.org" in cortex.working().entries


def test_rollback_killed_while_restoring_files_completes_when_run_again(cortex, org):
    first = cortex.snapshot("first")
    originals = {p: (org / p).read_bytes() for p in ("notes/projects.org", "notes/reading.org")}
    for path in originals:
        (org / path).write_text((org / path).read_text() + "* Added later\n")
    cortex.ingest()
    cortex.snapshot("second")
    store = cortex.store_folder()
    cortex.close()
    script = textwrap.dedent(f"""
        import os, signal
        import cortex.api as cx
        import cortex.history.checkout as history
        original = history.write_under
        def write_one_then_die(*args):
            original(*args)
            os.kill(os.getpid(), signal.SIGKILL)
        history.write_under = write_one_then_die
        cx.open({str(store)!r}, {str(org)!r}).rollback("HEAD~1")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()
    restored = [p for p, data in originals.items() if (org / p).read_bytes() == data]
    assert len(restored) == 1  # killed halfway: one file back, the other not yet
    with cx.open(store, org) as again:
        assert again.fsck() == [] and again.resolve("HEAD").message == "second"
        again.rollback("HEAD~1")  # no --force needed: every file on disk is in a snapshot
        assert all((org / p).read_bytes() == data for p, data in originals.items())
        assert again.resolve("HEAD") == first


def test_head_oid_and_snapshot_count_follow_snapshots_rollback_and_retention(cortex, org):
    assert cortex.head_oid is None and cortex.snapshot_count == 0
    first = cortex.snapshot("first")
    edit(org, PROJECTS, "Blocked on", "Waiting for")
    cortex.ingest()
    second = cortex.snapshot("second")
    assert cortex.head_oid == second.oid and cortex.snapshot_count == 2
    cortex.rollback(first.oid.hex())
    assert cortex.head_oid == first.oid and cortex.snapshot_count == 2
    cortex.rollback("HEAD@{1}")
    cortex.gc(keep_last=1)
    assert cortex.head_oid == second.oid and cortex.snapshot_count == len(cortex.snapshots()) == 1


SECRET = "The backup key is hunter2-correct-horse-7731."


def test_gc_keep_1_drops_a_deleted_secret_the_working_reflog_kept(cortex, org, tmp_path):
    notes = org / "notes" / "secret.org"
    notes.write_text(f"* Credentials\n{SECRET}\n")
    cortex.ingest()
    cortex.snapshot("with the secret")
    notes.unlink()
    cortex.ingest()
    cortex.snapshot("without it")
    assert cortex.gc(keep_last=1, compact=True)[0] == 1
    assert SECRET.encode() not in (tmp_path / "store" / "data.mdb").read_bytes()
    assert [s.message for s in cortex.snapshots()] == ["without it"] and cortex.fsck() == []
    assert cortex.show(PROJECTS) == (org / PROJECTS).read_text()


def test_gc_without_snapshots_keeps_the_newest_working_reflog_entries(cortex, org):
    for n in range(4):
        edit(org, PROJECTS, "Blocked on" if n == 0 else f"Draft {n - 1}", f"Draft {n}")
        cortex.ingest()
    assert len(cortex.store.refs.reflog("working")) == 5
    cortex.gc(keep_last=2)
    assert [e.message for e in cortex.store.refs.reflog("working")] == ["ingest ., synced", "ingest ., synced"]
    assert cortex.show(PROJECTS) == (org / PROJECTS).read_text()
    assert cortex.fsck() == []
    cortex.gc(keep_last=None)  # no rule: nothing expires
    assert len(cortex.store.refs.reflog("working")) == 2


def test_concurrent_snapshots_from_four_processes_all_land(cortex, org, tmp_path):
    cortex.close()  # each process opens the store itself
    start = tmp_path / "start"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        import cortex.api as cx
        with cx.open({str(tmp_path / "store")!r}, {str(org)!r}) as c:
            while not Path({str(start)!r}).exists():
                time.sleep(0.001)
            for n in range(10):
                c.snapshot(f"{{sys.argv[1]}}-{{n}}")
    """)
    workers = [subprocess.Popen([sys.executable, "-c", script, f"p{n}"], stderr=subprocess.PIPE) for n in range(4)]
    start.touch()
    for worker in workers:
        assert worker.wait(timeout=120) == 0, worker.stderr.read().decode()
    with cx.open(tmp_path / "store", org) as c:
        listed = c.snapshots()
        assert sorted(s.message for s in listed) == sorted(f"p{p}-{n}" for p in range(4) for n in range(10))
        chain, snap = [], c.resolve("HEAD")
        while snap is not None:
            chain.append(snap.oid)
            snap = snap.parent and c.store.objects[snap.parent]
        assert sorted(chain) == sorted(s.oid for s in listed)


def test_diff_and_a_sync_agree_on_which_headline_is_the_same_one(tmp_path):
    """A retitled headline keeping its text is one headline changed, for `diff` as for the merge of a sync:
    they pair siblings with one matcher (`history.siblings`)."""
    from cortex.history import diff, merge
    from cortex.objects import Tree

    with cx.open(tmp_path / "store", folder=False) as c:
        before = "* Plan\nShip on Monday.\n* Budget\nTen thousand.\n"
        after = "* The plan\nShip on Monday.\n* Budget\nTen thousand.\n"
        parsed = [parse(text) for text in (before, after)]
        c.store.objects.add_many([obj for p in parsed for obj in p.objects])
        old, new = (Tree({"a.org": p.document.oid}) for p in parsed)
        assert [(ch.kind, ch.outline, ch.fields) for ch in diff(c.store, old, new)] == [
            ("changed", ("The plan",), ("title",))]
        merged = merge.merge_documents(parsed[0].document, parsed[1].document, parsed[0].document,
                                       c.store.objects.__getitem__)
        assert merged.clean and merged.text == after
