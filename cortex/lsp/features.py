"""What the editor asks of the store, as LSP answers: workspace symbols (search), definitions of links,
references (backlinks), hover on a headline and completion of `[[id:` links."""

from __future__ import annotations

import posixpath
import re
from datetime import datetime

from lsprotocol import types

from ..api import SEARCH_BUDGET
from ..errors import NotFound
from ..memory.validity import Validity
from ..query import Node
from .documents import Buffer, Located
from .session import Session

__all__ = ["Json", "completion", "definition", "hover", "references", "symbols"]

SYMBOLS = 50  # results a workspace-symbol query answers
STRING = types.SymbolKind.String.value
ID_PREFIX = re.compile(r"\[\[id:([^\]\s]*)$")


class Json(dict):
    """An answer already in the protocol's JSON form, which the server sends as it is (`server.py`)."""


def symbols(session: Session, query: str) -> list[Json]:
    """The headlines `cortex search QUERY` finds, best first, at their heading's line (in an open buffer, as
    it stands there): SymbolInformation in its JSON form, built directly, as typing every field of 50 answers and
    converting them back would cost a third of the search."""
    if not query.strip():
        return []
    with session.lock:
        results = session.cx.search(query, limit=SYMBOLS, budget=SEARCH_BUDGET)
    found = []
    for result in results:
        line = result.line - 1
        if (buffer := session.buffers.get(result.path)) is not None and result.id:
            line = buffer.heading_lines.get(result.id, line)
        whole = {"start": {"line": line, "character": 0}, "end": {"line": line + 1, "character": 0}}
        found.append(Json(name=result.heading, kind=STRING, location={"uri": session.uri(result.path), "range": whole},
                          containerName=result.path))
    return found


def definition(session: Session, buffer: Buffer, position: types.Position) -> list[types.Location]:
    """Where the link under the cursor leads: an :ID:'s headline or file, a file link's file and `::*heading` or
    `::#custom-id`, a `[[*heading]]` of the same file."""
    located = buffer.link_at(position.line, session.column(buffer.path, position))
    if located is None:
        return []
    link = located.link
    if link.kind == "id":
        where = session.node(link.target)
        return [] if where is None else [session.location(where[0], where[1])]
    if link.kind == "file":
        path = posixpath.normpath(posixpath.join(posixpath.dirname(buffer.path), link.target))
        if path.startswith("../"):
            return []
        return [session.location(path, _searched(session, path, link.search))]
    if link.kind == "fuzzy" and link.target.startswith("*"):
        return [session.location(buffer.path, _searched(session, buffer.path, link.target))]
    return []


def _searched(session: Session, path: str, search: str | None) -> int:
    """The line a file link's search names in `path` (`*heading` or `#custom-id`; 0: the file's first)."""
    from ..orgquery.links import heading_words  # (the Org queries load once a link is followed)

    if not search or search[0] not in "*#":
        return 0
    if path in session.buffers:
        nodes = session.buffers[path].nodes
    else:
        with session.lock:
            try:
                nodes = session.cx.outline(path)
            except NotFound:
                return 0
    if search.startswith("*"):
        words = heading_words(search[1:])
        match = (n for n in nodes if heading_words(n.title) == words)
    else:
        match = (n for n in nodes if dict(n.headline.properties).get("CUSTOM_ID") == search[1:])
    node = next(match, None)
    return 0 if node is None else node.line - 1


def references(session: Session, buffer: Buffer, position: types.Position) -> list[types.Location]:
    """The links that lead to the headline under the cursor (its backlinks): open buffers as the editor has
    them, the other files as the store has them."""
    node = buffer.node_at(position.line)
    if node is None:
        return []
    found = []
    if node.id:
        for other in session.buffers.values():
            found += [_at(session, other.path, x) for x in other.links if x.link.kind == "id"
                      and x.link.target == node.id]
    with session.lock:
        backlinks = session.cx.backlinks(node)
    for backlink in backlinks:
        if backlink.path in session.buffers and (node.id or backlink.path != buffer.path):
            continue  # answered from its buffer above (an id link), or a heading link of a buffer's own
        line = backlink.link_line - 1
        start = max(session.line_text(backlink.path, line).find(backlink.link.raw), 0)
        found.append(session.location(backlink.path, line, start, start + len(backlink.link.raw)))
    return found


def _at(session: Session, path: str, located: Located) -> types.Location:
    return session.location(path, located.line, located.start, located.end)


def hover(session: Session, buffer: Buffer, position: types.Position) -> types.Hover | None:
    """On a heading line: its :ID:, when it last changed and in which snapshot, its validity when it has one."""
    node = buffer.node_at(position.line)
    if node is None or node.line - 1 != position.line:
        return None
    lines = [f"**{node.title}**"]
    if node.id:
        lines.append(f"- :ID: `{node.id}`")
        lines.append(f"- {_last_change(session, node)}")
    lines += [f"- {name}: {value}" for name, value in Validity.of(node.headline.properties).repl_pairs()]
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n".join(lines)),
                       range=session.range(buffer.path, position.line))


def _last_change(session: Session, node: Node) -> str:
    """When a headline last changed, in which snapshot, and whether the buffer differs from the store: read from
    the stored state without the session's lock, so that a hover never waits for a sync (the first one at start)."""
    try:
        versions = session.cx.history(node.id)
    except NotFound:  # in no snapshot yet
        versions = []
    try:
        stored = session.cx.lookup(node.id).headline.oid
    except NotFound:
        stored = None
    unsaved = "" if stored == node.headline.oid else " (the buffer differs from it: edits not saved or ingested)"
    if not versions:
        return f"in no snapshot yet{unsaved}"
    last = versions[0]
    message = f" “{last.snapshot.message}”" if last.snapshot.message else ""
    return (f"last changed ({last.change}) in snapshot `{last.snapshot.oid.hex()[:12]}`{message} of "
            f"{datetime.fromtimestamp(last.snapshot.time_ns / 1e9):%Y-%m-%d %H:%M}{unsaved}")


def completion(session: Session, buffer: Buffer, position: types.Position) -> list[types.CompletionItem]:
    """After `[[id:`, every headline with an :ID: by title; choosing one writes `[[id:ID][Title]]`, as org-roam's
    node-insert does."""
    text = buffer.lines[position.line] if position.line < len(buffer.lines) else ""
    column = session.column(buffer.path, position)
    typed = ID_PREFIX.search(text[:column])
    if typed is None:
        return []
    session.ids.ready.wait()
    start = session.range(buffer.path, position.line, typed.start(), column)
    rest = text[column:]
    closing = len(rest) - len(rest.lstrip("]")) if rest.startswith("]") else 0
    replaced = types.Range(start=start.start, end=types.Position(line=position.line, character=start.end.character + closing))
    return [types.CompletionItem(label=entry.title, kind=types.CompletionItemKind.Reference, detail=entry.path,
                                 filter_text=f"[[id:{entry.title}",
                                 text_edit=types.TextEdit(range=replaced, new_text=f"[[id:{entry.id}][{entry.title}]]"))
            for entry in session.ids.entries()]
