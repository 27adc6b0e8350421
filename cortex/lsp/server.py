"""The language server on pygls, over stdio: the editor's documents kept in step (full or incremental sync),
each request answered in a worker thread from the buffers and the store, diagnostics published on every change.

Work waits for nothing it does not need: the :ID:s and the search vectors are read in the background after
`initialized`, and requests are answered meanwhile (those that need every :ID: wait for them).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from importlib.metadata import version

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from ..api import Cortex
from ..errors import UserError
from . import commands, diagnostics, features
from .session import Session

__all__ = ["CortexLanguageServer", "serve"]

log = logging.getLogger(__name__)


class CortexLanguageServer(LanguageServer):
    """cortex for editors: one `Session` over an open `Cortex`."""

    def __init__(self, cx: Cortex):
        super().__init__("cortex", version("cortex"), text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.cx = cx
        self._session: Session | None = None

    @property
    def session(self) -> Session:
        if self._session is None:  # the codec is known once the client said which position encoding it takes
            self._session = Session(self.cx, self.workspace.position_codec)
        return self._session


async def _run(call, *args):
    """`call(*args)` in a worker thread; a user's mistake answers an invalid-params error carrying its message."""
    try:
        return await asyncio.to_thread(call, *args)
    except UserError as error:
        raise JsonRpcInvalidParams(str(error).splitlines()[0]) from None


def build(cx: Cortex) -> CortexLanguageServer:
    """The server and its features."""
    server = CortexLanguageServer(cx)

    def buffer_of(uri: str):
        path = server.session.path(uri)
        return None if path is None else server.session.buffers.get(path)

    async def refresh(uri: str) -> None:
        """Take the editor's text of a document and publish its diagnostics."""
        session, document = server.session, server.workspace.get_text_document(uri)
        path = session.path(uri)
        if path is None:
            return
        version_, text = document.version, document.source
        buffer = await asyncio.to_thread(session.opened, path, text)
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
        await refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(params: types.DidChangeTextDocumentParams):
        await refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: types.DidSaveTextDocumentParams):
        path = server.session.path(params.text_document.uri)
        if path is not None:
            await _run(server.session.saved, path)
            await refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(params: types.DidCloseTextDocumentParams):
        path = server.session.path(params.text_document.uri)
        if path is not None:
            await _run(server.session.closed, path)

    @server.feature(types.WORKSPACE_SYMBOL)
    async def workspace_symbol(params: types.WorkspaceSymbolParams):
        return await _run(features.symbols, server.session, params.query)

    def at_position(feature):
        """A feature of a position in an open buffer (nothing for a document the server does not hold)."""
        @functools.wraps(feature)
        async def answer(params):
            buffer = buffer_of(params.text_document.uri)
            return None if buffer is None else await _run(feature, server.session, buffer, params.position)
        return answer

    server.feature(types.TEXT_DOCUMENT_DEFINITION)(at_position(features.definition))
    server.feature(types.TEXT_DOCUMENT_REFERENCES)(at_position(features.references))
    server.feature(types.TEXT_DOCUMENT_HOVER)(at_position(features.hover))
    server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[":"]))(
        at_position(features.completion))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION)
    async def code_action(params: types.CodeActionParams):
        buffer = buffer_of(params.text_document.uri)
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
    build(cx).start_io()
