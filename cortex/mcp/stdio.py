"""The stdio transport, every line answered: the SDK's transport drops a line it cannot read, and a client
waiting for the answer waits forever. Here a line that is not UTF-8 or not JSON gets JSON-RPC's parse error
(-32700); one longer than MAX_LINE, nested too deep, a batch (`[]`), or JSON that is no JSON-RPC message gets an
invalid-request error (-32600), with its id when it has one; a response to no request this server sent gets one
too. Blank lines are skipped. Everything else goes to the SDK's session as it arrived.

While serving, descriptor 0 reads /dev/null and 1 writes to stderr, so that nothing else this process prints
reaches the wire; both are restored at the end.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.stdio import stdio_server
from pydantic import ValidationError

__all__ = ["MAX_LINE", "answered_stdio"]

MAX_LINE = 4 << 20  # bytes of one message, as the HTTP transport takes at most
PARSE_ERROR, INVALID_REQUEST = -32700, -32600


@asynccontextmanager
async def answered_stdio() -> AsyncIterator[tuple]:
    """The SDK's (read stream, write stream) over this process's stdin and stdout, every line answered."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        with os.fdopen(wire_in, "rb", closefd=False) as reading, os.fdopen(wire_out, "wb", closefd=False) as writing:
            wire = _Wire(writing)
            async with stdio_server(stdin=_Lines(reading, wire), stdout=wire) as streams:
                yield streams
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


class _Wire:
    """stdout as the SDK writes to it: a whole line at a time, flushed; remembers the ids of the requests this
    server sends, so that a client's response to one is passed on and any other is answered."""

    def __init__(self, file):
        self._file = file
        self._lock = anyio.Lock()
        self.requested: set = set()

    async def write(self, text: str) -> None:
        if '"method"' in text and '"id"' in text:
            sent = json.loads(text)
            if isinstance(sent, dict) and "method" in sent and "id" in sent:
                self.requested.add(sent["id"])
        async with self._lock:
            await anyio.to_thread.run_sync(self._write, text.encode("utf-8"))

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()

    async def flush(self) -> None:
        """Each write is flushed already."""

    async def error(self, code: int, message: str, ident=None) -> None:
        """Answer a line with a JSON-RPC error."""
        await self.write(json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})
                         + "\n")


class _Lines:
    """stdin as the SDK reads it (an async iterator of lines): only the lines it can take; the others answered."""

    def __init__(self, file, wire: _Wire):
        self._file = file
        self._wire = wire

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(self._file.readline, MAX_LINE + 1)
            if not line:
                raise StopAsyncIteration
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                await anyio.to_thread.run_sync(self._skip_line)
                await self._wire.error(INVALID_REQUEST, f"Invalid Request: a message longer than {MAX_LINE >> 20} "
                                                        "MiB")
                continue
            if not line.strip():
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                await self._wire.error(PARSE_ERROR, f"Parse error: not UTF-8 (byte {exc.start + 1})")
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            except ValidationError as exc:
                await self._wire.error(*_refusal(text, exc))
                continue
            if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id is not None:
                if message.id not in self._wire.requested:
                    await self._wire.error(INVALID_REQUEST, "Invalid Request: a response to no request of this "
                                                            f"server (id {str(message.id)[:40]!r})")
                    continue
                self._wire.requested.discard(message.id)
            return text

    def _skip_line(self) -> None:
        """Read on to the end of an overlong line, keeping no more than a block of it."""
        while (block := self._file.readline(MAX_LINE)) and not block.endswith(b"\n"):
            pass


def _refusal(text: str, error: ValidationError) -> tuple[int, str, object]:
    """The JSON-RPC error (code, message, id) for a line the SDK cannot take."""
    try:
        data = json.loads(text)
    except RecursionError:
        return INVALID_REQUEST, "Invalid Request: nested deeper than a message may be", None
    except ValueError as exc:
        return PARSE_ERROR, f"Parse error: not JSON ({exc.msg} at character {exc.pos + 1})", None
    if isinstance(data, list):
        return INVALID_REQUEST, "Invalid Request: a batch; send one message a line", None
    ident = data.get("id") if isinstance(data, dict) else None
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        ident = None
    reason = error.errors()[0]["msg"] if error.errors() else "not a message"
    return INVALID_REQUEST, f"Invalid Request: not a JSON-RPC 2.0 request, notification or response ({reason[:120]})", \
        ident
