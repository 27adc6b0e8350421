"""`cortex mcp --config` prints a client configuration that works as written: a client that starts the server from
another folder, with no PATH, reaches this store's memory through it (the `mcp` SDK's own client)."""

import json
import os
import subprocess
import sys

from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcp_client import CORTEX, connected, prepared


def test_the_printed_configuration_starts_the_server_from_anywhere(tmp_path):
    store, org = prepared(tmp_path)
    printed = subprocess.run([CORTEX, "mcp", "--config", "--store", "store", "--agent", "assistant", "--review"],
                             cwd=tmp_path, capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    assert "claude_desktop_config.json" in printed.stderr and ".cursor/mcp.json" in printed.stderr
    server = json.loads(printed.stdout)["mcpServers"]["cortex-assistant"]
    assert server["args"] == ["mcp", "--store", str(store), "--org", str(org), "--agent", "assistant", "--review"]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(tmp_path / "cache"))}
    params = StdioServerParameters(command=server["command"], args=server["args"], env=env, cwd=elsewhere)
    with (tmp_path / "server.log").open("w") as log, \
            connected(stdio_client(params, errlog=log), tmp_path / "server.log") as client:
        assert "memory_add" in client.tools()
        assert "* Facts" in client.read("cortex://agents/assistant/memory")


def test_config_refuses_http_and_a_folder_the_store_does_not_track(tmp_path):
    store, org = prepared(tmp_path)
    cortex = [sys.executable, "-c", "from cortex.cli import main; main()", "mcp", "--config", "--store", str(store)]
    http = subprocess.run([*cortex, "--http"], capture_output=True, text=True)
    assert http.returncode == 2 and "an HTTP client connects to the address" in http.stderr
    other = subprocess.run([*cortex, "--org", str(tmp_path)], capture_output=True, text=True)
    assert other.returncode == 1 and other.stderr.startswith(f"cortex: this store tracks the Org folder {org}")
    assert other.stdout == ""
