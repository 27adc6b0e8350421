"""memory.org as sections and items: read it (reporting what is not an item), rewrite it item by item.

Only the items a save changes are rewritten; every other byte of the file (the preamble,
unknown sections, free text, items nobody touched) is written back exactly as it was read.
A rewrite also yields the model of the new text, derived from the old one: the pieces it
wrote are read back on their own, every other piece is shared, so saving one item into a
file of thousands neither renders nor reads the others again.
`merge` reconciles what an agent saves with what a person edited meanwhile, item by item.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from operator import itemgetter
from typing import NamedTuple

from ..bounded import BoundedDict
from ..errors import UserError, located
from ..objects import Document, Headline
from .. import org
from ..org import parse, render_headline, split_blank_end
from ..org.syntax import BULLET
from .items import MemoryItem, item_from_headline, make_id, normalise, render_item
from .layout import ITEM_TYPES, SECTION_TITLES, section_type

Typed = tuple[str, MemoryItem]  # (memory type, item)
Getter = Callable[[bytes], object]

_LINE = re.compile(r"[^\n]*\n|[^\n]+")
_LIST_ITEM = re.compile(rf"{BULLET}(\S.*?)[ \t]*\r?\n?$")
_TEXT = itemgetter(0)

# What a headline or a document holds depends only on its oid, so each is read once per process.
_children: BoundedDict = BoundedDict(200_000)  # oid -> (subtree text, item, line count)
_models: BoundedDict = BoundedDict(16)  # (path, document oid) -> MemoryFile


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
    key: str | None = None


@dataclass(frozen=True)
class Section:
    """A level-1 section: its type (None: not a memory section, kept as written), head and child items."""

    type: str | None
    head: tuple[Piece, ...] = ()  # the headline, its drawer, list items, free text
    children: tuple[Piece, ...] = ()  # headline items

    @cached_property
    def data(self) -> bytes:
        """The section's bytes (kept: the next model shares every section a save does not touch)."""
        return "".join(map(_TEXT, (*self.head, *self.children))).encode("utf-8")


@dataclass(frozen=True)
class MemoryFile:
    """The structure of one memory.org: sections, items by key and by type, and what could not be read as items.

    A MemoryFile is shared by everyone who reads the same text, so it never changes: `rewrite`
    returns the model of the new text.
    """

    path: str
    preamble: str | None = None  # None: the file does not exist yet
    sections: tuple[Section, ...] = ()
    entries: Mapping[str, Typed] = field(default_factory=dict)  # key -> (type, item)
    kinds: Mapping[str, tuple[MemoryItem, ...]] = field(default_factory=lambda: {k: () for k in ITEM_TYPES})
    warnings: tuple[str, ...] = ()
    newline: str = "\n"

    @classmethod
    def read(cls, path: str, doc: Document, get: Getter) -> MemoryFile:
        """Read a parsed memory.org: known sections and their items; report the rest, which stays as written."""
        known = _models.get((path, doc.oid))
        if known is None:
            known = _models[(path, doc.oid)] = _Reader(path).read(doc, get)
        return known

    @cached_property
    def texts(self) -> Counter[tuple[str, str]]:
        """How many items of each (type, normalised text) the file holds."""
        return Counter((kind, item.normalised) for kind, item in self.entries.values())

    @cached_property
    def dated(self) -> tuple[MemoryItem, ...]:
        """The items whose properties say when they hold (only these may not hold now)."""
        return tuple(item for items in self.kinds.values() for item in items if item.validity.stated)

    def current_with_text(self, kind: str, normalised: str) -> MemoryItem | None:
        """The current item of this type with this normalised text, if any (one that no longer holds does not
        count: the same text may be true again)."""
        if not self.texts[(kind, normalised)]:
            return None
        return next((item for k, item in self.entries.values()
                     if k == kind and item.normalised == normalised and item.current), None)

    def named(self, name: str) -> list[tuple[str, Typed]]:
        """The items `name` stands for, by key: its :ID:, key or text (compared normalised), in file order."""
        text = normalise(name)
        return [(key, typed) for key, typed in self.entries.items()
                if name in (key, typed[1].id) or typed[1].normalised == text]

    def render(self) -> bytes:
        """The bytes of the file."""
        return b"".join([(self.preamble or "").encode("utf-8"), *(section.data for section in self.sections)])

    def render_without(self, keys: Collection[str]) -> bytes:
        """The bytes of the file without the items of these keys (every other byte as it is, and the blank lines
        that end a section kept when its last item goes)."""
        if not keys:
            return self.render()
        texts = [self.preamble or ""]
        for section in self.sections:
            pieces = (*section.head, *section.children)
            texts += [p.text if p.key not in keys else split_blank_end(p.text)[1] if n == len(pieces) - 1 else ""
                      for n, p in enumerate(pieces)]
        return "".join(texts).encode("utf-8")

    def lines(self, keys: Iterable[str]) -> dict[str, int]:
        """The first line of each of these items (counted from the text: only error messages need it)."""
        return {key: line for key, (line, _) in self.placed(keys).items()}

    def placed(self, keys: Iterable[str]) -> dict[str, tuple[int, str]]:
        """The first line of each of these items and its text in the file (with the blank lines after it)."""
        wanted = set(keys)
        found = {}
        line = 1 + (self.preamble or "").count("\n")
        for section in self.sections:
            for piece in (*section.head, *section.children):
                if piece.key in wanted:
                    found[piece.key] = (line, piece.text)
                line += piece.text.count("\n")
        return found

    def replacement(self, key: str, text: str, new: Typed | None) -> str | None:
        """What stands where item `key` (its text in the file: `text`) stood once a rewrite makes it `new`: its
        text with the blank lines that followed the old, "" when removed; None when it cannot stand there (of
        another type, or a list item become a headline: it goes to the end of its section)."""
        kind, old = self.entries[key]
        if new is None:
            return ""
        return render_item(new[1], self.newline) + split_blank_end(text)[1] if _fits(kind, old, new) else None

    def rewrite(self, changed: dict[str, Typed | None], added: list[Typed],
                title: str) -> tuple[bytes, MemoryFile | None]:
        """The file's bytes with `changed` items replaced (None: removed) and `added` appended to their sections.

        Also the model of the new bytes, or None when only reading them whole again can tell it
        (new sections, or warnings whose lines may have moved).
        """
        nl = self.newline
        edits: dict[str, dict[str, MemoryItem | None]] = {}  # type -> key -> new item (None: leaves its place)
        pending = list(added)
        for key, new in changed.items():
            kind, old = self.entries[key]
            fits = _fits(kind, old, new)
            edits.setdefault(kind, {})[key] = new[1] if fits else None
            if new is not None and not fits:
                pending.append(new)
        writer = _Writer(self.preamble or "", nl)
        sections = []
        for section in self.sections:
            mine = [item for kind, item in pending if kind == section.type]
            if section.type is not None and (mine or section.type in edits):
                section = writer.section(section, edits.get(section.type, {}), mine)
                pending = [(kind, item) for kind, item in pending if kind != section.type]
            sections.append(section)
        derived = replace(self, sections=tuple(sections))
        data = (f"#+TITLE: {title}{nl}{nl}".encode() if self.preamble is None else b"") + derived.render()
        for kind in ITEM_TYPES:
            items = [item for k, item in pending if k == kind]
            if items:
                data += (_separator(data, nl) + f"* {SECTION_TITLES[kind]}{nl}" + _render_all(items, nl)).encode()
        if pending or self.preamble is None or self.warnings or not writer.read_back():
            return data, None
        return data, self._derived(derived, changed, writer)

    def _derived(self, derived: MemoryFile, changed: dict[str, Typed | None], writer: _Writer) -> MemoryFile:
        """The model after a rewrite: entries, types, texts and dated items updated by what was removed and written."""
        entries = dict(self.entries)
        gone = [entries.pop(key) for key in changed]
        entries.update(writer.written)
        kinds = dict(self.kinds)
        for section in derived.sections:
            if section.type in writer.appended:
                kinds[section.type] += tuple(entries[key][1] for key in writer.appended[section.type])
            elif section.type in writer.touched:
                kinds[section.type] = tuple(entries[p.key][1] for p in (*section.head, *section.children)
                                            if p.key is not None)
        result = replace(derived, entries=entries, kinds=kinds)
        if "dated" in self.__dict__:  # likewise the items that say when they hold
            left = {id(item) for _, item in gone}
            result.__dict__["dated"] = (*(item for item in self.dated if id(item) not in left),
                                        *(item for _, item in writer.written.values() if item.validity.stated))
        if "texts" in self.__dict__:  # keep the index of normalised texts without counting every item again
            texts = self.texts.copy()
            for kind, item in gone:
                text = (kind, item.normalised)
                texts[text] -= 1
                if not texts[text]:
                    del texts[text]
            texts.update((kind, item.normalised) for kind, item in writer.written.values())
            result.__dict__["texts"] = texts
        return result


class _Reader:
    """Reads a parsed memory.org into a MemoryFile, counting lines for the warnings."""

    def __init__(self, path: str):
        self.path = path
        self.entries: dict[str, Typed] = {}
        self.first_lines: dict[str, int] = {}
        self.warnings: list[str] = []

    def read(self, doc: Document, get: Getter) -> MemoryFile:
        crlf = doc.preamble.endswith("\r\n") or (not doc.preamble and _first_line_crlf(doc, get))
        line = 1 + doc.preamble.count("\n")
        sections = []
        seen: set[str] = set()
        for oid in doc.children:
            headline: Headline = get(oid)
            kind = section_type(headline.title) if headline.level == 1 else None
            if kind is None or kind in seen:
                text = render_headline(headline, get)
                self._warn(line, f"section {headline.title!r} is not a memory section "
                                 f"({', '.join(SECTION_TITLES.values())})" if kind is None
                           else f"a second {SECTION_TITLES[kind]!r} section is not read")
                sections.append(Section(None, (Piece(text),)))
                line += text.count("\n")
                continue
            seen.add(kind)
            head = self._head(kind, headline.raw, line)
            line += headline.raw.count("\n")
            children = []
            for child in headline.children:
                text, item, lines = _parse_child(child, get)
                children.append(Piece(text, self._add(kind, item, line)))
                line += lines
            sections.append(Section(kind, tuple(head), tuple(children)))
        kinds = {kind: () for kind in ITEM_TYPES}
        for section in sections:
            if section.type is not None:
                kinds[section.type] = tuple(self.entries[p.key][1] for p in (*section.head, *section.children)
                                            if p.key is not None)
        return MemoryFile(self.path, doc.preamble, tuple(sections), self.entries, kinds, tuple(self.warnings),
                          "\r\n" if crlf else "\n")

    def _head(self, kind: str, raw: str, line: int) -> list[Piece]:
        """A section's own text as pieces: headline and drawer, then each list item and each other line."""
        lines = _LINE.findall(raw)
        start = org.Section.of(raw).body  # the headline, its planning line and property drawer
        head = [Piece("".join(lines[:start]))]
        i = start
        reported = False
        while i < len(lines):
            j = _list_item_end(lines, i)
            if j is None:
                if lines[i].strip() and not reported:
                    self._warn(line + i, f"free text in {SECTION_TITLES[kind]!r} is not an item")
                    reported = True
                head.append(Piece(lines[i]))
                i += 1
                continue
            key = self._add(kind, _list_item(lines[i:j]), line + i)
            head.append(Piece("".join(lines[i:j]), key))
            i = j
        return head

    def _add(self, kind: str, item: MemoryItem, line: int) -> str | None:
        key = item.key(kind)
        if key in self.entries:
            self._warn(line, f"item {item.title!r} repeats the item of line {self.first_lines[key]} "
                             f"({key}); only the first is read")
            return None
        self.entries[key] = (kind, item)
        self.first_lines[key] = line
        return key

    def _warn(self, line: int, message: str) -> None:
        self.warnings.append(located(self.path, line, message + "; kept as it is"))


def _appended_to(old: Section, new: Section) -> Section:
    """`new`, which only appends children to `old` (changing its last child's trailing blank lines),
    with its bytes made from the old section's instead of joined again from thousands of pieces."""
    if old.children:
        kept = len(old.data) - len(old.children[-1].text.encode("utf-8"))
        tail = "".join(map(_TEXT, new.children[len(old.children) - 1:])).encode("utf-8")
        new.__dict__["data"] = old.data[:kept] + tail  # the cached property, set ahead
    return new


class _Writer:
    """Rewrites sections piece by piece, then reads back the pieces it wrote as a read of the whole file would."""

    def __init__(self, preamble: str, nl: str):
        self.preamble = preamble
        self.nl = nl
        self.pieces: list[tuple[str, Piece, bool]] = []  # (type, piece, plain) of every piece written
        self.written: dict[str, Typed] = {}  # key -> (type, item as read back) of every piece written
        self.appended: dict[str, list[str]] = {}  # type -> keys of the items only appended to its section
        self.touched: set[str] = set()  # types of the sections changed otherwise

    def section(self, section: Section, edits: dict[str, MemoryItem | None], mine: list[MemoryItem]) -> Section:
        """`section` with `edits` made in place and `mine` added: list items after the last one, headlines last."""
        kind = section.type
        head, children = section.head, section.children
        if edits:
            head, children = self._edited(kind, head, edits), self._edited(kind, children, edits)
        plain = [self._piece(kind, item) for item in mine if item.as_plain]
        if plain:
            at = max((n + 1 for n, piece in enumerate(head) if piece.key is not None), default=1)
            before = Piece(self._line_ended(head[at - 1].text), head[at - 1].key)
            head = (*head[:at - 1], before, *plain, *head[at:])
        headlines = [item for item in mine if not item.as_plain]
        if headlines:
            head, children = self._appended(kind, head, children, headlines)
        if edits or plain:
            self.touched.add(kind)
            return Section(kind, head, children)
        self.appended[kind] = [piece.key for piece in children[len(section.children):]]
        return _appended_to(section, Section(kind, head, children))

    def _edited(self, kind: str, pieces: tuple[Piece, ...], edits: dict[str, MemoryItem | None]) -> tuple:
        out = []
        for piece in pieces:
            if piece.key not in edits:
                out.append(piece)
            elif (new := edits[piece.key]) is not None:
                out.append(self._piece(kind, new, split_blank_end(piece.text)[1]))
        return tuple(out)

    def _appended(self, kind: str, head: tuple, children: tuple, items: list[MemoryItem]) -> tuple[tuple, tuple]:
        """New headline items after the section's last line of text, before the blank lines that end it."""
        if children:
            body, blanks = split_blank_end(children[-1].text)
            children = (*children[:-1], Piece(self._line_ended(body), children[-1].key))
        else:
            end = len(head)
            while end > 1 and head[end - 1].key is None and not head[end - 1].text.strip():
                end -= 1
            blanks = "".join(map(_TEXT, head[end:]))
            head = (*head[:end - 1], Piece(self._line_ended(head[end - 1].text), head[end - 1].key))
        new = [self._piece(kind, item) for item in items[:-1]] + [self._piece(kind, items[-1], blanks)]
        return head, (*children, *new)

    def _line_ended(self, text: str) -> str:
        return text if text.endswith("\n") else text + self.nl

    def _piece(self, kind: str, item: MemoryItem, tail: str = "") -> Piece:
        """The piece that holds `item`, followed by `tail` (blank lines)."""
        piece = Piece(render_item(item, self.nl) + tail, item.key(kind))
        self.pieces.append((kind, piece, item.as_plain))
        return piece

    def read_back(self) -> bool:
        """Read the pieces written as a read of the file finds them; False if one reads as another item."""
        headlines = [piece.text for _, piece, plain in self.pieces if not plain]
        # one parse for them all, after the preamble: the file's TODO setup applies
        parsed = parse(self.preamble + "".join(headlines))
        if len(parsed.document.children) != len(headlines):
            return False
        objects = {obj.oid: obj for obj in parsed.objects}
        found = iter(item_from_headline(objects[oid], text) for oid, text in zip(parsed.document.children, headlines))
        for kind, piece, plain in self.pieces:
            item = _list_item(_LINE.findall(piece.text)) if plain else next(found)
            if item.key(kind) != piece.key or piece.key in self.written:
                return False
            self.written[piece.key] = (kind, item)
        return True


def merge(path: str, base: Mapping[str, Typed], ours: Mapping[str, Typed | None], theirs: MemoryFile,
          agent: str) -> tuple[dict[str, Typed | None], list[Typed]]:
    """Three-way merge by item key: what to change in `theirs` (None: remove) and what to add.

    `ours` holds only what the saved context changes against `base`, what it was loaded from
    (empty for a new context, which then only adds and updates): key -> (type, item), None
    when removed. An item changed on one side only takes that side's version; changed on
    both sides differently, it is a conflict and nothing is written.
    """
    changed: dict[str, Typed | None] = {}
    added: list[Typed] = []
    conflicts: list[str] = []
    for key, o in ours.items():
        t = theirs.entries.get(key)
        if o == t:
            continue
        if t != base.get(key):
            conflicts.append(key)
        elif t is not None:
            changed[key] = o
        elif o is not None:
            added.append(o)
    if conflicts:
        lines = theirs.lines(conflicts)
        raise MemoryConflict(path, [(lines.get(key), _conflict(key, base.get(key), ours[key], theirs.entries.get(key)))
                                    for key in conflicts])
    return changed, _new_items(added, theirs, agent)


def _new_items(added: list[Typed], theirs: MemoryFile, agent: str) -> list[Typed]:
    """New items without repeats of a current item already there (by normalised text), each with an org-id."""
    known = theirs.texts if added else {}
    seen: set[tuple[str, str]] = set()
    ids: set[str] = set()
    fresh = []
    for kind, item in added:
        text = (kind, item.normalised)
        if text in seen or text in known and theirs.current_with_text(kind, item.normalised):
            continue
        seen.add(text)
        if item.id is None and not item.as_plain:
            item = with_unique_id(item, make_id(agent, kind, item.text), lambda i: i in ids or i in theirs.entries)
        ids.add(item.key(kind))
        fresh.append((kind, item))
    return fresh


def with_unique_id(item: MemoryItem, wanted: str, taken: Callable[[str], bool]) -> MemoryItem:
    """The item with the :ID: `wanted`, or `wanted-2`, `-3`... the first not `taken`."""
    candidate, n = wanted, 1
    while taken(candidate):  # a person reworded the item that first had this id
        n += 1
        candidate = f"{wanted}-{n}"
    return replace(item, id=candidate)


def _conflict(key: str, base: Typed | None, ours: Typed | None, theirs: Typed | None) -> str:
    title = (theirs or base or ours)[1].title
    if base is None:
        return f"item {key} {title!r} is already in the file with other content"
    if theirs is None:
        return f"item {key} {title!r} was removed in the file, and changed here"
    if ours is None:
        return f"item {key} {title!r} was changed in the file, and removed here"
    return f"item {key} {title!r} was changed in the file, and changed differently here"


def _fits(kind: str, old: MemoryItem, new: Typed | None) -> bool:
    """Whether `new` can take the place of `old`, an item of type `kind`, in a rewrite."""
    return new is not None and new[0] == kind and new[1].as_plain == old.plain


def _parse_child(oid: bytes, get: Getter) -> tuple[str, MemoryItem, int]:
    """A child headline's subtree text, its item and its line count."""
    known = _children.get(oid)
    if known is None:
        headline = get(oid)
        text = render_headline(headline, get)
        known = _children[bytes(oid)] = (text, item_from_headline(headline, text), text.count("\n"))
    return known


def _list_item_end(lines: list[str], i: int) -> int | None:
    """Where the list item starting at line `i` ends (its indented lines follow it), or None if none starts."""
    if _LIST_ITEM.match(lines[i]) is None:
        return None
    j = i + 1
    while j < len(lines) and lines[j].strip() and lines[j][0] in " \t":
        j += 1
    return j


def _list_item(lines: list[str]) -> MemoryItem:
    """The plain item a list item's lines hold."""
    first = _LIST_ITEM.match(lines[0]).group(1).strip()
    return MemoryItem("\n".join([first, *(line.strip() for line in lines[1:])]), plain=True)


def _first_line_crlf(doc: Document, get: Getter) -> bool:
    return bool(doc.children) and get(doc.children[0]).raw.split("\n", 1)[0].endswith("\r")


def _render_all(items: list[MemoryItem], nl: str) -> str:
    return "".join(render_item(item, nl) for item in items)


def _separator(data: bytes, nl: str) -> str:
    """What puts one blank line between the text `data` holds and a new section."""
    end = nl.encode()
    if not data or data.endswith(end + end) or data == end:
        return ""
    return nl if data.endswith(b"\n") else nl + nl
