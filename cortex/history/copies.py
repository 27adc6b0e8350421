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
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from ..backends import Store
from ..codec import decode, encode
from ..errors import UserError
from ..files import ChangedMeanwhile, Staged, remove_under, write_atomically
from ..location import RECORD, RECORD_BYTES, CopyRecord, NotACopy, read_record
from ..locks import folder_lock
from ..hashing import OID_SIZE, Oid, hash_bytes
from ..ingest import INGESTED_WHOLE, SYNCED, WORKING, FolderRead, IngestReport, Progress, ReadCollected, note_written, \
    read_folder, scope_test, working_tree
from ..objects import EMPTY_TREE, Document, Tree
from ..prefixes import unique
from ..retry import retrying
from ..reads import ORG_FILE, TooLarge, read_bounded
from ..words import brief, counted
from . import erasures
from .checkout import holds, holds_bytes
from .conflicts import Conflict, conflicts_in
from .diff import differing
from .merge import merge_documents, merge_trees
from .siblings import Getter

__all__ = ["BASE", "COPIES", "NEXT", "READS", "RECORD", "RECORD_BYTES", "REF_PREFIX", "SYNC_WAIT", "Copy", "CopyBusy",
           "NotACopy", "SyncReport", "check_out", "conflicts", "forget_copy", "is_copy", "settled", "sync",
           "working_copies"]

BASE = Path(".cortex") / "base"
REF_PREFIX = "copies/"
NEXT = "/next"  # with a copy's ref: the base its last sync made, trusted once the folder's record names it
COPIES = "history.copies"  # copy id -> [folder, host, time made]
READS = 3  # reads of the folder a sync makes while a gc keeps collecting what the last one reused
_settling: dict[tuple[int, Path], Future] = {}  # (process, folder) -> its last sync there, settling (`_settle`)
SYNC_WAIT = 300.0  # seconds a sync waits for another sync of its folder (a first checkout of a big store is long)


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
    deferred: list[str] = field(default_factory=list)  # files spared (open in an editor): received by a later sync
    conflicts: list[Conflict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files that could not be read
    marked: list[str] = field(default_factory=list)  # files sent or received that hold the marker asked for
    read: IngestReport | None = field(default=None, repr=False)  # how the folder was read
    tree: Oid | None = None  # the working state this sync left
    new_objects: int = 0
    seconds: float = 0.0

    def followed_by(self, later: "SyncReport") -> "SyncReport":
        """What this sync and a `later` one of the same folder did together."""
        def both(name: str) -> list:
            return sorted({*getattr(self, name), *getattr(later, name)})

        return replace(later, sent=both("sent"), received=both("received"), merged=both("merged"),
                       kept=both("kept"), deferred=both("deferred"), marked=both("marked"), conflicts=self.conflicts + later.conflicts,
                       new_objects=self.new_objects + later.new_objects, seconds=self.seconds + later.seconds)

    def __str__(self) -> str:
        lines = [f"{self.folder}: {len(self.sent)} sent, {len(self.received)} received, "
                 f"{len(self.merged)} merged, {counted(len(self.conflicts), 'conflict')}"]
        lines += [f"  conflict {c}" for c in self.conflicts]
        lines += [f"  {rel}: changed during the sync; it is merged by the next one" for rel in self.kept]
        lines += [f"  {rel}: open in an editor, not written; a later sync brings it up to date" for rel in self.deferred]
        lines += [f"  skipped {problem}" for problem in self.problems]
        return "\n".join(lines)


def is_copy(folder: str | os.PathLike) -> bool:
    """Whether `folder` is recorded as a working copy (of some store)."""
    return (Path(folder) / RECORD).exists()


def _first_base(store: Store) -> Oid | None:
    """The base of the Org folder the store tracks when it is made a working copy: the working state its last
    whole ingest made, if that came after every sync of it (a store from before the folder was a copy),
    else none (the empty tree: what each side holds is merged as added on both, a difference kept as a
    conflict). Its files are never copied over the working state: what others committed since is kept."""
    for entry in reversed(store.refs.reflog(WORKING)):
        if entry.message == INGESTED_WHOLE:
            return entry.new if entry.new is not None and entry.new in store.objects else None
        if entry.message.endswith(SYNCED) or entry.message.startswith("sync "):
            return None
    return None


def check_out(store: Store, folder: str | os.PathLike) -> SyncReport:
    """Write the store's working state into a new (or empty) folder and make it a working copy; a folder that is
    one already is synced (checking out again brings it up to date)."""
    folder = Path(os.path.abspath(folder))
    if (folder / RECORD).exists():
        if _record_of(store, folder) is None:
            raise NotACopy(f"{folder}: a working copy this store has forgotten; remove {folder / RECORD.parent} "
                           "to check it out again")
        return sync(store, folder)
    if folder.exists() and any(folder.iterdir()):
        raise UserError(f"{folder}: not empty; check out into a new or empty folder")
    real, here = Path(os.path.realpath(folder)), socket.gethostname()
    for copy in working_copies(store):
        other = Path(os.path.realpath(copy.folder))
        if copy.host == here and (real.is_relative_to(other) or other.is_relative_to(real)):
            raise UserError(f"{folder}: inside the working copy {copy.folder}, whose syncs would take the new "
                            "copy's files for its own; check out into a folder beside it")
    folder.mkdir(parents=True, exist_ok=True)
    _write_record(store, folder, uuid.uuid4().hex, joined=False)  # first: a checkout killed halfway, `sync` completes
    return sync(store, folder)


@dataclass(frozen=True)
class Copy:
    """A working copy the store knows: its id, its folder and the machine it is on, when it was made."""

    id: str
    folder: str
    host: str
    time_ns: int
    key: bytes | None = field(default=None, repr=False)  # its public key (None: made before copies had one)


def working_copies(store: Store) -> list[Copy]:
    """The working copies of this store, oldest first."""
    known = [Copy(key.decode(), *decode(value)) for key, value in store.table(COPIES).items()]
    return sorted(known, key=lambda c: c.time_ns)


def forget_copy(store: Store, copy_id: str) -> Copy:
    """Forget a working copy (its folder was deleted, say): it syncs no more, and gc may collect its base."""
    known = {c.id: c for c in working_copies(store)}
    copy = known[unique(copy_id, known, "working copy", "; `cortex copies` lists them")]

    def drop() -> None:
        for ref in (_ref(copy.id), _ref(copy.id) + NEXT):
            if (base := store.refs.get(ref)) is not None:
                store.refs.set_if_equals(ref, None, base, "forgot the working copy")
        del store.table(COPIES)[copy.id.encode()]
        erasures.drop(store, copy.id)

    store.transact(drop)
    return copy


def _write_record(store: Store, folder: Path, copy_id: str, joined: bool) -> None:
    """Name in `folder` the working copy it is of `store`; `joined`: the store knows it (before that, the
    copy's first sync registers it in its commit)."""
    record = {"copy": copy_id, "host": socket.gethostname(), "store": store.id, "joined": joined,
              "location": store.engine.location}
    try:
        write_atomically(folder / RECORD, json.dumps(record).encode())
        if not (ignored := folder / RECORD.parent / ".gitignore").exists():  # a notes repository never takes the key
            write_atomically(ignored, b"# cortex's record of this working copy, and its private key\n*\n")
    except OSError as exc:
        raise UserError(f"{folder}: cannot be made a working copy of the store ({exc.strerror or exc}): cortex writes "
                        "into the Org folder it tracks what others add to the memory; make it writable, or work "
                        "on a copy of it") from None


def _register(store: Store, copy_id: str, folder: Path, base: Oid, key: bytes) -> None:
    """Make the store know the copy `copy_id` in `folder`, whose files agree with it at tree `base` and whose
    public key is `key`; call inside a transaction."""
    store.refs.set_if_equals(_ref(copy_id), base, None, f"working copy {folder}")
    store.table(COPIES)[copy_id.encode()] = encode([str(folder), socket.gethostname(), time.time_ns(), key])


def _key_of(store: Store, copy_id: str, folder: Path | None = None) -> bytes | None:
    """The copy's public key as the store has it; with its `folder`, the folder's (made if it has none) when
    the store has none (a copy made before copies had keys)."""
    entry = store.table(COPIES).get(copy_id.encode())
    known = None if entry is None else Copy(copy_id, *decode(entry)).key
    if known is None and folder is not None:
        return erasures.public_key(folder) or erasures.new_key(folder)
    return known


def _keep_key(store: Store, copy_id: str, key: bytes | None) -> None:
    """Record the copy's public key if the store has none; call inside a transaction."""
    entry = store.table(COPIES).get(copy_id.encode())
    if key is not None and entry is not None and (copy := Copy(copy_id, *decode(entry))).key is None:
        store.table(COPIES)[copy_id.encode()] = encode([copy.folder, copy.host, copy.time_ns, key])


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


def sync(store: Store, folder: str | os.PathLike, label: str | None = None, *, tracked: bool = False,
         progress: Progress | None = None, marker: bytes | None = None, written: Mapping[str, bytes] | None = None,
         digests: Mapping[str, bytes] | None = None, then: Callable[[IngestReport], None] | None = None,
         scope: str = ".", message: str | None = None, spare: Callable[[str], bool] | None = None,
         deep: bool = True) -> SyncReport:
    """Merge a working copy's edits into the store and the store's changes into it (see the module).

    `tracked`: the folder is the Org folder the store tracks, made a working copy here if it is not one
    yet. The folder is read as `ingest.ingest` reads it (`progress`, `written`, `digests`), and the
    report lists the files changed that hold `marker`; `then(report of the read)` runs in the sync's
    commit, which the working state's log names `message`. Only the files under `scope` (a path from the
    folder; of a folder not `deep`, only the files in it, not in its subfolders) are read, sent and received; the
    others wait for a sync that reads them. Syncs of one folder
    take turns (on its machine): one that read the folder before another brought it up to date would take
    that other's writes for edits of its own. A file `spare(path)` names (open in an editor) is read and sent
    but never written: what the store changed in it waits for a sync that does not spare it (`deferred`)."""
    folder = Path(os.path.abspath(folder))

    def busy() -> CopyBusy:
        return CopyBusy(f"{folder}: another sync of this folder has run for over {SYNC_WAIT:.0f} seconds")

    with folder_lock(folder, SYNC_WAIT, busy):
        settled(folder)  # the last sync here names its base first, so that this one merges no more
        if tracked and _record_of(store, folder) is None:  # not a copy yet (or one this store forgot)
            _write_record(store, folder, uuid.uuid4().hex, joined=False)
        for _ in range(READS):
            try:
                return _sync(store, folder, label, progress, marker, written, digests, then, tracked, scope, message,
                             spare, deep or scope == ".")
            except ReadCollected:  # nothing was committed: the folder is read again
                continue
        raise UserError(f"{folder}: a gc kept collecting what this sync read ({READS} times); sync again")


def _sync(store: Store, folder: Path, label: str | None, progress: Progress | None, marker: bytes | None,
          written: Mapping[str, bytes] | None, digests: Mapping[str, bytes] | None,
          then: Callable[[IngestReport], None] | None, tracked: bool, scope: str, message: str | None,
          spare: Callable[[str], bool] | None, deep: bool) -> SyncReport:
    started = time.perf_counter()
    copy_id, recorded, joining = _copy_record(store, folder)
    sure, made = _ref(copy_id), _ref(copy_id) + NEXT
    first = (_first_base(store) if tracked else None) if joining else None
    key = erasures.new_key(folder) if joining else _key_of(store, copy_id, folder)
    read = read_folder(store, folder, progress, marker, written, digests, scope, deep)
    # What hard erasures took from this copy's bases, if any: merged against, so the erased text leaves the folder.
    waiting = None if joining else erasures.waiting_for(store, copy_id, folder, read.get)
    get = read.get if waiting is None else waiting.get
    made_now = store.refs.get(made)  # (only this copy's syncs move it, and they take turns)
    erased = frozenset() if waiting is None else waiting.erased(made_now)
    report = SyncReport(folder, read=read.report)
    report.problems = [str(p) for p in read.report.problems]
    ours = read.tree
    unreadable = {p.path for p in read.report.problems}
    in_scope = scope_test(scope, (folder / scope).is_dir(), deep)

    def unread(path: str) -> bool:  # as the base has it: its edits wait for a sync that reads it
        return path in unreadable or not in_scope(path)

    labels = (label or folder.name or str(folder), "store")

    def merge_and_commit():
        sure_oid, made_oid, theirs_oid = store.refs.get(sure), store.refs.get(made), store.refs.get(WORKING)
        if sure_oid is None and not joining:
            raise NotACopy(f"{folder}: this working copy was forgotten during the sync; nothing was changed")
        if joining and sure_oid is not None:
            raise NotACopy(f"{folder}: its record names a working copy the store already knows; check it out again")
        sure_oid = sure_oid or first or EMPTY_TREE.oid
        stored_sure = _tree(get, sure_oid)
        base = _base(get, stored_sure if waiting is None else waiting.sure(stored_sure),
                     made_oid if waiting is None else waiting.next(made_oid), recorded, ours, unread)
        theirs = EMPTY_TREE if theirs_oid is None else store.objects[theirs_oid]
        mine = _mine(base, ours, unreadable, scope, in_scope)
        merge = merge_trees(base, mine, theirs, get, labels=labels, erased=erased)
        new = {obj.oid: obj for obj in merge.objects}
        writes = {rel: None if now is None else read.render(rel, now, lambda oid: new.get(oid) or get(oid))
                  for rel in sorted(differing(mine, merge.tree))
                  if not unread(rel) and (now := merge.tree.entries.get(rel)) != mine.entries.get(rel)}
        # The store holds what the folder held (`mine`) from now on: until the files are brought up to date that
        # is the base to merge them against, so that nothing the store undoes later comes back. A file still
        # holding erased text is kept only sealed, behind the stand-in the sure base has there.
        hidden = {} if waiting is None else {p: (stored_sure.entries.get(p), mine.entries.get(p))
                                             for p in waiting.paths(made_now)
                                             if erasures.held(get, [mine.entries.get(p)], erased)}
        absorbed = _standing_in(mine, hidden)

        def commit() -> None:
            report.new_objects = read.write(merge.tree, absorbed, made=merge.objects) + \
                store.objects.add_many(merge.objects)
            if merge.tree.oid != theirs.oid:
                store.refs.set_if_equals(WORKING, merge.tree.oid, theirs_oid, message or f"sync {folder}")
            if joining:
                store.objects.add(absorbed)
                _register(store, copy_id, folder, absorbed.oid, key)
            else:
                if absorbed.oid != sure_oid:
                    store.objects.add(absorbed)
                    store.refs.set_if_equals(sure, absorbed.oid, sure_oid, logged=False)
                _keep_key(store, copy_id, key)
            if waiting is not None:
                erasures.reseal(store, copy_id, key, hidden, get)
            if merge.tree.oid != made_oid:
                store.refs.set_if_equals(made, merge.tree.oid, made_oid, logged=False)
            if then is not None:
                read.report.root = merge.tree.oid
                then(read.report)
            # Last, for workers to take up while the commit waits for the disk (a worker started sooner would
            # take the interpreter from this thread at every write, as the store lends it): the new files'
            # bytes written beside them and synced to disk (renamed over the old ones after), and their
            # layouts and hashes, for the next read of them to re-parse only what it changes, or nothing.
            if not jobs:  # (the body runs again when the store must grow)
                jobs.extend((workers.submit(_stage, folder, writes),
                             workers.submit(lambda: {rel: (read.layout_of(rel, data), hash_bytes(data))
                                                     for rel, data in writes.items() if data is not None}))
                            if writes else (_done({}), _done({})))

        workers, jobs = _workers(os.getpid()), []
        if not writes and then is None and not joining and waiting is None and read.stored() and \
                sure_oid == absorbed.oid and theirs.oid == merge.tree.oid == made_oid and \
                _key_of(store, copy_id) == key:  # nothing to commit, nothing to write
            return base, mine, hidden, absorbed, merge, writes, _done({})
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
        return base, mine, hidden, absorbed, merge, writes, staging

    base, mine, hidden, absorbed, merge, writes, staging = retrying(merge_and_commit)
    if joining:
        _write_record(store, folder, copy_id, joined=True)
    report.tree = merge.tree.oid
    for obj in (*merge.objects, absorbed):  # committed: the next sync and writing the files decode nothing
        store.objects.remember(obj)
    read.batch.committed()
    report.sent = sorted(p for p in differing(mine, base) if not unread(p))
    report.merged = sorted(merge.files)
    report.conflicts = list(merge.conflicts)
    if marker is not None:  # a file parsed now was looked at as it was read (through its layout, if large)
        parsed, found = set(read.report.parsed), set(read.report.marked)
        report.marked = sorted(rel for rel in {*report.sent, *writes} if (
            marker in (writes[rel] or b"") if rel in writes else rel in found if rel in parsed else
            marker in _bytes_of(folder / rel)))
    staged, placed, agreed = staging.result(), [], None
    try:
        agreed = _bring_up_to_date(folder, mine, merge.tree, writes, staged, placed, read, report, unread, spare)
    finally:
        for file in staged.values():  # not put in place: an error stopped the sync
            file.drop()
        up_to_date = agreed is not None and agreed.oid == merge.tree.oid
        # As the sync returns: the renames made durable, then (the files all up to date) the base named. When
        # erased text was taken out of the folder, before the sync returns: the store then forgets what waited.
        named = merge.tree.oid if up_to_date else None
        if waiting is not None and up_to_date:
            _settle(folder, placed, named, read)
        elif placed or named != recorded:
            _settling[os.getpid(), folder] = _workers(os.getpid()).submit(_settle, folder, placed, named, read)
    if not up_to_date:  # a file could not be brought up to date: the store keeps the base it has now
        kept = _standing_in(agreed, {p: hid for p, hid in hidden.items() if agreed.entries.get(p) == hid[1]})

        def settle() -> None:  # with the documents of the files kept as read, which the merge replaced
            store.objects.add_many([kept, *(read.get(oid) for oid in set(kept.entries.values())
                                            if oid not in store.objects)])
            store.refs.set_if_equals(sure, kept.oid, store.refs.get(sure), logged=False)
            store.refs.set_if_equals(made, None, store.refs.get(made), logged=False)

        store.transact(settle)
    elif waiting is not None:  # the folder holds no erased text any more (durably): nothing waits for it
        def settled() -> None:
            store.refs.set_if_equals(sure, merge.tree.oid, store.refs.get(sure), logged=False)
            erasures.drop(store, copy_id)

        store.transact(settled)
    report.seconds = time.perf_counter() - started
    return report


def settled(folder: str | os.PathLike) -> None:
    """Wait until this process's last sync of `folder` has made its renames durable and named its base: after
    this, nothing it started writes into the folder."""
    if (settling := _settling.pop((os.getpid(), Path(os.path.abspath(folder))), None)) is not None:
        settling.result()


def _mine(base: Tree, ours: Tree, unreadable: set[str], scope: str, in_scope: Callable[[str], bool]) -> Tree:
    """The folder's files as a tree: those read under `scope`, and every other one (not read: it cannot be, or
    lies outside the scope) as the base has it."""
    if scope == ".":
        return ours.with_changes({p: oid for p in unreadable if (oid := base.entries.get(p)) is not None})
    gone = {p: None for p in _paths_within(base, scope) if in_scope(p) and p not in unreadable and p not in ours.entries}
    return base.with_changes({**gone, **{p: oid for p, oid in ours.entries.items() if base.entries.get(p) != oid}})


def _paths_within(tree: Tree, scope: str) -> list[str]:
    """The paths of `tree` under `scope` (a folder or a file, from the root), opening only the folders there."""
    if scope in tree.entries:
        return [scope]
    return [f"{folder}/{name}" if folder else name for folder in tree.folders
            if folder == scope or folder.startswith(scope + "/") for name in tree.folder(folder).files]


def _tree(get: Getter, oid: Oid) -> Tree:
    return EMPTY_TREE if oid == EMPTY_TREE.oid else get(oid)


def _standing_in(tree: Tree, hidden: Mapping[str, tuple[Oid | None, Oid | None]]) -> Tree:
    """`tree` with the stand-in at each path `hidden` names (path -> (stand-in, what it hides))."""
    return tree.with_changes({path: stand_in for path, (stand_in, _) in hidden.items()})


def _base(get: Getter, sure: Tree, made: Oid | None, recorded: bytes | None, ours: Tree,
          unread: Callable[[str], bool]) -> Tree:
    """The base to merge a copy's files against: the last sync's result where the folder names it (its
    files were all brought up to it), else the sure base, taking the last sync's result for each file
    that holds what that sync brought into it (put in place before the sync was stopped, or saved since
    by an editor that had read it there); `get` reads the store's and the folder's objects."""
    if made is not None and recorded == made:
        return get(made)
    base = sure
    if made is None:
        return base
    result: Tree = get(made)
    changes: dict[str, Oid | None] = {}
    for path in differing(base, result):
        was, now, have = base.entries.get(path), result.entries.get(path), ours.entries.get(path)
        if unread(path) or now == was or not (have == now or None not in (now, have) and _brought(
                get, was, now, have)):
            continue
        changes[path] = now
    return base.with_changes(changes)


def _brought(get: Getter, was: Oid | None, now: Oid, have: Oid) -> bool:
    """Whether the document `have` already holds every change from `was` (None: no file) to `now`, so that
    merging them into it changes nothing: then it was made from `now` (or from `was` and what the store
    changed since), and `now` is its base."""
    merged = merge_documents(Document(preamble="") if was is None else get(was), get(have), get(now), get)
    return merged.clean and merged.document.oid == have


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


def _done(result) -> Future:
    """A future already holding `result` (work there was no need to hand to a worker)."""
    done: Future = Future()
    done.set_result(result)
    return done


def _bytes_of(path: Path) -> bytes:
    """The bytes of a file, or none when it cannot be read (gone since, say, or larger than an Org file may be)."""
    try:
        return read_bounded(path, ORG_FILE, "an Org file")
    except (OSError, TooLarge):
        return b""


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
                      unread: Callable[[str], bool], spare: Callable[[str], bool] | None) -> Tree:
    """Put into the folder what the merge changed there, moving each file's new bytes from `staged` to
    `placed` (the old ones to be freed), but for the files `spare` names; return the copy's new base, file by file."""
    agreed: dict[str, Oid | None] = {}  # changes to `merged`
    for rel in sorted(differing(mine, merged)):
        was = mine.entries.get(rel)
        if unread(rel):
            _keep_base(agreed, rel, was)  # left alone: it syncs once it can be read
        if rel not in writes:
            continue
        if spare is not None and spare(rel):  # open in an editor: the store holds what was read, its change waits
            report.deferred.append(rel)
            _keep_base(agreed, rel, was)
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
    return merged.with_changes(agreed)


def _keep_base(agreed: dict[str, Oid | None], rel: str, was: Oid | None) -> None:
    """Make the folder's version (None: no file) the base of `rel`: the store holds what it changed."""
    agreed[rel] = was


def _record_of(store: Store, folder: Path) -> CopyRecord | None:
    """The folder's record if it names a copy of `store` that `store` knows or is to register (None: no
    record, or one of a copy this store has forgotten); NotACopy for another store's copy."""
    record = read_record(folder)
    if record is None:
        return None
    if record.store is not None and record.store != store.id:
        raise NotACopy(f"{folder}: a working copy of another store; open that one (--store), or remove "
                       f"{folder / RECORD.parent} to make the folder this store's")
    if not record.joined or store.refs.get(_ref(record.copy)) is not None:
        return record
    return None


def _copy_record(store: Store, folder: Path) -> tuple[str, bytes | None, bool]:
    """The id of the working copy in `folder` (NotACopy unless `store` knows it or is to register it), the
    base the folder names, if any (to be trusted only if it is the one the copy's last sync made), and
    whether the copy is yet to be registered (its first sync)."""
    record = _record_of(store, folder)
    if record is None:
        shown = brief(str(folder), 80)
        if (folder / RECORD).exists():
            raise NotACopy(f"{shown}: a working copy this store has forgotten (or another store's)")
        raise NotACopy(f"{shown}: not a working copy; make one with `cortex checkout {shown}`")
    if not record.joined:
        return record.copy, None, store.refs.get(_ref(record.copy)) is None
    try:
        base = read_bounded(folder / BASE, RECORD_BYTES, "a working copy's record")
        return record.copy, bytes.fromhex(base.decode("ascii")) if len(base) == 2 * OID_SIZE else None, False
    except (OSError, ValueError, TooLarge):
        return record.copy, None, False


def _ref(copy_id: str) -> str:
    return REF_PREFIX + copy_id


def _at(conflict: Conflict, path: str) -> Conflict:
    return replace(conflict, path=path)
