"""`cortex brief` and `cortex hook`: an agent's briefing, and the hooks a coding agent runs at its sessions' start
and end."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import click

from ..memory.brief import DEFAULT_BUDGET
from ..words import counted
from .common import console, err_console, no_org_option, org_option, store_option, with_cortex

AGENT_VARIABLE = "CORTEX_AGENT"
budget_option = click.option("--budget", type=click.IntRange(min=50), default=DEFAULT_BUDGET, show_default=True,
                             metavar="TOKENS", help="At most this many tokens (estimated as characters / 4); whole "
                                                    "items are left out, and said so, beyond.")


@click.command()
@click.argument("agent")
@budget_option
@with_cortex
def brief(cx, agent, budget):
    """What AGENT should know as a session starts: its current facts, procedures and patterns, its open TODOs (in
    its folder, or tagged with its name) and what changed since its last session began, within --budget."""
    console.print(cx.brief(agent, budget).text, end="")


@click.command()
@click.argument("runtime", type=click.Choice(["claude-code"]))
@click.argument("event", required=False)
@click.option("--install", is_flag=True, help="Write the hooks into PROJECT/.claude/settings.json and this store's "
                                              "MCP server into PROJECT/.mcp.json (merged, absolute paths).")
@click.option("--project", type=click.Path(file_okay=False), default=".", show_default=True,
              help="--install: the project whose settings get the hooks (its folder's name is the default agent).")
@click.option("--agent", envvar=AGENT_VARIABLE, metavar="NAME",
              help=f"The agent whose memory it is (default: ${AGENT_VARIABLE}, else the name of the project's folder).")
@budget_option
@store_option
@org_option
@no_org_option
def hook(runtime, event, install, project, agent, budget, store, org_root, no_org):
    """Run the hook of EVENT that Claude Code starts (SessionStart, PreCompact, SessionEnd), reading its JSON on
    stdin; or, with --install, install them.

    SessionStart prints the agent's briefing (`cortex brief`) for the model's context; PreCompact and SessionEnd
    log the session's new turns into the agent's daily log, and SessionEnd snapshots. A hook never stops the
    session: with no store or no memory yet it says so on stderr and exits 0; bad input exits 1 with one line.
    """
    from ..hooks import claude_code as cc

    if install:
        if event is not None:
            raise click.UsageError("--install installs every hook: give no EVENT")
        return _install(Path(project).resolve(), agent, store, org_root, no_org)
    if event is None:
        raise click.UsageError(f"name the EVENT ({', '.join(cc.EVENTS)}), or --install")
    _run(cc.event_named(event), agent, budget, store, org_root, no_org)


def _run(event: str, agent, budget: int, store, org_root, no_org) -> None:
    from .. import api
    from ..backends import NoStore
    from ..errors import NotFound
    from ..hooks import claude_code as cc
    from ..reads import read_text_bounded

    payload = cc.read_payload(read_text_bounded(sys.stdin, cc.MAX_INPUT, "a hook's input", "stdin"), event)
    agent = agent or Path(payload.get("cwd") or os.getcwd()).name
    try:
        with api.open(store, org_root, folder=not no_org, create=False) as cx:
            if event == "SessionStart":
                print(cc.session_start_output(cx.brief(agent, budget).text))
                return
            count, path = cc.record(cx, agent, payload)
            if event == "SessionEnd":
                cx.snapshot(f"{agent}: session {payload['session_id']} ended", empty=False)
    except NotFound as exc:  # no store, or no memory yet: the session goes on without
        err_console.print(f"cortex: {exc}; nothing {'briefed' if event == 'SessionStart' else 'logged'}",
                          markup=False)
        return
    err_console.print(f"cortex: logged {counted(count, 'turn')} of session {payload['session_id']}"
                      + (f" in {path}" if path else ""), markup=False)


def _install(project: Path, agent, store, org_root, no_org) -> None:
    from ..files import write_atomically
    from ..hooks import claude_code as cc
    from ..memory.layout import check_agent_id
    from .mcp import client_config, invocation

    agent = check_agent_id(agent or project.name)
    commands = {event: shlex.join(invocation(store, org_root, no_org, ["hook", cc.RUNTIME, event, "--agent", agent]))
                for event in cc.EVENTS}
    servers = client_config(store, org_root, no_org, ["--agent", agent], agent)["mcpServers"]
    settings, mcp = project / ".claude" / "settings.json", project / ".mcp.json"
    updated = [(settings, cc.installed_hooks(cc.read_json_object(settings), commands, str(settings))),
               (mcp, cc.installed_server(cc.read_json_object(mcp), servers, str(mcp)))]
    for path, value in updated:  # both read and checked before either is written
        data = (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        if path.exists() and path.read_bytes() == data:
            console.print(f"unchanged {path}", markup=False)
            continue
        write_atomically(path, data)
        console.print(f"wrote     {path}", markup=False)
    console.print(f"Claude Code now briefs agent {agent} at each session start and logs its sessions "
                  f"({', '.join(cc.EVENTS)}); its MCP server is {next(iter(servers))}", markup=False)


commands = (brief, hook)
