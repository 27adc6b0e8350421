"""Who may talk to the MCP server over HTTP: the transport's rules, as the MCP specification sets them (servers
MUST validate Origin, SHOULD bind to localhost when local, SHOULD authenticate).

On a loopback address only this machine reaches the port: requests whose Host is not a loopback name (DNS
rebinding) get 421 and those from a foreign Origin 403; a bearer token is asked for only if one is given. On
any other address anyone who reaches the port could read and write the memory, so a bearer token is required
(the server does not start without one): every request without it, or with another, gets 401. Host and Origin
are then checked against the names the person allows (`--allow-host`, `--allow-origin`), and the address the
server listens at; a server listening on every interface (0.0.0.0, ::) needs the names clients use.

A token comes from CORTEX_MCP_TOKEN, or from the file --token-file names (made, with a new random token, when
it does not exist; readable by its owner only).
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import PlainTextResponse

from ..errors import UserError
from ..listen import is_loopback
from ..reads import read_bounded
from ..words import quoted

__all__ = ["LOOPBACK_HOSTS", "MAX_SESSIONS", "MAX_TOKEN_FILE", "MIN_TOKEN", "TOKEN_ENV", "BearerAuth", "Policy",
           "policy", "read_token"]

TOKEN_ENV = "CORTEX_MCP_TOKEN"
MIN_TOKEN = 16  # characters: a shorter token can be guessed
MAX_TOKEN_FILE = 4096  # bytes of a token file
MAX_SESSIONS = 64  # sessions open at once: a client opening more is refused (503) until one closes
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class Policy:
    """What a request must carry: the bearer token (None: none needed), and the Host and Origin values allowed."""

    token: str | None
    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    def settings(self) -> TransportSecuritySettings:
        """The SDK's Host and Origin checks (421, 403) over these lists."""
        return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=list(self.hosts),
                                         allowed_origins=list(self.origins))


def policy(host: str, *, token: str | None = None, allow_hosts=(), allow_origins=()) -> Policy:
    """The rules for a server listening at `host`; a UserError when they cannot be met (another address than
    loopback and no token, or every interface and no host name to allow)."""
    if token is not None and (len(token) < MIN_TOKEN or any(c.isspace() or not c.isprintable() for c in token)):
        raise UserError(f"the bearer token must be at least {MIN_TOKEN} printable characters without blanks")
    hosts = [name for given in allow_hosts for name in _host_names(given)]
    origins = [origin.rstrip("/") for origin in allow_origins]
    if is_loopback(host):
        shown = f"[{host}]" if ":" in host else host
        hosts += [f"{name}:*" for name in dict.fromkeys((*LOOPBACK_HOSTS, shown))]
        origins += [f"http://{name}:*" for name in LOOPBACK_HOSTS]
        return Policy(token, tuple(hosts), tuple(origins))
    if token is None:
        raise UserError(f"--host {quoted(host)} is not a loopback address: anyone who reaches it could read and "
                        f"write this memory; give a bearer token with --token-file FILE (made if missing) or "
                        f"{TOKEN_ENV}, or listen at 127.0.0.1")
    if host in ("0.0.0.0", "::"):
        if not hosts:
            raise UserError(f"--host {host} listens on every interface: name the host names or addresses clients "
                            "reach this server by with --allow-host (checked against each request's Host)")
    else:
        hosts += [f"[{host}]:*" if ":" in host else f"{host}:*"]
    return Policy(token, tuple(dict.fromkeys(hosts)), tuple(dict.fromkeys(origins)))


def _host_names(given: str) -> list[str]:
    """The Host values `--allow-host` admits: the name with any port, or with the one it names."""
    given = given.strip()
    if not given or "/" in given:
        raise UserError(f"--allow-host {quoted(given)}: give a host name or address, such as memory.example.com")
    has_port = given.rsplit(":", 1)[-1].isdigit() and (given.count(":") == 1 or given.startswith("["))
    return [given] if has_port else [given, f"{given}:*"]


def read_token(token_file: str | None) -> tuple[str | None, str | None]:
    """The bearer token (None: none given) from CORTEX_MCP_TOKEN or `token_file`, and a line to tell the person
    when a new one was made into the file."""
    if token_file is None:
        return os.environ.get(TOKEN_ENV) or None, None
    path = Path(token_file).expanduser()
    try:
        text = read_bounded(path, MAX_TOKEN_FILE, "a token file").decode("utf-8").strip()
    except FileNotFoundError:
        return _new_token(path), f"cortex mcp: made a new bearer token in {path} (readable by you only)"
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; a token file holds one line, the token") from None
    except OSError as exc:
        raise UserError(f"--token-file {quoted(str(path))}: {exc.strerror}") from None
    if not text:
        raise UserError(f"{path}: empty; a token file holds one line, the token")
    return text, None


def _new_token(path: Path) -> str:
    """A new random token, written into a new file at `path` that only its owner may read."""
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise UserError(f"--token-file {quoted(str(path))}: cannot make it ({exc.strerror})") from None
    with os.fdopen(fd, "w") as file:
        file.write(token + "\n")
    return token


class BearerAuth:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <token>` (401 otherwise)."""

    def __init__(self, app, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                response = PlainTextResponse("401 unauthorized: this server needs its bearer token "
                                             "(Authorization: Bearer ...)", status_code=401,
                                             headers={"WWW-Authenticate": 'Bearer realm="cortex"'})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
