"""Org files and folders into the store, incrementally.

The working state is a tree (relative path -> document oid) held in the `working` ref.
An unchanged file costs one stat, as in git's index: a file whose size, times and inode are
those it had when it was last read (kept in the store) is not read again, unless it was changed
within `RACY_SECONDS` of that read (a change in the same timestamp tick would not show). Otherwise
it costs one hash: its bytes' blake3 names the document parsed from
them. An edited file re-parses only the headlines whose subtree text changed; every
other subtree is found by its text's hash. A large file edited again in the same process
goes further: its last layout is kept, and only the sections around the changed bytes are
read at all (`org.reparse`). Each ingest is one write transaction, applied to whatever
other writers committed meanwhile (see `retry`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from weakref import WeakKeyDictionary
from dataclasses import dataclass, field
from pathlib import Path

from . import org
from .backends import Store
from .codec import decode, encode
from .errors import CortexError, RefConflict, UserError, located
from .files import remove_leftovers, stat_signature
from .scan import Problem, link_problem, relative_path, scan_folder
from .hashing import OID_SIZE, Oid, hash_bytes
from .objects import EMPTY_TREE, OrgObject, Tree
from .paths import path_problem
from .reads import ORG_FILE, TooLarge, read_file_bounded
from .retry import retrying
from .words import counted

WORKING = "working"
INGESTED_WHOLE = "ingest ."  # how the working state's reflog names an ingest of the whole Org folder
SYNCED = ", synced"  # and ends its name of the ingest of a folder that is a working copy (a sync)
DOCS_BY_BYTES = "ingest.docs"
SUBTREES = "ingest.subtrees"
STATS = "ingest.stats"  # absolute path -> the file's stat and bytes' hash when last read
# Files smaller than this parse whole in about a millisecond; keeping their layouts gains nothing.
LAYOUT_MIN_BYTES = 32 * 1024

READ_ATTEMPTS = 3  # reads of a file that keeps changing while it is read, before it waits for the next ingest
RACY_SECONDS = 2  # timestamps are as coarse as this on some filesystems (FAT); finer on most

# The last layout of each large file ingested into a store by this process.
_layouts: WeakKeyDictionary[Store, dict[str, org.Layout]] = WeakKeyDictionary()
# The documents of bytes this process wrote to files (by their hash), for the parse cache: stored by the
# next commit of the store here, or when the session closes (`store_written`).
_written: WeakKeyDictionary[Store, dict[bytes, Oid]] = WeakKeyDictionary()

Progress = Callable[[int, int, str], None]

@dataclass
class IngestReport:
    """What one ingest did."""

    root: Oid
    files: int = 0
    parsed: list[str] = field(default_factory=list)
    marked: list[str] = field(default_factory=list)  # parsed files whose bytes hold the marker asked for
    removed: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    new_objects: int = 0
    seconds: float = 0.0
    received: list[str] = field(default_factory=list)  # files the sync before it wrote: what the store had new
    conflicts: list = field(default_factory=list)  # what that sync left in conflict (`history.conflicts.Conflict`)

    @property
    def unchanged(self) -> int:
        """Files whose bytes were already known."""
        return self.files - len(self.parsed) - len(self.problems)

    def __str__(self) -> str:
        received = f"{len(self.received)} received from the store, " if self.received else ""
        lines = [f"{counted(self.files, 'file')}: {len(self.parsed)} parsed, {self.unchanged} unchanged, "
                 f"{len(self.removed)} removed, {len(self.problems)} skipped; {received}"
                 f"{counted(self.new_objects, 'new object')} in {self.seconds * 1000:.0f} ms"]
        return "\n".join(lines + [f"  conflict {c}" for c in self.conflicts])


def working_tree(store: Store) -> Tree:
    """The tree of the working state (empty before the first ingest)."""
    return _tree(store, store.refs.get(WORKING))


def _tree(store: Store, oid: Oid | None) -> Tree:
    return EMPTY_TREE if oid is None else store.objects[oid]


def ingest(store: Store, root: Path, target: Path | None = None, progress: Progress | None = None,
           marker: bytes | None = None, written: Mapping[str, bytes] | None = None,
           digests: Mapping[str, bytes] | None = None, then: "Callable[[IngestReport], None] | None" = None,
           ) -> IngestReport:
    """Bring the working state in line with the Org files under `target` (default: all of `root`).

    The report lists the parsed files whose bytes contain `marker`, so a caller that looks
    for something in changed files need not read them again. `written` holds the bytes the
    caller has just written to some of the files (by path from the root): they are taken as
    read, not read back, and `digests` may hold their `hash_bytes`, when the caller knows them
    without hashing them whole (it extended a hash). `then(report)` runs in the ingest's write
    transaction once the working state is set: its writes land with the ingest's or neither
    does (it may run again when the ingest starts over). Other writers may ingest other files
    of the root meanwhile.
    """
    root = Path(os.path.abspath(root))
    target = root if target is None else Path(os.path.abspath(target))
    return retrying(lambda: _ingest_once(store, root, target, progress, marker, written or {}, digests or {}, then))


class ReadCollected(CortexError):
    """A gc collected objects a folder's read reused (from the parse caches) before it was committed."""


class _CollectedMeanwhile(RefConflict):
    """gc removed an object this ingest meant to reuse; ingesting again finds the caches cleaned."""

    def __init__(self):
        CortexError.__init__(self, "a concurrent gc collected objects this ingest reused; run it again")


def _ingest_once(store: Store, root: Path, target: Path, progress: Progress | None, marker: bytes | None,
                 written: Mapping[str, bytes], digests: Mapping[str, bytes],
                 then: "Callable[[IngestReport], None] | None") -> IngestReport:
    started = time.perf_counter()
    scope = relative_path(root, target)
    if not target.exists():
        raise UserError(f"{target}: no such file or folder")
    folder = target.is_dir()
    files, skipped = _files_under(root, target, scope, folder)
    in_scope = scope_test(scope, folder)
    base_oid = store.refs.get(WORKING)
    base = _tree(store, base_oid)
    scoped = _within(base, in_scope)
    report = IngestReport(root=base_oid or EMPTY_TREE.oid, files=len(files) + len(skipped),
                          problems=list(skipped))
    under = os.path.join(target, "") if folder else os.fspath(target)
    with store.reading():
        batch = _Batch(store, _layouts.setdefault(store, {}), base, under)
        entries = _read(batch, root, files, report, progress, marker, written, digests)
    # A file we could not read keeps its last good version rather than vanishing (a link not followed is no file).
    for problem in report.problems[len(skipped):]:
        if problem.path in scoped:
            entries[problem.path] = scoped[problem.path]
    report.removed = sorted(p for p in scoped if p not in entries)

    def commit() -> None:
        # Other writers may have committed since `base` was read. Their files outside our scope are
        # kept; a change within it means what we read may be stale, so `ingest` starts over.
        latest_oid = store.refs.get(WORKING)
        latest = base if latest_oid == base_oid else _tree(store, latest_oid)
        if latest is not base and _within(latest, in_scope) != scoped:
            raise RefConflict(WORKING, base_oid, latest_oid)
        # What the working state reaches is stored (gc spares it); anything else reused may be gone.
        reachable = batch.in_base if latest is base else set(latest.entries.values())
        if any(oid not in reachable and oid not in store.objects for oid in batch.reused):
            raise _CollectedMeanwhile()
        outside = {path: oid for path, oid in latest.entries.items() if not in_scope(path)}
        tree = Tree(dict(sorted({**outside, **entries}.items())))
        batch.add(tree)
        report.root = tree.oid
        report.new_objects = batch.write()
        for rel in report.removed:
            batch.stats.pop(os.fsencode(os.path.join(root, rel)), None)
        if tree.oid != latest_oid:
            store.refs.set_if_equals(WORKING, tree.oid, latest_oid, f"ingest {scope}")
        if then is not None:
            then(report)

    return _committed(store, commit, batch, report, started)


def _committed(store: Store, commit: Callable[[], None], batch: "_Batch", report: IngestReport,
               started: float) -> IngestReport:
    """Run `commit` in one write transaction, then keep what the batch parsed; return the report, timed."""
    store.transact(commit)
    batch.committed()
    report.seconds = time.perf_counter() - started
    return report


Change = Callable[[Tree], Mapping[str, "bytes | None"]]


Digests = Callable[[str, bytes], "bytes | None"]  # the hash of bytes about to be written to a file, when known


def commit_files(store: Store, change: Change, message: str,
                 then: "Callable[[IngestReport], None] | None" = None, digests: Digests | None = None) -> IngestReport:
    """Change the working state in the store itself, with no Org folder: `change(tree)` gives the new
    bytes of the files it changes (None: remove the file), which are parsed and committed by
    compare-and-swap. If another writer moved the working state meanwhile, `change` runs again on
    the newer state: it must compute its bytes from the tree it is given. `then(report)` runs in
    the same transaction, as for `ingest`; `digests(path, bytes)`: their hash, when the caller knows it."""
    return retrying(lambda: _commit_once(store, change, message, then, digests))


def _commit_once(store: Store, change: Change, message: str,
                 then: "Callable[[IngestReport], None] | None", digests: Digests | None) -> IngestReport:
    started = time.perf_counter()
    base_oid = store.refs.get(WORKING)
    staged = stage_files(store, _tree(store, base_oid), change(_tree(store, base_oid)), digests)

    def commit() -> None:
        staged.write()
        if staged.tree.oid != base_oid:
            store.refs.set_if_equals(WORKING, staged.tree.oid, base_oid, message)
        if then is not None:
            then(staged.report)

    return _committed(store, commit, staged.batch, staged.report, started)


class StagedFiles:
    """Files' new bytes parsed onto a tree, ready to be written in one transaction (`stage_files`)."""

    def __init__(self, tree: Tree, report: IngestReport, batch: "_Batch"):
        self.tree, self.report, self.batch = tree, report, batch

    def write(self) -> None:
        """Write the tree and what parsing made (objects, caches); call inside a transaction. A gc that
        collected what the parse reused meanwhile makes it start over (a RefConflict)."""
        if any(oid not in self.batch.in_base and oid not in self.batch.store.objects for oid in self.batch.reused):
            raise _CollectedMeanwhile()
        self.batch.add(self.tree)
        self.report.new_objects = self.batch.write()

    def get(self, oid: bytes) -> OrgObject:
        """An object of the new tree (parsed here, or stored)."""
        return self.batch.get(oid)

    @property
    def objects(self) -> dict[Oid, OrgObject]:
        """The objects parsing made (not all stored yet)."""
        return self.batch.objects

    def committed(self) -> None:
        """Keep what the next parse starts from, once `write` landed."""
        self.batch.committed()


def stage_files(store: Store, base: Tree, files: Mapping[str, "bytes | None"],
                digests: Digests | None = None) -> StagedFiles:
    """The tree `base` becomes with these files' new bytes (None: the file goes; `digests` gives their hash when
    known), parsed with the store's caches and nothing written yet: a UserError names a file that cannot be
    written, or whose bytes are not Org text."""
    named = [f"{rel}: {problem}" for rel in files if (problem := path_problem(rel)) is not None]
    if named:
        raise UserError("cannot write these files:\n  " + "\n  ".join(named))
    entries: dict[str, Oid | None] = {}  # changes to `base`
    report = IngestReport(root=base.oid, files=len(files))
    with store.reading():
        batch = _Batch(store, _layouts.setdefault(store, {}), base, None)
        for rel, data in files.items():
            if data is None:
                report.removed += [rel] if rel in base.entries else []
                entries[rel] = None
                continue
            try:
                entries[rel], changed = batch.document(rel, data, digests and digests(rel, data) or hash_bytes(data))
            except NotOrgText as exc:
                raise UserError(located(rel, exc.line, exc.reason)) from None
            report.parsed += [rel] if changed else []
    tree = base.with_changes(entries)
    report.root = tree.oid
    return StagedFiles(tree, report, batch)


def _read(batch: "_Batch", root: Path, files: list[str], report: IngestReport, progress: Progress | None = None,
          marker: bytes | None = None, written: Mapping[str, bytes] | None = None,
          digests: Mapping[str, bytes] | None = None) -> dict[str, Oid]:
    """The document of each Org file named (by path from `root`), parsing only bytes not seen before;
    problems and parsed files go into `report`. See `ingest` for `written` and `digests`."""
    entries: dict[str, Oid] = {}
    written, digests = written or {}, digests or {}
    for n, rel in enumerate(files, 1):
        if progress:
            progress(n, len(files), rel)
        path, data, stat = os.path.join(root, rel), written.get(rel), None
        if data is None:
            try:
                if (known := batch.unchanged(path)) is not None:
                    entries[rel] = known
                    continue
                read_at, stat, data = _read_whole(path)
            except OSError as exc:
                report.problems.append(Problem(rel, exc.strerror or str(exc)))
                continue
            except TooLarge as exc:
                report.problems.append(Problem(rel, f"{exc.reason}: not ingested"))
                continue
            if data is None:
                report.problems.append(Problem(rel, "kept changing while it was read; it is read when it is saved"))
                continue
        digest = digests.get(rel) if rel in written and rel in digests else hash_bytes(data)
        try:
            entries[rel], changed = batch.document(path, data, digest)
        except NotOrgText as exc:
            report.problems.append(Problem(rel, exc.reason, exc.line))
            continue
        if stat is not None:
            batch.read(path, stat, read_at, digest, entries[rel])
        if changed:
            report.parsed.append(rel)
            if marker is not None and batch.contains(path, data, marker):
                report.marked.append(rel)
    return entries


def _read_whole(path: str) -> tuple[int, os.stat_result, bytes | None]:
    """When the file at `path` was read, its stat then, and its bytes: None if it changed during each of
    READ_ATTEMPTS reads (a file written in place, as editors save, may otherwise read half old, half new)."""
    for _ in range(READ_ATTEMPTS):
        with open(path, "rb") as file:
            read_at, stat = time.time_ns(), os.fstat(file.fileno())
            data = read_file_bounded(file, ORG_FILE, "an Org file", path)
            if stat_signature(os.fstat(file.fileno())) == stat_signature(stat) and len(data) == stat.st_size:
                return read_at, stat, data
    return read_at, stat, None


@dataclass
class FolderRead:
    """A folder's Org files read into a tree, not yet committed: `write()` stores its objects (in a transaction)."""

    root: Path
    tree: Tree
    report: IngestReport
    batch: "_Batch"

    def digest(self, rel: str) -> bytes | None:
        """The hash of the bytes read from the file `rel` (None: not read)."""
        return self.batch.digests.get(os.path.join(self.root, rel))

    def get(self, oid: bytes) -> OrgObject:
        """An object of the tree, read or stored."""
        return self.batch.get(oid)

    def bytes_read(self, rel: str) -> bytes | None:
        """The bytes read from the file `rel` if they are kept (a large file's are, for its layout)."""
        return self.batch.bytes_read.get(os.path.join(self.root, rel))

    def render(self, rel: str, oid: Oid, get: org.Getter | None = None) -> bytes:
        """The bytes of a document for the file `rel` (its objects read with `get`, else as `get` here):
        an edit of what was read there costs what it changed."""
        get = get or self.get
        path = os.path.join(self.root, rel)
        layout = self.batch.layout(path)
        if layout is not None and layout.document.oid == oid:
            return layout.data
        document = get(oid)
        splice = None if layout is None else layout.splice(document, get)
        if splice is None:
            return org.render(document, get).encode("utf-8")
        self.batch.spliced[path] = layout, splice  # for `layout_of` these bytes, if they are written
        return splice.data

    def layout_of(self, rel: str, data: bytes) -> org.Layout | None:
        """The layout of bytes `render` made for the file `rel`, derived from the one it edited without
        parsing them (None: parse them); it reads nothing else, so it may run on another thread."""
        layout, splice = self.batch.spliced.get(os.path.join(self.root, rel), (None, None))
        return None if splice is None or splice.data is not data else layout.edited(splice)

    def relayout(self, rel: str, data: bytes, layout: org.Layout | None) -> None:
        """Keep `layout` (else the parse of `data`) as the layout of the bytes about to be written to the
        file `rel` (a layout need not be the file's: a re-parse compares its bytes with the file's), so that
        an edit of them re-parses only what it touched."""
        self.batch.relayout(os.path.join(self.root, rel), data, layout)

    def stored(self) -> bool:
        """Whether the store already holds everything this read found: nothing was parsed, no stat is new."""
        batch = self.batch
        return not (batch.objects or batch.new_stats or batch.doc_cache or batch.seen.keys() - {
            os.fsencode(os.path.join(self.root, rel)) for rel in self.tree.entries})

    def write(self, *trees: Tree, made: Iterable[OrgObject] = ()) -> int:
        """Store what reading parsed that the stored `trees` reach (through the objects `made` for them too),
        and nothing else: a document read and replaced in them, and what only it holds, is left out (a sync
        may drop text the store erased), and so are its cache entries; call inside a transaction.
        ReadCollected if a gc has collected an object the reading reused meanwhile."""
        if any(oid not in self.batch.store.objects for oid in self.batch.reused):
            raise ReadCollected(f"{self.root}: a gc collected objects this read of the folder reused; read it again")
        # (a document read here that a tree keeps is kept at the path it was read at: only those are looked up)
        kept = {oid for path, oid in self.tree.entries.items() if any(tree.entries.get(path) == oid for tree in trees)}
        kept.update(child for obj in made for child in getattr(obj, "children", ()))
        leaving = {oid for oid in self.tree.entries.values() if oid not in kept}
        here = {os.fsencode(os.path.join(self.root, rel)) for rel in self.tree.entries}
        here |= {os.fsencode(os.path.join(self.root, problem.path)) for problem in self.report.problems}
        for gone in self.batch.seen.keys() - here:  # files no longer there
            del self.batch.stats[gone]
        return self.batch.write(leaving, reached_from=kept if leaving else None)


def known_bytes(store: Store, rel: str, document: Oid) -> bytes | None:
    """The bytes of the file `rel` of the working state, if this process committed them last as `document`
    without an Org folder (a large file's layout keeps them): an edit of them then renders nothing."""
    layout = _layouts.get(store, {}).get(rel)
    return layout.data if layout is not None and layout.document.oid == document else None


def note_written(store: Store, documents: Mapping[bytes, Oid]) -> None:
    """Remember the documents of bytes just written to files, by their hash, so that reading them back
    parses nothing; the next commit of `store` here stores them in its parse cache (see `store_written`)."""
    _written.setdefault(store, {}).update(documents)


def store_written(store: Store) -> None:
    """Store in the parse cache the documents of written bytes no commit has stored yet (as a session
    closes: a later process reading those files then parses nothing either)."""
    waiting = _written.pop(store, None)
    if waiting:
        store.transact(lambda: store.table(DOCS_BY_BYTES).update(_stored_entries(store, waiting)))


def _stored_entries(store: Store, documents: Mapping[bytes, Oid], leaving: Collection[Oid] = ()) -> Iterator[tuple]:
    """The (digest, document) pairs of `documents` whose document is stored and not `leaving` (a gc may
    have collected one since it was written)."""
    return ((digest, oid) for digest, oid in documents.items() if oid not in leaving and oid in store.objects)


def read_folder(store: Store, root: Path, progress: Progress | None = None, marker: bytes | None = None,
                written: Mapping[str, bytes] | None = None, digests: Mapping[str, bytes] | None = None,
                scope: str = ".", deep: bool = True) -> FolderRead:
    """Every Org file under `root` (or under `scope`, a path from it; not `deep`: the folder's own files, not its
    subfolders') as a tree of documents, parsing only what changed, without moving any ref (see `ingest`)."""
    root = Path(os.path.abspath(root))
    target = root / scope
    folder = target.is_dir()
    files, skipped = _files_under(root, target, scope, folder, deep)
    report = IngestReport(root=EMPTY_TREE.oid, files=len(files) + len(skipped), problems=list(skipped))
    with store.reading():
        under = os.path.join(target, "") if folder else os.fspath(target)
        batch = _Batch(store, _layouts.setdefault(store, {}), EMPTY_TREE, under, deep)
        tree = Tree(dict(sorted(_read(batch, root, files, report, progress, marker, written, digests).items())))
    report.root = tree.oid
    return FolderRead(root, tree, report, batch)


def _within(tree: Tree, in_scope: Callable[[str], bool]) -> dict[str, Oid]:
    """The entries of `tree` in an ingest's scope."""
    return {path: oid for path, oid in tree.entries.items() if in_scope(path)}


def scope_test(scope: str, folder: bool, deep: bool = True) -> Callable[[str], bool]:
    """Whether a path of the working state lies in an ingest's scope: the root, a folder (not `deep`: its own
    files only), or one file."""
    if scope == ".":
        return lambda path: True
    if folder and not deep:
        return lambda path: path.startswith(scope + "/") and "/" not in path[len(scope) + 1:]
    if folder:
        return lambda path: path.startswith(scope + "/")
    return lambda path: path == scope


def _files_under(root: Path, target: Path, scope: str, folder: bool | None = None, deep: bool = True,
                 ) -> tuple[list[str], list[Problem]]:
    """The Org files to read under `target` (by path from `root`; not `deep`: in that folder itself), and those
    skipped (links, bad names); `folder`: whether `target` is a folder, when the caller knows."""
    if target.is_dir() if folder is None else folder:
        prefix = "" if scope == "." else scope + "/"
        scan = scan_folder(target, root, deep=deep)
        remove_leftovers(scan.leftovers)
        files = [prefix + rel for rel in scan.paths]
        skipped = [Problem(prefix + p.path, p.reason) for p in scan.skipped]
    else:
        files, skipped = [scope], []
        if target.is_symlink() and (problem := link_problem(os.fspath(target), Path(os.path.realpath(root)))):
            files, skipped = [], [Problem(scope, problem)]
    named = {rel: problem for rel in files if (problem := path_problem(rel)) is not None}
    return ([rel for rel in files if rel not in named],
            skipped + [Problem(rel, f"not ingested: its path {problem}") for rel, problem in named.items()])


class _Batch:
    """Objects and cache entries gathered during one ingest, written in one transaction."""

    def __init__(self, store: Store, layouts: dict[str, org.Layout], base: Tree, under: str | None,
                 deep: bool = True):
        self.store = store
        self.layouts = layouts
        self.new_layouts: dict[str, org.Layout] = {}
        # Stored, as the working state reaches them: known without a lookup while a folder is read (a few files
        # staged look each up instead of listing every file of the tree).
        self.in_base = set(base.entries.values()) if under is not None else set()
        self.stats = store.table(STATS)
        # The stat entries of every file under `under` (a folder, or one file; None: no files read), in one
        # scan rather than a lookup per file: on a database server each lookup is a round trip.
        # (not `deep`: the folder's own files only)
        self.seen = {} if under is None else {key: entry for key, entry in self.stats.items(os.fsencode(under))
                                              if deep or b"/" not in key[len(os.fsencode(under)):]}
        self.new_stats: dict[bytes, tuple[bytes, Oid]] = {}  # path -> its stat entry, and the document read
        self.docs = store.table(DOCS_BY_BYTES)
        self.subtrees = store.table(SUBTREES)
        self.objects: dict[Oid, OrgObject] = {}
        self.doc_cache: dict[bytes, Oid] = {}
        self.written = dict(_written.get(store, {}))  # documents of bytes written here, not yet stored
        self.subtree_cache: dict[bytes, Oid] = {}
        self.reused: set[bytes] = set()  # checked again when committing, in case gc ran meanwhile
        self.digests: dict[str, bytes] = {}  # path -> the hash of the bytes read there (or known unchanged)
        self.bytes_read: dict[str, bytes] = {}  # path -> the bytes read there, for a large file (its layout's)
        self.spliced: dict[str, tuple[org.Layout, org.Splice]] = {}  # path -> how its last rendering was made
        self.replaced: list[org.Layout] = []  # layouts `committed` replaced (freeing them takes a while)

    def unchanged(self, path: str) -> Oid | None:
        """The document of a file whose stat is what it was when last read, if it is still stored."""
        seen = self.seen.get(os.fsencode(path))
        if seen is None:
            return None
        try:
            *signature, digest = decode(seen)
        except (TypeError, ValueError):  # a damaged entry is a miss: reading the file rewrites it
            return None
        fresh = tuple(signature) == stat_signature(os.stat(path))
        known = self._known(digest) if fresh and isinstance(digest, bytes) and len(digest) == OID_SIZE else None
        if known is not None:
            self.digests[path] = digest
        return known

    def read(self, path: str, stat: os.stat_result, read_at: int, digest: bytes, document: Oid) -> None:
        """Note that the bytes of the file at `path` hashed to `digest` (parsed as `document`) when it had `stat`."""
        if max(stat.st_mtime_ns, stat.st_ctime_ns) < read_at - RACY_SECONDS * 10**9:
            self.new_stats[os.fsencode(path)] = encode([*stat_signature(stat), digest]), document

    def document(self, path: str, data: bytes, digest: bytes) -> tuple[Oid, bool]:
        """The document oid for a file's bytes (whose hash is `digest`), and whether it had to be parsed.

        `path` names the file for the layouts kept between ingests: a file's path on disk, or its path
        in the store for a store-side write."""
        self.digests[path] = digest
        known = self._known(digest)
        if known is not None:
            return known, False
        parsed, layout = self._reparse(path, data) or self._parse(data)
        if len(data) >= LAYOUT_MIN_BYTES:
            self.new_layouts[path] = layout
            self.bytes_read[path] = data
        for obj in parsed.objects:
            self.add(obj)
        self.subtree_cache.update(parsed.subtree_keys)
        self.doc_cache[digest] = parsed.document.oid
        return parsed.document.oid, True

    def relayout(self, path: str, data: bytes, layout: org.Layout | None) -> None:
        """Keep `layout` (else the parse of `data`) as the layout of the bytes to be written at `path`."""
        if len(data) >= LAYOUT_MIN_BYTES:
            self.new_layouts[path] = layout or (self._reparse(path, data) or self._parse(data))[1]

    def contains(self, path: str, data: bytes, marker: bytes) -> bool:
        """Whether the file just parsed at `path` holds `marker` (its kept layout knows where to look)."""
        layout = self.new_layouts.get(path)
        return marker in data if layout is None else layout.contains(marker)

    def _parse(self, data: bytes) -> tuple[org.Parsed, org.Layout]:
        parsed = org.parse(decode_org(data), cached=self._cached_subtree)
        return parsed, org.Layout.of(data, parsed)

    def layout(self, path: str) -> org.Layout | None:
        """The last layout of the file at `path`: as read now, else as last committed."""
        return self.new_layouts.get(path) or self.layouts.get(path)

    def _reparse(self, path: str, data: bytes) -> tuple[org.Parsed, org.Layout] | None:
        """Re-parse an edit of a file whose last layout is kept (this batch's own, else one committed), if every
        object it names is still stored or in this batch."""
        old = self.new_layouts.get(path)
        if old is None:
            old = self.layouts.get(path)
            if old is None or not self._still_stored(old.document.oid):
                return None
        return org.reparse(old, data, self.get, cached=self._cached_subtree)

    def get(self, oid: bytes) -> OrgObject:
        """An object this batch made, or a stored one."""
        return self.objects.get(oid) or self.store.objects[oid]

    def _still_stored(self, oid: Oid) -> bool:
        # A stored document's whole tree is stored: gc collects whole unreachable trees.
        if oid not in self.store.objects:
            return False
        self.reused.add(oid)
        return True

    def committed(self) -> None:
        """Keep what the next ingest and readers start from, now that it is stored: the layouts of
        the files parsed, and the objects decoded (an edited section may list thousands of children).
        The layouts replaced are kept with the batch: freed with it, by whoever lets go of it last."""
        self.replaced = [self.layouts[path] for path in self.new_layouts if path in self.layouts]
        self.layouts.update(self.new_layouts)
        for obj in self.objects.values():
            self.store.objects.remember(obj)
        waiting = _written.get(self.store, {})
        for digest in self.written:
            waiting.pop(digest, None)

    def _known(self, digest: bytes) -> Oid | None:
        oid = self.doc_cache.get(digest) or self._stored(self.docs, digest) or self._stored(self.written, digest)
        return None if oid is None else Oid(oid)

    def _cached_subtree(self, key: bytes) -> Oid | None:
        oid = self.subtree_cache.get(key) or self._stored(self.subtrees, key)
        return None if oid is None else Oid(oid)

    def _stored(self, table, key: bytes) -> bytes | None:
        """The oid a cache table holds for `key` if it names a stored object: a damaged entry is a miss,
        so the file is parsed again and the entry overwritten, at the cost of one lookup per hit (none for
        a document of the working state)."""
        oid = table.get(key)
        if oid is None or len(oid) != OID_SIZE or oid not in self.in_base and oid not in self.store.objects:
            return None
        self.reused.add(oid)
        return oid

    def add(self, obj: OrgObject) -> None:
        for one in (obj, *obj.parts()):
            self.objects.setdefault(one.oid, one)

    def write(self, leaving: Collection[Oid] = (), reached_from: Collection[Oid] | None = None) -> int:
        """Write everything gathered but the documents `leaving`; with `reached_from`, only the objects
        those documents reach (and the cache and stat entries of what is written); call inside a transaction."""
        objects = self.objects if reached_from is None else self._reached(reached_from)
        new = self.store.objects.add_raw((oid, obj.encoded) for oid, obj in objects.items() if oid not in leaving)
        self.docs.update((digest, oid) for digest, oid in self.doc_cache.items() if oid not in leaving)
        self.docs.update(_stored_entries(self.store, self.written, leaving))
        self.subtrees.update((key, oid) for key, oid in self.subtree_cache.items()
                             if oid in objects or oid not in self.objects)
        self.stats.update((path, entry) for path, (entry, document) in self.new_stats.items()
                          if document not in leaving)
        return new

    def _reached(self, roots: Collection[Oid]) -> dict[Oid, OrgObject]:
        """The objects gathered that the documents `roots` reach (through objects gathered)."""
        reached: dict[Oid, OrgObject] = {}
        stack = [oid for oid in roots if oid in self.objects]
        while stack:
            oid = stack.pop()
            if oid not in reached:
                reached[oid] = obj = self.objects[oid]
                stack.extend(child for child in getattr(obj, "children", ()) if child in self.objects)
        return reached


def forget_collected(store: Store, collected: set[bytes]) -> None:
    """Drop cache entries that name collected objects, and the stat entries of files whose bytes they named
    (a hash of a file's bytes would confirm a guess of them); call inside gc's transaction."""
    gone: set[bytes] = set()
    for name in (DOCS_BY_BYTES, SUBTREES):
        table = store.table(name)
        for key, oid in table.items():
            if oid in collected:
                del table[key]
                gone.add(key)
    stats = store.table(STATS)
    for path, entry in stats.items() if gone else ():
        try:
            digest = decode(entry)[-1]
        except (TypeError, ValueError, IndexError):
            digest = None
        if digest is None or digest in gone:
            del stats[path]


class NotOrgText(UserError):
    """A file's bytes are not UTF-8 text."""

    def __init__(self, reason: str, line: int | None = None):
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.reason = reason
        self.line = line


def decode_org(data: bytes) -> str:
    """Decode an Org file's bytes, refusing binary and non-UTF-8 content with the position."""
    if b"\0" in data:
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise NotOrgText("binary file (NUL byte), not Org text", line)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise NotOrgText(f"not UTF-8 (byte 0x{data[exc.start]:02x})", line) from None

