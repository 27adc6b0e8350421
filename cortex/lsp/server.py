"""The language server on pygls, over stdio: the editor's documents kept in step (full or incremental sync),
each request answered in a worker thread from the buffers and the store, diagnostics published on every change.
A workspace symbol's answer is sent by the worker that found it, without a hop back to the event loop.

Work waits for nothing it does not need: the first sync of the Org folder, the :ID:s and the search vectors are
read in the background after `initialized`, and requests are answered meanwhile from the stored state (those that
need every :ID: wait for them). A request on a document waits only for the parse of its latest text. Messages are
read from stdin's pipe by the event loop itself, not a thread per read.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import stat
import sys
import threading

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.io_ import StdoutWriter, run_async
from pygls.lsp.server import LanguageServer
from pygls.protocol import default_converter

from .. import __version__
from ..api import Cortex
from ..errors import UserError
from . import commands, diagnostics, features
from .session import Session

__all__ = ["CortexLanguageServer", "serve"]

log = logging.getLogger(__name__)


class CortexLanguageServer(LanguageServer):
    """cortex for editors: one `Session` over an open `Cortex`."""

    def __init__(self, cx: Cortex):
        super().__init__("cortex", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         converter_factory=_converter)
        self.cx = cx
        self._session: Session | None = None

    @property
    def session(self) -> Session:
        if self._session is None:  # the codec is known once the client said which position encoding it takes
            self._session = Session(self.cx, self.workspace.position_codec)
        return self._session


def _converter():
    """pygls's converter, which sends an answer already in JSON form (`features.Json`) as it is."""
    converter = default_converter()
    converter.register_unstructure_hook(features.Json, lambda value: value)
    return converter


async def _run(call, *args):
    """`call(*args)` in a worker thread, answered as `_answered` says."""
    return await asyncio.to_thread(_answered, call, *args)


def _answered(call, *args):
    """`call(*args)`; a user's mistake answers an invalid-params error carrying its message."""
    try:
        return call(*args)
    except UserError as error:
        raise JsonRpcInvalidParams(str(error).splitlines()[0]) from None


def build(cx: Cortex) -> CortexLanguageServer:
    """The server and its features."""
    server = CortexLanguageServer(cx)
    parsing: dict[str, asyncio.Future] = {}  # by uri: the parse of a document's latest text, while it runs

    async def buffer_of(uri: str):
        """The open buffer of a document as the editor last sent it (None: not one the server holds)."""
        if (pending := parsing.get(uri)) is not None:
            await asyncio.wait([pending])
        path = server.session.path(uri)
        return None if path is None else server.session.buffers.get(path)

    async def refresh(uri: str) -> None:
        """Take the editor's text of a document and publish its diagnostics."""
        session, document = server.session, server.workspace.get_text_document(uri)
        path = session.path(uri)
        if path is None:
            return
        version_, text = document.version, document.source
        parse = parsing[uri] = asyncio.ensure_future(asyncio.to_thread(session.opened, path, text))
        try:
            buffer = await parse
        finally:
            if parsing.get(uri) is parse:
                del parsing[uri]
        found = await asyncio.to_thread(diagnostics.diagnostics, session, buffer)
        if server.workspace.get_text_document(uri).version == version_:
            server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=version_))

    @server.feature(types.INITIALIZED)
    async def initialized(_params):
        session = server.session

        def index():
            with session.lock:
                if session.root is not None and session.root.is_dir():
                    session.cx.ingest()
            session.index()
            with session.lock:
                session.cx.build_search_in_background(lambda line: log.info(line))

        threading.Thread(target=index, name="cortex-lsp-index", daemon=True).start()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(params: types.DidOpenTextDocumentParams):
        if (path := server.session.path(params.text_document.uri)) is not None:
            server.session.open.add(path)  # at once: a sync running now must not write it
        await refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(params: types.DidChangeTextDocumentParams):
        await refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: types.DidSaveTextDocumentParams):
        uri = params.text_document.uri
        path = server.session.path(uri)
        if path is not None:
            received = await _run(server.session.saved, path, uri)
            capabilities = server.client_capabilities.workspace
            if received is not None and capabilities is not None and capabilities.apply_edit:
                # others' edits merged into it: the buffer receives them as an edit
                await server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=received, label="cortex sync"))
            await refresh(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(params: types.DidCloseTextDocumentParams):
        path = server.session.path(params.text_document.uri)
        if path is not None:
            await _run(server.session.closed, path)

    @server.feature(types.WORKSPACE_SYMBOL)
    @server.thread()
    def workspace_symbol(params: types.WorkspaceSymbolParams):
        return _answered(features.symbols, server.session, params.query)

    def at_position(feature):
        """A feature of a position in an open buffer (nothing for a document the server does not hold)."""
        @functools.wraps(feature)
        async def answer(params):
            buffer = await buffer_of(params.text_document.uri)
            return None if buffer is None else await _run(feature, server.session, buffer, params.position)
        return answer

    server.feature(types.TEXT_DOCUMENT_DEFINITION)(at_position(features.definition))
    server.feature(types.TEXT_DOCUMENT_REFERENCES)(at_position(features.references))
    server.feature(types.TEXT_DOCUMENT_HOVER)(at_position(features.hover))
    server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[":"]))(
        at_position(features.completion))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION)
    async def code_action(params: types.CodeActionParams):
        buffer = await buffer_of(params.text_document.uri)
        if buffer is None:
            return None
        return await _run(commands.actions, server.session, buffer, params.text_document.uri, params.range.start.line)

    for name, call in commands.COMMANDS.items():
        server.command(name)(_command(server, call))
    return server


def _command(server: CortexLanguageServer, call):
    """A command's handler: its text answer, or (a rollback) its edit sent to the client to apply."""
    async def run(*arguments):
        answer = await _run(call, server.session, *arguments)
        if isinstance(answer, types.WorkspaceEdit):
            result = await server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=answer, label="cortex rollback"))
            return {"applied": result.applied, **({"reason": result.failure_reason} if result.failure_reason else {})}
        return answer
    return run


def serve(cx: Cortex) -> None:
    """Serve the language server over stdio until the client exits."""
    server = build(cx)
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        server.start_io()  # (a file or a terminal: pygls reads it in a thread)
        return
    try:
        asyncio.run(_on_pipes(server))
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        server.shutdown()


class _PipeReader:
    """stdin's pipe read by the event loop: the reader pygls's message loop takes, an empty read at its end."""

    def __init__(self, stream: asyncio.StreamReader):
        self.stream = stream

    async def readline(self) -> bytes:
        return await self.stream.readline()

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self.stream.readexactly(n)
        except asyncio.IncompleteReadError:
            return b""


async def _on_pipes(server: CortexLanguageServer) -> None:
    """pygls's message loop over stdin and stdout, stdin read without a thread hop per read."""
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), sys.stdin.buffer)
    server._stop_event = threading.Event()  # (what pygls's own start sets, and its shutdown stops)
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    await run_async(stop_event=server._stop_event, reader=_PipeReader(stream), protocol=server.protocol, logger=log,
                    error_handler=server.report_server_error)
