"""`cortex mcp --review` as an agent uses it (the SDK's client, a real server process): its tools say that writes
are proposals, a write answers with its proposal's id, the agent reads its pending writes, and `proposals` shows
what waits and what a person rejected, and why; a bound server sees its own agent's alone."""

import pytest

import cortex.api as cx
from cortex.mcp.tools import COMMITS

from tests.mcp_client import Refused, prepared, stdio_server


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    """A stdio server bound to agent assistant whose writes wait for review."""
    store, org = prepared(tmp_path_factory.mktemp("reviewed"))
    options = ("--store", str(store), "--org", str(org), "--agent", "assistant", "--review", "--allow-rollback")
    with stdio_server(store.parent / "stdio.log", *options) as client:
        client.store, client.org = store, org
        yield client
    assert "Traceback" not in client.log.read_text()


def test_the_tools_say_writes_are_proposals_and_rollback_is_a_persons(reviewed):
    tools = {t.name: t.description for t in reviewed.portal.call(reviewed.session.list_tools).tools}
    assert all("Under review: this write is a proposal" in tools[name] for name in COMMITS if name != "rollback")
    assert "proposals" in tools and "rollback" not in tools
    assert reviewed.call("rollback", ref="HEAD") == Refused(
        "rollback is off: this server's writes wait for review (cortex mcp --review), and a rollback is a person's")


def test_a_write_answers_with_its_proposal_which_the_agent_sees_and_a_person_decides(reviewed):
    memory = reviewed.org / "agents" / "assistant" / "memory.org"
    before = memory.read_text()
    added = reviewed.call("memory_add", text="The release train leaves on Wednesdays now.")
    assert added["added"] is True and added["status"] == "pending review" and len(added["proposal"]) == 8
    assert memory.read_text() == before  # nothing reached the files
    assert "Wednesdays" in reviewed.call("memory_inspect")["memory_org"]  # the agent sees its own write
    found = reviewed.call("search", query="When does the release train leave?", limit=3)["results"]
    assert any("Wednesdays" in hit["text"] for hit in found)  # its searches too
    assert "Facts / The release train leaves on Wednesdays now." in [
        n["outline"] for n in reviewed.call("find", text="release train")["headlines"]]
    again = reviewed.call("memory_add", text="The release train leaves on Wednesdays now.")
    assert again == {"added": False, "id": added["id"], "note": "already in memory"}
    [waiting] = reviewed.call("proposals")["pending"]
    assert (waiting["id"], waiting["agent"], waiting["operation"]) == (added["proposal"], "assistant", "add")
    with cx.open(reviewed.store, reviewed.org) as person:  # another process, as a person reviews
        person.reject_proposal(added["proposal"], "the train still leaves on Tuesdays")
    listed = reviewed.call("proposals")
    assert listed["pending"] == [] and listed["rejected"][0]["reason"] == "the train still leaves on Tuesdays"
    assert "Wednesdays" not in reviewed.call("memory_inspect")["memory_org"] and memory.read_text() == before
    turns = reviewed.call("memory_turns", session="s-9", turns=[{"speaker": "Dana", "text": "Hi."}])
    assert turns["status"] == "pending review"


def test_a_bound_server_lists_its_own_agents_proposals_alone(reviewed):
    with cx.open(reviewed.store, reviewed.org, review=True) as other:
        other.memory.add_item("reviewer", "fact", "Reviews happen on Fridays.")
    assert all(p["agent"] == "assistant" for p in reviewed.call("proposals")["pending"])
    refused = reviewed.call("proposals", agent="reviewer")
    assert isinstance(refused, Refused) and refused.endswith(
        "agent 'reviewer': this server is bound to agent 'assistant' (cortex mcp --agent assistant) and cannot "
        "reach another agent's memory")
