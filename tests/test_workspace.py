"""The workspace: one write path (`change_files`) over an Org folder or over the store alone, a folder held by
one writer, whole folders removed, and erasures that run their hooks first."""

import threading
import time

import pytest

import cortex.api as cx
import cortex.workspace as workspaces
from cortex.errors import UserError
from cortex.history import copies
from cortex.memory.conversation.orglog import Utterance
from cortex.objects import Tree
from cortex.workspace import UNCHANGED, FolderWorkspace, StoreWorkspace

NOTE = "notes/a.org"


def appending(line: str):
    """An edit that appends a line once (running it again on its own output changes nothing)."""
    def edit(current):
        text = (current.data or b"").decode()
        return UNCHANGED if line in text else (text + line + "\n").encode()
    return edit


@pytest.fixture(params=["folder", "store"])
def space(request, tmp_path):
    """A workspace over a fresh store: with an Org folder, or with none."""
    org = tmp_path / "org"
    (org / "notes").mkdir(parents=True)
    (org / NOTE).write_text("* A\n")
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
    with cx.open(tmp_path / "store", folder=request.param == "folder") as c:
        yield c.workspace


def test_the_kind_of_workspace_is_decided_once_when_it_is_opened(space):
    assert isinstance(space, FolderWorkspace if space.root is not None else StoreWorkspace)


def test_change_files_writes_removes_and_commits_in_one_step(space):
    changed = space.change_files("two edits", {NOTE: appending("* B"), "notes/new.org": lambda current: b"* New\n"})
    assert sorted(changed.paths) == [NOTE, "notes/new.org"] and changed.report is not None
    assert space.rendered(NOTE) == "* A\n* B\n" and space.read("notes/new.org") == b"* New\n"
    assert space.change_files("again", {NOTE: appending("* B")}).paths == []  # made once
    removed = space.change_files("gone", {"notes/new.org": lambda current: None})
    assert removed.paths == ["notes/new.org"] and "notes/new.org" not in space.working().entries
    assert space.read("notes/new.org") is None
    if space.root is not None:
        assert not (space.root / "notes/new.org").exists()


def test_an_edit_given_the_working_state_sees_the_files_as_they_are(space):
    def edits(tree: Tree):
        assert NOTE in tree.entries
        return {path: appending("* Seen") for path in tree.entries if path.startswith("notes/")}

    assert space.change_files("seen", edits, within="notes").paths == [NOTE]
    assert "* Seen" in space.rendered(NOTE)


def test_then_runs_in_the_commit_of_the_change(space):
    seen = []
    space.change_files("with a record", {NOTE: appending("* C")}, then=lambda report: seen.append(report.root))
    assert seen == [space.working().oid]


def test_an_edit_runs_again_on_what_another_writer_committed_meanwhile(space, tmp_path):
    """The other writer lands between the edit's first run and its write: the edit is made on top of it."""
    runs = []

    def late(current):
        runs.append(current.data)
        if len(runs) == 1:  # another writer (a person in a folder, another process on the store) wins the race
            if space.root is not None:
                (space.root / NOTE).write_text("* A\n* Theirs\n")
            else:
                StoreWorkspace(space.store).change_files("theirs", {NOTE: appending("* Theirs")})
        return (current.data or b"") + b"* Mine\n"

    space.change_files("mine", {NOTE: late})
    assert len(runs) == 2 and space.rendered(NOTE) == "* A\n* Theirs\n* Mine\n"


def test_a_user_error_from_an_edit_reaches_the_caller_and_nothing_is_written(space):
    def refuse(current):
        raise UserError("notes/a.org:1: no")

    before = space.working().oid
    with pytest.raises(UserError, match="no"):
        space.change_files("refused", {NOTE: refuse})
    assert space.working().oid == before and space.rendered(NOTE) == "* A\n"


def test_a_file_that_is_not_org_text_is_refused_saying_where(tmp_path):
    org = tmp_path / "org"
    org.mkdir()
    (org / "b.org").write_bytes(b"* ok\n\xff\xfe\n")
    with cx.open(tmp_path / "store", org) as c:
        with pytest.raises(UserError, match=r"b\.org:2: not UTF-8"):
            c.workspace.change_files("read it", {"b.org": lambda current: current.document and UNCHANGED})
    with pytest.raises(UserError, match="not UTF-8"):  # nor can one reach a store
        with cx.open(tmp_path / "other", folder=False) as c:
            c.workspace.change_files("binary", {"b.org": lambda current: b"\xff"})


def test_remove_takes_a_whole_folder(space):
    if space.root is not None:
        (space.root / "notes" / "a.org~").write_text("* A backup keeps the text\n")
    assert space.remove("notes", "removed the notes") == [NOTE]
    assert not any(path.startswith("notes/") for path in space.working().entries)
    if space.root is not None:
        assert not (space.root / "notes").exists()


def test_erase_runs_its_hooks_before_rewriting_history(space):
    space.snapshot("with the note")
    order = []
    space.erasing.append(lambda: order.append("erasing"))
    space.replacing.append(lambda replaced: order.append("replacing"))
    space.remove("notes", "removed")
    forgotten = space.erase(lambda tree: Tree({p: o for p, o in tree.entries.items() if not p.startswith("notes/")}),
                            "the notes")
    assert forgotten is not None and order[0] == "erasing" and "replacing" in order


def test_a_folder_is_held_by_one_writer_and_a_thread_may_ask_again(tmp_path):
    org = tmp_path / "org"
    org.mkdir()
    with cx.open(tmp_path / "store", org) as c:
        space = c.workspace
        with space.held("agents/a"), space.held("agents/a"):  # the same thread: no deadlock
            entered = threading.Event()

            def enter():
                with space.held("agents/a"):
                    entered.set()

            other = threading.Thread(target=enter)
            other.start()
            assert not entered.wait(0.2)  # another thread waits for the folder
        other.join(10)
        assert entered.is_set()


def test_a_folder_leading_outside_the_root_is_refused(tmp_path):
    org, outside = tmp_path / "org", tmp_path / "outside"
    (org / "agents").mkdir(parents=True)
    outside.mkdir()
    (org / "agents" / "sneaky").symlink_to(outside)
    with cx.open(tmp_path / "store", org) as c:
        with pytest.raises(UserError, match="leads outside the Org root"):
            with c.workspace.held("agents/sneaky"):
                pass


def test_a_write_syncs_only_the_folder_that_holds_what_it_wrote(tmp_path, monkeypatch):
    org = tmp_path / "org"
    (org / "agents" / "a" / "logs").mkdir(parents=True)
    (org / "elsewhere.org").write_text("* Elsewhere\n")
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        scopes = []
        synced = c.workspace._synced
        monkeypatch.setattr(c.workspace, "_synced",
                            lambda scope, *a, **k: scopes.append(scope) or synced(scope, *a, **k))
        c.workspace.change_files("two files of one agent", {"agents/a/memory.org": lambda current: b"* M\n",
                                                           "agents/a/logs/2026-01-01.org": lambda current: b"* L\n"})
        assert scopes == ["agents/a"]
        assert workspaces._narrowest(org, ["agents/b/x.org"]) == "agents"  # (the folder does not exist yet)
        assert workspaces._narrowest(org, ["top.org", "agents/a/memory.org"]) == "."


def test_a_write_into_a_root_that_does_not_exist_yet_makes_it(tmp_path):
    root = tmp_path / "not-yet" / "org"
    with cx.open(tmp_path / "store", root) as c:
        c.memory.add_item("assistant", "fact", "The root is made by the first write.")
        path = c.memory.record_session("assistant", [Utterance("User", "hello")], session="s1")
        assert (root / "agents" / "assistant" / "memory.org").is_file() and (root / path).is_file()
        assert "agents/assistant/memory.org" in c.working().entries


def test_a_closed_session_writes_nothing_more_into_its_folder(tmp_path, monkeypatch):
    """A sync names the folder's new base after it returns, in a thread: closing the session waits for it, so
    a folder removed after `close` is not written into again (a `.cortex` left half removed)."""
    settle, settled = copies._settle, []

    def slow_settle(*args):
        time.sleep(0.3)
        settle(*args)
        settled.append(True)

    monkeypatch.setattr(copies, "_settle", slow_settle)
    org = tmp_path / "org"
    org.mkdir()
    (org / "a.org").write_text("* A\n")
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
    assert settled == [True] and (org / copies.BASE).exists()


def test_a_write_of_one_file_reads_its_folder_s_own_files_not_its_subfolders(store_at, tmp_path):
    org = tmp_path / "org"
    (org / "agents" / "ann" / "logs").mkdir(parents=True)
    (org / "agents" / "ann" / "notes.org").write_text("* Notes\n")
    (org / "agents" / "ann" / "logs" / "2026-11-20.org").write_text("* Log\n")
    with cx.open(store_at, org) as c:
        c.ingest()
        (org / "agents" / "ann" / "notes.org").write_text("* Notes, edited by hand\n")
        (org / "agents" / "ann" / "logs" / "2026-11-20.org").write_text("* Log, edited by hand\n")
        c.memory.add_item("ann", "fact", "Ann likes tea.")
        assert c.show("agents/ann/notes.org") == "* Notes, edited by hand\n"  # the folder the write was in
        assert c.show("agents/ann/logs/2026-11-20.org") == "* Log\n"  # a subfolder: its next sync reads it
        assert (org / "agents" / "ann" / "logs" / "2026-11-20.org").read_text() == "* Log, edited by hand\n"
        c.ingest()
        assert c.show("agents/ann/logs/2026-11-20.org") == "* Log, edited by hand\n"
        assert "Ann likes tea." in c.show("agents/ann/memory.org")
