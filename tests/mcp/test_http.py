"""The MCP transports as an attacker meets them: over HTTP, a bearer token off loopback (on initialise and on
every request after it), Host and Origin checked on every bind, bodies and sessions bounded; over stdio, every
line answered, the broken ones with JSON-RPC's error. Real servers, the real client, raw HTTP for the rest."""

import json
import subprocess

import httpx
import pytest

from cortex.errors import UserError
from cortex.mcp.http import MAX_SESSIONS, policy, read_token
from tests.linear import finishes
from tests.mcp_client import CORTEX, environment, http_server, prepared

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(url: str, body=INITIALIZE, **headers) -> httpx.Response:
    """One raw POST to the server, with the headers MCP asks for and `headers` (None: left out)."""
    sent = {k.replace("_", "-"): v for k, v in {**HEADERS, **headers}.items() if v is not None}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(timeout=30) as client:
        return client.post(url, content=content, headers=sent)


# --- the rules --------------------------------------------------------------------------------------------


def test_the_rules_of_each_address():
    loopback = policy("127.0.0.1")
    assert loopback.token is None and "localhost:*" in loopback.hosts and "http://127.0.0.1:*" in loopback.origins
    assert "[::1]:*" in policy("::1").hosts and "127.0.0.2:*" in policy("127.0.0.2").hosts
    with pytest.raises(UserError, match="'192.0.2.7' is not a loopback address: anyone who reaches it"):
        policy("192.0.2.7")
    token = "t" * 32
    concrete = policy("192.0.2.7", token=token, allow_origins=["https://app.example.com/"])
    assert concrete.hosts == ("192.0.2.7:*",) and concrete.origins == ("https://app.example.com",)
    with pytest.raises(UserError, match="listens on every interface: name the host names"):
        policy("0.0.0.0", token=token)
    assert policy("::", token=token, allow_hosts=["memory.example.com", "10.0.0.5:8765"]).hosts == (
        "memory.example.com", "memory.example.com:*", "10.0.0.5:8765")
    with pytest.raises(UserError, match="at least 16 printable characters"):
        policy("127.0.0.1", token="short")


def test_a_token_comes_from_the_environment_or_a_file_made_when_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("CORTEX_MCP_TOKEN", "e" * 20)
    assert read_token(None) == ("e" * 20, None)
    token, told = read_token(str(tmp_path / "token"))
    assert told.endswith("(readable by you only)") and read_token(str(tmp_path / "token")) == (token, None)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(UserError, match="empty; a token file holds one line"):
        read_token(str(tmp_path / "empty"))
    with pytest.raises(UserError, match="more than 4.0 KiB, the most a token file may hold"):
        read_token("/dev/zero")


def test_a_server_off_loopback_does_not_start_without_a_token(tmp_path):
    done = subprocess.run([CORTEX, "mcp", "--http", "--host", "0.0.0.0", "--port", "0", "--store",
                           str(tmp_path / "store")], capture_output=True, text=True, env=environment(), timeout=60)
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert done.stderr.strip().startswith("cortex: --host '0.0.0.0' is not a loopback address")
    assert len(done.stderr.strip().splitlines()) == 1


# --- a server on every interface, with its token -------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A server on 0.0.0.0 whose token it made in a new file, allowing the Host names 127.0.0.1 and memory.test
    (reached over loopback only)."""
    folder = tmp_path_factory.mktemp("guarded")
    store, org = prepared(folder)
    token_file, log = folder / "token", folder / "http.log"
    options = ("--host", "0.0.0.0", "--token-file", str(token_file), "--allow-host", "127.0.0.1",
               "--allow-host", "memory.test", "--store", str(store), "--org", str(org), "--agent", "assistant")
    with http_server(log, *options, token=lambda: token_file.read_text().strip()) as client:
        yield client
    assert f"made a new bearer token in {token_file}" in log.read_text() and client.token not in log.read_text()
    assert (token_file.stat().st_mode & 0o777) == 0o600 and len(client.token) >= 32
    assert "Traceback" not in log.read_text()


def test_with_its_token_a_client_uses_the_server(guarded):
    assert guarded.call("memory_inspect")["summary"].startswith("assistant:")


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-of-enough-length", "Basic abc", "Bearer x"])
def test_without_its_token_every_request_gets_401(guarded, authorization):
    answer = post(guarded.url, Authorization=authorization)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("Bearer")
    opened = post(guarded.url, Authorization=f"Bearer {guarded.token}")  # a session, opened with the token...
    later = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    assert post(guarded.url, later, Authorization=authorization, **session).status_code == 401  # ...not without it
    assert post(guarded.url, later, Authorization=f"Bearer {guarded.token}", **session).status_code == 200


@pytest.mark.parametrize("headers, status", [
    ({"Origin": "http://evil.example"}, 403),
    ({"Host": "evil.example"}, 421),
    ({"Host": "memory.test"}, 200),
    ({"Host": "memory.test:1", "Origin": "https://memory.test"}, 403),
])
def test_host_and_origin_off_loopback_are_those_allowed(guarded, headers, status):
    assert post(guarded.url, Authorization=f"Bearer {guarded.token}", **headers).status_code == status


# --- the default, loopback ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """A server on 127.0.0.1 without a token."""
    store, org = prepared(tmp_path_factory.mktemp("local"))
    with http_server(store.parent / "http.log", "--store", str(store), "--org", str(org)) as client:
        yield client


@pytest.mark.parametrize("headers, status", [
    ({"Origin": "http://evil.example"}, 403),
    ({"Origin": "null"}, 403),
    ({"Host": "evil.example"}, 421),
    ({"Host": "evil.example:8765", "Origin": "http://evil.example:8765"}, 421),
    ({"Origin": "http://localhost:3000"}, 200),
    ({}, 200),
])
def test_on_loopback_a_foreign_host_or_origin_is_refused(local, headers, status):
    assert post(local.url, **headers).status_code == status


def test_a_match_string_that_took_minutes_answers_at_once_and_the_server_goes_on(local):
    answer = finishes(lambda: local.call("query", query="security+project_infrastructure_migration" + "x" * 100_000))
    assert answer == {"headlines": []}  # the server's one call at a time was not held: the next is answered
    assert local.call("find", tag="security")["headlines"]


def test_a_body_too_large_gets_413_and_sessions_are_bounded(local):
    assert post(local.url, b"[" + b" " * (5 << 20) + b"]").status_code == 413
    answers = [post(local.url).status_code for _ in range(MAX_SESSIONS + 1)]
    assert answers.count(503) >= 1 and answers[0] == 200
    assert local.call("find", tag="security")["headlines"]  # the client's own session goes on


# --- stdio ------------------------------------------------------------------------------------------------


def test_over_stdio_every_line_gets_an_answer(tmp_path):
    store, org = prepared(tmp_path)
    lines = [b"not json", b"\xff\xfe", b"[]", b'[{"jsonrpc": "2.0", "id": 5, "method": "ping"}]',
             b'{"jsonrpc": "2.0", "id": 7, "result": {}}', b"[" * 100_000 + b"]" * 100_000,
             b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "find", "arguments": {"tag": '
             + b"[" * 300 + b"]" * 300 + b"}}}", b'{"jsonrpc": "2.0", "id": 4, "method": 5}', b"",
             b"x" * (5 << 20), b'{"jsonrpc": "2.0", "id": 9, "method": "ping"}']
    done = subprocess.run([CORTEX, "mcp", "--store", str(store), "--org", str(org), "--read-only"],
                          input=b"\n".join(lines) + b"\n", capture_output=True, timeout=120)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(a.get("id"), a["error"]["code"] if "error" in a else "ok") for a in answers] == [
        (None, -32700), (None, -32700), (None, -32600), (None, -32600), (None, -32600), (None, -32600),
        (3, -32600), (4, -32600), (None, -32600), (9, "ok")]
    assert "Traceback" not in done.stderr.decode()
