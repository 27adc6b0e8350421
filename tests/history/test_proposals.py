"""Proposals: writes kept under refs of their own until a person accepts (merged headline by headline, in one
commit, undone by a rollback) or rejects them (kept in the record with the reason, never in the working state)."""

import signal
import subprocess
import sys
import textwrap

import pytest

from cortex import org
from cortex.backends import open_store
from cortex.errors import NotFound, UserError
from cortex.history import gc, proposals, rollback_state
from cortex.history.fsck import fsck
from cortex.history.proposals import ACCEPTED, PENDING, REJECTED, accept, find, patch, pending, propose, reject
from cortex.ingest import commit_files, working_tree
from cortex.objects import Tree
from cortex.query import render_file

FACTS = """* Facts
** Tea
:PROPERTIES:
:ID: tea
:END:
Prefers green tea.
** Desk
Standing desk.
"""


def seeded(location):
    store = open_store(location)
    commit_files(store, lambda tree: {"facts.org": FACTS.encode(), "plan.org": b"* Plan\nShip it.\n"}, "seed")
    return store


@pytest.fixture
def store(store_at):
    with seeded(store_at) as s:
        yield s


@pytest.fixture
def memory_store():
    with seeded(None) as s:
        yield s


def proposed(store, files: dict[str, str], agent="bot", operation="add"):
    """A proposal of `agent` on the working state: these files with this text."""
    base = working_tree(store)
    entries, objects = dict(base.entries), []
    for path, text in files.items():
        parsed = org.parse(text)
        entries[path], objects = parsed.document.oid, objects + list(parsed.objects)
    return propose(store, base, Tree(dict(sorted(entries.items()))), agent=agent, message=f"{operation} by {agent}",
                   operation=operation, objects=objects)


def text(store, path="facts.org"):
    return render_file(store, working_tree(store), path)


def commit(store, path, old, new):
    commit_files(store, lambda tree: {path: text(store, path).replace(old, new).encode()}, "person")


def test_a_proposal_waits_under_its_refs_and_the_working_state_does_not_move(store, store_at):
    before = working_tree(store)
    made = proposed(store, {"facts.org": FACTS + "** Cats\nHas two cats.\n"})
    assert working_tree(store) == before and made.paths == ("facts.org",) and made.operation == "add"
    assert len(made.id) == 8 and store.refs.get(made.ref) is not None
    gc(store)  # its trees are kept: refs of their own
    assert "+** Cats" in patch(store, made) and "added    facts.org: Facts / Cats" in patch(store, made)
    assert fsck(store) == []
    store.close()
    with open_store(store_at) as again:  # it survives the process
        assert [p.id for p in pending(again)] == [made.id] and find(again, made.id[:3]) == made


def test_a_write_that_changes_nothing_is_no_proposal(memory_store):
    assert proposed(memory_store, {"facts.org": FACTS}) is None and pending(memory_store) == []


def test_accepting_merges_with_what_changed_meanwhile_in_one_commit_that_a_rollback_undoes(store):
    made = proposed(store, {"facts.org": FACTS.replace("Prefers green tea.", "Prefers black tea.")})
    commit(store, "facts.org", "Standing desk.", "Standing desk, by the window.")
    before = working_tree(store)
    moves = len(store.refs.reflog("working"))
    done = accept(store, made.id)
    assert "Prefers black tea." in text(store) and "by the window" in text(store) and done.conflicts == ()
    assert len(store.refs.reflog("working")) == moves + 1  # one commit
    record = find(store, made.id)
    assert record.status == ACCEPTED and pending(store) == []
    assert store.objects[record.commit].root == working_tree(store).oid
    assert store.refs.get(made.ref) is None and fsck(store) == []
    assert store.objects[store.objects[record.undo].root] == before  # a snapshot of what it merged into
    rollback_state(store, record.undo.hex())
    assert working_tree(store) == before


def test_a_true_conflict_stays_in_the_file_as_a_conflict_copy_and_is_listed(memory_store):
    made = proposed(memory_store, {"facts.org": FACTS.replace("Prefers green tea.", "Prefers black tea.")})
    commit(memory_store, "facts.org", "Prefers green tea.", "Prefers oolong.")
    done = accept(memory_store, made.id)
    merged = text(memory_store)
    assert "Prefers oolong." in merged and "Prefers black tea." in merged and ":CONFLICT:" in merged
    assert [c.kind for c in done.conflicts] == ["both-changed"] and find(memory_store, made.id).conflicts


def test_accepting_only_some_headlines_by_id_or_outline_path_leaves_the_rest_out(memory_store):
    change = FACTS.replace("Prefers green tea.", "Prefers black tea.").replace("Standing desk.\n", "")
    made = proposed(memory_store, {"facts.org": change + "** Cats\nHas two cats.\n",
                                   "plan.org": "* Plan\nShip it on Monday.\n"})
    with pytest.raises(UserError, match="'Facts / Dogs' names no headline this proposal changes"):
        accept(memory_store, made.id, only=["Facts / Dogs"])
    done = accept(memory_store, made.id, only=["tea", "facts.org: Facts / Cats"])
    merged = text(memory_store)
    assert "Prefers black tea." in merged and "Has two cats." in merged and "Standing desk." in merged
    assert text(memory_store, "plan.org") == "* Plan\nShip it.\n" and done.paths == ["facts.org"]
    assert find(memory_store, made.id).only == ("tea", "facts.org: Facts / Cats")


def test_a_removal_and_an_addition_at_the_end_of_a_file_are_picked_alone(memory_store):
    commit_files(memory_store, lambda tree: {"facts.org": b"* Facts\n** Tea\nGreen.\n** Desk\nStanding."}, "no end")
    made = proposed(memory_store, {"facts.org": "* Facts\n** Desk\nStanding.\n** Cats\nTwo.\n"})
    accept(memory_store, made.id, only=["Facts / Cats"])
    assert text(memory_store) == "* Facts\n** Tea\nGreen.\n** Desk\nStanding.\n** Cats\nTwo.\n"


def test_rejecting_keeps_the_record_and_reason_and_never_reaches_the_working_state(memory_store):
    before = working_tree(memory_store)
    made = proposed(memory_store, {"facts.org": FACTS + "** Secret\nThe key is hunter2.\n"})
    done = reject(memory_store, made.id, "not a fact")
    assert done.status == REJECTED and done.reason == "not a fact" and working_tree(memory_store) == before
    assert [p.reason for p in proposals.proposals(memory_store, REJECTED)] == ["not a fact"]
    assert gc(memory_store) > 0 and not any(b"hunter2" in memory_store.objects.raw(o) for o in memory_store.objects)
    with pytest.raises(UserError, match=f"proposal {made.id} was rejected already"):
        accept(memory_store, made.id)
    with pytest.raises(NotFound, match="its trees are no longer kept"):
        patch(memory_store, done)
    assert dict(memory_store.table(PENDING).items()) == {}


@pytest.mark.parametrize("name, says", [("", "is not a proposal id"), ("xyz", "is not a proposal id"),
                                        ("0" * 9, "is not a proposal id"), ("abc", "no proposal abc;")])
def test_a_bad_proposal_id_is_one_line(memory_store, name, says):
    with pytest.raises(UserError, match=says) as raised:
        find(memory_store, name)
    assert "\n" not in str(raised.value)


def test_an_accept_that_loses_the_race_merges_again_onto_what_won(memory_store, monkeypatch):
    made = proposed(memory_store, {"facts.org": FACTS.replace("Prefers green tea.", "Prefers black tea.")})
    merge, raced = proposals.merge_trees, []

    def racing(*args, **kwargs):
        if not raced:
            raced.append(commit(memory_store, "plan.org", "Ship it.", "Ship it today."))
        return merge(*args, **kwargs)

    monkeypatch.setattr(proposals, "merge_trees", racing)
    accept(memory_store, made.id)
    assert "Prefers black tea." in text(memory_store) and "Ship it today." in text(memory_store, "plan.org")


def test_a_pending_record_without_its_refs_is_found_by_fsck(memory_store):
    made = proposed(memory_store, {"facts.org": FACTS + "** Cats\nTwo.\n"})
    memory_store.refs.set_if_equals(made.ref, None, memory_store.refs.get(made.ref))
    assert [str(p) for p in fsck(memory_store)] == [f"history.proposals {made.id}: pending, but no ref holds its trees"]


KILLED_ACCEPT = """
import os, signal, sys
from cortex.backends import open_store
from cortex.history import proposals
decide = proposals._decide
def decide_then_die(store, decided):
    decide(store, decided)  # the working state has moved in this transaction: it never commits
    os.kill(os.getpid(), signal.SIGKILL)
proposals._decide = decide_then_die
with open_store(sys.argv[1]) as store:
    proposals.accept(store, sys.argv[2])
"""


def test_an_accept_killed_before_it_commits_leaves_none_of_it_then_lands_whole(store, store_at):
    made = proposed(store, {"facts.org": FACTS.replace("Prefers green tea.", "Prefers black tea.") + "** Cats\nTwo.\n",
                            "plan.org": "* Plan\nShip it on Monday.\n"})
    before = working_tree(store)
    store.close()
    child = subprocess.run([sys.executable, "-c", KILLED_ACCEPT, store_at, made.id], capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    with open_store(store_at) as again:
        assert working_tree(again) == before and find(again, made.id).pending and fsck(again) == []
        accept(again, made.id)
        assert "Prefers black tea." in text(again) and "Cats" in text(again) and "Monday" in text(again, "plan.org")
