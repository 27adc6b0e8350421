"""Snapshots, rollback, diff, log, headline history, retention, gc, export and import.

HEAD points at the newest snapshot of the line of work; `working` at the tree the Org
files were last ingested into. A snapshot is one small object and a ref move. Every
snapshot ever taken (until retention drops it) is listed in the `snapshots` table by
time, so a rollback never hides the snapshots it moved away from.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from . import orgfile
from .backends import Store
from .codec import decode, encode
from .errors import NotFound, UserError
from .hashing import Oid, hash_bytes
from .ingest import DOCS_BY_BYTES, WORKING, forget_collected, ingest, org_paths, working_tree
from .objects import EMPTY_TREE, Headline, Snapshot, Tree
from .objects import decode as decode_object
from .query import references, with_id

HEAD = "HEAD"
SNAPSHOTS = "history.snapshots"
SUMMARIES = "history.summaries"
DEFAULT_KEEP = 20


class DirtyWorkingFiles(UserError):
    """Org files on disk hold edits no snapshot has."""

    def __init__(self, paths: list[str]):
        listed = "\n  ".join(paths)
        super().__init__(
            f"these Org files hold edits that no snapshot has:\n  {listed}\n"
            "roll back with keep (--keep) to snapshot them first, or force (--force) to discard them"
        )
        self.paths = paths


# --- snapshots and addressing -------------------------------------------------------------

def head(store: Store) -> Snapshot | None:
    """The snapshot HEAD points at, if any."""
    oid = store.refs.get(HEAD)
    return None if oid is None else store.objects[oid]


def summary(store: Store, tree: Tree) -> dict[str, int]:
    """Files and headlines of a tree, cached per tree and per document oid (content never changes)."""
    table = store.table(SUMMARIES)
    cached = table.get(tree.oid)
    if cached is not None:
        return decode(cached)
    headlines, new = 0, {}
    for doc_oid in tree.entries.values():
        cached = table.get(doc_oid)
        if cached is None:
            count = _count_headlines(store, store.objects[doc_oid])
            new[doc_oid] = encode(count)
        else:
            count = decode(cached)
        headlines += count
    counts = {"files": len(tree.entries), "headlines": headlines}
    new[tree.oid] = encode(counts)
    table.update(new)  # one commit, however many documents are new
    return counts


def _count_headlines(store: Store, node) -> int:
    return sum(1 + _count_headlines(store, store.objects[c]) for c in node.children)


def snapshot(store: Store, message: str = "", now_ns: int | None = None) -> Snapshot:
    """Record the working state as a snapshot and move HEAD to it (compare-and-swap)."""
    root = store.refs.get(WORKING) or store.objects.add(EMPTY_TREE)
    parent = store.refs.get(HEAD)
    snap = Snapshot(root=root, parent=parent, time_ns=now_ns or time.time_ns(), message=message,
                    counts=summary(store, store.objects[root]))

    def record() -> None:
        store.objects.add(snap)
        store.table(SNAPSHOTS)[snapshot_key(snap)] = snap.oid
        store.refs.set_if_equals(HEAD, snap.oid, parent, f"snapshot: {message}")

    store.transact(record)
    return snap


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
    match = re.fullmatch(r"HEAD(?:~(\d+)|@\{(\d+)\})?", text)
    if match:
        return _from_head(store, text, int(match[1] or 0), int(match[2] or 0))
    if re.fullmatch(r"[0-9a-fA-F]{4,64}", text):
        return _from_prefix(store, text.lower())
    raise UserError(f"{text!r} is not a snapshot: use an oid or prefix, HEAD, HEAD~N, HEAD@{{N}} or a position")


def _from_head(store: Store, text: str, back: int, moves: int) -> Snapshot:
    if moves:
        log = store.refs.reflog(HEAD)
        if moves > len(log):
            raise NotFound(f"{text}: HEAD has moved only {len(log)} times")
        oid = log[-moves].old
    else:
        oid = store.refs.get(HEAD)
    if oid is None:
        raise NotFound(f"{text}: no snapshot yet (take one with `snapshot`)")
    snap = store.objects[oid]
    for step in range(back):
        if snap.parent is None:
            raise NotFound(f"{text}: history has only {step + 1} snapshots")
        snap = store.objects[snap.parent]
    return snap


def _from_prefix(store: Store, prefix: str) -> Snapshot:
    matches = {oid for _, oid in store.table(SNAPSHOTS).items() if oid.hex().startswith(prefix)}
    if not matches and len(prefix) == 64 and bytes.fromhex(prefix) in store.objects:
        matches = {bytes.fromhex(prefix)}
    if not matches:
        raise NotFound(f"no snapshot {prefix}")
    if len(matches) > 1:
        raise UserError(f"snapshot prefix {prefix} is ambiguous: {', '.join(sorted(m.hex()[:12] for m in matches))}")
    obj = store.objects[matches.pop()]
    if not isinstance(obj, Snapshot):
        raise UserError(f"{prefix} is a {obj.kind}, not a snapshot")
    return obj


# --- rollback -------------------------------------------------------------------------------

@dataclass
class RollbackReport:
    """What a rollback changed."""

    target: Snapshot
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: Snapshot | None = None


def disk_documents(store: Store, root: Path) -> dict[str, bytes | None]:
    """Each Org file on disk and the document its bytes were parsed into (None if never ingested)."""
    docs = store.table(DOCS_BY_BYTES)
    with store.reading():
        return {rel: docs.get(hash_bytes(_read(root / rel))) for rel in org_paths(root)} if root.exists() else {}


def unsnapshotted_edits(store: Store, root: Path, disk: dict[str, bytes | None] | None = None) -> list[str]:
    """Org files on disk whose bytes no kept snapshot holds at that path."""
    disk = disk_documents(store, root) if disk is None else disk
    recorded: dict[str, set[bytes]] = {}
    for snap in snapshots(store):
        for path, doc in store.objects[snap.root].entries.items():
            recorded.setdefault(path, set()).add(bytes(doc))
    return [rel for rel, doc in disk.items() if doc is None or bytes(doc) not in recorded.get(rel, ())]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def rollback(store: Store, root: Path, ref: str | int, *, keep: bool = False, force: bool = False) -> RollbackReport:
    """Return the working state, HEAD and the Org files on disk to a snapshot; never lose an edit silently.

    Only files whose bytes differ from the snapshot's are rendered and written; running an
    interrupted rollback again completes it.
    """
    root = Path(os.path.abspath(root))
    target = resolve(store, ref)
    report = RollbackReport(target)
    disk = disk_documents(store, root)
    dirty = unsnapshotted_edits(store, root, disk)
    if dirty and keep:
        ingest(store, root)
        report.kept = snapshot(store, "before rollback to " + target.oid.hex()[:12])
    elif dirty and not force:
        raise DirtyWorkingFiles(dirty)
    tree: Tree = store.objects[target.root]
    get = store.objects.__getitem__
    written: dict[bytes, Oid] = {}
    for path, doc_oid in sorted(tree.entries.items()):
        if disk.get(path) == doc_oid:
            continue
        data = orgfile.render(get(doc_oid), get).encode("utf-8")
        write_atomically(root / path, data)
        written[hash_bytes(data)] = doc_oid
        report.written.append(path)
    for rel in disk:
        if rel not in tree.entries:
            (root / rel).unlink()
            report.removed.append(rel)
    old_working, old_head = store.refs.get(WORKING), store.refs.get(HEAD)
    message = f"rollback to {target.oid.hex()[:12]}"

    def move() -> None:
        if old_working != target.root:
            store.refs.set_if_equals(WORKING, target.root, old_working, message)
        if old_head != target.oid:
            store.refs.set_if_equals(HEAD, target.oid, old_head, message)
        store.table(DOCS_BY_BYTES).update(written)

    store.transact(move)
    return report


def write_atomically(path: Path, data: bytes) -> None:
    """Write a file so that it holds either its old bytes or all of `data`, even after a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# --- diff -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """One headline added, removed, changed or moved between two states."""

    kind: str  # added | removed | changed | moved
    path: str
    outline: tuple[str, ...]
    id: str | None
    old: Oid | None = None
    new: Oid | None = None
    old_path: str | None = None
    old_outline: tuple[str, ...] | None = None
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"{self.path}: {' / '.join(self.outline)}"
        if self.kind == "moved":
            where = f"{self.old_path}: {' / '.join(self.old_outline)} -> {where}"
        detail = f" ({', '.join(self.fields)})" if self.fields else ""
        ident = f" [{self.id}]" if self.id else ""
        return f"{self.kind:8} {where}{ident}{detail}"


def tree_of(store: Store, state: str | int | None) -> Tree:
    """The tree of a snapshot reference, or of the working state when `state` is None."""
    if state is None:
        return working_tree(store)
    return store.objects[resolve(store, state).root]


def diff(store: Store, old: Tree, new: Tree) -> list[Change]:
    """Headline changes from `old` to `new`; equal subtrees (equal oids) are never opened."""
    if old.oid == new.oid:
        return []
    get = store.objects.__getitem__
    found = _Found()
    for path in sorted(old.entries.keys() | new.entries.keys()):
        a, b = old.entries.get(path), new.entries.get(path)
        if a != b:
            _diff_children(get, path, (), get(a).children if a else (), get(b).children if b else (), found)
    return found.changes + _moves(get, found)


@dataclass
class _Found:
    changes: list[Change] = field(default_factory=list)
    added: list[tuple[str, tuple[str, ...], Headline]] = field(default_factory=list)
    removed: list[tuple[str, tuple[str, ...], Headline]] = field(default_factory=list)


def _diff_children(get, path, outline, old_oids, new_oids, found: _Found) -> None:
    unmatched_new = list(new_oids)
    leftover_old = []
    for oid in old_oids:
        if oid in unmatched_new:
            unmatched_new.remove(oid)
        else:
            leftover_old.append(oid)
    for a, b in _pair([get(o) for o in leftover_old], [get(o) for o in unmatched_new]):
        if a is None:
            found.added.append((path, outline, b))
        elif b is None:
            found.removed.append((path, outline, a))
        else:
            fields = _changed_fields(a, b)
            if fields:
                found.changes.append(Change("changed", path, (*outline, b.title), b.id or a.id, a.oid, b.oid,
                                            fields=fields))
            _diff_children(get, path, (*outline, b.title), a.children, b.children, found)


def _pair(olds: list[Headline], news: list[Headline]):
    """Pair old and new siblings: by :ID:, then by title, then by order; the rest stand alone."""
    pairs, olds, news = [], list(olds), list(news)
    for match in (lambda a, b: a.id is not None and a.id == b.id,
                  lambda a, b: a.id is None and b.id is None and a.title == b.title,
                  lambda a, b: a.id is None and b.id is None):
        for a in list(olds):
            b = next((b for b in news if match(a, b)), None)
            if b is not None:
                pairs.append((a, b))
                olds.remove(a)
                news.remove(b)
    return pairs + [(a, None) for a in olds] + [(None, b) for b in news]


def _changed_fields(a: Headline, b: Headline) -> tuple[str, ...]:
    names = ("title", "todo", "priority", "tags", "properties", "planning", "level")
    fields = [n for n in names if getattr(a, n) != getattr(b, n)]
    if not fields and a.raw != b.raw:
        fields.append("text")
    return tuple(fields)


def _moves(get, found: _Found) -> list[Change]:
    """Added and removed subtrees, with headlines found on both sides (same :ID: or content) as moves.

    Only added and removed subtrees are opened, so this stays O(changed).
    """
    def expand(roots):
        nodes = []

        def visit(path, outline, h, ancestors):
            here = (*outline, h.title)
            nodes.append((path, here, h, ancestors))
            for child in h.children:
                visit(path, here, get(child), (*ancestors, h.oid))

        for path, outline, headline in roots:
            visit(path, outline, headline, ())
        return nodes

    added, removed = expand(found.added), expand(found.removed)
    moved_new, moved_old, moves = set(), set(), []
    for path, outline, h, ancestors in added:
        if moved_new.intersection(ancestors):
            continue  # it moved with its parent
        twin = next((r for r in removed if r[2].oid not in moved_old
                     and ((h.id and r[2].id == h.id) or r[2].oid == h.oid)), None)
        if twin is not None:
            moved_new.add(h.oid)
            moved_old.add(twin[2].oid)
            moves.append(Change("moved", path, outline, h.id or twin[2].id, twin[2].oid, h.oid, twin[0], twin[1]))
    result = [Change("added", p, (*o, h.title), h.id, new=h.oid) for p, o, h in found.added if h.oid not in moved_new]
    result += [Change("removed", p, (*o, h.title), h.id, old=h.oid) for p, o, h in found.removed
               if h.oid not in moved_old]
    return result + moves


# --- log and history ----------------------------------------------------------------------------

@dataclass(frozen=True)
class LogEntry:
    """A snapshot with what changed since its parent."""

    snapshot: Snapshot
    changes: dict[str, int]

    def __str__(self) -> str:
        changed = ", ".join(f"{n} {kind}" for kind, n in sorted(self.changes.items())) or "no changes"
        return f"{self.snapshot} [{changed}]"


def log(store: Store, limit: int | None = None) -> list[LogEntry]:
    """Kept snapshots, newest first, each with counts of what changed since its parent."""
    _not_negative("log limit", limit)
    entries = []
    for snap in snapshots(store)[:limit]:
        parent = store.objects.get(snap.parent) if snap.parent else None
        parent_tree = store.objects[parent.root] if parent else EMPTY_TREE
        counts: dict[str, int] = {}
        for change in diff(store, parent_tree, store.objects[snap.root]):
            counts[change.kind] = counts.get(change.kind, 0) + 1
        entries.append(LogEntry(snap, counts))
    return entries


@dataclass(frozen=True)
class Version:
    """One headline as a snapshot recorded it, and what differed from the previous version."""

    snapshot: Snapshot
    path: str
    headline: Headline
    change: str

    def __str__(self) -> str:
        return f"{self.snapshot.oid.hex()[:12]} {self.path}: {self.headline.title} ({self.change})"


def headline_history(store: Store, org_id: str) -> list[Version]:
    """The versions of the headline with :ID: `org_id` across kept snapshots, oldest first."""
    versions: list[Version] = []
    previous: tuple[str, Headline] | None = None
    for snap in reversed(snapshots(store)):
        node = with_id(store, store.objects[snap.root], org_id)
        found = None if node is None else (node.path, node.headline)
        if found is None:
            if previous is not None:
                versions.append(Version(snap, previous[0], previous[1], "removed"))
                previous = None
            continue
        if previous is None:
            change = "added"
        elif found[1].oid == previous[1].oid and found[0] == previous[0]:
            continue
        elif found[0] != previous[0]:
            change = f"moved from {previous[0]}"
        else:
            change = ", ".join(_changed_fields(previous[1], found[1])) or "children"
        versions.append(Version(snap, found[0], found[1], change))
        previous = found
    if not versions:
        raise NotFound(f"no snapshot holds a headline with :ID: {org_id}")
    return versions


def _not_negative(what: str, count: int | None) -> None:
    if count is not None and count < 0:
        raise UserError(f"{what} must be 0 or more, got {count}")


# --- retention and gc ----------------------------------------------------------------------------

def apply_retention(store: Store, keep_last: int | None = DEFAULT_KEEP, max_age: timedelta | None = None,
                    now_ns: int | None = None) -> list[Snapshot]:
    """Drop snapshots beyond the last `keep_last` and older than `max_age` (HEAD is always kept); return them."""
    _not_negative("the number of snapshots to keep", keep_last)
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
        reachable = _reach(store, [Oid(r) for r in roots if r is not None])
        garbage = [oid for oid in store.objects if oid not in reachable]
        forget_collected(store, set(garbage))
        return store.objects.delete_many(garbage)

    return store.transact(collect)


def _reach(store: Store, roots: list[Oid]) -> set[Oid]:
    seen: set[Oid] = set()
    stack = list(roots)
    while stack:
        oid = stack.pop()
        if oid in seen or oid not in store.objects:
            continue
        seen.add(oid)
        stack.extend(references(store.objects[oid]))
    return seen


# --- export and import --------------------------------------------------------------------------

MAGIC = b"CORTEX-SNAPSHOT\n"
EXPORT_VERSION = 1


class DamagedExport(UserError):
    """An export file that is truncated, altered or not an export at all."""


def export_snapshot(store: Store, ref: str | int, path: Path) -> tuple[Snapshot, int]:
    """Write one snapshot and every object it reaches to a single file; return it and the object count."""
    snap = resolve(store, ref)
    closure = _reach(store, [snap.root]) | {snap.oid}
    body = encode([EXPORT_VERSION, snap.oid, [[oid, store.objects.raw(oid)] for oid in sorted(closure)]])
    write_atomically(Path(path), MAGIC + body + hash_bytes(body))
    return snap, len(closure)


def import_snapshot(store: Store, path: Path) -> Snapshot:
    """Verify an export file completely, then add its objects and list its snapshot (HEAD does not move)."""
    data = Path(path).read_bytes()
    where = str(path)
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 32:
        raise DamagedExport(f"{where}: not a cortex snapshot export")
    body, digest = data[len(MAGIC):-32], data[-32:]
    if hash_bytes(body) != digest:
        raise DamagedExport(f"{where}: damaged or truncated (checksum does not match)")
    try:
        version, snap_oid, pairs = decode(body)
    except Exception:
        raise DamagedExport(f"{where}: unreadable export") from None
    if version > EXPORT_VERSION:
        raise DamagedExport(f"{where}: written by a newer cortex (export format {version})")
    objects: dict[bytes, bytes] = {}
    for oid, raw in pairs:
        if hash_bytes(raw) != oid:
            raise DamagedExport(f"{where}: object {oid.hex()} does not match its content")
        objects[oid] = raw
    decoded = {oid: decode_object(raw) for oid, raw in objects.items()}
    snap = decoded.get(snap_oid)
    if not isinstance(snap, Snapshot):
        raise DamagedExport(f"{where}: the snapshot object is missing")
    for oid, obj in decoded.items():
        for ref in references(obj):
            if ref not in objects and ref not in store.objects:
                raise DamagedExport(f"{where}: object {oid.hex()[:12]} refers to {ref.hex()[:12]}, which is missing")

    def add() -> None:
        store.objects.add_raw(objects.items())
        store.table(SNAPSHOTS)[snapshot_key(snap)] = snap.oid

    store.transact(add)
    return snap
