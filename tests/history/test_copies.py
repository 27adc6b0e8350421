"""Working copies: checkout, sync by a three-way merge per file and headline, conflicts kept in Org, nothing lost."""

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cortex.api as cx
from cortex.backends import open_store
from cortex.errors import UserError
from cortex import files
from cortex.files import Staged
from cortex.history import copies
from cortex.history.copies import NotACopy, check_out, conflicts, sync
from cortex.history.fsck import fsck
from cortex.ingest import commit_files, read_folder, working_tree
from cortex.query import render_file

from tests.conftest import fill_disk

PLAN = """#+TITLE: Plan
* Launch
:PROPERTIES:
:ID: launch
:END:
Ship on Monday.
* Budget
Ten thousand.
* Notes
Nothing yet.
"""


@pytest.fixture
def store(store_at):
    with open_store(store_at) as s:
        commit_files(s, lambda tree: {"plan.org": PLAN.encode(), "team/ann.org": b"* Ann\nLikes tea.\n"}, "seed")
        yield s


def edit(folder, rel, old, new):
    path = folder / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def stored(store, rel):
    return render_file(store, working_tree(store), rel)


def test_checkout_writes_the_working_state_syncs_a_copy_and_refuses_a_used_folder(store, tmp_path):
    report = check_out(store, tmp_path / "a")
    assert (tmp_path / "a" / "plan.org").read_text() == PLAN and report.received == ["plan.org", "team/ann.org"]
    edit(tmp_path / "a", "plan.org", "Ship on Monday.", "Ship on Tuesday.")
    again = check_out(store, tmp_path / "a")  # a copy already: brought up to date, its edit kept and sent
    assert again.sent == ["plan.org"] and "Ship on Tuesday." in stored(store, "plan.org")
    copies.forget_copy(store, copies.working_copies(store)[0].id)
    with pytest.raises(NotACopy, match="a working copy this store has forgotten; remove .*/a/.cortex to check"):
        check_out(store, tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "mine.org").write_text("* mine\n")
    with pytest.raises(UserError, match="not empty"):
        check_out(store, tmp_path / "b")
    with pytest.raises(NotACopy, match="cortex checkout"):
        sync(store, tmp_path / "b")


def test_disjoint_edits_of_two_copies_and_the_store_all_land(store, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    check_out(store, a), check_out(store, b)
    edit(a, "plan.org", "Ship on Monday.", "Ship on Tuesday.")  # one headline of plan.org
    edit(b, "plan.org", "Ten thousand.", "Twelve thousand.")  # another headline of the same file
    edit(b, "team/ann.org", "Likes tea.", "Likes green tea.")  # another file
    commit_files(store, lambda tree: {"team/bo.org": b"* Bo\n"}, "a store-side writer")
    first = sync(store, a)
    assert first.sent == ["plan.org"] and first.received == ["team/bo.org"] and first.conflicts == []
    second = sync(store, b)
    assert second.merged == ["plan.org"] and second.conflicts == []
    sync(store, a)
    for text in (stored(store, "plan.org"), (a / "plan.org").read_text(), (b / "plan.org").read_text()):
        assert "Ship on Tuesday." in text and "Twelve thousand." in text and "CONFLICT" not in text
    assert (a / "team/ann.org").read_text() == "* Ann\nLikes green tea.\n" and (a / "team/bo.org").exists()


def test_a_spared_file_is_read_and_sent_but_written_only_by_a_sync_that_does_not_spare_it(store, tmp_path):
    a = tmp_path / "a"
    check_out(store, a)
    edit(a, "plan.org", "Ship on Monday.", "Ship on Tuesday.")  # saved by an editor that keeps it open
    commit_files(store, lambda tree: {"plan.org": stored(store, "plan.org").replace("Ten thousand.", "Twelve.")
                                      .encode(), "team/bo.org": b"* Bo\n"}, "a store-side writer")
    saved = (a / "plan.org").read_text()
    report = sync(store, a, spare=lambda rel: rel == "plan.org")
    assert report.sent == ["plan.org"] and report.deferred == ["plan.org"] and report.received == ["team/bo.org"]
    assert (a / "plan.org").read_text() == saved  # not written
    assert "Ship on Tuesday." in stored(store, "plan.org") and "Twelve." in stored(store, "plan.org")
    assert "open in an editor" in str(report)
    assert sync(store, a, spare=lambda rel: rel == "plan.org").deferred == ["plan.org"]  # still waiting
    later = sync(store, a)
    assert later.received == ["plan.org"] and later.deferred == [] and later.conflicts == []
    assert (a / "plan.org").read_text() == stored(store, "plan.org")
    assert sync(store, a).received == [] and not list(a.glob("**/*.org.*"))  # up to date, nothing staged left


def test_the_same_headline_changed_on_both_sides_keeps_both_until_resolved(store, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    check_out(store, a), check_out(store, b)
    edit(a, "plan.org", "Ship on Monday.", "Ship on Tuesday.")
    edit(b, "plan.org", "Ship on Monday.", "Ship on Friday.")
    sync(store, a)
    report = sync(store, b)
    assert [(c.kind, c.path, c.id) for c in report.conflicts] == [("both-changed", "plan.org", "launch")]
    text = (b / "plan.org").read_text()
    assert "Ship on Tuesday." in text and "Ship on Friday." in text and ":CONFLICT:" in text
    assert text == stored(store, "plan.org") and len(conflicts(store, b)) == len(conflicts(store)) == 1
    sync(store, a)
    assert len(conflicts(store, a)) == 1
    # Resolved in copy a: keep Friday, delete the conflict copy.
    lines = (a / "plan.org").read_text().split("\n* ")
    kept = [part for part in lines if "CONFLICT" not in part]
    (a / "plan.org").write_text("\n* ".join(kept).replace("Ship on Tuesday.", "Ship on Friday."))
    sync(store, a), sync(store, b)
    assert conflicts(store) == [] and conflicts(store, b) == []
    assert "Ship on Friday." in stored(store, "plan.org") and "Tuesday" not in stored(store, "plan.org")


def _edited_on_both_sides(store, tmp_path, archive):
    """A working copy of a plan (`archive` lines longer) that the store and the copy each edited since."""
    plan = PLAN + "* Archive\n" + "An old line.\n" * archive
    commit_files(store, lambda tree: {"plan.org": plan.encode()}, "archive")
    a = tmp_path / "a"
    check_out(store, a)
    commit_files(store, lambda tree: {"plan.org": plan.replace("Nothing yet.", "From the store.").encode()}, "w")
    edit(a, "plan.org", "Ten thousand.", "Nine thousand.")
    return a


def _all_edits_in(store, a):
    """The store's edit, the copy's, and the editor's save are all in the store and in the copy."""
    for text in (stored(store, "plan.org"), (a / "plan.org").read_text()):
        assert all(s in text for s in ("Ship on Sunday.", "Nine thousand.", "From the store.")), text


@pytest.mark.parametrize("archive", [0, 4000])  # lines: a large file's bytes read are compared, not hashed
@pytest.mark.parametrize("exchange", [True, False])  # files exchanged in one step, or checked then renamed over
def test_an_editor_save_during_a_sync_is_kept_and_merged_next_time(store, tmp_path, monkeypatch, archive, exchange):
    if not exchange:
        monkeypatch.setattr(files, "_libc_renameat2", None)
    a = _edited_on_both_sides(store, tmp_path, archive)
    real_put = Staged.put

    def save_first(staged, unchanged, **how):  # Emacs saves (temp file, rename) just before the sync renames its own
        path = staged.target
        temp = path.with_name(".#" + path.name)
        temp.write_text(path.read_text().replace("Ship on Monday.", "Ship on Sunday."))
        os.replace(temp, path)
        return real_put(staged, unchanged, **how)

    monkeypatch.setattr(Staged, "put", save_first)
    report = sync(store, a)
    assert report.kept == ["plan.org"] and "Nine thousand." in stored(store, "plan.org")
    assert fsck(store) == []  # the base kept for the file is the version read, stored with it
    assert [p.name for p in a.iterdir() if p.name.endswith(".tmp")] == []  # the sync's new bytes are dropped
    monkeypatch.setattr(Staged, "put", real_put)
    sync(store, a)
    _all_edits_in(store, a)


@pytest.mark.parametrize("archive", [0, 4000])
def test_an_editor_save_landing_while_a_sync_checks_the_file_is_kept_and_merged_next_time(store, tmp_path,
                                                                                           monkeypatch, archive):
    a = _edited_on_both_sides(store, tmp_path, archive)
    shown = (a / "plan.org").read_text()  # what the editor shows, as the sync reads it
    saved = []

    def saving_as_it_checks(make):  # Emacs saves (temp file, rename) once the check has read the file
        def checks(expected):
            check = make(expected)

            def check_then_save(path):
                fit = check(path)
                if not saved:
                    temp = a / ".#plan.org"
                    temp.write_text(shown.replace("Ship on Monday.", "Ship on Sunday."))
                    os.replace(temp, a / "plan.org")
                    saved.append(path)
                return fit
            return check_then_save
        return checks

    monkeypatch.setattr(copies, "holds", saving_as_it_checks(copies.holds))
    monkeypatch.setattr(copies, "holds_bytes", saving_as_it_checks(copies.holds_bytes))
    sync(store, a)
    assert saved and "Ship on Sunday." in (a / "plan.org").read_text()  # the rename did not unlink the save
    monkeypatch.undo()
    sync(store, a)
    _all_edits_in(store, a)
    assert sync(store, a).received == []  # up to date; it waited for the last one to settle
    assert fsck(store) == [] and not list(a.rglob(".*.tmp"))


SYNC_LOOP = """
import sys
from cortex.backends import open_store
from cortex.history.copies import sync
with open_store(sys.argv[1]) as s:
    print("ready", flush=True)
    while True:
        sync(s, sys.argv[2])
"""


def test_a_sync_killed_at_any_moment_is_completed_by_the_next(store, store_at, tmp_path):
    a = tmp_path / "a"
    check_out(store, a)
    rng = random.Random(7)
    for trial in range(4):
        many = {f"bulk/{trial}-{n}.org": f"* file {n}\n".encode() * 50 for n in range(40)}
        commit_files(store, lambda tree, many=many: many, "bulk")
        edit(a, "team/ann.org", "Ann\n", f"Ann\nEdit {trial}.\n")
        child = subprocess.Popen([sys.executable, "-c", SYNC_LOOP, store_at, str(a)], stdout=subprocess.PIPE)
        assert child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait()
        report = sync(store, a)
        assert report.conflicts == [], report
        tree = working_tree(store)
        assert all((a / rel).read_text() == render_file(store, tree, rel) for rel in tree.entries)
        assert f"Edit {trial}." in stored(store, "team/ann.org")
        assert fsck(store) == [] and not list(a.rglob(".*.tmp"))  # what the killed sync staged is gone


def test_a_sync_killed_while_it_writes_over_a_large_file_s_spare_is_completed_by_the_next(store, store_at, tmp_path):
    big = "".join(f"* Topic {n}\nNotes on {n}.\n" for n in range(3000))  # large enough to keep a spare
    commit_files(store, lambda tree: {"big.org": big.encode()}, "big")
    a = tmp_path / "a"
    check_out(store, a)
    rng = random.Random(11)
    for trial in range(4):
        child = subprocess.Popen([sys.executable, "-c", SYNC_LOOP, store_at, str(a)], stdout=subprocess.PIPE)
        assert child.stdout.readline() == b"ready\n"
        for n in range(rng.randrange(2, 6)):  # the child's syncs write big.org again and again, over its spare
            line = f"Notes on {10 * trial + n}."
            text = stored(store, "big.org").replace(line, f"{line} Trial {trial}.")
            commit_files(store, lambda tree, text=text: {"big.org": text.encode()}, "agent")
            time.sleep(rng.uniform(0, 0.05))
        child.send_signal(signal.SIGKILL)
        child.wait()
        sync(store, a)
        assert (a / "big.org").read_text() == stored(store, "big.org") and f"Trial {trial}." in stored(store, "big.org")
        # The killed process's spare is gone; this one keeps its own while it lives.
        assert all(f".{os.getpid()}." in p.name for p in a.rglob(".*.tmp"))
    assert fsck(store) == []


def test_two_processes_syncing_one_copy_while_both_sides_edit_lose_nothing(store, store_at, tmp_path):
    a = tmp_path / "a"
    check_out(store, a)
    loops = [subprocess.Popen([sys.executable, "-c", SYNC_LOOP, store_at, str(a)], stdout=subprocess.PIPE)
             for _ in range(2)]
    try:
        assert [loop.stdout.readline() for loop in loops] == [b"ready\n"] * 2
        for k in range(12):  # a person saves plan.org (as Emacs does) while an agent writes team/ann.org
            path = a / "plan.org"
            saved = path.with_name(".#plan.org")
            saved.write_text(path.read_text() + f"* Note {k}\n")
            os.replace(saved, path)
            text = stored(store, "team/ann.org") + f"Agent line {k}.\n"
            commit_files(store, lambda tree, text=text: {"team/ann.org": text.encode()}, "agent")
            time.sleep(0.05)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    report = sync(store, a)
    plan, ann = stored(store, "plan.org"), stored(store, "team/ann.org")
    assert report.conflicts == [] and conflicts(store) == []
    assert all(f"* Note {k}\n" in plan and f"Agent line {k}.\n" in ann for k in range(12)), (plan, ann)
    assert (a / "plan.org").read_text() == plan and (a / "team/ann.org").read_text() == ann
    assert fsck(store) == [] and not list(a.rglob(".*.tmp"))


def test_a_person_saving_a_file_a_sync_loop_keeps_rewriting_loses_nothing(store, store_at, tmp_path):
    """The store's writer and a person edit one file while another process syncs it again and again: the
    person saves as Emacs does (a temporary file renamed over it, unless the file changed since it was
    read), so the syncs' exchanges and the saves race; no line of either side is lost."""
    a = tmp_path / "a"
    check_out(store, a)
    loop = subprocess.Popen([sys.executable, "-c", SYNC_LOOP, store_at, str(a)], stdout=subprocess.PIPE)
    path = a / "plan.org"
    try:
        assert loop.stdout.readline() == b"ready\n"
        for k in range(15):
            def agent(tree, k=k):  # from the state it is given: a sync may commit first
                return {"plan.org": render_file(store, tree, "plan.org").replace(
                    "Ship on Monday.\n", f"Ship on Monday.\nAgent line {k}.\n").encode()}

            commit_files(store, agent, "agent")
            while True:  # the person: read, edit, save unless the file changed meanwhile
                before = os.stat(path)
                edited = path.read_text() + f"* Note {k}\n"
                temp = path.with_name(".#plan.org")
                temp.write_text(edited)
                now = os.stat(path)
                if (now.st_ino, now.st_mtime_ns, now.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size):
                    os.replace(temp, path)
                    break
            time.sleep(0.01)
    finally:
        loop.kill()
        loop.wait()
    sync(store, a)
    sync(store, a)
    plan = stored(store, "plan.org")
    assert all(f"* Note {k}\n" in plan and f"Agent line {k}.\n" in plan for k in range(15)), plan
    assert path.read_text() == plan and conflicts(store) == [] and fsck(store) == []


STOPPED_SYNC = """
import os, signal, sys
from cortex import files
from cortex.backends import open_store
from cortex.history import copies
where, how = sys.argv[3:]

def stop(*args, **kwargs):
    if how == "exit":
        os._exit(0)
    os.kill(os.getpid(), signal.SIGKILL)

if where == "after the read":  # nothing committed
    read = copies.read_folder
    copies.read_folder = lambda *a, **k: (read(*a, **k), stop())[0]
elif where == "after the commit":  # no file placed, no base named
    copies._bring_up_to_date = stop
elif where == "after one file is placed":
    put = files.Staged.put
    files.Staged.put = lambda self, *a, **k: (put(self, *a, **k), stop())
else:  # every file placed, the base not named (as when writing it fails)
    copies._write_base = lambda *a: stop()
with open_store(sys.argv[1]) as s:
    copies.sync(s, sys.argv[2])
    copies._workers(os.getpid()).shutdown(wait=True)
    stop()
"""


@pytest.mark.parametrize("where", ["after the commit", "after one file is placed", "before the base is named"])
@pytest.mark.parametrize("how", ["kill", "exit"])
def test_a_sync_stopped_after_its_commit_never_sends_back_what_the_store_undid_since(store, store_at, tmp_path,
                                                                                      where, how):
    a = tmp_path / "a"
    check_out(store, a)
    edit(a, "plan.org", "* Notes\n", "* Card 4111\nThe number.\n* Notes\n")
    for rel, old, new in (("team/ann.org", "Likes tea.", "Likes coffee."), ("plan.org", "Ten thousand.", "Nine.")):
        commit_files(store, lambda tree, rel=rel, old=old, new=new: {
            rel: render_file(store, tree, rel).replace(old, new).encode()}, "a store-side writer")
    subprocess.run([sys.executable, "-c", STOPPED_SYNC, store_at, str(a), where, how], timeout=120)
    assert "Card 4111" in stored(store, "plan.org")

    def undo(tree):  # the store forgets what the stopped sync sent, and changes again what it received
        return {"plan.org": render_file(store, tree, "plan.org").replace("* Card 4111\nThe number.\n", "").encode(),
                "team/ann.org": render_file(store, tree, "team/ann.org").replace("coffee", "cocoa").encode()}

    commit_files(store, undo, "forgot the card")
    report = sync(store, a)
    assert report.conflicts == [] and "Card 4111" not in stored(store, "plan.org")
    assert "Card 4111" not in (a / "plan.org").read_text() and "Nine." in (a / "plan.org").read_text()
    assert (a / "team/ann.org").read_text() == stored(store, "team/ann.org") and "cocoa" in stored(store, "team/ann.org")
    assert fsck(store) == []


WRITER = """
import sys
from cortex.backends import open_store
from cortex.history.copies import sync
from pathlib import Path
store, folder, name = sys.argv[1:]
with open_store(store) as s:
    for k in range(6):
        path = Path(folder) / "plan.org"
        path.write_text(path.read_text() + f"* {name} {k}\\n")
        sync(s, folder)
"""


def test_copies_in_separate_processes_lose_no_edit(store, store_at, tmp_path):
    folders = [tmp_path / name for name in ("a", "b", "c")]
    for folder in folders:
        check_out(store, folder)
    children = [subprocess.Popen([sys.executable, "-c", WRITER, store_at, str(f), f.name]) for f in folders]
    assert [c.wait(timeout=120) for c in children] == [0, 0, 0]
    for folder in folders:
        sync(store, folder)
    text = stored(store, "plan.org")
    for name in ("a", "b", "c"):
        assert all(f"* {name} {k}\n" in text for k in range(6)), text
    assert all((f / "plan.org").read_text() == text for f in folders)


def test_a_full_disk_under_a_copy_stops_its_sync_in_one_line_and_loses_nothing(small_disk, tmp_path):
    store_at, a = str(tmp_path / "store"), small_disk / "a"  # the store has room: only the copy's disk is full
    with open_store(store_at) as s:
        commit_files(s, lambda tree: {"plan.org": PLAN.encode()}, "seed")
        check_out(s, a)
        edit(a, "plan.org", "Ship on Monday.", "Ship on Tuesday.")
        commit_files(s, lambda tree: {"plan.org": stored(s, "plan.org").replace("Ten", "Nine").encode()}, "agent")
    fill_disk(small_disk)
    done = subprocess.run([str(Path(sys.executable).parent / "cortex"), "sync", str(a), "--store", store_at],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "the disk is full" in done.stderr and "Traceback" not in done.stderr
    assert "Ship on Tuesday." in (a / "plan.org").read_text() and not list(a.rglob(".*.tmp"))
    (small_disk / "ballast").unlink()
    with open_store(store_at) as s:
        assert "Ship on Tuesday." in stored(s, "plan.org")  # the store took the edit before the disk refused
        assert sync(s, a).conflicts == [] and (a / "plan.org").read_text() == stored(s, "plan.org")
        assert "Nine thousand." in stored(s, "plan.org") and fsck(s) == []


def test_the_files_a_sync_replaced_are_freed_once_it_returns(store, tmp_path):
    a = tmp_path / "a"
    check_out(store, a)
    for n in range(3):
        text = stored(store, "plan.org").replace("Nothing yet", f"Nothing yet {n}")
        commit_files(store, lambda tree: {"plan.org": text.encode()}, "agent")
        assert sync(store, a).received == ["plan.org"]
    # The old bytes stay linked beside the file until then (freeing them is the slow part of a replace).
    deadline = time.monotonic() + 10
    while any(p.name.endswith(".tmp") for p in a.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(p.name for p in a.iterdir()) == [".cortex", "plan.org", "team"]
    assert (a / "plan.org").read_text() == stored(store, "plan.org")
    assert "Nothing yet 2 1 0." in stored(store, "plan.org")


def test_a_forked_process_syncs_after_its_parent_did(store_at, tmp_path, monkeypatch):
    # A sync stages its files on a thread of its process, and settles on one as it returns; a child forked
    # after one has none of them, and does not wait for the parent's settling.
    a, settled, real_settle = tmp_path / "a", threading.Event(), copies._settle
    monkeypatch.setattr(copies, "_settle", lambda *args: settled.wait(60) and real_settle(*args))
    with open_store(store_at) as s:
        commit_files(s, lambda tree: {"plan.org": PLAN.encode()}, "seed")
        check_out(s, a)
    edit(a, "plan.org", "Ten thousand.", "Eleven thousand.")
    child = os.fork()
    if child == 0:
        try:
            with open_store(store_at) as s:
                sync(s, a)
                os._exit(0 if "Eleven thousand." in stored(s, "plan.org") else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(child, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    if done == (0, 0):
        os.kill(child, signal.SIGKILL)
    settled.set()
    assert done[0] == child and os.waitstatus_to_exitcode(done[1]) == 0


def test_the_tracked_org_folder_is_a_copy_and_keeps_what_other_copies_sent(tmp_path, org):
    import cortex.api as cx

    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        copy = tmp_path / "copy"
        c.checkout(copy)
        edit(copy, "notes/reading.org", "* ", "* EDITED ")
        assert c.sync(copy).sent == ["notes/reading.org"]
        (org / "notes" / "projects.org").write_text((org / "notes" / "projects.org").read_text() + "* From the folder\n")
        c.ingest()  # the tracked folder syncs first: the copy's edit arrives instead of being replaced
        for text in ((org / "notes/reading.org").read_text(), stored(c.store, "notes/reading.org")):
            assert "* EDITED " in text
        assert "* From the folder" in stored(c.store, "notes/projects.org")
        assert c.sync().sent == [] and c.conflicts() == []


def test_a_copy_forgotten_during_its_sync_stops_it_in_one_line(store, tmp_path, monkeypatch):
    from cortex.history import forget_copy, working_copies

    a = tmp_path / "a"
    check_out(store, a)
    edit(a, "plan.org", "Ship on Monday.", "Ship on Tuesday.")
    real_read = copies.read_folder

    def forgotten_meanwhile(s, folder, *args, **kwargs):
        forget_copy(s, working_copies(s)[0].id)
        return real_read(s, folder, *args, **kwargs)

    monkeypatch.setattr(copies, "read_folder", forgotten_meanwhile)
    with pytest.raises(NotACopy, match="forgotten during the sync; nothing was changed"):
        sync(store, a)
    assert "Ship on Monday." in stored(store, "plan.org") and fsck(store) == []


def test_a_sync_whose_read_reused_what_a_gc_then_collected_reads_again(store, tmp_path, monkeypatch):
    from cortex.history import apply_retention, gc

    a = tmp_path / "a"
    check_out(store, a)
    edit(a, "plan.org", "Ten thousand.", "Eleven thousand.")
    sync(store, a), sync(store, a)  # the copy's bases move past the version with "Ten thousand."
    commit_files(store, lambda tree: {"team/bo.org": b"* Bo\n"}, "agent")  # and so does the working state's log
    edit(a, "plan.org", "Eleven thousand.", "Ten thousand.")  # back to a section the parse caches know
    real_read, collected = copies.read_folder, []

    def collected_right_after(s, folder, *args, **kwargs):  # another process's gc, between its read and commit
        read = real_read(s, folder, *args, **kwargs)
        if not collected:
            apply_retention(s, keep_last=1)
            collected.append(gc(s))
        return read

    monkeypatch.setattr(copies, "read_folder", collected_right_after)
    sync(store, a)
    assert collected[0] > 0 and fsck(store) == [] and "Ten thousand." in stored(store, "plan.org")
    assert (a / "plan.org").read_text() == stored(store, "plan.org")


def test_a_copy_is_never_checked_out_inside_another_or_the_tracked_folder(tmp_path, org):
    import cortex.api as cx

    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.checkout(tmp_path / "copy")  # the tracked folder becomes a working copy too
        for inside in (org / "mirror", tmp_path / "copy" / "nested"):
            with pytest.raises(UserError, match="inside the working copy .*; check out into a folder beside it"):
                c.checkout(inside)
            assert not inside.exists()
        files = set(c.working().entries)
        c.ingest()
        assert set(c.working().entries) == files and not any(path.startswith("mirror/") for path in files)


def test_copies_are_listed_and_a_forgotten_one_syncs_no_more(store, tmp_path):
    from cortex.history import forget_copy, working_copies as listed

    a, b = tmp_path / "a", tmp_path / "b"
    check_out(store, a), check_out(store, b)
    known = listed(store)
    assert [c.folder for c in known] == [str(a), str(b)]
    with pytest.raises(UserError, match="no working copy"):
        forget_copy(store, "not-an-id")
    assert forget_copy(store, known[0].id[:8]).folder == str(a)
    assert [c.folder for c in listed(store)] == [str(b)]
    with pytest.raises(NotACopy, match="forgotten"):
        sync(store, a)
    sync(store, b)


def test_the_base_a_sync_made_is_trusted_only_as_the_folder_records_it(store, tmp_path):
    a = tmp_path / "a"
    check_out(store, a)

    def edit_store(old, new):
        commit_files(store, lambda tree: {"plan.org": stored(store, "plan.org").replace(old, new).encode()}, "agent")

    # The store changes a headline, the copy takes it, then edits that very headline: no conflict, as
    # the folder's record names the base that sync brought it up to.
    edit_store("Ten thousand.", "Twelve thousand.")
    assert sync(store, a).received == ["plan.org"]
    edit(a, "plan.org", "Twelve thousand.", "Twelve thousand, approved.")
    assert sync(store, a).conflicts == [] and "Twelve thousand, approved." in stored(store, "plan.org")
    # A base naming another tree (forged, or left from an older sync), or torn, is not trusted: the sync
    # merges against the base the store is sure of, and nothing the store holds is undone.
    for n, base in enumerate((working_tree(store).oid.hex(), working_tree(store).oid.hex()[:40], "", "\xff" * 64)):
        edit_store("Nothing yet." if n == 0 else f"Hired {n + 1}.", f"Hired {n + 2}.")
        (a / copies.BASE).write_text(base, encoding="latin-1")
        report = sync(store, a)
        assert f"Hired {n + 2}." in stored(store, "plan.org") and f"Hired {n + 2}." in (a / "plan.org").read_text()
        assert "Twelve thousand, approved." in stored(store, "plan.org"), report
    assert fsck(store) == []


def test_a_file_a_sync_wrote_is_read_back_without_parsing_here_and_in_a_later_session(tmp_path):
    org, copy = tmp_path / "org", tmp_path / "copy"
    org.mkdir()
    big = "".join(f"* Topic {n}\n:PROPERTIES:\n:ID: t{n}\n:END:\nNotes on {n}.\n" for n in range(2000))
    (org / "big.org").write_text(big)
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.checkout(copy)
        commit_files(c.store, lambda tree: {"big.org": big.replace("Notes on 7.", "From the store.").encode()}, "w")
        edit(copy, "big.org", "Notes on 1500.", "From the copy.")  # merged: bytes nothing parsed yet
        assert c.sync(copy).merged == ["big.org"]
        assert {"From the store.", "From the copy."} <= set((copy / "big.org").read_text().splitlines())
        assert read_folder(c.store, copy).report.parsed == []  # its document is remembered here
    with cx.open(tmp_path / "store", org) as c:  # and stored in the parse cache as the session closed
        assert read_folder(c.store, copy).report.parsed == [] and fsck(c.store) == []


def test_a_sync_of_one_file_makes_only_its_folder_of_the_tree_again(store, tmp_path, monkeypatch):
    from cortex import objects
    commit_files(store, lambda tree: {f"notes/p{n:02}/n{i}.org": f"* Note {n}\n".encode()
                                      for n in range(20) for i in range(5)}, "notes")
    check_out(store, tmp_path / "a")
    edit(tmp_path / "a", "notes/p07/n1.org", "Note 7", "Note seven")
    encoded, encode = [], objects.encode_object  # (kind, how many entries) of each tree and folder encoded

    def encoding(kind, fields):
        encoded.append(len(fields.get("files") or fields.get("folders") or fields.get("entries") or ()))
        return encode(kind, fields)

    monkeypatch.setattr(objects, "encode_object", encoding)
    report = sync(store, tmp_path / "a", scope="notes/p07/n1.org")
    assert report.sent == ["notes/p07/n1.org"] and "Note seven" in stored(store, "notes/p07/n1.org")
    assert sum(encoded) < 102  # the file's folder and the root: never every path of the tree
