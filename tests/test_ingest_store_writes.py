"""Writes applied to the store's working state itself, with no Org folder: re-applied when another writer won."""

import subprocess
import sys
import threading

import pytest

from cortex.backends import open_store
from cortex.errors import UserError
from cortex.ingest import commit_files, working_tree
from cortex.query import render_file

NOTES = "notes/log.org"


def appending(store, line: str):
    """A change that appends a headline to NOTES, computed from the tree it is given."""
    def change(tree):
        before = render_file(store, tree, NOTES) if NOTES in tree.entries else ""
        return {NOTES: (before + f"* {line}\n").encode()}
    return change


@pytest.fixture
def store(store_at):
    with open_store(store_at) as s:
        yield s


def test_files_are_added_changed_and_removed(store):
    commit_files(store, lambda tree: {"a.org": b"* one\n", "b/c.org": b"#+TITLE: c\n* two\n"}, "add")
    report = commit_files(store, lambda tree: {"a.org": b"* one\n* three\n", "b/c.org": None}, "change")
    tree = working_tree(store)
    assert sorted(tree.entries) == ["a.org"] and report.removed == ["b/c.org"] and report.parsed == ["a.org"]
    assert render_file(store, tree, "a.org") == "* one\n* three\n"
    assert [e.message for e in store.refs.reflog("working")] == ["add", "change"]


def test_racing_writers_reapply_their_change(store):
    threads = [threading.Thread(target=lambda n=n: [commit_files(store, appending(store, f"t{n} e{k}"), "append")
                                                  for k in range(10)]) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = render_file(store, working_tree(store), NOTES)
    assert sorted(text.splitlines()) == sorted(f"* t{n} e{k}" for n in range(6) for k in range(10))


def test_processes_racing_lose_nothing(store, store_at):
    script = f"""
import sys
from cortex.backends import open_store
from cortex.ingest import commit_files
from cortex.query import render_file
with open_store({store_at!r}) as s:
    for k in range(15):
        line = f"* p{{sys.argv[1]}} e{{k}}\\n"
        def change(tree):
            before = render_file(s, tree, {NOTES!r}) if {NOTES!r} in tree.entries else ""
            return {{{NOTES!r}: (before + line).encode()}}
        commit_files(s, change, "append")
"""
    workers = [subprocess.Popen([sys.executable, "-c", script, str(n)]) for n in range(3)]
    assert [w.wait(timeout=120) for w in workers] == [0, 0, 0]
    text = render_file(store, working_tree(store), NOTES)
    assert sorted(text.splitlines()) == sorted(f"* p{n} e{k}" for n in range(3) for k in range(15))


def test_bad_paths_and_bytes_are_refused_whole(store):
    with pytest.raises(UserError, match=r"\.\./escape\.org"):
        commit_files(store, lambda tree: {"ok.org": b"* fine\n", "../escape.org": b"* no\n"}, "bad")
    with pytest.raises(UserError, match=r"bad\.org:2: not UTF-8"):
        commit_files(store, lambda tree: {"bad.org": b"* one\n\xff\n"}, "bad")
    assert working_tree(store).entries == {}
