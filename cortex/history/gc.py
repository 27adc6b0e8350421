"""Retention (which snapshots are kept) and gc (deleting what nothing kept reaches)."""

from __future__ import annotations

import time
from datetime import timedelta

from ..backends import Store
from ..hashing import Oid
from ..ingest import forget_collected
from ..objects import Snapshot
from ..query import references
from .snapshots import DEFAULT_KEEP, HEAD, SNAPSHOTS, not_negative, snapshot_key, snapshots

def apply_retention(store: Store, keep_last: int | None = DEFAULT_KEEP, max_age: timedelta | None = None,
                    now_ns: int | None = None) -> list[Snapshot]:
    """Drop snapshots beyond the last `keep_last` and older than `max_age` (HEAD is always kept); return them."""
    not_negative("the number of snapshots to keep", keep_last)
    now_ns = now_ns or time.time_ns()
    head_oid = store.refs.get(HEAD)

    def kept(position: int, snap: Snapshot) -> bool:
        rules = []
        if keep_last is not None:
            rules.append(position < keep_last)
        if max_age is not None:
            rules.append(now_ns - snap.time_ns <= max_age.total_seconds() * 1e9)
        return snap.oid == head_oid or not rules or any(rules)

    dropped = [snap for position, snap in enumerate(snapshots(store)) if not kept(position, snap)]
    gone = {s.oid for s in dropped}

    def drop() -> None:
        table = store.table(SNAPSHOTS)
        for snap in dropped:
            del table[snapshot_key(snap)]
        for name in store.refs.names():
            store.refs.expire(name, lambda e: e.old not in gone and e.new not in gone)

    store.transact(drop)
    return dropped


def gc(store: Store) -> int:
    """Delete every object no kept snapshot, ref or reflog entry reaches; return how many.

    Marking and sweeping happen in one write transaction, so a concurrent ingest
    waits and readers keep their consistent view (LMDB readers never block).
    """

    def collect() -> int:
        roots = [oid for _, oid in store.table(SNAPSHOTS).items()]
        roots += [store.refs.get(n) for n in store.refs.names()]
        roots += list(store.refs.reflog_oids())
        reachable = reach(store, [Oid(r) for r in roots if r is not None])
        garbage = [oid for oid in store.objects if oid not in reachable]
        forget_collected(store, set(garbage))
        return store.objects.delete_many(garbage)

    return store.transact(collect)


def reach(store: Store, roots: list[Oid]) -> set[Oid]:
    seen: set[Oid] = set()
    stack = list(roots)
    while stack:
        oid = stack.pop()
        if oid in seen or oid not in store.objects:
            continue
        seen.add(oid)
        stack.extend(references(store.objects[oid]))
    return seen
