"""`cortex mcp`: serve the store to AI agents over the Model Context Protocol."""

from __future__ import annotations

import json
import os
import shutil
import sys
from contextlib import nullcontext
from pathlib import Path

import click

from . import interrupted
from .common import err_console, no_org_option, org_option, stopped_by_ctrl_c, store_option


@click.command(name="mcp")
@click.option("--agent", metavar="NAME", help="Bind the server to one agent: it sees and writes only agents/NAME/.")
@click.option("--tenant", "tenants", metavar="NAME", multiple=True,
              help="Reach the conversations of this tenant only (repeatable); a server bound to an agent reaches "
                   "none without it.")
@click.option("--read-only", is_flag=True, help="Refuse every write: memory, snapshots, conversation turns.")
@click.option("--allow-rollback", is_flag=True, help="Offer the rollback tool (it is refused otherwise).")
@click.option("--review", is_flag=True, help="Every memory write waits for a person's review, as a proposal "
                                             "(`cortex review`); the agent sees its own at once.")
@click.option("--http", is_flag=True, help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The HTTP address: loopback unless changed (another needs a bearer token).")
@click.option("--token-file", metavar="FILE", help="HTTP: the bearer token every request must carry, read from FILE "
                                                   "(a new one is made there if it does not exist); or set "
                                                   "CORTEX_MCP_TOKEN. Required off loopback.")
@click.option("--allow-host", "allow_hosts", metavar="NAME", multiple=True,
              help="HTTP: a Host a request may name (repeatable); loopback names are allowed on loopback.")
@click.option("--allow-origin", "allow_origins", metavar="ORIGIN", multiple=True,
              help="HTTP: an Origin a browser request may come from (repeatable), such as https://app.example.com.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The HTTP port (0: a free one); the address is printed on stderr.")
@click.option("--config", is_flag=True,
              help="Serve nothing: print the block a desktop client's configuration takes to start this server as "
                   "given (absolute paths of this installation), and where the common clients keep it.")
@store_option
@org_option
@no_org_option
def mcp_command(store, org_root, no_org, agent, tenants, read_only, allow_rollback, review, http, host, token_file,
                allow_hosts, allow_origins, port, config):
    """Serve this store to AI agents over MCP: stdio (what desktop clients start) or, with --http, streamable HTTP.

    Tools search, show, query and write agent memory; every write is a commit that `cortex diff` shows and
    `cortex rollback` undoes. Resources are cortex:// URIs: agents/NAME/memory, agents/NAME/logs/DAY,
    files/PATH, ids/ID, snapshots/REF/files/PATH and snapshots/REF/ids/ID.
    """
    from .. import api
    from ..mcp import serve
    from ..mcp.http import policy, read_token

    if config:
        if http:
            raise click.UsageError("--config writes how a client starts a stdio server; an HTTP client connects to "
                                   "the address `cortex mcp --http` prints")
        flags = [("--read-only", read_only), ("--allow-rollback", allow_rollback), ("--review", review)]
        options = [*(["--agent", agent] if agent else []), *(w for t in tenants for w in ("--tenant", t)),
                   *(flag for flag, on in flags if on)]
        print(json.dumps(client_config(store, org_root, no_org, options, agent), indent=2))
        err_console.print(CLIENT_FILES, markup=False)
        return
    rules = None
    if http:
        token, made = read_token(token_file)
        rules = policy(host, token=token, allow_hosts=allow_hosts, allow_origins=allow_origins)
        if made:
            err_console.print(made, markup=False)
    with api.open(store, org_root, folder=not no_org, read_only=read_only, review=review) as cx, \
            stopped_by_ctrl_c() if http else nullcontext():
        serve(cx, agent=agent, read_only=read_only, allow_rollback=allow_rollback,
              tenants=frozenset(tenants) if tenants else None, http=rules, host=host, port=port, stop=interrupted)


CLIENT_FILES = ("add it under \"mcpServers\" in your client's configuration: Claude Desktop "
                "~/.config/Claude/claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/"
                "claude_desktop_config.json; Windows: %APPDATA%\\Claude\\claude_desktop_config.json), Cursor "
                "~/.cursor/mcp.json, Claude Code .mcp.json at a project's root; then restart the client")


def client_config(store, org_root, no_org: bool, options: list[str], agent: str | None) -> dict:
    """The `mcpServers` block that starts `cortex mcp OPTIONS` on this store and Org folder from any folder, with
    no PATH: the installed command and every path absolute (a database URL as given)."""
    command, *args = invocation(store, org_root, no_org, ["mcp"])
    return {"mcpServers": {f"cortex-{agent}" if agent else "cortex": {"command": command, "args": args + options}}}


def invocation(store, org_root, no_org: bool, words: list[str]) -> list[str]:
    """The command line that runs `cortex WORDS` on this store and Org folder from any folder, with no PATH: the
    installed command, then WORDS with --store and --org, every path absolute (a database URL as given)."""
    from .. import api
    from ..backends import NoStore, is_database_url
    from ..location import default_store_path

    where = store or default_store_path(org_root)
    where = where if is_database_url(where) else os.path.abspath(Path(where).expanduser())
    args = [*words, "--store", str(where)]
    if not no_org:
        try:  # the folder the store tracks, unless named: a client starts the server in a folder of its own
            with api.open(where, org_root, read_only=True) as cx:
                folder = cx.root
        except NoStore:
            folder = Path(os.path.abspath(org_root or "org"))
        args += ["--org", str(folder)]
    else:
        args += ["--no-org"]
    installed = Path(sys.executable).with_name("cortex")
    command = str(installed) if installed.is_file() else shutil.which("cortex")
    if command is None:
        return [sys.executable, "-c", "from cortex.cli import main; main()", *args]
    return [command, *args]


commands = (mcp_command,)
