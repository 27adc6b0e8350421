"""Where each search item stands in its file as the file is now: the first line of its headline, for a
result's file:line.

A file new to an index has its items' lines counted as it is read whole. An edited file's lines shift, so its
items' lines are found as results need them: from the lines of the subtrees before the headline (most known
from earlier versions of the file, by oid), or by one walk of the file when headlines were inserted or removed
before it since it was indexed.
"""

from __future__ import annotations

from itertools import accumulate

from ..backends import Store
from ..hashing import Oid
from ..objects import Document, Headline, Tree
from ..query import walk_document
from .items import Item

__all__ = ["Lines"]

LINES_KEPT = 200_000  # subtrees whose line counts are kept
OFFSETS_KEPT = 4096  # headlines whose children's line offsets are kept


class Lines:
    """The first lines of the items of one index (see the module's docstring)."""

    def __init__(self, store: Store):
        self.store = store
        # the first line of each item of the files in `lined`, counted when they were first read
        self.line_of: dict[int, int] = {}
        self.lined: set[str] = set()
        self._lines: dict[bytes, int] = {}  # headline oid -> lines of its subtree
        self._offsets: dict[bytes, list[int]] = {}  # document or headline oid -> lines before each child
        self._walked: dict[bytes, dict[bytes, int]] = {}  # document oid -> headline oid -> line, when positions moved

    def count(self, path: str, doc: Document, items: dict[int, Item]) -> None:
        """Count the lines of the `items` of a file new to the index, as it is read whole."""
        lines = {node.position: node.line for node in walk_document(self.store, path, doc)}
        self.line_of.update((key, lines[item.position]) for key, item in items.items())
        self.lined.add(path)

    def changed(self, path: str) -> None:
        """A file changed: the lines counted for its items no longer hold."""
        self.lined.discard(path)

    def removed(self, key: int) -> None:
        """An item left the index."""
        self.line_of.pop(key, None)

    def clear(self) -> None:
        """Forget every item's line (the counts of subtrees, named by their oids, stay true)."""
        self.line_of.clear()
        self.lined.clear()

    def of(self, item: Item, tree: Tree) -> int:
        """The first line of an item's headline in `tree`'s version of its file."""
        if item.path in self.lined and (line := self.line_of.get(item.key)) is not None:
            return line
        doc = self.store.objects[tree.entries[item.path]]
        line = self._line_at(doc, item.position, item.oid)
        if line is None:  # headlines were inserted or removed before it since it was indexed
            lines = self._walked.get(doc.oid)
            if lines is None:
                lines = {}
                for node in walk_document(self.store, item.path, doc):
                    lines.setdefault(node.oid, node.line)
                self._walked = {doc.oid: lines}  # the file being edited
            line = lines.get(item.oid, 0)
        return line

    def _line_at(self, doc: Document, position: tuple[int, ...], oid: Oid) -> int | None:
        """The first line of the headline at `position`, from the lines of the subtrees before it; None if not `oid`."""
        parent: Document | Headline = doc
        start = line = 1 + doc.preamble.count("\n")  # where the parent's children start
        for index in position:
            if index >= len(parent.children):
                return None
            line = start + self._starts(parent)[index]
            parent = self.store.objects[parent.children[index]]
            start = line + parent.raw.count("\n")
        return line if parent.oid == oid else None

    def _starts(self, parent: Document | Headline) -> list[int]:
        """Lines before each child's subtree among the children of `parent`, then the lines of them all."""
        starts = self._offsets.get(parent.oid)
        if starts is None:
            starts = [0, *accumulate(map(self._subtree_lines, parent.children))]
            if len(self._offsets) >= OFFSETS_KEPT:
                self._offsets.clear()
            if len(self._lines) >= LINES_KEPT:
                self._lines.clear()
            self._offsets[parent.oid] = starts
        return starts

    def _subtree_lines(self, oid: bytes) -> int:
        """Lines of a headline's subtree; most are known from earlier documents, the rest are counted
        children first from a stack (files may nest thousands deep)."""
        known, stack = self._lines, [oid]
        while stack:
            top = stack[-1]
            if top in known:
                stack.pop()
                continue
            headline: Headline = self.store.objects[top]
            missing = [child for child in headline.children if child not in known]
            if missing:
                stack.extend(missing)
                continue
            known[bytes(top)] = headline.raw.count("\n") + sum(known[child] for child in headline.children)
            stack.pop()
        return known[oid]
