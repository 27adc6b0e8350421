"""Where each search item stands in its file as the file is now: the first line of its headline, for a
result's file:line.

A file new to an index has its items' lines counted as it is read whole. An edited file's lines shift, so its
items' lines are found as results need them: from the lines of the subtrees before the headline (most known
from earlier versions of the file, by oid), or by one walk of the file when headlines were inserted or removed
before it since it was indexed.
"""

from __future__ import annotations

from itertools import accumulate

import numpy as np

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
        # the first line of each item of the files in `lined`, counted when they were first read: those of a saved
        # index in two arrays (keys sorted, lines), those counted since in a dict
        self.line_of: dict[int, int] = {}
        self._saved_keys, self._saved_lines = np.zeros(0, dtype="<u8"), np.zeros(0, dtype="<u4")
        self._gone: set[int] = set()  # saved keys of items since removed
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
        if self._saved_at(key) is not None:
            self._gone.add(key)

    def clear(self) -> None:
        """Forget every item's line (the counts of subtrees, named by their oids, stay true)."""
        self.load(b"", b"", [])

    def load(self, keys: bytes, lines: bytes, lined: list[str]) -> None:
        """Take the lines `packed` made, in place of those counted."""
        self.line_of.clear()
        self._gone.clear()
        self._saved_keys, self._saved_lines = np.frombuffer(keys, "<u8"), np.frombuffer(lines, "<u4")
        if len(self._saved_keys) != len(self._saved_lines) or not np.all(self._saved_keys[1:] > self._saved_keys[:-1]):
            self.load(b"", b"", [])
            raise ValueError("saved lines that do not match their keys")
        self.lined = set(lined)

    def packed(self) -> tuple[bytes, bytes, list[str]]:
        """The lines counted, as `load` takes them: keys sorted, their lines, the files whose lines they are."""
        keys, lines = self._saved_keys, self._saved_lines
        if self._gone or self.line_of:
            merged = dict(zip(keys.tolist(), lines.tolist()))
            for key in self._gone:
                del merged[key]
            merged.update(self.line_of)
            ordered = sorted(merged)
            keys, lines = np.array(ordered, dtype="<u8"), np.array([merged[key] for key in ordered], dtype="<u4")
        return keys.tobytes(), lines.tobytes(), sorted(self.lined)

    def _saved_at(self, key: int) -> int | None:
        """The line saved for `key`, None when none was (or its item was removed since)."""
        n = int(np.searchsorted(self._saved_keys, key))
        if n < len(self._saved_keys) and int(self._saved_keys[n]) == key and key not in self._gone:
            return int(self._saved_lines[n])
        return None

    def of(self, item: Item, tree: Tree) -> int:
        """The first line of an item's headline in `tree`'s version of its file."""
        if item.path in self.lined:
            line = self.line_of.get(item.key)
            if line is not None or (line := self._saved_at(item.key)) is not None:
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
