"""memory.org as sections and items: read it (reporting what is not an item), rewrite it item by item.

Only the items a save changes are rewritten; every other byte of the file (the preamble,
unknown sections, free text, items nobody touched) is written back exactly as it was read.
`merge` reconciles what an agent saves with what a person edited meanwhile, item by item.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..errors import UserError, located
from ..objects import Document, Headline
from ..orgfile import render_headline
from .items import MemoryItem, item_from_headline, make_id, render_item
from .layout import ITEM_TYPES, SECTION_TITLES, section_type

Typed = tuple[str, MemoryItem]  # (memory type, item)
Getter = Callable[[bytes], object]

_LINE = re.compile(r"[^\n]*\n|[^\n]+")
_LIST_ITEM = re.compile(r"(?:[-+]|\d+[.)])[ \t]+(\S.*?)[ \t]*\r?\n?$")
_PLANNING = re.compile(r"[ \t]*(?:CLOSED|DEADLINE|SCHEDULED):", re.IGNORECASE)
_DRAWER_START = re.compile(r"[ \t]*:PROPERTIES:[ \t]*\r?\n?$", re.IGNORECASE)
_DRAWER_END = re.compile(r"[ \t]*:END:[ \t]*\r?\n?$", re.IGNORECASE)

# What a headline or a document holds depends only on its oid, so each is read once per process.
_children: dict[bytes, tuple[str, MemoryItem, int]] = {}
_CHILDREN_LIMIT = 200_000
_models: dict[tuple[str, bytes], MemoryFile] = {}
_MODELS_LIMIT = 16


class MemoryConflict(UserError):
    """An item changed both in the file (by hand) and in the context being saved."""

    def __init__(self, path: str, problems: list[tuple[int | None, str]]):
        listed = "\n  ".join(located(path, line, what) for line, what in problems)
        super().__init__(f"{path}: not saved, nothing was written; these items changed both in the file "
                         f"and in the memory being saved:\n  {listed}\nload the memory again and redo the change")
        self.path = path
        self.problems = problems


class Piece(NamedTuple):
    """A stretch of a section's text: one item (its key), or text kept as written (key None)."""

    text: str
    line: int
    key: str | None = None


@dataclass
class Section:
    """A level-1 section: its type (None: not a memory section, kept as written), head and child items."""

    type: str | None
    line: int
    head: list[Piece] = field(default_factory=list)  # the headline, its drawer, list items, free text
    children: list[Piece] = field(default_factory=list)  # headline items


class Entry(NamedTuple):
    """An item as found in the file: its type, the item and its first line."""

    type: str
    item: MemoryItem
    line: int


@dataclass
class MemoryFile:
    """The structure of one memory.org: sections, items by key, and what could not be read as items."""

    path: str
    preamble: str | None = None  # None: the file does not exist yet
    sections: list[Section] = field(default_factory=list)
    entries: dict[str, Entry] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    newline: str = "\n"

    @classmethod
    def read(cls, path: str, doc: Document, get: Getter) -> MemoryFile:
        """Read a parsed memory.org: known sections and their items; report the rest, which stays as written.

        The result is shared by every caller that reads the same document: do not change it.
        """
        known = _models.get((path, doc.oid))
        if known is None:
            known = cls._read(path, doc, get)
            if len(_models) >= _MODELS_LIMIT:
                _models.pop(next(iter(_models)))
            _models[(path, doc.oid)] = known
        return known

    @classmethod
    def _read(cls, path: str, doc: Document, get: Getter) -> MemoryFile:
        crlf = doc.preamble.endswith("\r\n") or (not doc.preamble and _first_line_crlf(doc, get))
        memory = cls(path, doc.preamble, newline="\r\n" if crlf else "\n")
        line = 1 + doc.preamble.count("\n")
        seen: set[str] = set()
        for oid in doc.children:
            headline: Headline = get(oid)
            kind = section_type(headline.title) if headline.level == 1 else None
            if kind is None or kind in seen:
                text = render_headline(headline, get)
                memory._warn(line, f"section {headline.title!r} is not a memory section "
                                   f"({', '.join(SECTION_TITLES.values())})" if kind is None
                             else f"a second {SECTION_TITLES[kind]!r} section is not read")
                memory.sections.append(Section(None, line, [Piece(text, line)]))
                line += text.count("\n")
                continue
            seen.add(kind)
            section = Section(kind, line)
            memory._read_head(section, headline.raw, line)
            line += headline.raw.count("\n")
            for child in headline.children:
                text, item, lines = _parse_child(child, get)
                section.children.append(Piece(text, line, memory._add(kind, item, line)))
                line += lines
            memory.sections.append(section)
        return memory

    def _read_head(self, section: Section, raw: str, line: int) -> None:
        lines = _LINE.findall(raw)
        start = 1
        if start < len(lines) and _PLANNING.match(lines[start]):
            start += 1
        if start < len(lines) and _DRAWER_START.match(lines[start]):
            end = next((i for i in range(start + 1, len(lines)) if _DRAWER_END.match(lines[i])), start)
            start = end + 1
        section.head.append(Piece("".join(lines[:start]), line))
        i = start
        reported = False
        while i < len(lines):
            listed = _LIST_ITEM.match(lines[i])
            if listed is None:
                if lines[i].strip() and not reported:
                    self._warn(line + i, f"free text in {SECTION_TITLES[section.type]!r} is not an item")
                    reported = True
                section.head.append(Piece(lines[i], line + i))
                i += 1
                continue
            j = i + 1
            while j < len(lines) and lines[j].strip() and lines[j][0] in " \t":
                j += 1
            text = "\n".join([listed.group(1).strip(), *(x.strip() for x in lines[i + 1:j])])
            key = self._add(section.type, MemoryItem(text, plain=True), line + i)
            section.head.append(Piece("".join(lines[i:j]), line + i, key))
            i = j

    def _add(self, kind: str, item: MemoryItem, line: int) -> str | None:
        key = item.key(kind)
        if key in self.entries:
            self._warn(line, f"item {item.title!r} repeats the item of line {self.entries[key].line} "
                             f"({key}); only the first is read")
            return None
        self.entries[key] = Entry(kind, item, line)
        return key

    def _warn(self, line: int, message: str) -> None:
        self.warnings.append(located(self.path, line, message + "; kept as it is"))

    def items(self, kind: str) -> list[MemoryItem]:
        """The items of one type, in file order."""
        return [e.item for e in self.entries.values() if e.type == kind]

    def rewrite(self, changed: dict[str, Typed | None], added: list[Typed], title: str) -> str:
        """The file's text with `changed` items replaced (None: removed) and `added` appended to their sections."""
        nl = self.newline
        pending = list(added)
        for section in self.sections:
            for piece, plain in _item_pieces(section):
                new = changed.get(piece.key, False)
                if new and not _fits(new, section.type, plain):
                    pending.append(new)
        out = [f"#+TITLE: {title}{nl}{nl}" if self.preamble is None else self.preamble]
        for section in self.sections:
            if section.type is None:
                out.extend(piece.text for piece in section.head)
                continue
            out.append(self._rewrite_section(section, changed, pending))
            pending = [(kind, item) for kind, item in pending if kind != section.type]
        text = "".join(out)
        for kind in ITEM_TYPES:
            items = [item for k, item in pending if k == kind]
            if items:
                text += _separator(text, nl) + f"* {SECTION_TITLES[kind]}{nl}" + _render_all(items, nl)
        return text

    def _rewrite_section(self, section: Section, changed: dict, pending: list[Typed]) -> str:
        nl = self.newline
        mine = [item for kind, item in pending if kind == section.type]
        head: list[str] = []
        after_plain = 1
        for piece in section.head:
            text = _replaced(piece, changed, section.type, True, nl)
            if text is not None:
                head.append(text)
                if piece.key is not None:
                    after_plain = len(head)
        head[after_plain:after_plain] = [render_item(item, nl) for item in mine if item.as_plain]
        children = [text for piece in section.children
                    if (text := _replaced(piece, changed, section.type, False, nl)) is not None]
        text = "".join(head) + "".join(children)
        headlines = [item for item in mine if not item.as_plain]
        return _insert_before_blanks(text, _render_all(headlines, nl), nl) if headlines else text


def merge(path: str, base: dict[str, Typed], ours: list[Typed], theirs: MemoryFile,
          agent: str) -> tuple[dict[str, Typed | None], list[Typed]]:
    """Three-way merge by item key: what to change in `theirs` (None: remove) and what to add.

    `base` is what the saved context was loaded from (empty for a new context, which then only
    adds and updates). An item changed on one side only takes that side's version; changed
    on both sides differently, it is a conflict and nothing is written.
    """
    mine: dict[str, Typed] = {}
    for pair in ours:
        mine.setdefault(pair[1].key(pair[0]), pair)
    changed: dict[str, Typed | None] = {}
    added: list[Typed] = []
    problems: list[tuple[int | None, str]] = []
    for key in [*mine, *(k for k in base if k not in mine)]:
        b, o = base.get(key), mine.get(key)
        if o == b:  # not changed here: the file's version stands
            continue
        entry = theirs.entries.get(key)
        t = entry and (entry.type, entry.item)
        if o == t:
            continue
        if t != b:
            problems.append((entry and entry.line, _conflict(key, t or b or o, b, o, t)))
            continue
        if key in theirs.entries:
            changed[key] = o
        elif o is not None:
            added.append(o)
    if problems:
        raise MemoryConflict(path, problems)
    return changed, _new_items(added, theirs, agent)


def _new_items(added: list[Typed], theirs: MemoryFile, agent: str) -> list[Typed]:
    """New items without repeats of an item already there (by normalised text), each with an org-id."""
    known = {(e.type, e.item.normalised) for e in theirs.entries.values()} if added else set()
    ids: set[str] = set()
    fresh = []
    for kind, item in added:
        if (kind, item.normalised) in known:
            continue
        known.add((kind, item.normalised))
        if item.id is None and not item.as_plain:
            item = _with_id(item, make_id(agent, kind, item.text), lambda i: i in ids or i in theirs.entries)
        ids.add(item.key(kind))
        fresh.append((kind, item))
    return fresh


def _with_id(item: MemoryItem, wanted: str, taken: Callable[[str], bool]) -> MemoryItem:
    candidate, n = wanted, 1
    while taken(candidate):  # a person reworded the item that first had this id
        n += 1
        candidate = f"{wanted}-{n}"
    return replace(item, id=candidate)


def _conflict(key: str, any_side: Typed, base: Typed | None, ours: Typed | None, theirs: Typed | None) -> str:
    title = any_side[1].title
    if base is None:
        return f"item {key} {title!r} is already in the file with other content"
    if theirs is None:
        return f"item {key} {title!r} was removed in the file, and changed here"
    if ours is None:
        return f"item {key} {title!r} was changed in the file, and removed here"
    return f"item {key} {title!r} was changed in the file, and changed differently here"


def _parse_child(oid: bytes, get: Getter) -> tuple[str, MemoryItem, int]:
    """A child headline's subtree text, its item and its line count."""
    known = _children.get(oid)
    if known is None:
        headline = get(oid)
        text = render_headline(headline, get)
        known = (text, item_from_headline(headline, text), text.count("\n"))
        if len(_children) >= _CHILDREN_LIMIT:
            _children.clear()
        _children[bytes(oid)] = known
    return known


def _first_line_crlf(doc: Document, get: Getter) -> bool:
    return bool(doc.children) and get(doc.children[0]).raw.split("\n", 1)[0].endswith("\r")


def _item_pieces(section: Section):
    if section.type is not None:
        yield from ((p, True) for p in section.head if p.key is not None)
        yield from ((p, False) for p in section.children if p.key is not None)


def _fits(new: Typed, kind: str, plain: bool) -> bool:
    """Whether a changed item can take its old place: same section, same form (list item or headline)."""
    return new[0] == kind and new[1].as_plain == plain


def _replaced(piece: Piece, changed: dict, kind: str, plain: bool, nl: str) -> str | None:
    """A piece's text after the changes: as it was, re-rendered in place, or None when it goes."""
    if piece.key not in changed:
        return piece.text
    new = changed[piece.key]
    if new is None or not _fits(new, kind, plain):
        return None
    return render_item(new[1], nl) + _split_blanks(piece.text)[1]


def _render_all(items: list[MemoryItem], nl: str) -> str:
    return "".join(render_item(item, nl) for item in items)


def _split_blanks(text: str) -> tuple[str, str]:
    """`text` cut before the blank lines that end it."""
    cut = text.find("\n", len(text.rstrip(" \t\r\n"))) + 1 or len(text)
    return text[:cut], text[cut:]


def _insert_before_blanks(text: str, addition: str, nl: str) -> str:
    """Insert `addition` before the blank lines that end `text`, on a line of its own."""
    body, blanks = _split_blanks(text)
    if body and not body.endswith("\n"):
        body += nl
    return body + addition + blanks


def _separator(text: str, nl: str) -> str:
    """What puts one blank line between `text` and a new section."""
    if not text or text.endswith(nl + nl) or text == nl:
        return ""
    return nl if text.endswith("\n") else nl + nl
