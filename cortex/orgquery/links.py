"""Links as Org reads them (bracket, angle and plain links), where they lead, and backlinks.

A link is read as org-element reads it: `[[id:x]]` has kind "id" and target "x",
`[[file:notes.org::*Plans]]` kind "file", target "notes.org" and search "*Plans", `[[*Plans]]`
kind "fuzzy", `[[#plans]]` kind "custom-id", `https://orgmode.org` kind "https". Where a link leads is
a key (`link_key`) that its targets share (`target_keys`, `file_keys`): an index of keys finds
backlinks without reading every link again, and a link whose key nothing holds is broken.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..bounded import BoundedDict
from ..objects import Document, Headline
from ..org import file_properties
from ..org.inline import OPAQUE, bracket_link_at, enclosing, link_closes
from ..query import Node, file_id
from .dates import object_lines, section_lines

__all__ = ["LINK_TYPES", "Backlink", "Link", "broken", "document_links", "file_keys", "file_node",
           "headline_links", "link_key", "links_in", "resolve", "sources", "target_index", "target_keys"]

# The link types of Emacs's Org 9.5 with its default modules and org-id (`org-link-types`).
LINK_TYPES = ("attachment", "bbdb", "bibtex", "docview", "doi", "elisp", "eww", "file", "file+emacs", "file+sys",
              "ftp", "gnus", "help", "http", "https", "id", "info", "irc", "mailto", "mhe", "news", "rmail", "shell",
              "w3m")
_TYPES = "|".join(re.escape(t) for t in sorted(LINK_TYPES, key=len, reverse=True))
_NON_SPACE_BRACKET = r"[^\]\[ \t\n()<>]"
_PARENS = rf"\((?:{_NON_SPACE_BRACKET}|\({_NON_SPACE_BRACKET}*\))*\)"
_PUNCT = re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
# org-link-angle-re and org-link-plain-re, tried in this order where no bracket link starts first (`bracket_link_at`
# reads those: org-link-bracket-re backtracks over every split of a run of backslashes).
_LINK = re.compile(
    rf"<(?P<angle_type>{_TYPES}):(?P<angle_path>[^>\n]*)>"
    rf"|\b(?P<plain_type>{_TYPES}):(?P<plain_path>(?:{_NON_SPACE_BRACKET}|{_PARENS})+"
    rf"(?:[^{_PUNCT}\s]|/|{_PARENS}))")
_TYPE_PREFIX = re.compile(rf"({_TYPES}):")
_ESCAPES = re.compile(r"(?<!\\)(\\+)(?=[\]\[]|$)")  # a whole run: no retrying from each backslash of it
_COOKIE = re.compile(r"\[[0-9]*(?:%|/[0-9]*)\]")


@dataclass(frozen=True)
class Link:
    """One link: its `kind` (Org's type: "id", "file", "https", "fuzzy", "custom-id"...), `target` (the id,
    path, address or heading), `search` (after "::" in a file link), `description`, its `line` within the
    section (0: the heading) and its text as written."""

    kind: str
    target: str
    search: str | None
    description: str | None
    line: int
    raw: str

    def __str__(self) -> str:
        return self.raw


_CACHE: BoundedDict = BoundedDict(200_000)  # by headline or document oid: content never changes


def headline_links(headline: Headline) -> tuple[Link, ...]:
    """The links of a headline's title and section (not its property drawer), in order."""
    found = _CACHE.get(headline.oid)
    if found is None:
        found = _CACHE[headline.oid] = tuple(_links(section_lines(headline, properties=False)))
    return found


def document_links(document: Document) -> tuple[Link, ...]:
    """The links of the text before a file's first headline (its line is counted from the file's first)."""
    found = _CACHE.get(document.oid)
    if found is None:
        found = _CACHE[document.oid] = tuple(_links(object_lines(document.preamble, heading=False, properties=False)))
    return found


def links_in(text: str, line: int = 0) -> list[Link]:
    """The links of one line of text."""
    return list(_links([(line, text)]))


def _links(lines: Iterable[tuple[int, str]]) -> Iterable[Link]:
    for index, line in lines:
        if ":" not in line and "[[" not in line:
            continue  # a typed link names its type before a colon; any other is in brackets
        pos, other, bracket, around = 0, None, None, None
        while True:  # the link that starts first; at one place a bracket link before an angle or plain one
            if other is None or other.start() < pos:
                other = _LINK.search(line, pos)
            if bracket is None or bracket[0] < pos:
                bracket = _next_bracket(line, pos)
            first = min(bracket[0] if bracket is not None else len(line), other.start() if other else len(line))
            if first < len(line):
                around = enclosing(line) if around is None else around
                inside = [(kind, span) for kind, span in around if span.start <= first < span.end]
                if opaque := next((span for kind, span in inside if kind is OPAQUE), None):
                    pos = opaque.end  # verbatim, code, a target, a snippet or a macro holds no link
                    continue
                if inside and other is not None and other.start() == first and other.end() > inside[-1][1].end:
                    other = _LINK.search(line, first, inside[-1][1].end)  # ends where bold or italic does
            if bracket is not None and (other is None or bracket[0] <= other.start()):
                start, end, path, description = bracket
                yield _bracket(path, description, index, line[start:end])
                pos = end
            elif other is not None:
                kind = other["angle_type"] or other["plain_type"]
                yield _typed(kind, other["angle_path"] if other["angle_type"] else other["plain_path"], None,
                             index, other[0])
                pos = other.end()
            else:
                break


def _next_bracket(line: str, pos: int) -> tuple[int, int, str, str | None] | None:
    """The first bracket link at or after `pos`: (start, end, path, description)."""
    closes = None
    while (start := line.find("[[", pos)) >= 0:
        if closes is None:
            closes = link_closes(line)
        if (found := bracket_link_at(line, start, closes)) is not None:
            return (start, *found)
        pos = start + 1
    return None


def _bracket(path: str, description: str | None, line: int, raw: str) -> Link:
    """A bracket link's kind and target, as org-element-link-parser reads them."""
    path = _ESCAPES.sub(lambda m: "\\" * (len(m[1]) // 2), path)
    if path.startswith(("/", "~", "./", "../")):
        return _typed("file", path, description, line, raw)
    if m := _TYPE_PREFIX.match(path):
        return _typed(m[1], path[m.end():], description, line, raw)
    if path.startswith("(") and path.endswith(")"):
        return Link("coderef", path[1:-1], None, description, line, raw)
    if path.startswith("#"):
        return Link("custom-id", path[1:], None, description, line, raw)
    return Link("fuzzy", path, None, description, line, raw)


def _typed(kind: str, path: str, description: str | None, line: int, raw: str) -> Link:
    """A link of an explicit type; a file link (`file+sys:` too) splits its search option off after "::"."""
    search = None
    if kind.startswith("file"):
        kind = "file"
        path, found, rest = path.partition("::")
        search = rest if found else None
    return Link(kind, path, search, description, line, raw)


# --- where links lead -------------------------------------------------------------------------------


def link_key(link: Link, source: str, root: str | Path | None = None) -> tuple | None:
    """What a link in file `source` leads to, as a key its targets share: ("id", id), ("file", path),
    ("heading", path, words of the title) or ("custom-id", path, id); None for a link out of the store.

    File paths are relative to the Org root, as the store names files; an absolute one outside `root` leads out.
    """
    if link.kind == "id":
        return ("id", link.target)
    if link.kind == "file":
        path = _store_path(link.target, source, root)
        return None if path is None else _search_key(path, link.search) or ("file", path)
    if link.kind == "fuzzy":
        return _search_key(source, link.target)
    if link.kind == "custom-id":
        return ("custom-id", source, link.target)
    return None


def target_keys(node: Node) -> list[tuple]:
    """The keys of the links that lead to a headline: its :ID:, its title in its file, its CUSTOM_ID."""
    keys = [("heading", node.path, heading_words(node.title))]
    if node.id:
        keys.append(("id", node.id))
    if custom := node.headline.get("CUSTOM_ID"):
        keys.append(("custom-id", node.path, custom))
    return keys


def file_keys(path: str, file_id: str | None = None) -> list[tuple]:
    """The keys of the links that lead to a file: its path, and its own :ID: if it has one."""
    return [("file", path)] + ([("id", file_id)] if file_id else [])


def heading_words(title: str) -> tuple[str, ...]:
    """A title as Org compares it with a `*heading` search: its words, statistics cookies left out."""
    return tuple(_COOKIE.sub("", title).split())


def _search_key(path: str, search: str | None) -> tuple | None:
    """The key of a search option in file `path`: `*heading`, `#custom-id` or heading text; None (the file
    itself) for none, a line number or a /regexp/."""
    if not search or search.isdigit() or (len(search) > 1 and search.startswith("/") and search.endswith("/")):
        return None
    if search.startswith("#"):
        return ("custom-id", path, search[1:])
    return ("heading", path, heading_words(search.removeprefix("*")))


def _store_path(target: str, source: str, root: str | Path | None) -> str | None:
    """A file link's path as the store names files (relative to the Org root); None outside it."""
    if target.startswith("~"):
        target = str(Path(target).expanduser())
    if posixpath.isabs(target):
        if root is None:
            return None
        relative = posixpath.relpath(target, str(Path(root).resolve().as_posix()))
        return None if relative.startswith("..") else relative
    path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    return None if path.startswith("..") else path


# --- backlinks --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backlink(Node):
    """A link where it is: the headline holding it, a node, so every form that takes nodes takes it. A link
    before a file's first headline is held by the file's node (`file_node`)."""

    link: Link | None = None

    @property
    def link_line(self) -> int:
        """The file line the link is on."""
        return self.line + self.link.line

    def __str__(self) -> str:
        return f"{self.path}:{self.link_line}: {' / '.join(self.outline) or '(file)'}  {self.link}"


def file_node(path: str, document: Document) -> Node:
    """A file as a node (org-roam's file node): the text before its first headline, its own properties, no outline."""
    properties = file_properties(document.preamble)
    return Node(path, (), (), 1, Headline(level=0, title=path, raw=document.preamble, properties=properties))


def sources(files: Iterable[tuple[str, Document, Iterable[Node]]]) -> Iterator[Backlink]:
    """Every link of some files where it is: those before each file's first headline, then its headlines'."""
    for path, document, nodes in files:
        if links := document_links(document):
            top = file_node(path, document)
            for link in links:
                yield Backlink(path, (), (), 1, top.headline, link)
        for node in nodes:
            for link in headline_links(node.headline):
                yield Backlink(node.path, node.outline, node.position, node.line, node.headline, link)


def target_index(files: Iterable[tuple[str, Document, Iterable[Node]]]) -> dict[tuple, list[Node | str]]:
    """Every key links lead by in some files, with the headlines (nodes) and files (paths) each leads to."""
    index: dict[tuple, list[Node | str]] = {}
    for path, document, nodes in files:
        for key in file_keys(path, file_id(document)):
            index.setdefault(key, []).append(path)
        for node in nodes:
            for key in target_keys(node):
                index.setdefault(key, []).append(node)
    return index


def resolve(link: Link, source: str, index: dict[tuple, list], root: str | Path | None = None) -> list[Node | str]:
    """The headlines (nodes) and files (paths) a link in file `source` leads to, given a `target_index`."""
    key = link_key(link, source, root)
    return [] if key is None else index.get(key, [])


def broken(found: Iterable[Backlink], index: dict[tuple, list]) -> list[Backlink]:
    """The id links among `found` whose :ID: no headline or file of a `target_index` holds."""
    return [ref for ref in found if ref.link.kind == "id" and ("id", ref.link.target) not in index]
