"""The server's side of one editor session: the store (one call at a time), the open buffers over their files,
the :ID:s known, and positions in the client's units."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from ..api import Cortex
from ..errors import NotFound
from ..query import Node
from .documents import Buffer
from .index import Entry, Ids

__all__ = ["Session"]


class Session:
    """A `Cortex` and what the editor has open; `lock` serialises every write to the store and every read of
    its caches (search, queries). Reads of states and history (hover) take no lock: they answer from the stored
    state while a sync holds it."""

    def __init__(self, cx: Cortex, codec):
        self.cx, self.codec = cx, codec
        self.root = cx.root
        self.lock = threading.RLock()
        self.ids = Ids()
        self.buffers: dict[str, Buffer] = {}  # by path from the Org root
        self.open: set[str] = set()  # the files the editor has open: the server's syncs never write them
        self._uris: dict[str, str] = {}  # the files' URIs, by path
        cx.spare(self.open.__contains__)

    # --- paths and positions ---------------------------------------------------------

    def path(self, uri: str) -> str | None:
        """A document's path from the Org root (None: not a file under it)."""
        where = to_fs_path(uri)
        if where is None or self.root is None:
            return None
        relative = os.path.relpath(os.path.abspath(where), self.root)
        return None if relative.startswith("..") else relative.replace(os.sep, "/")

    def uri(self, path: str) -> str:
        uri = self._uris.get(path)
        if uri is None:
            uri = self._uris[path] = from_fs_path(str(Path(self.root) / path))
        return uri

    def line_text(self, path: str, line: int) -> str:
        """A line of a file as the editor has it (its buffer), else as it is saved."""
        buffer = self.buffers.get(path)
        if buffer is not None:
            return buffer.lines[line] if line < len(buffer.lines) else ""
        try:
            with open(Path(self.root) / path, encoding="utf-8", errors="replace") as file:
                for n, text in enumerate(file):
                    if n == line:
                        return text.rstrip("\r\n")
        except OSError:
            pass
        return ""

    def range(self, path: str, line: int, start: int = 0, end: int | None = None) -> types.Range:
        """Columns `start`..`end` (characters; None: the line's end) of a line, in the client's units."""
        text = self.line_text(path, line)
        end = len(text) if end is None else end
        units = self.codec.client_num_units
        return types.Range(start=types.Position(line=line, character=units(text[:start])),
                           end=types.Position(line=line, character=units(text[:end])))

    def location(self, path: str, line: int, start: int | None = None, end: int | None = None) -> types.Location:
        """Columns of a line of a file; without them, the whole line (its text is not read)."""
        if start is None:
            whole = types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line + 1,
                                                                                                 character=0))
            return types.Location(uri=self.uri(path), range=whole)
        return types.Location(uri=self.uri(path), range=self.range(path, line, start, end))

    def column(self, path: str, position: types.Position) -> int:
        """A client position's column in characters."""
        text = self.line_text(path, position.line)
        at = types.Position(line=0, character=position.character)
        return self.codec.position_from_client_units([text], at).character

    # --- what the editor has open -----------------------------------------------------

    def opened(self, path: str, text: str) -> Buffer:
        """Take a buffer's text (opened or changed): parsed, and its :ID:s over the file's."""
        buffer = Buffer(path, text)
        with self.ids.lock:  # whole against `index`, which leaves open files to their buffers
            self.buffers[path] = buffer
            self.ids.set_file(path, buffer_entries(buffer))
        return buffer

    def closed(self, path: str) -> None:
        """A buffer closed: its file receives what the store changed in it while it was open (a sync of it), and
        is as the store has it again."""
        self.open.discard(path)
        if self.buffers.pop(path, None) is not None:
            with self.lock:
                if path.endswith(".org") and (Path(self.root) / path).is_file():
                    self.cx.ingest(Path(self.root) / path)
                self.ids.set_file(path, self.stored_entries(path))

    def saved(self, path: str, uri: str) -> types.WorkspaceEdit | None:
        """A buffer saved: its file is ingested (only what changed is read; open, it is not written). When the
        store merged others' edits into it, the edit that brings them into the buffer, for the client to apply
        (None: nothing to bring, or the buffer changed since it was saved: the file receives them once closed)."""
        with self.lock:
            self.cx.ingest(Path(self.root) / path)
            tree = self.cx.working()
            stored = self.cx.show(path) if path in tree.entries else None
        buffer = self.buffers.get(path)
        if stored is None or buffer is None or stored == buffer.text:
            return None
        try:
            saved = (Path(self.root) / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if saved != buffer.text:
            return None
        whole = types.Range(start=types.Position(line=0, character=0), end=self.range(path, len(buffer.lines) - 1).end)
        return types.WorkspaceEdit(changes={uri: [types.TextEdit(range=whole, new_text=stored)]})

    # --- the :ID:s known ---------------------------------------------------------------

    def index(self) -> None:
        """Read every :ID: of the working state (the files open in the editor as their buffers hold them)."""
        with self.lock:
            files: dict[str, list[Entry]] = {}
            for node in self.cx.headlines():
                if node.id:
                    files.setdefault(node.path, []).append(Entry(node.id, node.path, node.line - 1, node.title))
            for org_id, path in self.cx.file_ids().items():
                files.setdefault(path, []).insert(0, Entry(org_id, path, 0, path))
        with self.ids.lock:
            for path, entries in files.items():
                if path not in self.buffers:
                    self.ids.set_file(path, entries)
        self.ids.ready.set()

    def stored_entries(self, path: str) -> list[Entry]:
        try:
            nodes = self.cx.outline(path)
        except NotFound:  # a file not in the working state holds no :ID:
            return []
        return [Entry(n.id, path, n.line - 1, n.title) for n in nodes if n.id]

    def node(self, org_id: str) -> tuple[str, int, Node | None] | None:
        """Where an :ID: stands (path, 0-based line, its node when a headline), an open buffer first."""
        for buffer in self.buffers.values():
            for node in buffer.nodes:
                if node.id == org_id:
                    return buffer.path, node.line - 1, node
            if buffer.file_id == org_id:
                return buffer.path, 0, None
        with self.lock:
            try:
                found = self.cx.lookup(org_id)
            except NotFound:  # none, or a file's own :ID:
                entries = self.ids.where(org_id)
                return (entries[0].path, entries[0].line, None) if entries else None
        return found.path, found.line - 1, found


def buffer_entries(buffer: Buffer) -> list[Entry]:
    """A buffer's :ID:s as index entries."""
    entries = [Entry(buffer.file_id, buffer.path, 0, buffer.path)] if buffer.file_id else []
    return entries + [Entry(n.id, buffer.path, n.line - 1, n.title) for n in buffer.nodes if n.id]
