"""What holds, over MCP: the search, query, find and memory tools and the memory resource answer with current items
by default and take `valid_at` and `all`, checked; through the `mcp` SDK's own client and a real `cortex mcp`."""

import pytest

import cortex.api as cx
from tests.conftest import with_chain
from tests.mcp_client import Refused, prepared, stdio_server

READERS = ("search", "query", "find", "memory_inspect")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A stdio server over every agent, whose assistant remembers a fact replaced twice and one retired."""
    store, org = prepared(tmp_path_factory.mktemp("validity"))
    with_chain(org)
    with cx.open(store, org) as c:
        c.ingest()
    with stdio_server(store.parent / "stdio.log", "--store", str(store), "--org", str(org)) as client:
        yield client
    assert "Traceback" not in client.log.read_text()


def ids(answer: dict, key: str) -> list[str]:
    return [found["id"] for found in answer[key] if (found["id"] or "").startswith("mem-assistant-db")]


def test_the_tools_say_they_answer_with_current_items_and_take_valid_at_and_all(server):
    tools = {t.name: t for t in server.portal.call(server.session.list_tools).tools}
    for name in READERS:
        assert {"valid_at", "all"} <= tools[name].input_schema["properties"].keys()
        assert "valid_at" in tools[name].description and "all" in tools[name].description
    assert tools["search"].input_schema["properties"]["all"]["type"] == "boolean"


def test_search_query_and_find_answer_with_current_items_unless_asked(server):
    question = {"query": "which database do we run?", "agent": "assistant", "limit": 20}
    assert ids(server.call("search", **question), "results") == ["mem-assistant-db-17"]
    assert ids(server.call("search", **question, valid_at="2026-10-15"), "results") == ["mem-assistant-db-16"]
    assert sorted(ids(server.call("search", **question, all=True), "results")) == [
        "mem-assistant-db-15", "mem-assistant-db-16", "mem-assistant-db-17"]
    assert ids(server.call("query", query='(heading "Postgres")'), "headlines") == ["mem-assistant-db-17"]
    assert ids(server.call("query", query='(heading "Postgres")', valid_at="2026-09-30 12:00"), "headlines") == [
        "mem-assistant-db-15"]
    assert len(ids(server.call("query", query="+ARCHIVE", all=True), "headlines")) == 2
    assert ids(server.call("find", text="postgres"), "headlines") == ["mem-assistant-db-17"]
    assert len(ids(server.call("find", text="postgres", all=True), "headlines")) == 3


def test_memory_inspect_says_what_no_longer_holds_and_why(server):
    now = server.call("memory_inspect", agent="assistant")
    assert "Postgres 17." in now["memory_org"] and "Postgres 16." not in now["memory_org"]
    assert now["summary"].endswith("3 items no longer current, left out")
    assert now["not_holding"][1] == {"id": "mem-assistant-db-16", "type": "fact", "title": "The database is Postgres 16.",
                                     "why": "superseded by mem-assistant-db-17 on 2026-11-03 14:00"}
    every = server.call("memory_inspect", agent="assistant", all=True)
    assert "Postgres 16." in every["memory_org"] and len(every["not_holding"]) == 3
    then = server.call("memory_inspect", agent="assistant", valid_at="2026-10-15")
    assert "Postgres 16." in then["memory_org"] and "Postgres 17." not in then["memory_org"]


def test_the_memory_resource_answers_with_current_items_unless_asked(server):
    assert "Postgres 16." not in server.read("cortex://agents/assistant/memory")
    assert "Postgres 16." in server.read("cortex://agents/assistant/memory?all=true")
    then = server.read("cortex://agents/assistant/memory?valid_at=2026-10-15")
    assert "Postgres 16." in then and "Postgres 17." not in then
    assert "all 'maybe': write true or false" in server.refused_read("cortex://agents/assistant/memory?all=maybe")
    assert "'soon' is not a moment" in server.refused_read("cortex://agents/assistant/memory?valid_at=soon")
    assert "exclude each other" in server.refused_read(
        "cortex://agents/assistant/memory?valid_at=today&all=1")


@pytest.mark.parametrize("tool", READERS)
def test_bad_values_are_tool_errors_that_say_what(server, tool):
    arguments = {"search": {"query": "x"}, "query": {"query": "(todo)"}, "find": {"text": "x"},
                 "memory_inspect": {"agent": "assistant"}}[tool]
    both = server.call(tool, **arguments, valid_at="2026-11-01", all=True)
    assert isinstance(both, Refused) and "all and valid_at exclude each other" in both
    bad = server.call(tool, **arguments, valid_at="next tuesday")
    assert isinstance(bad, Refused) and "'next tuesday' is not a moment; write a day (today" in bad
    typed = server.call(tool, **arguments, all="perhaps")
    assert isinstance(typed, Refused) and "all" in typed and "Traceback" not in typed
