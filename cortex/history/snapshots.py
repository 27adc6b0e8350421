"""Snapshots and how they are named: HEAD, HEAD~N, HEAD@{N}, oids, prefixes and list positions.

A snapshot is one small object and a ref move. Every snapshot ever taken (until retention
drops it) is listed in the `snapshots` table by time, so a rollback never hides the
snapshots it moved away from.
"""

from __future__ import annotations

import re
import struct
import time

from ..backends import Store
from ..codec import decode, encode
from ..errors import NotFound, UserError
from ..hashing import Oid
from ..ingest import WORKING, working_tree
from ..objects import EMPTY_TREE, Snapshot, Tree
from ..prefixes import unique
from ..retry import retrying
from ..words import counted, quoted

__all__ = ["DEFAULT_KEEP", "HEAD", "SNAPSHOTS", "SUMMARIES", "head", "not_negative", "resolve", "snapshot",
           "snapshot_key", "snapshots", "summary"]

HEAD = "HEAD"
SNAPSHOTS = "history.snapshots"
SUMMARIES = "history.summaries"
DEFAULT_KEEP = 20


def head(store: Store) -> Snapshot | None:
    """The snapshot HEAD points at, if any."""
    oid = store.refs.get(HEAD)
    return None if oid is None else store.objects[oid]


def summary(store: Store, tree: Tree, base: Tree | None = None) -> dict[str, int]:
    """Files and headlines of a tree, cached per tree and per document oid (content never changes): counted from
    `base`'s (HEAD's tree) by the documents the two do not share, when it is cached, else by every document."""
    table = store.table(SUMMARIES)
    cached = table.get(tree.oid)
    if cached is not None:
        return decode(cached)
    new: dict[bytes, bytes] = {}

    def count(doc_oid: Oid) -> int:
        cached = table.get(doc_oid)
        if cached is not None:
            return decode(cached)
        found = _count_headlines(store, store.objects[doc_oid])
        new[doc_oid] = encode(found)
        return found

    known = None if base is None else table.get(base.oid)
    if known is not None:  # only the folders and documents that differ are opened
        counts = decode(known)
        files, headlines = counts["files"], counts["headlines"]
        for path in tree.differing(base):
            was, now = base.entries.get(path), tree.entries.get(path)
            files += (now is not None) - (was is not None)
            headlines += (0 if now is None else count(now)) - (0 if was is None else count(was))
    else:
        files, headlines = len(tree.entries), sum(count(oid) for oid in tree.entries.values())
    counts = {"files": files, "headlines": headlines}
    new[tree.oid] = encode(counts)
    table.update(new)  # one commit, however many documents are new
    return counts


def _count_headlines(store: Store, node) -> int:
    count, stack = 0, list(node.children)  # a stack, not recursion: files may nest thousands deep
    while stack:
        count += 1
        stack.extend(store.objects[stack.pop()].children)
    return count


def snapshot(store: Store, message: str = "", now_ns: int | None = None) -> Snapshot:
    """Record the working state as a snapshot and move HEAD to it (compare-and-swap)."""
    last = head(store)  # counted before the write lock is taken (inside, a cached read), from HEAD's counts
    summary(store, working_tree(store), None if last is None else store.objects[last.root])

    def record() -> Snapshot:
        # HEAD and the working state are read inside the write transaction: where writers take turns
        # (LMDB) the compare-and-swap below cannot lose; where they do not (PostgreSQL), the loser
        # tries again from what won.
        root = store.refs.get(WORKING) or store.objects.add(EMPTY_TREE)
        parent = store.refs.get(HEAD)
        snap = Snapshot(root=root, parent=parent, time_ns=now_ns or time.time_ns(), message=message,
                        counts=summary(store, store.objects[root]))
        store.objects.add(snap)
        store.table(SNAPSHOTS)[snapshot_key(snap)] = snap.oid
        store.refs.set_if_equals(HEAD, snap.oid, parent, f"snapshot: {message}")
        return snap

    return retrying(lambda: store.transact(record))


def snapshot_key(snap: Snapshot) -> bytes:
    return struct.pack(">Q", snap.time_ns) + snap.oid


def snapshots(store: Store) -> list[Snapshot]:
    """Every kept snapshot, most recent first."""
    return [store.objects[oid] for _, oid in reversed(store.table(SNAPSHOTS).items())]


def resolve(store: Store, ref: str | int) -> Snapshot:
    """A snapshot by full oid, unique hex prefix, HEAD, HEAD~N, HEAD@{N} or list position (0 = newest)."""
    text = str(ref).strip()
    if re.fullmatch(r"\d{1,6}", text):
        listed = snapshots(store)
        if int(text) >= len(listed):
            raise NotFound(f"no snapshot at position {text}: there are {len(listed)}")
        return listed[int(text)]
    match = re.fullmatch(r"HEAD(?:~(\d{1,18})|@\{(\d{1,18})\})?", text)
    if match:
        return _from_head(store, text, int(match[1] or 0), int(match[2] or 0))
    if re.fullmatch(r"[0-9a-fA-F]{4,64}", text):
        return _from_prefix(store, text.lower())
    raise UserError(f"{quoted(text)} is not a snapshot: use an oid or prefix, HEAD, HEAD~N, HEAD@{{N}} or a position")


def _from_head(store: Store, text: str, back: int, moves: int) -> Snapshot:
    if moves:
        log = store.refs.reflog(HEAD)
        if moves > len(log):
            raise NotFound(f"{text}: HEAD has moved only {counted(len(log), 'time')}")
        oid = log[-moves].old
    else:
        oid = store.refs.get(HEAD)
    if oid is None:
        raise NotFound(f"{text}: no snapshot yet (take one with `snapshot`)")
    snap = store.objects[oid]
    for step in range(back):
        if snap.parent is None:
            raise NotFound(f"{text}: HEAD has only {counted(step, 'snapshot')} before it")
        if snap.parent not in store.objects:
            raise NotFound(f"{text}: HEAD has only {counted(step, 'snapshot')} kept before it (`gc` collected the "
                           "older ones)")
        snap = store.objects[snap.parent]
    return snap


def _from_prefix(store: Store, prefix: str) -> Snapshot:
    kept = [oid.hex() for _, oid in store.table(SNAPSHOTS).items()]
    if len(prefix) == 64 and prefix not in kept and bytes.fromhex(prefix) in store.objects:
        oid = prefix  # a whole oid that names an object of another kind, said below
    else:
        oid = unique(prefix, kept, "snapshot")
    obj = store.objects[bytes.fromhex(oid)]
    if not isinstance(obj, Snapshot):
        raise UserError(f"{prefix} is a {obj.kind}, not a snapshot")
    return obj


def not_negative(what: str, count: int | None) -> None:
    if count is not None and count < 0:
        raise UserError(f"{what} must be 0 or more, got {count}")
