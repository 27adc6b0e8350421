"""`cortex mcp` as a client uses it: the server runs as a subprocess (`cortex mcp ...`) and the tests talk to it
with the `mcp` SDK's own client, over stdio and over streamable HTTP on loopback."""

from datetime import date, datetime
from pathlib import Path

import pytest

import cortex.api as cx
from cortex.backends import open_store
from cortex.backends.base import ENGINE_TABLES
from cortex.cli import main as cortex_main
from cortex.memory.conversation import Utterance, read_session
from cortex.mcp.tools import COMMITS, READ, WRITE

from tests.mcp_client import Refused, http_server, prepared, stdio_server

@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """A stdio server over every agent, writes and rollback allowed."""
    store, org = prepared(tmp_path_factory.mktemp("full"))
    options = ("--store", str(store), "--org", str(org), "--allow-rollback")
    with stdio_server(store.parent / "stdio.log", *options) as client:
        client.store, client.org = store, org
        yield client
    assert "Traceback" not in client.log.read_text()


@pytest.fixture(scope="module")
def bound(tmp_path_factory):
    """An HTTP server bound to agent assistant (writes allowed, rollback not)."""
    store, org = prepared(tmp_path_factory.mktemp("bound"))
    options = ("--store", str(store), "--org", str(org), "--agent", "assistant")
    with http_server(store.parent / "http.log", *options) as client:
        client.store, client.org = store, org
        yield client
    assert "Traceback" not in client.log.read_text()


def cli(capsys, *args: str) -> str:
    """Run `cortex ARGS` (the real CLI entry point) and return what it printed."""
    capsys.readouterr()
    cortex_main(list(args))
    out = capsys.readouterr()
    return out.out + out.err


# --- listing -------------------------------------------------------------------------------


def test_lists_every_tool_with_a_schema_and_every_kind_of_resource(full):
    tools = full.portal.call(full.session.list_tools).tools
    assert {t.name for t in tools} == {*READ, *WRITE, "rollback"}
    for tool in tools:
        assert tool.description and tool.input_schema["type"] == "object"
    commits = [t.description for t in tools if t.name in COMMITS]
    assert len(commits) == len(COMMITS) and all("`diff` shows it" in d and "`rollback`" in d for d in commits)
    search = next(t for t in tools if t.name == "search").input_schema
    assert search["required"] == ["query"] and "as_of" in search["properties"]
    templates = {t.uri_template for t in full.portal.call(full.session.list_resource_templates).resource_templates}
    assert templates == {"cortex://agents/{agent}/memory{?valid_at,all}", "cortex://agents/{agent}/logs/{day}",
                         "cortex://files/{+path}", "cortex://ids/{id}", "cortex://snapshots/{ref}/files/{+path}",
                         "cortex://snapshots/{ref}/ids/{id}"}
    assert {"cortex://agents/assistant/memory", "cortex://agents/reviewer/memory",
            "cortex://agents/assistant/logs/2026-11-20", "cortex://files/notes/projects.org"} <= full.resources()


# --- reading -------------------------------------------------------------------------------


def test_search_finds_by_meaning_and_filters(full):
    hits = full.call("search", query="which region hosts staging?")["results"]  # embedded in the background
    assert "eu-west-1" in " ".join(h["text"] for h in hits[:3])
    facts = full.call("search", query="deploy", agent="assistant", type="fact")["results"]
    assert facts and {(h["agent"], h["type"]) for h in facts} == {("assistant", "fact")}
    assert "E1042" in full.call("search", query="E1042", as_of="HEAD")["results"][0]["text"]
    dated = full.call("search", query="release fix", since="2026-11-20", until="2026-11-20")["results"]
    assert dated and {h["date"] for h in dated} == {"2026-11-20"}


def test_show_find_and_query(full):
    assert full.call("show", target="task-rotate-secrets").startswith("** TODO [#A] Rotate the webhook secrets")
    assert full.call("show", target="notes/projects.org", as_of="HEAD").startswith("#+TITLE")
    oid = full.call("search", query="Rotate the webhook secrets", limit=1)["results"][0]["oid"]
    assert "Rotate the webhook secrets" in full.call("show", target=oid)
    found = full.call("find", todo="TODO")
    todos = found["headlines"]
    assert todos and all(h["todo"] == "TODO" for h in todos) and "scope" not in found  # it covers everything
    assert [h["id"] for h in full.call("query", query='(and (todo "TODO") (tags "security"))')["headlines"]] \
        == ["task-rotate-secrets"]
    assert "task-rotate-secrets" in [h["id"] for h in full.call("query", query="+security/TODO")["headlines"]]


def test_reads_every_kind_of_resource(full):
    assert "mem-assistant-dark-mode" in full.read("cortex://agents/assistant/memory")
    assert "Reviewed pull request #482" in full.read("cortex://agents/assistant/logs/2026-11-20")
    assert full.read("cortex://files/notes/projects.org").startswith("#+TITLE")
    assert full.read("cortex://ids/task-rotate-secrets").startswith("** TODO [#A] Rotate")
    assert full.read("cortex://snapshots/HEAD/files/notes/reading.org").startswith("#+TITLE")
    assert "Rotate" in full.read("cortex://snapshots/HEAD/ids/task-rotate-secrets")


def test_resource_mistakes_name_what_and_where(full):
    assert "no headline with :ID: or oid no-such-id" in full.refused_read("cortex://ids/no-such-id")
    assert "climbs out with '..'" in full.refused_read("cortex://files/notes/../../etc/passwd.org")
    assert "'yesterday': not a date" in full.refused_read("cortex://agents/assistant/logs/yesterday")
    assert "no daily log for 2020-01-01" in full.refused_read("cortex://agents/assistant/logs/2020-01-01")
    assert "no snapshot" in full.refused_read("cortex://snapshots/ffffffff/files/notes/projects.org")


def test_user_mistakes_are_tool_errors_that_say_what_and_where(full):
    mistakes = {
        ("show", "no-such-id"): full.call("show", target="no-such-id"),
        ("show", "/etc/passwd.org"): full.call("show", target="/etc/passwd.org"),
        ("search", "query is empty"): full.call("search", query="  "),
        ("query", "notadate"): full.call("query", query='(deadline :to "notadate")'),
        ("recent_activity", "yesterdayish"): full.call("recent_activity", since="yesterdayish"),
        ("diff", "HEAD~99"): full.call("diff", from_ref="HEAD~99"),
        ("memory_inspect", "agent id 'a/b'"): full.call("memory_inspect", agent="a/b"),
        ("memory_compact", "max_age 'soon'"): full.call("memory_compact", agent="assistant", max_age="soon"),
        ("get_context", "tenant"): full.call("get_context", tenant="acme", user="ada", session=" "),
        ("memory_add", "type"): full.call("memory_add", text="x", type="opinion", agent="assistant"),
    }
    for (tool, named), answer in mistakes.items():
        assert isinstance(answer, Refused), (tool, answer)
        assert named in answer and "Traceback" not in answer, (tool, answer)



def test_missing_or_wrong_arguments_are_one_sentence_naming_the_argument(full):
    missing = full.call("show")
    assert missing == "show: argument target is required", missing
    wrong = full.call("search", query="deploy", limit="many")
    assert wrong.startswith("search: argument limit: input should be a valid integer") and "'many'" in wrong, wrong
    nested = full.call("memory_turns", session="s-1", turns=[{"text": "hello"}])
    assert nested == "memory_turns: argument turns.0.speaker is required", nested
    for answer in (missing, wrong, nested):
        assert "\n" not in answer and "validation error" not in answer and "pydantic" not in answer


def test_tool_descriptions_read_as_prose_without_source_indentation(full):
    for tool in full.portal.call(full.session.list_tools).tools:
        assert "\n " not in tool.description and "  " not in tool.description, (tool.name, tool.description)
    search = next(t for t in full.portal.call(full.session.list_tools).tools if t.name == "search")
    assert "and oid; pass the :ID:" in search.description  # a line break of the source joined with one space


def test_mcp_help_names_every_kind_of_resource():
    from click.testing import CliRunner

    from cortex.cli.mcp import mcp_command
    from cortex.mcp.resources import TEMPLATES

    shown = " ".join(CliRunner().invoke(mcp_command, ["--help"], terminal_width=80).output.split())
    for uri, _ in TEMPLATES.values():
        named = uri.removeprefix("cortex://").split("{?")[0]
        for name, placeholder in (("{agent}", "NAME"), ("{day}", "DAY"), ("{+path}", "PATH"), ("{id}", "ID"),
                                  ("{ref}", "REF")):
            named = named.replace(name, placeholder)
        assert named in shown, (named, shown)


# --- writing -------------------------------------------------------------------------------


def test_memory_tools(full):
    inspected = full.call("memory_inspect", agent="assistant")
    assert inspected["summary"].startswith("assistant: 3 facts") and "2026-11-20" in inspected["daily_logs"]
    added = full.call("memory_add", agent="assistant", text="The database is Postgres 16.")
    assert added["added"] and added["id"].startswith("mem-assistant-the-database") and added["similar"] == []
    successor = full.call("memory_add", agent="assistant", text="The database is Postgres 17.")
    assert [(s["id"], s["text"]) for s in successor["similar"]] == [(added["id"], "The database is Postgres 16.")]
    assert 0.7 <= successor["similar"][0]["score"] < 1
    full.call("memory_forget", agent="assistant", item=successor["id"])
    assert not full.call("memory_add", agent="assistant", text="The database is Postgres 16.")["added"]
    replaced = full.call("memory_add", agent="assistant", text="The database is Postgres 17.", supersedes=added["id"],
                         valid_from="2026-11-20")
    assert replaced["added"] and replaced["supersedes"] == [added["id"]]
    retired = full.call("memory_retire", agent="assistant", item=replaced["id"], at="2026-11-25T10:00")
    assert retired == {"retired": replaced["id"], "invalid_at": "2026-11-25 10:00", "path": "agents/assistant/memory.org"}
    stale = full.call("memory_retire", agent="assistant", item=added["id"])
    assert isinstance(stale, Refused) and "only a current item can be retired" in stale
    undated = full.call("memory_add", agent="assistant", text="x", valid_from="soon")
    assert isinstance(undated, Refused) and "valid from 'soon': not a date" in undated
    full.call("memory_forget", agent="assistant", item=replaced["id"])
    forgot = full.call("memory_forget", agent="assistant", item=added["id"])
    assert forgot["forgot"] == [added["id"]] and forgot["files"] == ["agents/assistant/memory.org"]
    progress = []
    compacted = full.call("memory_compact", progress, agent="assistant", max_age="100y")
    assert [m["text"] for m in compacted["moved"]] == ["Release 2.3.1 contains the fix for E1042."]
    assert compacted["known_in_other_words"] == []
    assert progress[0][:2] == (0, 1) and progress[-1][:2] == (1, 1)
    compaction = full.call("diff", from_ref=compacted["before"], to_ref=compacted["after"])["changes"]
    assert ("added", "agents/assistant/memory.org") in {(c["kind"], c["path"]) for c in compaction}


def test_history_tools(full):
    taken = full.call("snapshot", message="from mcp")
    assert taken["message"] == "from mcp"
    assert full.call("log", limit=1)["snapshots"][0]["ref"] == taken["ref"]
    assert full.call("diff")["changes"] == []
    full.call("memory_add", agent="reviewer", text="Review migrations twice.", type="procedure")
    changes = full.call("diff")["changes"]
    assert ("added", "agents/reviewer/memory.org") in {(c["kind"], c["path"]) for c in changes}
    assert {c["path"] for c in changes} == {"agents/reviewer/memory.org"}
    for since in (taken["ref"], "1h", "2000-01-01"):
        recent = full.call("recent_activity", since=since)
        assert ("added", "agents/reviewer/memory.org") in {(c["kind"], c["path"]) for c in recent["changes"]}
    assert full.call("recent_activity", since=taken["ref"])["snapshots"] == []
    assert full.call("recent_activity", since="2000-01-01")["compared_with"].startswith("nothing")


def test_conversation_memory_per_identity(full):
    assert full.call("add_turn", tenant="acme", user="ada", session="s-1", user_message="What is due?",
                     assistant_response="The report.")["stored"]
    context = full.call("get_context", tenant="acme", user="ada", session="s-1")
    assert [(t["user"], t["assistant"]) for t in context["turns"]] == [("What is due?", "The report.")]
    assert full.call("get_context", tenant="acme", user="bob", session="s-1")["turns"] == []
    assert "session" in full.call("add_turn", tenant="acme", user="ada", user_message="x", assistant_response="y")


def test_a_write_shows_in_cortex_diff_and_cortex_rollback_undoes_it(full, capsys):
    fact = "The MCP server remembers this."
    full.call("snapshot", message="before the write")
    assert full.call("memory_add", agent="assistant", text=fact)["added"]
    memory = full.org / "agents" / "assistant" / "memory.org"
    assert fact in memory.read_text()
    shown = [line.rstrip() for line in cli(capsys, "diff", "--store", str(full.store)).splitlines()]
    assert [line for line in shown if line.startswith("added")] == [
        f"added    agents/assistant/memory.org: Facts / {fact} [mem-assistant-the-mcp-server-remembers-this-841829]"]
    cli(capsys, "rollback", "HEAD", "--keep", "--store", str(full.store))
    assert fact not in memory.read_text()
    assert fact not in full.call("memory_inspect", agent="assistant")["memory_org"]
    back = full.call("rollback", ref=_kept(full))  # and the rollback tool brings it back
    assert back["written"] == ["agents/assistant/memory.org"]
    assert fact in memory.read_text()


def _kept(client) -> str:
    """The ref of the snapshot `cortex rollback --keep` made of the edits it rolled back."""
    snapshots = client.call("log", limit=5)["snapshots"]
    return next(s["ref"] for s in snapshots if s["message"].startswith("before rollback"))


# --- scope and safety ------------------------------------------------------------------------


def test_a_bound_server_reaches_only_its_agent(bound):
    assert bound.resources() == {"cortex://agents/assistant/memory", "cortex://agents/assistant/logs/2026-11-20"}
    assert "mem-assistant-dark-mode" in bound.read("cortex://agents/assistant/memory")
    assert "bound to agent 'assistant'" in bound.refused_read("cortex://agents/reviewer/memory")
    assert "outside this server's scope" in bound.refused_read("cortex://files/notes/projects.org")
    assert "outside this server's scope" in bound.refused_read("cortex://files/agents/reviewer/memory.org")
    assert "no headline" in bound.refused_read("cortex://ids/task-rotate-secrets")
    refused = bound.call("memory_add", agent="reviewer", text="Not mine to write.")
    assert isinstance(refused, Refused) and "cannot reach another agent's memory" in refused
    assert isinstance(bound.call("memory_inspect", agent="reviewer"), Refused)
    assert isinstance(bound.call("show", target="task-rotate-secrets"), Refused)
    assert bound.call("memory_add", text="Bound servers write their own agent.")["added"]
    assert "Not mine" not in (bound.org / "agents" / "reviewer" / "memory.org").read_text()
    progress = []
    hits = bound.call("search", progress, query="staging migration E1042")["results"]
    assert progress and progress[-1][0] == progress[-1][1] > 0  # its first search embedded its agent's items
    assert hits and {h["path"].split("/")[1] for h in hits} == {"assistant"}
    assert all(h["path"].startswith("agents/assistant/") for h in bound.call("find", text="the")["headlines"])
    outside = bound.call("query", query='(todo "TODO")')  # the notes' tasks are out of its reach, and it says so
    assert outside["headlines"] == [] and outside["scope"] == ("agents/assistant/ only: this server is bound to "
                                                               "agent 'assistant'")
    assert bound.call("find", todo="TODO")["scope"].startswith("agents/assistant/ only")
    assert {c["path"] for c in bound.call("diff")["changes"]} == {"agents/assistant/memory.org"}
    assert "rollback is off" in bound.call("rollback", ref="HEAD")


def _stored(location: str) -> dict:
    """Every entry of every table of a store, read without writing."""
    store = open_store(location, read_only=True)
    try:
        return {table: list(store.engine.scan(table)) for table in ENGINE_TABLES}
    finally:
        store.close()


def _files(folder: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*") if p.is_file())


def test_a_read_only_server_refuses_every_write_and_writes_nothing(tmp_path, org, store_at):
    """(LMDB and PostgreSQL) after searches (which embed), reads of every kind and conversation contexts, the
    store's tables hold what they held, and no file was added beside the store or in the cache folder."""
    with cx.open(store_at, org) as c:
        c.ingest()
        c.snapshot("start")
        with c.conversations() as memory:
            memory.add_turn(cx.Identity("acme", "ada", "s-1"), cx.Turn("What is due?", "The report."))
    (org / "notes" / "projects.org").write_text((org / "notes" / "projects.org").read_text() + "* Not ingested\n")
    local = tmp_path / ("store" if not store_at.startswith("postgresql") else "cache/cortex")  # files beside it
    before, files_before = _stored(store_at), _files(local)
    with stdio_server(tmp_path / "stdio.log", "--store", store_at, "--org", str(org), "--read-only") as client:
        assert client.tools() == set(READ)
        for tool, arguments in {"memory_add": {"agent": "assistant", "text": "x"}, "snapshot": {},
                                "memory_forget": {"agent": "assistant", "item": "x"}, "rollback": {"ref": "HEAD"},
                                "add_turn": {"tenant": "a", "user": "b", "session": "c", "user_message": "x",
                                             "assistant_response": "y"}}.items():
            answer = client.call(tool, **arguments)
            assert isinstance(answer, Refused) and "read-only" in answer, (tool, answer)
        assert client.call("search", query="which region hosts staging?")["results"]
        assert client.call("search", query="E1042", as_of="HEAD")["results"]
        assert client.call("find", tag="security")["headlines"][0]["id"] == "task-rotate-secrets"
        assert client.call("query", query="+security/TODO")["headlines"]
        assert client.call("recent_activity", since="1d")["not_ingested"] == ["notes/projects.org"]
        assert client.call("memory_inspect", agent="assistant")["summary"].startswith("assistant: 3 facts")
        for strategy in ("truncation", "rolling_summary"):
            assert client.call("get_context", tenant="acme", user="ada", session="s-1", strategy=strategy)["turns"]
        assert client.call("log")["snapshots"] and client.call("diff")["changes"] == []
        assert client.read("cortex://files/notes/projects.org").startswith("#+TITLE")
        assert "mem-assistant-dark-mode" in client.read("cortex://agents/assistant/memory")
        assert client.resources()
    assert "Traceback" not in (tmp_path / "stdio.log").read_text()
    assert _stored(store_at) == before and _files(local) == files_before


def test_rollback_with_read_only_is_refused_at_start(full, capsys):
    with pytest.raises(SystemExit):
        cli(capsys, "mcp", "--read-only", "--allow-rollback", "--store", str(full.store))
    assert "--allow-rollback needs writes" in capsys.readouterr().err


# --- conversations in the daily log -----------------------------------------------------------


def test_memory_turns_logs_a_conversation_under_its_speakers_names(full, bound):
    day, at = date(2026, 11, 20), datetime(2026, 11, 20, 9, 30)
    logged = full.call("memory_turns", agent="helpdesk", session="s-7", title="Printer trouble", turns=[
        {"speaker": "Caroline", "text": "The printer on floor 2 jams.\nEvery morning.", "at": "2026-11-20T09:30"},
        {"speaker": "helpdesk", "text": "Logged as ticket 4411.", "at": "2026-11-20T09:30", "tools": ["tickets"]}])
    assert logged == {"logged": 2, "session": "s-7", "logs": ["agents/helpdesk/logs/2026-11-20.org"]}
    full.call("memory_turns", agent="helpdesk", session="s-7",
              turns=[{"speaker": "Melanie", "text": "Mine too.", "at": "2026-11-20T09:41"}])
    text = (full.org / "agents/helpdesk/logs/2026-11-20.org").read_text()
    assert "* 09:30 — Printer trouble\n" in text and ":PEOPLE:   Caroline, helpdesk, Melanie\n" in text
    assert read_session(text, "s-7", day) == [
        Utterance("Caroline", "The printer on floor 2 jams.\nEvery morning.", at),
        Utterance("helpdesk", "Logged as ticket 4411.", at, ("tickets",)),
        Utterance("Melanie", "Mine too.", at.replace(minute=41))]
    hit = full.call("search", query="printer jams every morning", agent="helpdesk", limit=1)["results"][0]
    assert hit["outline"].endswith("Caroline: The printer on floor 2 jams.")
    refused = full.call("memory_turns", agent="helpdesk", session="s-7",
                        turns=[{"speaker": "Ann", "text": "fine"}, {"speaker": "Dr: Who", "text": "x"}])
    assert isinstance(refused, Refused) and "turns[1]: turn speaker 'Dr: Who': holds ':'" in refused
    assert (full.org / "agents/helpdesk/logs/2026-11-20.org").read_text() == text  # nothing of it written
    assert "cannot reach another agent's memory" in bound.call(
        "memory_turns", agent="helpdesk", session="s-7", turns=[{"speaker": "Eve", "text": "Not my agent."}])
    assert bound.call("memory_turns", session="s-b", turns=[{"speaker": "Dana", "text": "Hello.",
                                                             "at": "2026-11-20T09:30"}])["logs"] == [
        "agents/assistant/logs/2026-11-20.org"]
    assert "** Dana: Hello." in (bound.org / "agents/assistant/logs/2026-11-20.org").read_text()
