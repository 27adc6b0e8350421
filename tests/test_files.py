"""Org files are written only under the root, never lost to a rollback, and read only inside the root."""

import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import suppress
from pathlib import Path

import pytest

import cortex.api as cx
from cortex import files
from cortex.org import parse
from cortex.codec import encode, encode_object
from cortex.errors import UserError
from cortex.files import (COMPARED_BYTES, SPARE_SECONDS, ChangedMeanwhile, OutsideRoot, Staged, file_holds,
                          remove_tree, remove_under, write_under)
from cortex.hashing import hash_bytes
from cortex.history import (DamagedExport, DirtyWorkingFiles, RollbackStopped, SNAPSHOTS, UnsnapshottableFiles,
                            snapshot_key)
from cortex.history.transfer import MAGIC
from cortex.ingest import READ_ATTEMPTS
from cortex.objects import Folder, Snapshot, Tree
from cortex.paths import path_problem
from cortex.query import render_file

from tests.conftest import EXAMPLES, fill_disk

PROJECTS = "notes/projects.org"
READING = "notes/reading.org"


# --- tree paths are untrusted -------------------------------------------------------------------

@pytest.mark.parametrize("path", ["../victim.org", "/etc/victim.org", "C:/victim.org", "notes/../../v.org",
                                  "a//b.org", "./a.org", "notes/", ".git/hooks.org", "a\0b.org", "a\nb.org",
                                  "a\\b.org", "victim.sh", "", "x" * 300 + ".org", "d/" * 65 + "a.org",
                                  "/".join(["x" * 200] * 6) + ".org"])
def test_a_path_that_cannot_name_an_org_file_under_the_root_is_refused(path):
    assert path_problem(path) is not None


@pytest.mark.parametrize("path", ["a.org", "notes/projects.org", "agents/assistant/logs/2026-11-20.org",
                                  "café/ünïcode file.org"])
def test_paths_ingest_writes_are_accepted(path):
    assert path_problem(path) is None


def crafted_export(cortex, tmp_path, entries, flat: bool = False) -> Path:
    """An export whose snapshot's tree names `entries` (path -> a real document), checksums all valid; `flat`:
    the tree as an earlier version stored it, one map of every path."""
    doc = parse("* Payload\n#!/bin/sh\nrm -rf ~\n").document
    objects = [*parse("* Payload\n#!/bin/sh\nrm -rf ~\n").objects]
    tree = Tree({path: doc.oid for path in entries})
    raw = encode_object("tree", {"entries": {path: doc.oid for path in entries}}) if flat else tree.encoded
    root = hash_bytes(raw)
    snap = Snapshot(root=root, parent=None, time_ns=1, message="crafted")
    pairs = [[o.oid, o.encoded] for o in (*objects, *([] if flat else tree.parts()), snap)] + [[root, raw]]
    body = encode([1, snap.oid, pairs])
    path = tmp_path / "crafted.cortex"
    path.write_bytes(MAGIC + body + hash_bytes(body))
    return path


@pytest.mark.parametrize("bad", ["../victim.org", "/tmp/victim.org", "notes/../../victim.org", ".x/a.org",
                                 "evil.sh", "a\x1bb.org", "d/" * 3000 + "deep.org"])
@pytest.mark.parametrize("flat", [False, True], ids=["by folder", "flat"])
def test_import_refuses_a_crafted_tree_and_adds_nothing(cortex, tmp_path, bad, flat):
    objects, snaps = cortex.object_count, cortex.snapshot_count
    with pytest.raises(DamagedExport, match="cannot be under an Org root"):
        cortex.import_(crafted_export(cortex, tmp_path, ["notes/fine.org", bad], flat))
    assert cortex.object_count == objects and cortex.snapshot_count == snaps


def test_import_refuses_a_folder_naming_paths_or_missing_or_of_the_wrong_kind(cortex, tmp_path):
    parsed = parse("* A\n")
    doc = parsed.document
    folder = Folder({"x/../../victim.org": doc.oid})  # a name, in a folder object, is one file's
    cases = (({"notes": folder.oid}, [folder], "a folder of its tree names files by path"),
             ({"notes": folder.oid}, [], f"refers to {folder.oid.hex()[:12]}, which is missing"),
             ({"notes": doc.oid}, [], "a document where a folder belongs"))
    for folders, objects, refused in cases:
        tree = encode_object("tree", {"folders": folders})  # as anyone may write one
        snap = Snapshot(root=hash_bytes(tree), parent=None, time_ns=1)
        pairs = [[o.oid, o.encoded] for o in (*parsed.objects, *objects, snap)] + [[hash_bytes(tree), tree]]
        body = encode([1, snap.oid, pairs])
        (tmp_path / "x.cortex").write_bytes(MAGIC + body + hash_bytes(body))
        with pytest.raises(DamagedExport, match=refused):
            cortex.import_(tmp_path / "x.cortex")
    assert cortex.snapshot_count == 0


def test_import_refuses_objects_of_the_wrong_kind(cortex, tmp_path):
    doc = parse("* A\n").document
    snap = Snapshot(root=doc.oid, parent=None, time_ns=1)  # a document where a tree belongs
    body = encode([1, snap.oid, [[doc.oid, doc.encoded], [snap.oid, snap.encoded]]])
    (tmp_path / "x.cortex").write_bytes(MAGIC + body + hash_bytes(body))
    with pytest.raises(DamagedExport, match="a document where a tree belongs"):
        cortex.import_(tmp_path / "x.cortex")


def test_a_folder_nested_a_thousand_deep_is_skipped_in_one_line_and_nothing_breaks(cortex, org):
    deep = org
    for _ in range(1000):  # (one level at a time: pathlib's mkdir(parents=True) recurses)
        deep = deep / "d"
        deep.mkdir(exist_ok=True)
    (deep / "bottom.org").write_text("* Bottom\n")
    (org / "d" / "near.org").write_text("* Near\n")
    report = cortex.ingest()
    [problem] = report.problems
    assert str(problem).startswith("d/" * 64 + "d: a folder deeper than 64 levels: not read")
    assert "d/near.org" in cortex.working().entries
    cortex.snapshot("with the deep folder")
    (org / "d" / "near.org").write_text("* Near, edited\n")
    cortex.rollback("HEAD", force=True)
    assert (org / "d" / "near.org").read_text() == "* Near\n" and (deep / "bottom.org").exists()
    remove_tree(org / "d")  # (pytest's own clean-up of old runs would recurse)


def test_rollback_to_a_crafted_tree_already_in_the_store_writes_nothing(cortex, org, tmp_path):
    """A store that took a crafted export before imports were checked: rollback still refuses."""
    doc = parse("* Payload\n").document
    tree = Tree({"notes/fine.org": doc.oid, "../victim.org": doc.oid})
    snap = Snapshot(root=tree.oid, parent=None, time_ns=1, message="crafted")
    cortex.store.objects.add_many([*parse("* Payload\n").objects, tree, snap])
    cortex.store.table(SNAPSHOTS)[snapshot_key(snap)] = snap.oid
    cortex.snapshot("mine")
    with pytest.raises(OutsideRoot, match="victim"):
        cortex.rollback(snap.oid.hex())
    assert not (tmp_path / "victim.org").exists() and not (org / "notes" / "fine.org").exists()
    assert cortex.resolve("HEAD").message == "mine"
    assert [p.key for p in cortex.fsck() if "cannot be under an Org root" in p.problem] == [tree.oid.hex()]


def test_rollback_refuses_a_folder_that_became_a_link_out_of_the_root(cortex, org, tmp_path):
    cortex.snapshot("first")
    outside = tmp_path / "outside"
    shutil.move(org / "notes", outside)
    os.symlink(outside, org / "notes")
    before = {p: p.read_bytes() for p in outside.iterdir()}
    cortex.ingest()
    cortex.snapshot("without notes")  # ingest does not follow a link to a folder
    with pytest.raises(OutsideRoot, match="leads outside the Org root"):
        cortex.rollback("HEAD~1")
    assert {p: p.read_bytes() for p in outside.iterdir()} == before
    assert cortex.resolve("HEAD").message == "without notes"


def test_a_folder_swapped_for_a_link_while_writing_is_refused(org, tmp_path, monkeypatch):
    """The folders are walked without following links, so a swap after the check is caught too."""
    import cortex.files as files

    outside = tmp_path / "outside"
    outside.mkdir()
    checked = files.confined(org, PROJECTS)  # the check passes; then the folder becomes a link
    shutil.rmtree(org / "notes")
    os.symlink(outside, org / "notes")
    monkeypatch.setattr(files, "confined", lambda root, rel, follow=True: checked)
    with pytest.raises(OutsideRoot, match="became a symbolic link"):
        write_under(org, PROJECTS, b"* attacker's bytes\n")
    assert list(outside.iterdir()) == []


def test_a_memory_write_never_follows_a_link_out_of_the_root(cortex, org, tmp_path):
    outside = tmp_path / "elsewhere.org"
    memory = org / "agents" / "reviewer" / "memory.org"
    shutil.move(memory, outside)
    os.symlink(outside, memory)
    before = outside.read_bytes()
    with pytest.raises(UserError, match="leads outside the Org root"):
        cortex.memory.add_item("reviewer", "fact", "written through a link")
    assert outside.read_bytes() == before and memory.is_symlink()


# --- rollback never deletes or overwrites what no snapshot holds ------------------------------------

@pytest.mark.parametrize("options", [{"keep": True}, {"force": True}, {}])
def test_rollback_refuses_files_no_snapshot_can_hold_and_names_them(cortex, org, options):
    cortex.snapshot("first")
    (org / "binary.org").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (org / "latin1.org").write_bytes(b"* caf\xe9\n")
    head = cortex.head_oid
    with pytest.raises(UnsnapshottableFiles) as err:
        cortex.rollback("HEAD", **options)
    assert "binary.org: line 3: binary file" in str(err.value) and "latin1.org: line 1: not UTF-8" in str(err.value)
    assert (org / "binary.org").read_bytes().startswith(b"\x89PNG") and (org / "latin1.org").exists()
    assert cortex.head_oid == head and cortex.snapshot_count == 1


def test_rollback_leaves_a_link_it_does_not_follow_alone(cortex, org, tmp_path):
    cortex.snapshot("first")
    (tmp_path / "outside.org").write_text("* Not mine\n")
    os.symlink(tmp_path / "outside.org", org / "linked.org")
    os.symlink("loop.org", org / "loop.org")
    cortex.rollback("HEAD")
    assert (org / "linked.org").is_symlink() and (org / "loop.org").is_symlink()
    assert (tmp_path / "outside.org").read_text() == "* Not mine\n"


def test_an_edit_saved_while_rollback_runs_is_never_overwritten(cortex, org, monkeypatch):
    import cortex.history.checkout as checkout

    cortex.snapshot("first")
    for path in (PROJECTS, READING):
        (org / path).write_text((org / path).read_text() + "* Later\n")
    cortex.ingest()
    cortex.snapshot("second")
    render, calls = checkout.org.render, []

    def render_then_edit(*args):  # the person saves reading.org once rollback has checked every file
        if not calls:
            (org / READING).write_text((org / READING).read_text() + "* Saved meanwhile\n")
        calls.append(args)
        return render(*args)

    monkeypatch.setattr(checkout.org, "render", render_then_edit)
    with pytest.raises(RollbackStopped) as err:
        cortex.rollback("HEAD~1")
    assert err.value.changed == READING and err.value.restored == [PROJECTS]
    assert "Saved meanwhile" in (org / READING).read_text()
    assert cortex.resolve("HEAD").message == "second"
    monkeypatch.undo()
    with pytest.raises(DirtyWorkingFiles, match=READING):
        cortex.rollback("HEAD~1")
    report = cortex.rollback("HEAD~1", keep=True)
    kept = cortex.store.objects[report.kept.root]
    assert "Saved meanwhile" in render_file(cortex.store, kept, READING)


def test_an_edit_saved_in_a_file_rollback_removes_is_kept(cortex, org, monkeypatch):
    import cortex.history.checkout as checkout

    cortex.snapshot("first")
    (org / "notes" / "new.org").write_text("* New\n")
    cortex.ingest()
    cortex.snapshot("second")
    holds = checkout.holds

    def edited_first(digest):
        (org / "notes" / "new.org").write_text("* New, edited meanwhile\n")
        return holds(digest)

    monkeypatch.setattr(checkout, "holds", edited_first)
    with pytest.raises(RollbackStopped, match="notes/new.org changed"):
        cortex.rollback("HEAD~1")
    assert (org / "notes" / "new.org").read_text() == "* New, edited meanwhile\n"


@pytest.mark.parametrize("size", [0, 1, COMPARED_BYTES - 1, COMPARED_BYTES, 3 * COMPARED_BYTES + 7])
def test_a_file_holds_its_bytes_only_when_every_one_is_there(tmp_path, size):
    data = bytes(i % 251 for i in range(size))
    path = tmp_path / "f.org"
    assert not file_holds(path, data)  # no file
    path.write_bytes(data)
    assert file_holds(path, data)
    for other in (data + b"x", data[:-1], data[:size // 2] + b"\0" + data[size // 2 + 1:] if size else b"\0"):
        if other != data:
            path.write_bytes(other)
            assert not file_holds(path, data), len(other)


exchanging = pytest.mark.skipif(files._libc_renameat2 is None, reason="this system has no atomic exchange")


def _save(path: Path, text: str) -> None:
    """Save as Emacs does: a temporary file renamed over the file."""
    path.with_name(".#" + path.name).write_text(text)
    os.replace(path.with_name(".#" + path.name), path)


def test_a_file_already_changed_is_left_as_it_is_its_path_never_showing_the_new_bytes(tmp_path):
    target = tmp_path / "f.org"
    target.write_text("* saved\n")
    seen = []

    def check(path):  # what a reader of the file sees while it is checked (an editor reading it to save next)
        seen.append((path.name, target.read_text(), target.stat().st_ino))
        return False

    inode = target.stat().st_ino
    with pytest.raises(ChangedMeanwhile):
        Staged(tmp_path, "f.org", b"* new\n").put(check, free_later=True)
    assert seen == [("f.org", "* saved\n", inode)]
    assert os.listdir(tmp_path) == ["f.org"] and target.read_text() == "* saved\n"


@exchanging
def test_a_save_landing_between_the_check_and_the_exchange_is_put_back_with_nothing_left_beside_it(tmp_path):
    target = tmp_path / "f.org"
    target.write_text("* as read\n")
    seen = []

    def check(path):  # as expected; then a save lands before the exchange, and comes out of it
        seen.append((path.name, path.read_text(), target.read_text()))
        if len(seen) == 1:
            _save(target, "* saved\n")
            return True
        return path.read_text() == "* as read\n"

    with pytest.raises(ChangedMeanwhile):
        Staged(tmp_path, "f.org", b"* new\n").put(check)
    [(name, checked, _), (taken_out, came_out, in_place)] = seen
    assert (name, checked) == ("f.org", "* as read\n")
    assert taken_out != "f.org" and came_out == "* saved\n" and in_place == "* new\n"
    assert os.listdir(tmp_path) == ["f.org"] and target.read_text() == "* saved\n"


@exchanging
def test_a_save_landing_as_a_file_is_put_back_stays_in_place(tmp_path):
    target = tmp_path / "f.org"
    target.write_text("* first save\n")
    checks = []

    def check(path):  # as expected at first; then a save lands, and another over the new file as it is put back
        checks.append(path.name)
        if len(checks) == 1:
            _save(target, "* second save\n")
            return True
        _save(target, "* newest save\n")  # over the new file, which the exchange had put in place
        return False

    with pytest.raises(ChangedMeanwhile):
        Staged(tmp_path, "f.org", b"* new\n").put(check)
    assert os.listdir(tmp_path) == ["f.org"] and target.read_text() == "* newest save\n"


def test_a_folder_made_where_a_file_was_is_left_there(tmp_path):
    target = tmp_path / "f.org"
    staged = Staged(tmp_path, "f.org", b"* new\n")  # (no file there yet: made anew)
    target.mkdir()
    (target / "inside.org").write_text("* kept\n")
    with pytest.raises(ChangedMeanwhile):
        staged.put(lambda path: file_holds(path, b"* as read\n"))
    assert os.listdir(tmp_path) == ["f.org"] and (target / "inside.org").read_text() == "* kept\n"


@exchanging
def test_a_file_made_where_none_was_expected_is_never_replaced(tmp_path):
    target = tmp_path / "f.org"

    checks = []

    def check(path):  # no file, as expected (before the exchange, and after it found none); then one is made
        checks.append(not path.exists())
        if len(checks) == 2:
            target.write_text("* made meanwhile\n")
        return checks[-1]

    with pytest.raises(ChangedMeanwhile):
        Staged(tmp_path, "f.org", b"* new\n").put(check)
    assert checks == [True, True]
    assert os.listdir(tmp_path) == ["f.org"] and target.read_text() == "* made meanwhile\n"


@pytest.mark.parametrize("as_expected", [True, False])
def test_a_save_landing_while_a_removal_checks_the_file_stays(tmp_path, as_expected):
    target = tmp_path / "f.org"
    target.write_text("* to remove\n")

    checks = []

    def check(path):  # the file as expected; then taken away to be checked, a save landing in its place meanwhile
        checks.append(path.name)
        if len(checks) == 1:
            return path.read_text() == "* to remove\n"
        _save(target, "* saved meanwhile\n")
        return as_expected and path.read_text() == "* to remove\n"

    if as_expected:
        remove_under(tmp_path, "f.org", check)
    else:
        with pytest.raises(ChangedMeanwhile):
            remove_under(tmp_path, "f.org", check)
    assert os.listdir(tmp_path) == ["f.org"] and target.read_text() == "* saved meanwhile\n"


def test_a_file_failing_the_check_of_its_removal_is_never_moved(tmp_path):
    target = tmp_path / "f.org"
    target.write_text("* edited\n")
    seen = []

    def check(path):  # what a reader of the file sees while it is checked
        seen.append((path.name, target.read_text()))
        return path.read_text() == "* as synced\n"

    with pytest.raises(ChangedMeanwhile):
        remove_under(tmp_path, "f.org", check)
    assert seen == [("f.org", "* edited\n")]
    assert os.listdir(tmp_path) == ["f.org"] and target.read_text() == "* edited\n"


def test_a_file_edited_after_the_check_of_its_removal_is_put_back(tmp_path):
    target = tmp_path / "f.org"
    target.write_text("* as synced\n")
    checks = []

    def check(path):  # as synced when checked in place; edited in place before it is taken away
        checks.append(path.read_text())
        if len(checks) == 1:
            target.write_text("* edited\n")
            return True
        return checks[-1] == "* as synced\n"

    with pytest.raises(ChangedMeanwhile):
        remove_under(tmp_path, "f.org", check)
    assert checks == ["* as synced\n", "* edited\n"]
    assert os.listdir(tmp_path) == ["f.org"] and target.read_text() == "* edited\n"


# --- links, loops and other things in the Org folder ------------------------------------------------

def test_a_looping_link_is_skipped_with_one_line(cortex, org):
    os.symlink("loop.org", org / "loop.org")
    report = cortex.ingest()
    assert [str(p) for p in report.problems] == ["loop.org: a symbolic link that loops"]
    cortex.snapshot("with a loop beside")
    cortex.memory.add_item("assistant", "fact", "Loops are skipped.")
    assert "Loops are skipped." in cortex.show("agents/assistant/memory.org")


def test_the_cli_warns_of_a_looping_link_and_goes_on(tmp_path, org):
    os.symlink("loop.org", org / "agents" / "assistant" / "loop.org")
    env = {**os.environ, "CORTEX_STORE": str(tmp_path / "store")}
    cortex_bin = Path(sys.executable).parent / "cortex"
    for args in (["ingest", str(org)], ["memory", "add", "assistant", "Still works."],
                 ["snapshot", "-m", "x"], ["rollback", "HEAD"]):
        proc = subprocess.run([str(cortex_bin), *args, "--org", str(org)], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_link_out_of_the_root_is_not_followed(cortex, org, tmp_path):
    (tmp_path / "secret.org").write_text("* The neighbour's secret\n")
    os.symlink(tmp_path / "secret.org", org / "peek.org")
    os.symlink(org / "notes" / "projects.org", org / "alias.org")  # inside the root: followed
    report = cortex.ingest()
    assert [str(p) for p in report.problems] == [
        f"peek.org: a symbolic link out of the Org root (to {tmp_path / 'secret.org'}): not followed"]
    assert "peek.org" not in cortex.working().entries and "alias.org" in cortex.working().entries


def test_a_link_in_an_agents_folder_is_followed_only_to_a_file_of_that_folder(cortex, org):
    assistant = org / "agents" / "assistant"
    os.symlink(org / "agents" / "reviewer" / "memory.org", assistant / "linked.org")  # another agent's file
    os.symlink(org / "notes" / "projects.org", assistant / "notes.org")  # a file outside every agent's folder
    os.symlink(assistant / "memory.org", assistant / "again.org")  # its own file: followed
    report = cortex.ingest()
    assert sorted(str(p) for p in report.problems) == [
        "agents/assistant/linked.org: a symbolic link out of the agent's folder agents/assistant/ "
        "(to agents/reviewer/memory.org): not followed",
        "agents/assistant/notes.org: a symbolic link out of the agent's folder agents/assistant/ "
        "(to notes/projects.org): not followed"]
    assert {"agents/assistant/again.org", "agents/reviewer/memory.org"} <= cortex.working().entries.keys()
    assert not {"agents/assistant/linked.org", "agents/assistant/notes.org"} & cortex.working().entries.keys()


def test_a_memory_write_never_follows_a_link_into_another_agents_folder(cortex, org):
    memory, theirs = org / "agents" / "assistant" / "memory.org", org / "agents" / "reviewer" / "memory.org"
    memory.unlink()
    os.symlink(theirs, memory)
    before = theirs.read_bytes()
    with pytest.raises(UserError, match="a symbolic link out of the agent's folder agents/assistant/"):
        cortex.memory.add_item("assistant", "fact", "written through a link")
    assert theirs.read_bytes() == before and memory.is_symlink()


def test_a_fifo_named_like_an_org_file_does_not_hang_ingest(cortex, org):
    os.mkfifo(org / "pipe.org")
    report = cortex.ingest()
    assert [str(p) for p in report.problems] == ["pipe.org: not a regular file"]


def test_a_file_name_with_a_control_character_is_not_ingested(cortex, org):
    (org / "bell\a.org").write_text("* Ring\n")
    report = cortex.ingest()
    assert [p.path for p in report.problems] == ["bell\a.org"]
    assert "bell\a.org" not in cortex.working().entries


# --- what a rewrite keeps -------------------------------------------------------------------------------

def test_a_rewritten_file_keeps_its_mode_and_owner(cortex, org):
    cortex.snapshot("first")
    file = org / PROJECTS
    file.write_text(file.read_text() + "* Later\n")
    os.chmod(file, 0o640)
    if os.geteuid() == 0:
        os.chown(file, 4321, 4321)
    cortex.ingest()
    cortex.snapshot("second")
    cortex.rollback("HEAD~1")
    assert file.stat().st_mode & 0o7777 == 0o640
    if os.geteuid() == 0:
        assert (file.stat().st_uid, file.stat().st_gid) == (4321, 4321)


def test_a_new_file_follows_the_umask_not_0600(cortex, org):
    cortex.snapshot("first")
    (org / "notes" / "projects.org").unlink()
    cortex.ingest()
    cortex.rollback("HEAD", force=True)
    assert (org / PROJECTS).stat().st_mode & 0o777 == 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_rollback_writes_through_a_link_inside_the_root(cortex, org):
    (org / "real").mkdir()
    shutil.move(org / READING, org / "real" / "reading.org")
    os.symlink(org / "real" / "reading.org", org / READING)
    cortex.ingest()
    cortex.snapshot("first")
    (org / READING).write_text("* Changed through the link\n")
    cortex.ingest()
    cortex.snapshot("second")
    cortex.rollback("HEAD~1")
    assert (org / READING).is_symlink()
    assert (org / "real" / "reading.org").read_bytes() == (org / READING).read_bytes()
    assert b"Changed through" not in (org / READING).read_bytes()


def test_rollback_removes_the_folders_it_emptied(cortex, org):
    cortex.snapshot("first")
    (org / "extra" / "deeper").mkdir(parents=True)
    (org / "extra" / "deeper" / "new.org").write_text("* New\n")
    (org / "kept").mkdir()
    cortex.ingest()
    cortex.snapshot("second")
    cortex.rollback("HEAD~1")
    assert not (org / "extra").exists() and (org / "kept").is_dir()  # kept: rollback did not empty it


# --- temporary files of killed writes ------------------------------------------------------------------

def test_temporary_files_of_killed_writes_are_removed_by_the_next_ingest(cortex, org):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    leftover = org / "notes" / f".projects.org.{pid}.0123abcd.tmp"
    old_style = org / ".memory.org.k2j4_x9q.tmp"
    live = org / f".reading.org.{os.getpid()}.89abcdef.tmp"
    mine = org / ".my-notes.tmp"
    for file in (leftover, old_style, live, mine):
        file.write_text("half")
    os.utime(old_style, (1, 1))
    cortex.ingest()
    assert not leftover.exists() and not old_style.exists() and live.exists() and mine.exists()


def test_a_memory_write_killed_before_its_rename_leaves_nothing_after_the_next_run(tmp_path, org):
    store = tmp_path / "store"
    with cx.open(store, org) as c:
        c.ingest()
    script = textwrap.dedent(f"""
        import os, signal
        import cortex.api as cx
        import cortex.files
        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace = cortex.files._renameat2 = die  # whichever puts the new file in place
        cx.open({str(store)!r}, {str(org)!r}).memory.add_item("assistant", "fact", "Never written.")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    folder = org / "agents" / "assistant"
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]  # the killed write's file
    with cx.open(store, org) as c:
        c.ingest()
        assert c.fsck() == []
        assert "Never written." not in c.show("agents/assistant/memory.org")
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_leftovers_of_a_killed_index_save_are_removed_when_the_index_is_loaded(cortex):
    cortex.search("staging")
    cortex.close()
    index = cortex.store_folder() / "index"
    stale_folder, stale_file, fresh = index / ".keyword.k2j4x9q1", index / ".vectors.usearch.ab12cd34", index / ".x"
    stale_folder.mkdir()
    (stale_folder / "meta.json").write_text("{}")
    for file in (stale_file, fresh):
        file.write_bytes(b"half an index")
    for path in (stale_folder, stale_file):
        os.utime(path, (1, 1))
    with cx.open(cortex.store_folder(), cortex.root) as again:
        assert again.search("staging")
    assert not stale_folder.exists() and not stale_file.exists() and fresh.exists()


# --- a full disk under the Org root -----------------------------------------------------------------

def test_a_full_disk_under_the_org_root_is_one_line_and_loses_nothing(small_disk, tmp_path):
    org = small_disk / "org"
    shutil.copytree(EXAMPLES, org)
    store = tmp_path / "store"  # the store has room: only the Org files' disk is full
    with cx.open(store, org) as c:
        c.ingest()
        c.snapshot("first")
        (org / PROJECTS).write_text((org / PROJECTS).read_text() + "* Later\n")
        c.ingest()
        c.snapshot("second")
    memory = (org / "agents/assistant/memory.org").read_bytes()
    fill_disk(small_disk)
    cortex_bin = Path(sys.executable).parent / "cortex"
    for args, said in ((["memory", "add", "assistant", "A fact with nowhere to go."], "the disk is full"),
                       (["rollback", "HEAD~1"], "could not be written: the disk is full")):
        proc = subprocess.run([str(cortex_bin), *args, "--store", str(store), "--org", str(org)],
                              capture_output=True, text=True)
        assert proc.returncode == 1 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert (org / "agents/assistant/memory.org").read_bytes() == memory
    assert "* Later" in (org / PROJECTS).read_text()
    assert not [p for p in org.rglob(".*.tmp")]
    (small_disk / "ballast").unlink()
    with cx.open(store, org) as c:
        assert c.fsck() == [] and c.resolve("HEAD").message == "second"
        c.rollback("HEAD~1")
        assert "* Later" not in (org / PROJECTS).read_text()


def test_two_saves_of_one_index_folder_take_turns(cortex, monkeypatch):
    """Two processes closing one store save its index folder at once: they must not interleave."""
    import cortex.search.keyword as keyword
    from cortex.search.index import SearchIndex

    cortex.search("staging")
    index = cortex._search_index
    index.save()  # a saved index, to be replaced by two saves at once
    other = SearchIndex(cortex.store, index.embedder, index.folder)
    other.follow(cortex.working())
    index.dirty = True
    replace, both_aside = os.replace, threading.Barrier(2, timeout=1)

    def waiting_replace(source, target, **kwargs):
        replace(source, target, **kwargs)
        if Path(source).name == "keyword":  # the old index moved aside: let the other save catch up, if it can
            with suppress(threading.BrokenBarrierError):
                both_aside.wait()

    monkeypatch.setattr(keyword.os, "replace", waiting_replace)
    errors = []

    def save(index):
        try:
            index.save()
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(i,)) for i in (index, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert SearchIndex.load(cortex.store, index.embedder, index.folder).root == cortex.working().oid


BIG = b"* one\n" * 20000  # large enough to keep its spare


def _replace(folder: Path, data: bytes) -> None:
    """Replace big.org as a sync does: staged, renamed over it with the old bytes kept, then freed."""
    staged = Staged(folder, "big.org", data)
    staged.put(free_later=True)
    staged.free()


def _spares(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".tmp")]


def test_a_replaced_file_is_written_over_by_the_next_replacement_of_it(tmp_path):
    (tmp_path / "big.org").write_bytes(BIG)
    os.chmod(tmp_path / "big.org", 0o640)
    first = os.stat(tmp_path / "big.org").st_ino
    _replace(tmp_path, BIG * 2)
    assert len(_spares(tmp_path)) == 1  # the first version's blocks, kept under a temporary name
    os.chmod(tmp_path / "big.org", 0o600)
    _replace(tmp_path, b"* three\n" * 20000)
    now = os.stat(tmp_path / "big.org")
    assert now.st_ino == first and stat.S_IMODE(now.st_mode) == 0o600  # its spare, with the mode of the day
    assert (tmp_path / "big.org").read_bytes() == b"* three\n" * 20000 and len(_spares(tmp_path)) == 1


def test_a_replaced_file_linked_elsewhere_is_never_written_over(tmp_path):
    (tmp_path / "big.org").write_bytes(BIG)
    os.link(tmp_path / "big.org", tmp_path / "backup")
    _replace(tmp_path, BIG * 2)
    _replace(tmp_path, b"* three\n")
    assert (tmp_path / "backup").read_bytes() == BIG and (tmp_path / "big.org").read_bytes() == b"* three\n"


def test_no_spare_is_kept_of_a_small_file(tmp_path):
    (tmp_path / "small.org").write_bytes(b"* small\n")
    staged = Staged(tmp_path, "small.org", b"* smaller\n")
    staged.put(free_later=True)
    staged.free()
    assert _spares(tmp_path) == []


def test_a_spare_kept_too_long_is_removed_not_written_over(tmp_path):
    (tmp_path / "big.org").write_bytes(BIG)
    _replace(tmp_path, b"* two\n")
    [spare] = _spares(tmp_path)
    old = time.time() - SPARE_SECONDS - 1
    os.utime(tmp_path / spare, (old, old))
    _replace(tmp_path, b"* three\n")
    assert (tmp_path / "big.org").read_bytes() == b"* three\n"
    assert _spares(tmp_path) == []  # removed, and "two" was written anew (and is too small to keep)


def test_a_process_removes_its_spares_when_it_exits(tmp_path):
    (tmp_path / "big.org").write_bytes(BIG)
    script = textwrap.dedent(f"""
        from pathlib import Path
        from cortex.files import Staged
        staged = Staged(Path({str(tmp_path)!r}), "big.org", b"* two\\n")
        staged.put(free_later=True)
        staged.free()
        assert len([n for n in __import__("os").listdir({str(tmp_path)!r}) if n.endswith(".tmp")]) == 1
    """)
    subprocess.run([sys.executable, "-c", script], check=True)
    assert _spares(tmp_path) == [] and (tmp_path / "big.org").read_bytes() == b"* two\n"


@pytest.mark.parametrize("times", [2, READ_ATTEMPTS])
def test_a_file_that_changes_while_it_is_read_is_read_again(cortex, org, monkeypatch, times):
    """A reader that opened a file before it was written over (in place, or a replaced file's spare)
    sees its stat move: it reads again rather than take half of one version and half of another; a
    file that never holds still keeps its last version until it does."""
    path = org / "notes.org"
    path.write_text("* first version\n")
    real_open, writes = open, []

    class WrittenWhileRead:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def fileno(self):
            return self.handle.fileno()

        def read(self, size=-1):
            if len(writes) < times or times >= READ_ATTEMPTS:  # written over after the reader's first look at it
                writes.append(f"* version {len(writes) + 2}, longer\n")
                time.sleep(0.02)  # past the coarsest clock tick of a file time stamp
                path.write_text(writes[-1])
            return self.handle.read(size)

    def reading(file, *args, **kwargs):
        handle = real_open(file, *args, **kwargs)
        return WrittenWhileRead(handle) if os.fspath(file) == os.fspath(path) else handle

    cortex.ingest()
    monkeypatch.setattr("builtins.open", reading)
    report = cortex.ingest()  # (the sync of the Org folder before it reads the file too)
    assert len(writes) == times if times < READ_ATTEMPTS else len(writes) >= times
    if times < READ_ATTEMPTS:
        assert render_file(cortex.store, cortex.working(), "notes.org") == writes[-1] and not report.problems
    else:
        assert render_file(cortex.store, cortex.working(), "notes.org") == "* first version\n"
        assert [(p.path, p.reason) for p in report.problems] == [
            ("notes.org", "kept changing while it was read; it is read when it is saved")]


def test_an_agent_folder_nested_deeper_than_python_recurses_is_purged(cortex, org):
    deep = org / "agents" / "reviewer"
    for _ in range(1200):
        deep = deep / "d"
        deep.mkdir()
    (deep / "bottom.org").write_text("* Bottom\n")
    try:
        cortex.memory.purge("reviewer")
        assert not (org / "agents" / "reviewer").exists()
    finally:
        if (org / "agents" / "reviewer").exists():
            remove_tree(org / "agents" / "reviewer")  # (pytest's own clean-up of old runs would recurse)


# --- appends ---------------------------------------------------------------------------------------

LOG = "agents/a/logs/2026-11-27.org"


def log_of(root: Path, data: bytes) -> Path:
    path = root / LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_an_append_writes_after_the_bytes_the_edit_read_in_the_same_file(tmp_path):
    path = log_of(tmp_path, b"#+TITLE: a\n")
    inode = path.stat().st_ino
    data = b"#+TITLE: a\n"
    for n in range(3):  # the first append compares the file whole, the next ones its stat and last bytes
        done, data = files.edit_file(tmp_path, LOG, lambda old, n=n: files.Appended(old, f"* {n}\n".encode()), data)
        assert done and isinstance(data, files.Appended) and len(data) == path.stat().st_size
    assert files.whole(data) == b"#+TITLE: a\n* 0\n* 1\n* 2\n" == path.read_bytes() and path.stat().st_ino == inode
    assert not list(path.parent.glob(".*.tmp"))


def test_appended_bytes_are_joined_once_asked_for_whole_their_ends_read_without_joining_them():
    first = files.Appended(b"#+TITLE: a\r\n* 0", b"\r\n")
    chain = files.Appended(files.Appended(first, b"* 1\r\n"), b"* 2\r\n")
    assert len(chain) == 27 and chain.first_line == b"#+TITLE: a\r\n"
    assert [files.tail_of(chain, n) for n in (3, 8, 14, 99)] == [
        b"2\r\n", b"1\r\n* 2\r\n", b" 0\r\n* 1\r\n* 2\r\n", b"#+TITLE: a\r\n* 0\r\n* 1\r\n* 2\r\n"]
    assert first._data is chain._data is None  # (none of them joined yet: a tail reads only what it needs)
    assert files.whole(chain) == b"#+TITLE: a\r\n* 0\r\n* 1\r\n* 2\r\n" and chain.old is None
    later = files.Appended(chain, b"* 3\n")  # on bytes made whole: the chain ends there
    assert files.whole(later) == files.whole(chain) + b"* 3\n" and files.tail_of(later, 6) == b"\r\n* 3\n"
    assert files.Appended(b"no line end", b" yet\nthen").first_line == b"no line end yet\n"


@pytest.mark.parametrize("saved", [b"#+TITLE: a\n* a person's line\n", b"#+TITLE: b\n", b""])
def test_an_append_to_a_file_saved_since_it_was_read_runs_again_on_the_saved_bytes(tmp_path, saved):
    path = log_of(tmp_path, b"#+TITLE: a\n")
    files.edit_file(tmp_path, LOG, lambda old: files.Appended(old, b"* 0\n"), b"#+TITLE: a\n")
    path.write_bytes(saved)  # in place, as some editors save: same inode, maybe the same size
    given = []
    done, data = files.edit_file(tmp_path, LOG, lambda old: given.append(old) or files.Appended(old, b"* 1\n"),
                                 b"#+TITLE: a\n* 0\n")
    assert given == [b"#+TITLE: a\n* 0\n", saved] and files.whole(data) == saved + b"* 1\n" == path.read_bytes()


def test_a_file_is_known_as_appended_only_while_it_is_as_the_append_left_it(tmp_path):
    path = log_of(tmp_path, b"#+TITLE: a\n")
    assert not files.as_appended(tmp_path, LOG, b"#+TITLE: a\n")  # never appended to here: read it to know
    files.append_under(tmp_path, LOG, b"#+TITLE: a\n", b"* 0\n")
    assert files.as_appended(tmp_path, LOG, b"#+TITLE: a\n* 0\n")
    assert not files.as_appended(tmp_path, LOG, b"#+TITLE: a\n* 1\n")  # other last bytes
    assert not files.as_appended(tmp_path, LOG, b"#+TITLE: a\n")  # other length
    with path.open("ab") as log:  # another writer's append
        log.write(b"* 1\n")
    assert not files.as_appended(tmp_path, LOG, b"#+TITLE: a\n* 0\n* 1\n")
    assert not files.as_appended(tmp_path, "agents/a/logs/none.org", b"")


def test_an_append_refuses_a_file_that_no_longer_holds_what_it_read_and_writes_nothing(tmp_path):
    path = log_of(tmp_path, b"#+TITLE: a\n* 0\n")
    with pytest.raises(ChangedMeanwhile):
        files.append_under(tmp_path, LOG, b"#+TITLE: b\n* 0\n", b"* 1\n")  # the same size, other bytes
    with pytest.raises(ChangedMeanwhile):
        files.append_under(tmp_path, LOG, b"#+TITLE: a\n", b"* 1\n")  # longer than what was read
    assert path.read_bytes() == b"#+TITLE: a\n* 0\n"


def test_an_append_to_a_file_replaced_during_the_write_runs_again_on_the_new_file(tmp_path, monkeypatch):
    path = log_of(tmp_path, b"* 0\n")
    write, replaced = os.pwrite, []

    def save_then_write(fd, data, offset):  # an editor's save (a rename) lands while the addition is written
        if not replaced:
            replaced.append(True)
            (path.parent / "saved.tmp").write_bytes(b"* saved\n")
            os.replace(path.parent / "saved.tmp", path)
        return write(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", save_then_write)
    done, data = files.edit_file(tmp_path, LOG, lambda old: files.Appended(old, b"* 1\n"), b"* 0\n")
    assert files.whole(data) == b"* saved\n* 1\n" == path.read_bytes()


def test_an_append_the_disk_refuses_leaves_the_file_as_it_was(small_disk):
    path = log_of(small_disk, b"#+TITLE: a\n* 0\n")
    fill_disk(small_disk)
    with pytest.raises(files.DiskFull, match="the disk is full"):
        files.edit_file(small_disk, LOG, lambda old: files.Appended(old, b"* 1\n" * 50_000), path.read_bytes())
    assert path.read_bytes() == b"#+TITLE: a\n* 0\n"
