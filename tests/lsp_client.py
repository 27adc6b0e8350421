"""pygls's own language client driving a real `cortex lsp` subprocess over stdio, from synchronous tests: it keeps
the text of the documents it opens, applies the edits the server sends (`workspace/applyEdit`) as an editor does,
and collects the diagnostics published."""

import asyncio
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path
from pygls.workspace import TextDocument

CORTEX = str(Path(sys.executable).parent / "cortex")
TIMEOUT = 120


class Editor:
    """A client session: `request(method_name, params)` calls the client's `<name>_async` and waits for it."""

    def __init__(self, loop, client: LanguageClient, root: Path):
        self.loop, self.client, self.root = loop, client, root
        self.documents: dict[str, TextDocument] = {}
        self.diagnostics: dict[str, tuple[int | None, list[types.Diagnostic]]] = {}
        self.edits: list[types.WorkspaceEdit] = []

    def request(self, name: str, params):
        method = getattr(self.client, f"{name}_async")
        return asyncio.run_coroutine_threadsafe(method(params), self.loop).result(TIMEOUT)

    def uri(self, path: str) -> str:
        return from_fs_path(str(self.root / path))

    def open(self, path: str, text: str | None = None) -> str:
        """Open a file (as saved, or with `text` as an unsaved buffer); its uri. A file opened again gets versions
        past those it had, so that the diagnostics of its earlier edits are never taken for those of the new text."""
        uri = self.uri(path)
        text = (self.root / path).read_text() if text is None else text
        version = self.documents[uri].version + 1 if uri in self.documents else 1
        self.documents[uri] = TextDocument(uri, text, version=version)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="org", version=version, text=text)))
        return uri

    def change(self, uri: str, text: str) -> int:
        """Replace a buffer's whole text (a full sync); its new version."""
        return self.edit(uri, [types.TextDocumentContentChangeWholeDocument(text=text)])

    def edit(self, uri: str, changes: list) -> int:
        document = self.documents[uri]
        for change in changes:
            document.apply_change(change)
        document.version += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=document.version), content_changes=changes))
        return document.version

    def save(self, uri: str) -> None:
        """Write the buffer to its file, as an editor saves, and say so."""
        Path(self.documents[uri].path).write_text(self.documents[uri].source)
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))

    def close(self, uri: str) -> None:
        """Close a buffer, as an editor does."""
        del self.documents[uri]
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))

    def text(self, uri: str) -> str:
        return self.documents[uri].source

    def diagnosed(self, uri: str, version: int | None = None) -> list[types.Diagnostic]:
        """The diagnostics published for a document's `version` (by default the one it has now), waiting for them."""
        version = self.documents[uri].version if version is None else version
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            got = self.diagnostics.get(uri)
            if got is not None and got[0] == version:
                return got[1]
            time.sleep(0.02)
        raise AssertionError(f"no diagnostics for {uri} version {version}: {self.diagnostics.get(uri)}")

    def command(self, name: str, *arguments):
        return self.request("workspace_execute_command", types.ExecuteCommandParams(command=name, arguments=list(arguments)))

    def position(self, uri: str, needle: str, offset: int = 0) -> types.Position:
        """The position (in UTF-16 code units, as LSP counts) of `offset` characters into the first `needle`."""
        lines = self.text(uri).split("\n")
        for n, line in enumerate(lines):
            if (column := line.find(needle)) >= 0:
                return types.Position(line=n, character=len(line[:column + offset].encode("utf-16-le")) // 2)
        raise AssertionError(f"{needle!r} is not in {uri}")


@contextmanager
def editor(store: Path, org: Path, log: Path):
    """A client of `cortex lsp --store STORE --org ORG` over stdio; the server's stderr goes to `log`."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    client = LanguageClient("cortex-tests", "1")
    session = Editor(loop, client, org)
    session.store = store

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: types.PublishDiagnosticsParams):
        session.diagnostics[params.uri] = (params.version, params.diagnostics)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply(params: types.ApplyWorkspaceEditParams):
        session.edits.append(params.edit)
        for uri, edits in (params.edit.changes or {}).items():
            if uri not in session.documents:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"{uri} is not open")
            session.edit(uri, [types.TextDocumentContentChangePartial(range=e.range, text=e.new_text) for e in edits])
        return types.ApplyWorkspaceEditResult(applied=True)

    def run(coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(TIMEOUT)

    # pygls's client reads the server's stderr into a pipe of its own: a shell sends it to `log` instead
    run(client.start_io("/bin/sh", "-c", 'exec "$0" "$@" 2>"$LSP_LOG"', CORTEX, "lsp", "--store", str(store),
                        "--org", str(org), env={**os.environ, "LSP_LOG": str(log)}))
    if True:
        try:
            session.started = session.request("initialize", types.InitializeParams(
                capabilities=types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(apply_edit=True)),
                root_uri=from_fs_path(str(org))))
            client.initialized(types.InitializedParams())
            yield session
            session.request("shutdown", None)
            client.exit(None)
        finally:
            run(client.stop())
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
