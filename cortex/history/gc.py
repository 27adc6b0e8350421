"""Retention (which snapshots are kept) and gc (deleting what nothing kept reaches)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

from ..backends import RefLogEntry, Store
from ..hashing import Oid
from ..ingest import forget_collected
from ..objects import Snapshot
from .snapshots import DEFAULT_KEEP, HEAD, SNAPSHOTS, not_negative, snapshot_key, snapshots

__all__ = ["apply_retention", "gc", "reach"]


def apply_retention(store: Store, keep_last: int | None = DEFAULT_KEEP, max_age: timedelta | None = None,
                    now_ns: int | None = None) -> list[Snapshot]:
    """Drop snapshots beyond the last `keep_last` and older than `max_age` (HEAD is always kept), and the
    reflog entries retention no longer covers; return the snapshots dropped.

    HEAD's reflog loses the entries that name a dropped snapshot. Every other ref's reflog (the
    working state's) loses the entries older than the oldest kept snapshot; without snapshots,
    the same rules pick which of its own entries stay. Without any rule nothing is dropped.
    """
    not_negative("the number of snapshots to keep", keep_last)
    retention = _Retention(keep_last, max_age, now_ns or time.time_ns())

    def drop() -> list[Snapshot]:  # one write transaction: a snapshot taken meanwhile is not misplaced
        head_oid = store.refs.get(HEAD)
        listed = snapshots(store)
        dropped = [s for n, s in enumerate(listed) if s.oid != head_oid and not retention.keeps(n, s.time_ns)]
        gone = {s.oid for s in dropped}
        table = store.table(SNAPSHOTS)
        for snap in dropped:
            del table[snapshot_key(snap)]
        kept = [s.time_ns for s in listed if s.oid not in gone]
        for name in store.refs.names():
            if name == HEAD:
                store.refs.expire(name, lambda e: e.old not in gone and e.new not in gone)
            elif retention.rules:
                oldest = min(kept or retention.kept_times(store.refs.reflog(name)), default=None)
                store.refs.expire(name, lambda e: oldest is not None and e.time_ns >= oldest)
        return dropped

    return store.transact(drop)


@dataclass(frozen=True)
class _Retention:
    """The retention rules: the newest `keep_last`, and whatever is younger than `max_age`."""

    keep_last: int | None
    max_age: timedelta | None
    now_ns: int

    @property
    def rules(self) -> bool:
        return self.keep_last is not None or self.max_age is not None

    def keeps(self, position: int, time_ns: int) -> bool:
        """Whether something at `position` (0 = newest) from `time_ns` is kept: by any rule, or when there is none."""
        young = self.max_age is not None and self.now_ns - time_ns <= self.max_age.total_seconds() * 1e9
        return not self.rules or young or (self.keep_last is not None and position < self.keep_last)

    def kept_times(self, entries: list[RefLogEntry]) -> list[int]:
        """The times of the reflog entries (oldest first) these rules keep."""
        return [e.time_ns for n, e in enumerate(reversed(entries)) if self.keeps(n, e.time_ns)]


def gc(store: Store) -> int:
    """Delete every object no kept snapshot, ref or reflog entry reaches; return how many.

    The deleted bytes stay in LMDB's free pages until the engine's `compact()` rewrites the file.

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
    """Every stored object `roots` reach through their content (not snapshot parents), read a level at a time."""
    seen: set[Oid] = set()
    level = list(roots)
    while level:
        found = store.objects.load_many({oid for oid in level if oid not in seen}, missing_ok=True)
        seen.update(obj.oid for obj in found)
        level = [ref for obj in found for ref in obj.references]
    return seen
