"""The Org folder a store tracks is a working copy of it from its first ingest: store-side writers
(--no-org memory writes, receivers with no folder) and the folder never undo each other, on LMDB
and PostgreSQL."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from click.testing import CliRunner

import cortex.api as cx
import cortex.ingest as ingesting
from cortex.cli.app import cli
from cortex.errors import UserError
from cortex.history import DirtyWorkingFiles
from cortex.ingest import commit_files
from cortex.query import render_file
from tests.mcp_client import CORTEX, connected

STORE_SIDE = "NOORG-WRITE-1 store side"
MEMORY = Path("agents/assistant/memory.org")


def invoker(*options):
    """`invoke(*args)`: run a cortex command (and subcommand) with `options` after it; it must succeed."""
    def invoke(*args):
        result = CliRunner().invoke(cli, [*args, *options])
        assert result.exit_code == 0, result.output + str(result.exception)
        return result

    return invoke


def ingest(run, store, tmp_path, org):
    run("ingest")


def checkout(run, store, tmp_path, org):
    run("checkout", str(tmp_path / "copy"))


def repl(run, store, tmp_path, org):
    run("eval", "(stats)")  # the REPL ingests its Org folder as it opens


def sync(run, store, tmp_path, org):
    run("sync")


def mcp(run, store, tmp_path, org):
    server = StdioServerParameters(command=CORTEX, args=["mcp", "--store", store, "--org", str(org)],
                                   env=dict(os.environ))
    with connected(stdio_client(server), tmp_path / "mcp.log") as client:  # it ingests as it starts
        assert "memory_add" in client.tools()


@pytest.mark.parametrize("command", [ingest, checkout, repl, sync, mcp], ids=lambda f: f.__name__)
def test_a_store_side_write_survives_every_command_that_ingests_the_folder(store_at, org, tmp_path, command):
    run, store_side = invoker("--store", store_at, "--org", str(org)), invoker("--store", store_at, "--no-org")
    run("ingest")
    assert "added" in store_side("memory", "add", "assistant", STORE_SIDE).output  # acknowledged
    command(run, store_at, tmp_path, org)
    assert STORE_SIDE in run("show", str(MEMORY)).output
    assert STORE_SIDE in (org / MEMORY).read_text()  # the folder received it
    assert run("conflicts").output.strip() == "no conflicts"


HOOKS = """* Hooks
#+begin_src hy :cortex yes
(defwebhook payments :path "/hooks/payments" :provider stripe
  :secret "secret://env/PAYMENTS_SECRET" :agent assistant)
#+end_src
"""


def test_a_delivery_routed_with_no_folder_stays_when_one_with_the_folder_is_routed(store_at, org, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setenv("PAYMENTS_SECRET", "whsec_cGF5bWVudHMtc2VjcmV0")
    (org / "notes" / "hooks.org").write_text(HOOKS)
    run, store_side = invoker("--store", store_at, "--org", str(org)), invoker("--store", store_at, "--no-org")
    run("ingest")
    for routed_by, event in ((store_side, "evt_store_side"), (run, "evt_with_folder")):
        payload = json.dumps({"id": event, "type": "payment_intent.succeeded"})
        answer = routed_by("webhook", "test", "payments", "--event", "payment_intent.succeeded", "--payload", payload)
        assert "routed" in answer.output
    logs = sorted((org / "agents" / "assistant" / "logs").glob("*.org"))
    in_folder = "".join(log.read_text() for log in logs)
    in_store = "".join(run("show", log.relative_to(org).as_posix()).output for log in logs)
    for event in ("evt_store_side", "evt_with_folder"):
        assert event in in_folder and event in in_store


def test_a_folder_ingested_before_it_was_a_copy_keeps_both_sides_edits(tmp_path, org):
    """A store whose Org folder was last ingested as a plain folder (before folders were working copies)
    takes the tree of that ingest as the folder's base, so neither side's later edits undo the other's."""
    with cx.open(tmp_path / "store", org) as c:
        ingesting.ingest(c.store, org)  # as an ingest of a plain folder did
        commit_files(c.store, lambda tree: {"notes/agent.org": b"* Written store-side\n"}, "a store-side writer")
        (org / "notes" / "reading.org").write_text((org / "notes" / "reading.org").read_text() + "* Mine\n")
        report = c.ingest()
        assert report.received == ["notes/agent.org"] and report.conflicts == []
        assert "* Mine" in c.show("notes/reading.org") and (org / "notes" / "agent.org").exists()


def test_a_working_copy_of_another_store_is_refused_in_one_line(tmp_path, org):
    with cx.open(tmp_path / "first", org) as c:
        c.ingest()
    with cx.open(tmp_path / "second", org) as c, pytest.raises(UserError, match="a working copy of another store"):
        c.ingest()


def test_a_rollback_counts_what_store_side_writers_committed_as_an_edit(tmp_path, org):
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.snapshot("first")
    with cx.open(tmp_path / "store", folder=False) as c:
        c.memory.add_item("assistant", "fact", STORE_SIDE)
    with cx.open(tmp_path / "store", org) as c:
        with pytest.raises(DirtyWorkingFiles, match="memory.org"):
            c.rollback("HEAD")
        kept = c.rollback("HEAD", keep=True).kept
        assert STORE_SIDE in render_file(c.store, c.state(kept.oid), str(MEMORY))
        assert STORE_SIDE not in (org / MEMORY).read_text() and c.sync().sent == []


def test_a_folder_that_cannot_be_written_is_refused_in_one_line(tmp_path, org):
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    if subprocess.run(["mount", "--bind", str(org), str(readonly)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount a folder (needs root)")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(readonly)], capture_output=True).returncode != 0:
            pytest.skip("cannot make a mount read-only")
        with cx.open(tmp_path / "store", readonly) as c, pytest.raises(UserError, match="cannot be made a working"):
            c.ingest()
    finally:
        subprocess.run(["umount", str(readonly)], capture_output=True)
