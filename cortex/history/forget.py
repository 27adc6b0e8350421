"""Remove files from history: rewrite every kept snapshot without them, so gc can collect their objects.

Snapshots are immutable, so "without them" means new snapshots with the same time, message
and (rewritten) parents, replacing the old ones in the snapshot list, in HEAD and in every
other ref, in one transaction. Reflog entries that still reach the files are dropped: gc keeps
whatever a reflog entry reaches. Then gc deletes the objects, and an engine that can rewrite
its file without free space (`compact()`) does, so the bytes are gone from disk too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..backends import Store
from ..hashing import Oid
from .gc import gc
from .snapshots import SNAPSHOTS, snapshot_key, snapshots, summary
from ..objects import Snapshot, Tree


@dataclass(frozen=True)
class Forgotten:
    """What forgetting did: snapshots rewritten, reflog entries dropped, objects collected."""

    snapshots: int
    reflog_entries: int
    objects: int


def forget(store: Store, gone: Callable[[str], bool], message: str) -> Forgotten:
    """Rewrite history without the paths `gone` selects, then collect what nothing reaches any more."""

    def rewrite() -> tuple[int, int]:  # one write transaction: no snapshot can slip in meanwhile
        renamed: dict[Oid, Snapshot] = {}
        table = store.table(SNAPSHOTS)
        for snap in reversed(snapshots(store)):  # oldest first, so parents are rewritten before children
            tree: Tree = store.objects[snap.root]
            kept = Tree({path: oid for path, oid in tree.entries.items() if not gone(path)})
            parent = renamed[snap.parent].oid if snap.parent in renamed else snap.parent
            if len(kept.entries) == len(tree.entries) and parent == snap.parent:
                continue
            new = Snapshot(store.objects.add(kept), parent, snap.time_ns, snap.message, summary(store, kept))
            store.objects.add(new)
            del table[snapshot_key(snap)]
            table[snapshot_key(new)] = new.oid
            renamed[snap.oid] = new
        for name in store.refs.names():
            target = store.refs.get(name)
            if target in renamed:
                store.refs.set_if_equals(name, renamed[target].oid, target, message)
        tainted = _Tainted(store, gone, set(renamed))
        dropped = sum(store.refs.expire(name, lambda e: not (tainted(e.old) or tainted(e.new)))
                      for name in store.refs.names())
        return len(renamed), dropped

    rewritten, dropped = store.transact(rewrite)
    collected = gc(store)
    compact = getattr(store.engine, "compact", None)
    if compact is not None:  # LMDB's freed pages keep the deleted bytes until the file is rewritten
        compact()
    return Forgotten(rewritten, dropped, collected)


class _Tainted:
    """Whether an oid is a replaced snapshot, or a snapshot or tree that holds a forgotten path."""

    def __init__(self, store: Store, gone: Callable[[str], bool], replaced: set[Oid]):
        self.store, self.gone = store, gone
        self.known: dict[bytes, bool] = {oid: True for oid in replaced}

    def __call__(self, oid: bytes | None) -> bool:
        if oid is None:
            return False
        if oid not in self.known:
            obj = self.store.objects.get(oid)
            if isinstance(obj, Snapshot):
                obj = self.store.objects.get(obj.root)
            self.known[bytes(oid)] = isinstance(obj, Tree) and any(map(self.gone, obj.entries))
        return self.known[oid]
