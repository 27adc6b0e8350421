"""The listening socket of a server cortex runs (the webhook receiver, the MCP server over HTTP): an address a
person gave, refused in one line when no socket can listen there."""

from __future__ import annotations

import ipaddress
import socket

from .errors import UserError
from .words import quoted


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket listening at `host` (a name or an address; IPv6 without brackets) and `port` (0: a free one)."""
    if not host.strip():
        raise UserError("--host is empty: give the address to listen at, such as 127.0.0.1 (this machine only) "
                        "or 0.0.0.0 (every interface)")
    try:
        return socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except (OSError, UnicodeError) as exc:  # UnicodeError: a name no DNS label can hold
        reason = (getattr(exc, "strerror", None) or str(exc)).split(" (while attempting to bind")[0]
        raise UserError(f"--host {quoted(host)} --port {port}: cannot listen there ({reason})") from None


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only: localhost, or an address of 127.0.0.0/8 or ::1."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
