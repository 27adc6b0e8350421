"""Working copies: folders that hold a store's working state and sync with it by a three-way merge.

`checkout` writes the working state into a folder and records it as a copy; `sync` merges the
folder's edits and the store's changes since they last agreed (the copy's base), per file and
per headline (`merge`), commits the result by compare-and-swap, then writes what the store added
into the folder. Nothing is overwritten unseen: each file is replaced only while it still holds
the bytes the merge read, so an editor's save during a sync is kept for the next one.

The base is never older than what the store already holds of the folder: a sync commits, with its
merge, the folder's files as it read them as the copy's sure base (`copies/<id>`), and the merge's
result as the base its files are about to be brought up to (`copies/<id>/next`). The folder names
its copy in `.cortex/copy`, and in `.cortex/base` the base its files were last brought up to, written
once they all are (durably, as the sync returns): the next sync trusts it only when it names the
`next` one. Otherwise (a sync stopped before it placed every file, a save landing on a placed file,
a base record that could not be written) it merges against the sure base, taking `next`'s version
of each file that holds it. So what the store undoes after a sync (a forgotten item) is never sent
back as the folder's own edit. A sync killed at any point leaves the store at a committed state and
every file whole; the next sync completes it, as merging what both sides already share changes nothing.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from ..backends import Store
from ..codec import decode, encode
from ..errors import UserError
from ..files import ChangedMeanwhile, Staged, folder_lock, remove_under, write_atomically
from ..hashing import OID_SIZE, Oid, hash_bytes
from ..ingest import WORKING, FolderRead, ReadCollected, note_written, read_folder, working_tree
from ..objects import EMPTY_TREE, Tree
from ..retry import retrying
from ..words import counted
from .checkout import holds, holds_bytes
from .merge import Conflict, conflicts_in, merge_trees

RECORD = Path(".cortex") / "copy"
BASE = Path(".cortex") / "base"
REF_PREFIX = "copies/"
NEXT = "/next"  # with a copy's ref: the base its last sync made, trusted once the folder's record names it
COPIES = "history.copies"  # copy id -> [folder, host, time made]
READS = 3  # reads of the folder a sync makes while a gc keeps collecting what the last one reused
_settling: dict[tuple[int, Path], Future] = {}  # (process, folder) -> its last sync there, settling (`_settle`)
SYNC_WAIT = 300.0  # seconds a sync waits for another sync of its folder (a first checkout of a big store is long)


class NotACopy(UserError):
    """A folder that is not a working copy of this store."""


class CopyBusy(UserError):
    """Another sync of the same folder has held it for too long."""


@dataclass
class SyncReport:
    """What one sync did: files taken from each side, files written into the folder, conflicts."""

    folder: Path
    sent: list[str] = field(default_factory=list)  # files whose edits went into the store
    received: list[str] = field(default_factory=list)  # files written or removed in the folder
    merged: list[str] = field(default_factory=list)  # files both sides changed
    kept: list[str] = field(default_factory=list)  # files saved during the sync: merged next time
    conflicts: list[Conflict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files that could not be read
    tree: Oid | None = None  # the working state this sync left
    seconds: float = 0.0

    def __str__(self) -> str:
        lines = [f"{self.folder}: {len(self.sent)} sent, {len(self.received)} received, "
                 f"{len(self.merged)} merged, {counted(len(self.conflicts), 'conflict')}"]
        lines += [f"  conflict {c}" for c in self.conflicts]
        lines += [f"  {rel}: changed during the sync; it is merged by the next one" for rel in self.kept]
        lines += [f"  skipped {problem}" for problem in self.problems]
        return "\n".join(lines)


def is_copy(folder: str | os.PathLike) -> bool:
    """Whether `folder` is recorded as a working copy (of some store)."""
    return (Path(folder) / RECORD).exists()


def adopt(store: Store, folder: str | os.PathLike) -> None:
    """Record a folder whose files the working state holds now (just ingested) as a working copy of it."""
    _record(store, Path(os.path.abspath(folder)), store.refs.get(WORKING) or store.objects.add(EMPTY_TREE),
            f"adopt {folder}")


def check_out(store: Store, folder: str | os.PathLike) -> SyncReport:
    """Write the store's working state into a new (or empty) folder and make it a working copy."""
    folder = Path(os.path.abspath(folder))
    if (folder / RECORD).exists():
        raise UserError(f"{folder}: already a working copy; run `cortex sync {folder}`")
    if folder.exists() and any(folder.iterdir()):
        raise UserError(f"{folder}: not empty; check out into a new or empty folder")
    real, here = Path(os.path.realpath(folder)), socket.gethostname()
    for copy in working_copies(store):
        other = Path(os.path.realpath(copy.folder))
        if copy.host == here and (real.is_relative_to(other) or other.is_relative_to(real)):
            raise UserError(f"{folder}: inside the working copy {copy.folder}, whose syncs would take the new "
                            "copy's files for its own; check out into a folder beside it")
    folder.mkdir(parents=True, exist_ok=True)
    # Recorded first, with an empty base: a checkout killed halfway is completed by `sync`.
    _record(store, folder, store.objects.add(EMPTY_TREE), f"checkout into {folder}")
    return sync(store, folder)


@dataclass(frozen=True)
class Copy:
    """A working copy the store knows: its id, its folder and the machine it is on, when it was made."""

    id: str
    folder: str
    host: str
    time_ns: int


def working_copies(store: Store) -> list[Copy]:
    """The working copies of this store, oldest first."""
    known = [Copy(key.decode(), *decode(value)) for key, value in store.table(COPIES).items()]
    return sorted(known, key=lambda c: c.time_ns)


def forget_copy(store: Store, copy_id: str) -> Copy:
    """Forget a working copy (its folder was deleted, say): it syncs no more, and gc may collect its base."""
    found = [c for c in working_copies(store) if c.id.startswith(copy_id)] if copy_id else []
    if len(found) != 1:
        raise UserError(f"{copy_id!r} names {'no' if not found else 'more than one'} working copy of this store; "
                        "`cortex copies` lists them")

    def drop() -> None:
        for ref in (_ref(found[0].id), _ref(found[0].id) + NEXT):
            if (base := store.refs.get(ref)) is not None:
                store.refs.set_if_equals(ref, None, base, "forgot the working copy")
        del store.table(COPIES)[found[0].id.encode()]

    store.transact(drop)
    return found[0]


def _record(store: Store, folder: Path, base: Oid, message: str) -> None:
    """Make `folder` a working copy whose files agree with the store at tree `base`."""
    copy_id = uuid.uuid4().hex

    def register() -> None:
        store.refs.set_if_equals(_ref(copy_id), base, None, message)
        store.table(COPIES)[copy_id.encode()] = encode([str(folder), socket.gethostname(), time.time_ns()])

    store.transact(register)
    write_atomically(folder / RECORD, json.dumps({"copy": copy_id, "host": socket.gethostname()}).encode())


def _write_base(folder: Path, base: Oid) -> None:
    """Name in the folder the base its files were just brought up to: over the last one, in place (the
    same length, so no block is allocated), without waiting for the disk. A sync that finds it torn,
    empty or stale (a crash, a sync meanwhile) merges against the sure base instead."""
    text = base.hex().encode()
    try:
        fd = os.open(folder / BASE, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.pwrite(fd, text, 0)
            if os.fstat(fd).st_size != len(text):
                os.ftruncate(fd, len(text))
        finally:
            os.close(fd)
    except OSError:  # the next sync merges more, changing nothing twice
        pass


def sync(store: Store, folder: str | os.PathLike, label: str | None = None) -> SyncReport:
    """Merge a working copy's edits into the store and the store's changes into it (see the module).

    Syncs of one folder take turns (on its machine): one that read the folder before another brought it
    up to date would take that other's writes for edits of its own."""
    folder = Path(os.path.abspath(folder))

    def busy() -> CopyBusy:
        return CopyBusy(f"{folder}: another sync of this folder has run for over {SYNC_WAIT:.0f} seconds")

    with folder_lock(folder, SYNC_WAIT, busy):
        if (settling := _settling.pop((os.getpid(), folder), None)) is not None:
            settling.result()  # the last sync here names its base first, so that this one merges no more
        for _ in range(READS):
            try:
                return _sync(store, folder, label)
            except ReadCollected:  # nothing was committed: the folder is read again
                continue
        raise UserError(f"{folder}: a gc kept collecting what this sync read ({READS} times); sync again")


def _sync(store: Store, folder: Path, label: str | None) -> SyncReport:
    started = time.perf_counter()
    copy_id, recorded = _copy_record(store, folder)
    sure, made = _ref(copy_id), _ref(copy_id) + NEXT
    report = SyncReport(folder)
    read = read_folder(store, folder)
    report.problems = [str(p) for p in read.report.problems]
    ours = read.tree
    unreadable = {p.path for p in read.report.problems}
    labels = (label or folder.name or str(folder), "store")

    def merge_and_commit():
        sure_oid, made_oid, theirs_oid = store.refs.get(sure), store.refs.get(made), store.refs.get(WORKING)
        if sure_oid is None:
            raise NotACopy(f"{folder}: this working copy was forgotten during the sync; nothing was changed")
        base = _base(store, sure_oid, made_oid, recorded, ours, unreadable)
        theirs = EMPTY_TREE if theirs_oid is None else store.objects[theirs_oid]
        # A file that cannot be read now is as the base has it: its edits wait for a readable file.
        mine = Tree({**ours.entries, **{p: base.entries[p] for p in unreadable if p in base.entries}})
        merge = merge_trees(base, mine, theirs, read.get, labels=labels)
        new = {obj.oid: obj for obj in merge.objects}
        writes = {rel: None if now is None else read.render(rel, now, lambda oid: new.get(oid) or read.get(oid))
                  for rel in sorted(mine.entries.keys() | merge.tree.entries.keys())
                  if (now := merge.tree.entries.get(rel)) != mine.entries.get(rel) and rel not in unreadable}

        def commit() -> None:
            read.write(merge.tree, mine)
            store.objects.add_many(merge.objects)
            if merge.tree.oid != theirs.oid:
                store.refs.set_if_equals(WORKING, merge.tree.oid, theirs_oid, f"sync {folder}")
            # The store holds what the folder held (`mine`) from now on: until the files are brought up to date
            # that is the base to merge them against, so that nothing the store undoes later comes back.
            if mine.oid != sure_oid:
                store.objects.add(mine)
                store.refs.set_if_equals(sure, mine.oid, sure_oid, logged=False)
            if merge.tree.oid != made_oid:
                store.refs.set_if_equals(made, merge.tree.oid, made_oid, logged=False)
            # Last, for workers to take up while the commit waits for the disk (a worker started sooner would
            # take the interpreter from this thread at every write, as the store lends it): the new files'
            # bytes written beside them and synced to disk (renamed over the old ones after), and their
            # layouts and hashes, for the next read of them to re-parse only what it changes, or nothing.
            if not jobs:  # (the body runs again when the store must grow)
                jobs.append(workers.submit(_stage, folder, writes))
                jobs.append(workers.submit(lambda: {rel: (read.layout_of(rel, data), hash_bytes(data))
                                                    for rel, data in writes.items() if data is not None}))

        workers, jobs = _workers(os.getpid()), []
        try:
            store.transact(commit)
            staging, laid_out = jobs
            for rel, (layout, digest) in laid_out.result().items():
                read.relayout(rel, writes[rel], layout)
                note_written(store, {digest: merge.tree.entries[rel]})
        except BaseException:
            if jobs:
                _drop(jobs[0])
            raise
        return base, mine, merge, writes, staging

    base, mine, merge, writes, staging = retrying(merge_and_commit)
    report.tree = merge.tree.oid
    for obj in merge.objects:  # committed: writing the merged files reads them, decoding nothing
        store.objects.remember(obj)
    read.batch.committed()
    report.sent = sorted(p for p in mine.entries.keys() | base.entries.keys()
                         if mine.entries.get(p) != base.entries.get(p) and p not in unreadable)
    report.merged = sorted(merge.files)
    report.conflicts = list(merge.conflicts)
    staged, placed, agreed = staging.result(), [], None
    try:
        agreed = _bring_up_to_date(folder, mine, merge.tree, writes, staged, placed, read, report, unreadable)
    finally:
        for file in staged.values():  # not put in place: an error stopped the sync
            file.drop()
        up_to_date = agreed is not None and agreed.oid == merge.tree.oid
        # As the sync returns: the renames made durable, then (the files all up to date) the base named.
        named = merge.tree.oid if up_to_date else None
        _settling[os.getpid(), folder] = _workers(os.getpid()).submit(_settle, folder, placed, named, read)
    if not up_to_date:  # a file could not be brought up to date: the store keeps the base it has now
        def settle() -> None:  # with the documents of the files kept as read, which the merge replaced
            store.objects.add_many([agreed, *(read.get(oid) for oid in set(agreed.entries.values())
                                              if oid not in store.objects)])
            store.refs.set_if_equals(sure, agreed.oid, store.refs.get(sure), logged=False)
            store.refs.set_if_equals(made, None, store.refs.get(made), logged=False)

        store.transact(settle)
    report.seconds = time.perf_counter() - started
    return report


def _base(store: Store, sure: Oid, made: Oid | None, recorded: bytes | None, ours: Tree,
          unreadable: set[str]) -> Tree:
    """The base to merge a copy's files against: the last sync's result where the folder names it (its
    files were all brought up to it), else the sure base, taking the last sync's result for each file
    that holds it (one the sync put in place before it was stopped)."""
    if made is not None and recorded == made:
        return store.objects[made]
    base: Tree = store.objects[sure]
    if made is None:
        return base
    result: Tree = store.objects[made]
    entries = dict(base.entries)
    for path in base.entries.keys() | result.entries.keys():
        if path not in unreadable and ours.entries.get(path) == (now := result.entries.get(path)):
            if now is None:
                entries.pop(path, None)
            else:
                entries[path] = now
    return Tree(dict(sorted(entries.items())))


def conflicts(store: Store, folder: str | os.PathLike | None = None) -> list[Conflict]:
    """The conflicts left unresolved: in a working copy's files, or (no folder) in the store's working state."""
    if folder is None:
        tree = working_tree(store)
        found = []
        for path, oid in tree.entries.items():
            found += [_at(c, path) for c in conflicts_in(store.objects[oid], store.objects.__getitem__)]
        return found
    folder = Path(os.path.abspath(folder))
    _copy_record(store, folder)
    read = read_folder(store, folder)
    return [_at(c, path) for path, oid in read.tree.entries.items()
            for c in conflicts_in(read.get(oid), read.get)]


@cache
def _workers(pid: int) -> ThreadPoolExecutor:
    """The threads that stage, lay out and settle syncs' files in this process (a forked child has none of
    its parent's threads)."""
    return ThreadPoolExecutor(2, thread_name_prefix="cortex-sync")


def _stage(folder: Path, writes: dict[str, bytes | None]) -> dict[str, Staged]:
    """The new bytes of the files to write, staged beside them (all or, on an error, none)."""
    staged: dict[str, Staged] = {}
    try:
        for rel, data in writes.items():
            if data is not None:
                staged[rel] = Staged(folder, rel, data)
    except BaseException:
        for file in staged.values():
            file.drop()
        raise
    return staged


def _settle(folder: Path, placed: list[Staged], base: Oid | None, read: FolderRead) -> None:
    """Make the renames of the files `placed` durable (freeing what they replaced), then name `base`, if
    any, in the folder: never before, as a base newer than a file would read its old bytes as edits, and
    only while no file was replaced since (an editor's save landing during the sync was made from what
    the file held before: against the new base it would read as undoing what the sync brought; against
    the sure base, as what it is). The sync's `read` is let go of here, after the sync returned: a large
    file's layouts, old and new, take a while to free."""
    durable = True
    for file in placed:
        try:
            file.free()
        except OSError:  # the next sync merges against the sure base, which is never newer than the files
            durable = False
    if base is not None and durable and all(file.in_place() for file in placed):
        _write_base(folder, base)


def _drop(staging: Future) -> None:
    """Remove what `_stage` staged, once it is done (nothing if it failed)."""
    if staging.exception() is None:
        for file in staging.result().values():
            file.drop()


def _bring_up_to_date(folder: Path, mine: Tree, merged: Tree, writes: dict[str, bytes | None],
                      staged: dict[str, Staged], placed: list[Staged], read: FolderRead, report: SyncReport,
                      unreadable: set[str]) -> Tree:
    """Put into the folder what the merge changed there, moving each file's new bytes from `staged` to
    `placed` (the old ones to be freed); return the copy's new base, file by file."""
    agreed = dict(merged.entries)
    for rel in sorted(mine.entries.keys() | merged.entries.keys()):
        was = mine.entries.get(rel)
        if rel in unreadable and was != merged.entries.get(rel):
            _keep_base(agreed, rel, was)  # left alone: it syncs once it can be read
        if rel not in writes:
            continue
        data = read.bytes_read(rel)
        unchanged = holds_bytes(data) if data is not None else holds(
            {None if was is None else read.digest(rel) or hash_bytes(read.render(rel, was))})
        try:
            if rel in staged:
                file = staged.pop(rel)  # put in place, or dropped if not
                file.put(unchanged, free_later=True)
                placed.append(file)
            else:
                remove_under(folder, rel, unchanged)
            report.received.append(rel)
        except ChangedMeanwhile:
            # Saved during the sync: the store has what was read; what was saved since merges next time.
            report.kept.append(rel)
            _keep_base(agreed, rel, was)
    return Tree(dict(sorted(agreed.items())))


def _keep_base(agreed: dict[str, Oid], rel: str, was: Oid | None) -> None:
    """Make the folder's version (None: no file) the base of `rel`: the store holds what it changed."""
    if was is None:
        agreed.pop(rel, None)
    else:
        agreed[rel] = was


def _copy_record(store: Store, folder: Path) -> tuple[str, bytes | None]:
    """The id of the working copy in `folder`, known to `store` (NotACopy otherwise), and the base the
    folder names, if any: to be trusted only if it is the one the copy's last sync made."""
    try:
        copy_id = json.loads((folder / RECORD).read_text())["copy"]
    except FileNotFoundError:
        raise NotACopy(f"{folder}: not a working copy; make one with `cortex checkout {folder}`") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NotACopy(f"{folder / RECORD}: unreadable ({exc}); check the folder out again") from None
    if not isinstance(copy_id, str) or store.refs.get(_ref(copy_id)) is None:
        raise NotACopy(f"{folder}: a working copy of another store (or one this store has forgotten)")
    try:
        base = (folder / BASE).read_bytes()
        return copy_id, bytes.fromhex(base.decode("ascii")) if len(base) == 2 * OID_SIZE else None
    except (OSError, ValueError):
        return copy_id, None


def _ref(copy_id: str) -> str:
    return REF_PREFIX + copy_id


def _at(conflict: Conflict, path: str) -> Conflict:
    return replace(conflict, path=path)
