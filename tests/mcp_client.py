"""The `mcp` SDK's own client driving a real `cortex mcp` subprocess, over stdio or streamable HTTP on loopback,
from synchronous tests."""

import functools
import os
import shutil
import subprocess
import sys
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx2
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import cortex.api as cx

from tests.conftest import EXAMPLES

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


def environment() -> dict[str, str]:
    """This process's environment for a server, without a bearer token a developer may have set (the tests give
    theirs with --token-file)."""
    return {name: value for name, value in os.environ.items() if name != "CORTEX_MCP_TOKEN"}


@contextmanager
def http_server(log: Path, *options: str, token=None):
    """A client of `cortex mcp --http --port 0 OPTIONS` over streamable HTTP, sending `token` (or what `token()`
    answers once the server listens) as its bearer token; the server's stderr goes to `log`. The client's `url`
    is the server's (on 127.0.0.1 when it listens on every interface), its `token` the one it sends."""
    with log.open("w") as errors:
        server = subprocess.Popen([CORTEX, "mcp", "--http", "--port", "0", *options], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=errors, env=environment())
        try:
            url = announced(server, log).replace("//0.0.0.0:", "//127.0.0.1:")
            token = token() if callable(token) else token
            with connected(_streamable_http(url, token), log) as client:
                client.url, client.token = url, token
                yield client
        finally:
            server.terminate()
            server.wait(timeout=30)


@asynccontextmanager
async def _streamable_http(url: str, token: str | None):
    """The SDK's streamable HTTP transport to `url`, over an HTTP client that sends `token` as its bearer token."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http, \
            streamable_http_client(url, http_client=http) as streams:
        yield streams


def announced(server: subprocess.Popen, log: Path) -> str:
    """The URL an HTTP server prints on stderr once it listens."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("cortex mcp:") and "http://" in line:
                return line.split(" at ", 1)[1].split()[0]
        if server.poll() is not None:
            pytest.fail(f"cortex mcp --http exited with {server.returncode}: {log.read_text()}")
        time.sleep(0.05)
    pytest.fail(f"cortex mcp --http did not announce its address: {log.read_text()}")
