"""`cortex mcp` as a client uses it: the server runs as a subprocess (`cortex mcp ...`) and the tests talk to it
with the `mcp` SDK's own client, over stdio and over streamable HTTP on loopback."""

import functools
import os
import shutil
import subprocess
import sys
import time
from contextlib import asynccontextmanager, contextmanager
from datetime import date, datetime
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import cortex.api as cx
from cortex.cli import main as cortex_main
from cortex.memory.conversation import Utterance, read_session
from cortex.mcp.tools import COMMITS, READ, WRITE

from conftest import EXAMPLES, REPO

CORTEX = str(Path(sys.executable).parent / "cortex")


class Client:
    """A live MCP client session, driven from synchronous tests through a blocking portal."""

    def __init__(self, portal, session: ClientSession, log: Path):
        self.portal, self.session, self.log = portal, session, log

    def call(self, tool: str, progress: list | None = None, **arguments):
        """The tool's result: its structured content, else its text (Org text), or its error text."""
        told = None if progress is None else _collector(progress)
        result = self.portal.call(functools.partial(self.session.call_tool, tool, arguments, progress_callback=told))
        text = "\n".join(block.text for block in result.content)
        if result.is_error:
            return Refused(text)
        return text if result.structured_content is None else result.structured_content

    def read(self, uri: str) -> str:
        return self.portal.call(self.session.read_resource, uri).contents[0].text

    def refused_read(self, uri: str) -> str:
        with pytest.raises(MCPError) as refused:
            self.read(uri)
        return str(refused.value)

    def tools(self) -> set[str]:
        return {tool.name for tool in self.portal.call(self.session.list_tools).tools}

    def resources(self) -> set[str]:
        return {str(r.uri) for r in self.portal.call(self.session.list_resources).resources}


class Refused(str):
    """The text of a tool error."""


def _collector(progress: list):
    async def told(done, total, message):
        progress.append((done, total, message))
    return told


@asynccontextmanager
async def _session(transport):
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextmanager
def connected(transport, log: Path):
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(_session(transport)) as session:
        yield Client(portal, session, log)


def prepared(folder: Path) -> tuple[Path, Path]:
    """A store over a copy of the bundled Org examples, ingested and snapshotted (its search index not built)."""
    org, store = folder / "org", folder / "store"
    shutil.copytree(EXAMPLES, org)
    with cx.open(store, org) as c:
        c.ingest()
        c.snapshot("start")
    return store, org


@contextmanager
def stdio_server(log: Path, *options: str):
    """A client of `cortex mcp OPTIONS` over stdio; the server's stderr goes to `log`."""
    with log.open("w") as errors:
        params = StdioServerParameters(command=CORTEX, args=["mcp", *options], env=dict(os.environ))
        with connected(stdio_client(params, errlog=errors), log) as client:
            yield client


@contextmanager
def http_server(log: Path, *options: str):
    """A client of `cortex mcp --http --port 0 OPTIONS` over streamable HTTP; the server's stderr goes to `log`."""
    with log.open("w") as errors:
        server = subprocess.Popen([CORTEX, "mcp", "--http", "--port", "0", *options], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=errors, env=dict(os.environ))
        try:
            url = _announced(server, log)
            with connected(streamable_http_client(url), log) as client:
                yield client
        finally:
            server.terminate()
            server.wait(timeout=30)


def _announced(server: subprocess.Popen, log: Path) -> str:
    """The URL an HTTP server prints on stderr once it listens."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("cortex mcp:") and "http://" in line:
                return line.split(" at ", 1)[1].strip()
        if server.poll() is not None:
            pytest.fail(f"cortex mcp --http exited with {server.returncode}: {log.read_text()}")
        time.sleep(0.05)
    pytest.fail(f"cortex mcp --http did not announce its address: {log.read_text()}")


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
    assert templates == {"cortex://agents/{agent}/memory", "cortex://agents/{agent}/logs/{day}",
                         "cortex://files/{+path}", "cortex://ids/{id}", "cortex://snapshots/{ref}/files/{+path}",
                         "cortex://snapshots/{ref}/ids/{id}"}
    assert {"cortex://agents/assistant/memory", "cortex://agents/reviewer/memory",
            "cortex://agents/assistant/logs/2026-11-20", "cortex://files/notes/projects.org"} <= full.resources()


# --- reading -------------------------------------------------------------------------------


def test_search_builds_its_index_with_progress_and_filters(full):
    progress = []
    hits = full.call("search", progress, query="which region hosts staging?")["results"]
    assert progress and progress[-1][0] == progress[-1][1] > 0  # the first search embedded every item
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
    todos = full.call("find", todo="TODO")["headlines"]
    assert todos and all(h["todo"] == "TODO" for h in todos)
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


# --- writing -------------------------------------------------------------------------------


def test_memory_tools(full):
    inspected = full.call("memory_inspect", agent="assistant")
    assert inspected["summary"].startswith("assistant: 3 facts") and "2026-11-20" in inspected["daily_logs"]
    added = full.call("memory_add", agent="assistant", text="The database is Postgres 16.")
    assert added["added"] and added["id"].startswith("mem-assistant-the-database")
    assert not full.call("memory_add", agent="assistant", text="The database is Postgres 16.")["added"]
    forgot = full.call("memory_forget", agent="assistant", item=added["id"])
    assert forgot["forgot"] == [added["id"]] and forgot["files"] == ["agents/assistant/memory.org"]
    progress = []
    compacted = full.call("memory_compact", progress, agent="assistant", max_age="100y")
    assert [m["text"] for m in compacted["moved"]] == ["Release 2.3.1 contains the fix for E1042."]
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
    hits = bound.call("search", query="staging migration E1042")["results"]
    assert hits and {h["path"].split("/")[1] for h in hits} == {"assistant"}
    assert all(h["path"].startswith("agents/assistant/") for h in bound.call("find", text="the")["headlines"])
    assert {c["path"] for c in bound.call("diff")["changes"]} == {"agents/assistant/memory.org"}
    assert "rollback is off" in bound.call("rollback", ref="HEAD")


def test_a_read_only_server_on_postgresql_refuses_every_write(tmp_path, org, pg_url, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with cx.open(pg_url, org) as c:
        c.ingest()
    with stdio_server(tmp_path / "stdio.log", "--store", pg_url, "--no-org", "--read-only") as client:
        assert client.tools() == set(READ)
        for tool, arguments in {"memory_add": {"agent": "assistant", "text": "x"}, "snapshot": {},
                                "memory_forget": {"agent": "assistant", "item": "x"}, "rollback": {"ref": "HEAD"},
                                "add_turn": {"tenant": "a", "user": "b", "session": "c", "user_message": "x",
                                             "assistant_response": "y"}}.items():
            answer = client.call(tool, **arguments)
            assert isinstance(answer, Refused) and "read-only" in answer, (tool, answer)
        assert client.read("cortex://files/notes/projects.org").startswith("#+TITLE")
        assert "mem-assistant-dark-mode" in client.read("cortex://agents/assistant/memory")
        assert client.call("find", tag="security")["headlines"][0]["id"] == "task-rotate-secrets"
    assert "Traceback" not in (tmp_path / "stdio.log").read_text()


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
