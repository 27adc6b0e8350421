"""Remove content from history: rewrite every kept state with a tree rewrite, so gc can collect what it dropped.

Snapshots are immutable, so "without it" means new snapshots with the same time, message
and (rewritten) parents, replacing the old ones in the snapshot list, in HEAD and in every
other ref, in one transaction. Reflog entries are rewritten through the same map (old ->
new), so HEAD@{N} names the same moment as before. Then gc deletes the objects, a tombstone
records what was forgotten (never the content), and the engine's file is compacted, so the
bytes are gone from disk too.
"""

from __future__ import annotations

import getpass
import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..backends import Store
from ..codec import decode, encode
from ..hashing import Oid
from ..objects import Snapshot, Tree
from .copies import NEXT, REF_PREFIX, working_copies
from .erasures import seal
from .gc import gc
from .snapshots import SNAPSHOTS, snapshot_key, snapshots, summary

__all__ = ["PURGES", "Forgotten", "Replaced", "Tombstone", "TreeRewrite", "forget", "newest_purge", "purges",
           "rewrite_documents"]

PURGES = "history.purges"

TreeRewrite = Callable[[Tree], Tree]
Replaced = dict[tuple[str, Oid], Oid | None]  # (path, document) -> the document replacing it, None when dropped


@dataclass(frozen=True)
class Forgotten:
    """What forgetting did: snapshots rewritten, reflog entries rewritten, objects collected."""

    snapshots: int
    reflog_entries: int
    objects: int


@dataclass(frozen=True)
class Tombstone:
    """A purge of history: what (never the content), which files, when, by whom, and how much it rewrote."""

    time_ns: int
    by: str
    what: str
    paths: tuple[str, ...]
    snapshots: int
    objects: int


def forget(store: Store, rewrite: TreeRewrite, what: str,
           cleanup: Callable[[Replaced], object] | None = None) -> Forgotten | None:
    """Rewrite every kept state with `rewrite`, collect what nothing reaches any more, record a tombstone
    naming `what`, and compact the file; None (and nothing written) when `rewrite` changes nothing.

    `cleanup` sees the replaced documents while they are still stored, in the same transaction
    (derived data keyed by their content goes with them). Hold the store exclusively meanwhile.
    """

    def erase() -> Forgotten | None:
        bases = {copy.id: (copy.key, store.refs.get(REF_PREFIX + copy.id), store.refs.get(REF_PREFIX + copy.id + NEXT))
                 for copy in working_copies(store)}
        history = _History(store, rewrite)
        snaps, entries = history.rewrite()
        if not history.replaced:
            return None
        seal(store, bases, history.mapped)  # for the copies whose folders may still hold the text
        if cleanup is not None:
            cleanup(history.replaced)
        objects = gc(store)
        paths = tuple(sorted({path for path, _ in history.replaced}))
        _record(store, Tombstone(time.time_ns(), _who(), what, paths, snaps, objects))
        return Forgotten(snaps, entries, objects)

    forgotten = store.transact(erase)
    if forgotten is not None:
        store.engine.compact()  # LMDB's freed pages keep the deleted bytes until the file is rewritten
    return forgotten


def rewrite_documents(fn: Callable[[str, Oid], Oid | None]) -> TreeRewrite:
    """A tree rewrite that replaces each file's document by `fn(path, document)` (None drops the file),
    calling it once per path and document however many trees share them."""
    done: dict[tuple[str, Oid], Oid | None] = {}

    def rewrite(tree: Tree) -> Tree:
        entries = {}
        for path, oid in tree.entries.items():
            if (path, oid) not in done:
                done[(path, oid)] = fn(path, oid)
            if done[(path, oid)] is not None:
                entries[path] = done[(path, oid)]
        return Tree(entries)

    return rewrite


def newest_purge(store: Store) -> bytes:
    """The key of the newest purge of history (b"" when there was none): what derived data kept outside the store
    records, so that a copy made before a purge, which may hold its text, is never trusted after it."""
    keys = list(store.table(PURGES).keys_in_order())  # one per purge: few
    return keys[-1] if keys else b""


def purges(store: Store) -> list[Tombstone]:
    """Every purge of history recorded, newest first."""
    return [_tombstone(value) for _, value in reversed(store.table(PURGES).items())]


class _History:
    """Every kept state rewritten once: trees by oid, snapshots oldest first, refs and their reflogs."""

    def __init__(self, store: Store, rewrite: TreeRewrite):
        self.store, self.fn = store, rewrite
        self.trees: dict[Oid, Oid] = {}  # every tree visited: old -> new (itself when unchanged)
        self.snaps: dict[Oid, Oid] = {}  # every snapshot visited, likewise
        self.replaced: Replaced = {}

    def rewrite(self) -> tuple[int, int]:
        """Rewrite snapshots, refs and reflogs; return how many snapshots and reflog entries changed."""
        table = self.store.table(SNAPSHOTS)
        for snap in reversed(snapshots(self.store)):  # oldest first, so parents are rewritten before children
            new = self.snapshot(snap)
            if new != snap.oid:
                del table[snapshot_key(snap)]
                table[snapshot_key(self.store.objects[new])] = new
        entries = sum(self.relog(name) for name in self.store.refs.names())
        return sum(old != new for old, new in self.snaps.items()), entries

    def tree(self, oid: Oid) -> Oid:
        """The rewritten tree of `oid` (itself when the rewrite leaves it alone), noting the documents replaced."""
        if oid not in self.trees:
            old: Tree = self.store.objects[oid]
            new = self.fn(old)
            for path, doc in old.entries.items():
                if new.entries.get(path) != doc:
                    self.replaced[(path, doc)] = new.entries.get(path)
            self.trees[oid] = self.store.objects.add(new) if new.oid != oid else oid
        return self.trees[oid]

    def snapshot(self, snap: Snapshot) -> Oid:
        """`snap` with its tree rewritten and its parent by the parent's rewrite (itself if neither changed)."""
        if snap.oid not in self.snaps:
            root, parent = self.tree(snap.root), self.mapped(snap.parent)
            if (root, parent) == (snap.root, snap.parent):
                self.snaps[snap.oid] = snap.oid
            else:
                new = Snapshot(root, parent, snap.time_ns, snap.message, summary(self.store, self.store.objects[root]))
                self.snaps[snap.oid] = self.store.objects.add(new)
        return self.snaps[snap.oid]

    def mapped(self, oid: Oid | None) -> Oid | None:
        """What a ref or reflog entry naming `oid` names after the rewrite."""
        obj = None if oid is None else self.store.objects.get(oid)
        if isinstance(obj, Tree):
            return self.tree(oid)
        if isinstance(obj, Snapshot):  # listed ones are visited oldest first; any other when named
            return self.snapshot(obj)
        return oid  # nothing, or an object already collected: it holds nothing to forget

    def relog(self, name: str) -> int:
        """Move ref `name` to its rewrite and rewrite its reflog in place; return how many entries changed.

        The move is left out of the reflog: the ref names the same moment as before, rewritten,
        and the tombstone records the purge.
        """
        refs = self.store.refs
        target = refs.get(name)
        if (moved := self.mapped(target)) != target:
            refs.set_if_equals(name, moved, target, logged=False)
        return refs.rewrite_log(name, lambda e: replace(e, old=self.mapped(e.old), new=self.mapped(e.new)))


def _record(store: Store, tombstone: Tombstone) -> None:
    key = struct.pack(">Q", tombstone.time_ns) + os.urandom(4)  # two purges in one nanosecond both stay
    store.table(PURGES)[key] = encode([tombstone.time_ns, tombstone.by, tombstone.what, list(tombstone.paths),
                                       tombstone.snapshots, tombstone.objects])


def _tombstone(value: bytes) -> Tombstone:
    time_ns, by, what, paths, snaps, objects = decode(value)
    return Tombstone(time_ns, by, what, tuple(paths), snaps, objects)


def _who() -> str:
    """user@host of this process, as a tombstone names who purged."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (some containers)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"
