"""Writes under review: an agent's writes through the one write path become proposals on the working state; the
agent reads its pending ones (and does not write them twice), everyone else the working state; what may not
wait for review is refused before anything changes."""

import pytest

import cortex.api as cx
from cortex.errors import UserError
from cortex.history.proposals import find
from cortex.query import render_file
from cortex.review import ReviewedWorkspace

AGENT = "assistant"
MEMORY = "agents/assistant/memory.org"


@pytest.fixture(params=["folder", "store"])
def reviewed(request, tmp_path, org):
    """A handle under review: over the Org folder, or over the store alone (no folder on this machine)."""
    folder = request.param == "folder"
    with cx.open(tmp_path / "store", org if folder else None, folder=folder, review=True) as c:
        if folder:
            c.ingest()
        else:
            c.workspace.change_files("seed", {MEMORY: lambda current: (org / MEMORY).read_bytes()})
        yield c


def test_a_write_under_review_is_a_proposal_the_agent_sees_and_no_one_else_does(reviewed, org):
    before, on_disk = reviewed.working(), (org / MEMORY).read_bytes()
    reviewed.memory.add_item(AGENT, "fact", "Likes green tea.")
    [proposal] = reviewed.proposals()
    assert (proposal.agent, proposal.operation, proposal.paths) == (AGENT, "add", (MEMORY,))
    assert reviewed.working() == before and (org / MEMORY).read_bytes() == on_disk  # nothing moved, nothing written
    assert "Likes green tea." not in render_file(reviewed.store, reviewed.working(), MEMORY)  # as a person reads it
    assert "Likes green tea." in reviewed.memory.show(AGENT)  # the agent reads its pending write, whatever it reads:
    assert "Likes green tea." in reviewed.show(MEMORY)
    assert [n.headline.title for n in reviewed.find(text="green tea")] == ["Likes green tea."]
    assert [n.headline.title for n in reviewed.query('(heading "green tea")')] == ["Likes green tea."]
    assert reviewed.search("Which tea does the user like?", agent=AGENT, limit=1)[0].text.startswith("Likes green")
    assert reviewed.memory.known_item(AGENT, "fact", "likes green tea.") is not None
    reviewed.memory.add_item(AGENT, "fact", "Likes green tea.")  # already there, to the agent: no second proposal
    assert len(reviewed.proposals()) == 1 and isinstance(reviewed.memory.workspace, ReviewedWorkspace)


def test_each_proposal_holds_its_own_write_so_rejecting_one_keeps_it_out_of_the_next(reviewed, org):
    reviewed.memory.add_item(AGENT, "fact", "Likes cats.")
    reviewed.memory.add_item(AGENT, "fact", "Likes dogs.")
    cats, dogs = reviewed.proposals()
    assert "Likes dogs." in reviewed.memory.show(AGENT) and "Likes cats." in reviewed.memory.show(AGENT)
    reviewed.reject_proposal(cats.id, "no cats")
    assert "Likes cats." not in reviewed.memory.show(AGENT)  # the agent no longer sees what was rejected
    reviewed.accept_proposal(dogs.id)
    text = reviewed.show(MEMORY)
    assert "Likes dogs." in text and "Likes cats." not in text
    if reviewed.root is not None:  # the Org folder received it
        assert (org / MEMORY).read_text() == text


def test_the_write_a_callback_records_lands_with_the_proposal(reviewed):
    seen = []
    changed = reviewed.memory.workspace.change_files(
        "a note", {"agents/assistant/notes.org": lambda current: b"* Note\n"}, then=seen.append, operation="add")
    assert changed.proposal is not None and seen[0].root == reviewed.store.refs.get(changed.proposal.ref)


def test_changing_an_item_that_waits_for_review_is_refused_in_one_line(reviewed):
    item = reviewed.memory.add_item(AGENT, "fact", "Works from Lisbon.")
    with pytest.raises(UserError, match="what waits for review cannot be changed until a person accepts it") as error:
        reviewed.memory.retire(AGENT, item.id)
    assert "\n" not in str(error.value) and len(reviewed.proposals()) == 1


def test_what_rewrites_history_or_moves_the_working_state_is_refused_under_review(reviewed):
    snapshots = reviewed.snapshot_count
    with pytest.raises(UserError, match="erasing from history cannot wait for review"):
        reviewed.memory.forget(AGENT, "mem-assistant-dark-mode", hard=True)
    with pytest.raises(UserError, match="a rollback is theirs to make"):
        reviewed.memory.workspace.rollback("HEAD")
    assert reviewed.proposals() == [] and reviewed.snapshot_count == snapshots


def test_a_soft_forget_and_a_compaction_under_review_are_proposals_of_their_kind(reviewed):
    reviewed.memory.forget(AGENT, "mem-assistant-dark-mode")
    [forget] = reviewed.proposals()
    assert forget.operation == "forget" and "dark mode" not in reviewed.memory.show(AGENT).lower()
    assert "dark mode" in render_file(reviewed.store, reviewed.working(), MEMORY).lower()  # the working state keeps it
    reviewed.accept_proposal(forget.id)
    assert "dark mode" not in reviewed.show(MEMORY).lower() and find(reviewed.store, forget.id).status == "accepted"
