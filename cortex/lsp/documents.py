"""The editor's text of an open Org file, parsed as the buffer holds it: its headlines, :ID:s and links by line.

Lines and columns here are 0-based and count Python characters; `server.py` turns them into the client's units
(UTF-16 code units unless it asked for others) through pygls's position codec.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from ..org.parser import file_properties, parse
from ..query import Node, walk_headlines

if TYPE_CHECKING:
    from ..orgquery.links import Link

__all__ = ["Buffer", "Located"]


@dataclass(frozen=True)
class Located:
    """A link where it stands in a buffer: its line, first and past-last column."""

    link: Link
    line: int
    start: int
    end: int


class Buffer:
    """One open file's text (`path` from the Org root) and what its parse says."""

    def __init__(self, path: str, text: str):
        self.path, self.text = path, text
        self.lines = text.split("\n")
        parsed = parse(text)
        self.document = parsed.document
        self.get = {o.oid: o for o in parsed.objects}.__getitem__  # the objects of the parse, by oid
        self.nodes: tuple[Node, ...] = tuple(walk_headlines(self.get, path, parsed.document))

    @cached_property
    def file_id(self) -> str | None:
        """The :ID: the file gives itself (a property drawer before its first headline)."""
        return dict(file_properties(self.document.preamble)).get("ID")

    @cached_property
    def ids(self) -> dict[str, list[int]]:
        """Each :ID: of the buffer (the file's own and its headlines') with the lines that carry it."""
        found: dict[str, list[int]] = {}
        if self.file_id:
            found[self.file_id] = [next((n for n, line in enumerate(self.lines) if line.lstrip().upper()
                                         .startswith(":ID:")), 0)]
        for node in self.nodes:
            if node.id:
                found.setdefault(node.id, []).append(self.id_line(node))
        return found

    @cached_property
    def heading_lines(self) -> dict[str, int]:
        """The 0-based heading line of each headline :ID: (the first that carries it)."""
        found: dict[str, int] = {}
        for node in self.nodes:
            if node.id:
                found.setdefault(node.id, node.line - 1)
        return found

    def id_line(self, node: Node) -> int:
        """The line of a headline's :ID: property (its heading's line when none is found)."""
        first = node.line - 1
        for n, line in enumerate(node.headline.raw.split("\n")):
            if line.lstrip().upper().startswith(":ID:"):
                return first + n
        return first

    def node_at(self, line: int) -> Node | None:
        """The headline whose section holds `line` (None: before the first headline)."""
        found = None
        for node in self.nodes:
            if node.line - 1 > line:
                break
            found = node
        return found

    def subtree_lines(self, node: Node) -> tuple[int, int]:
        """The first line of a headline and the line past its subtree."""
        index = self.nodes.index(node)
        after = next((n for n in self.nodes[index + 1:] if n.headline.level <= node.headline.level), None)
        return node.line - 1, len(self.lines) - 1 if after is None else after.line - 1

    @cached_property
    def links(self) -> tuple[Located, ...]:
        """Every link as Org reads it (not in property drawers or raw blocks), in order."""
        from ..orgquery.links import document_links, headline_links  # (the Org queries load once a link is asked for)

        placed = [(0, link) for link in document_links(self.document)]
        placed += [(node.line - 1, link) for node in self.nodes for link in headline_links(node.headline)]
        located, column = [], {}
        for first, link in placed:
            line = first + link.line
            start = self.lines[line].find(link.raw, column.get(line, 0)) if line < len(self.lines) else -1
            if start >= 0:
                column[line] = start + len(link.raw)
                located.append(Located(link, line, start, start + len(link.raw)))
        return tuple(located)

    def link_at(self, line: int, column: int) -> Located | None:
        """The link under a position, if any."""
        return next((x for x in self.links if x.line == line and x.start <= column <= x.end), None)
