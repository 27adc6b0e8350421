"""The workspace: a store, and what this machine has of it (an Org folder that is a working copy of it, or none).

Features build on a workspace, never on `api.Cortex`: they read the working state, ingest, snapshot, erase,
and write files through `change_files`, the one write path. Whether this machine has an Org folder is
decided once, when the workspace is opened (`FolderWorkspace` or `StoreWorkspace`), and no feature asks
again: `change_files` takes, for each file, a function from its current version to its new bytes, and

- in a folder, replaces each file only while it still holds what the function was given (a person's save
  meanwhile makes it run again on the new bytes), or appends to it what follows those bytes (`Appended`:
  the write costs what it adds), then syncs the folder into the store, in one commit with whatever the
  caller records (`then`);
- with no folder, computes the new bytes from the working state, commits them by compare-and-swap, and
  runs the functions again on the newer state when another writer won.

So a function must compute its bytes from the version it is given, and give the same result when it runs
again on its own output (an edit already made is made once).
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from . import history, ingest as ingesting, org
from .backends import Store
from .errors import UserError, located
from .files import Appended, FilesBusy, edit_file, remove_tree, whole
from .locks import folder_lock
from .hashing import hash_bytes
from .history.proposals import Proposal
from .ingest import IngestReport, decode_org
from .objects import Document, Snapshot, Tree
from .query import render_file
from .scan import relative_path
from .reads import ORG_FILE, read_bounded

__all__ = ["AnotherFolder", "Appended", "CONFIG", "Current", "Changed", "Edit", "FolderWorkspace", "LITERATE",
           "StoreWorkspace", "UNCHANGED", "Workspace", "new_bytes", "open_workspace"]

CONFIG = "config"
LITERATE = "dsl.literate"  # Org files that hold cortex definition blocks (their paths, as keys)
ORG_ROOT_KEY = b"org_root"
FOLDER_WAIT = 60.0  # seconds a writer waits for another process writing the same folder of the Org root
UNCHANGED = object()  # what an edit returns when the file stays as it is


class Current:
    """A file as the workspace has it now: its bytes and its document (None: no such file), each made from
    the other when first asked for (a document the store already holds for those bytes is taken from it)."""

    def __init__(self, path: str, data: bytes | None = None, document: Document | None = None,
                 get: Callable[[bytes], object] | None = None, store: Store | None = None):
        self.path = path
        self.given_data, self.given_document = data, document
        self._get, self._store = get, store

    @cached_property
    def data(self) -> bytes | None:
        """The file's bytes."""
        if self.given_data is not None or self.given_document is None:
            return self.given_data
        return org.render(self.given_document, self._get).encode("utf-8")

    @cached_property
    def document(self) -> Document | None:
        """The file's document: a UserError naming the file and line if its bytes are not Org text."""
        if self.given_document is not None or self.given_data is None:
            return self.given_document
        if self._store is not None and (known := self._store.table(ingesting.DOCS_BY_BYTES).get(
                hash_bytes(self.given_data))) is not None and known in self._store.objects:
            self._get = self._store.objects.__getitem__
            return self._store.objects[known]
        try:
            parsed = org.parse(decode_org(self.given_data))
        except ingesting.NotOrgText as exc:
            raise UserError(located(self.path, exc.line, exc.reason)) from None
        objects = {obj.oid: obj for obj in parsed.objects}
        self._get = lambda oid: objects.get(oid) or self._store.objects[oid]
        return parsed.document

    def get(self, oid: bytes):
        """An object of the file's document."""
        return self._get(oid)

    @property
    def exists(self) -> bool:
        return self.given_data is not None or self.given_document is not None


# new bytes, None (no file), UNCHANGED, or `Appended` (the bytes it was given and what follows them)
Edit = Callable[[Current], "bytes | Appended | None | object"]


def new_bytes(new: "bytes | Appended | None | object") -> "bytes | None | object":
    """What an edit returned, with appended bytes made whole."""
    return whole(new)


@dataclass
class Changed:
    """What `change_files` did: the files it wrote (or removed), and the report of the commit that took them; under
    review, the proposal it made instead (`review.ReviewedWorkspace`)."""

    paths: list[str] = field(default_factory=list)
    report: IngestReport | None = None
    proposal: Proposal | None = None


class Workspace(ABC):
    """A store and this machine's Org folder of it, or none (see the module)."""

    root: Path | None

    def __init__(self, store: Store):
        self.store = store
        self.erasing: list[Callable[[], None]] = []  # run before an erasure rewrites history (indexes dropped)
        self.replacing: list[Callable[[history.forget.Replaced], object]] = []  # see history.forget's cleanup

    # --- reading ------------------------------------------------------------------------

    @abstractmethod
    def read(self, path: str) -> bytes | None:
        """A file's bytes as this machine has it: the Org folder's file, else the working state's (None: none)."""

    @abstractmethod
    def where(self, folder: str) -> str:
        """Where a folder's files live, for messages ("under /notes/agents")."""

    def working(self) -> Tree:
        """The tree of the working state."""
        return ingesting.working_tree(self.store)

    def current(self, path: str, tree: Tree | None = None) -> Current:
        """A file as the working state (or `tree`) has it."""
        tree = self.working() if tree is None else tree
        oid = tree.entries.get(path)
        get = self.store.objects.__getitem__
        return Current(path, None, None if oid is None else get(oid), get)

    def rendered(self, path: str, tree: Tree | None = None) -> str:
        """The text of a file of the working state (or of `tree`)."""
        return render_file(self.store, self.working() if tree is None else tree, path)

    # --- history ------------------------------------------------------------------------

    def snapshot(self, message: str = "") -> Snapshot:
        """Record the working state (O(1)) and move HEAD to it."""
        return history.snapshot(self.store, message)

    def erase(self, rewrite: history.forget.TreeRewrite, what: str) -> history.Forgotten | None:
        """Rewrite every kept state with `rewrite` and remove every trace of what it dropped (see
        `history.forget`), running the `erasing` hooks first (a crash halfway must not leave derived data
        holding the text) and the `replacing` ones in its transaction. Refused (before anything changes)
        while another process has the store open."""
        with self.store.engine.exclusively():
            for hook in self.erasing:
                hook()
            return history.forget(self.store, rewrite, what,
                                  lambda replaced: [hook(replaced) for hook in self.replacing])

    # --- writing ------------------------------------------------------------------------

    @abstractmethod
    def change_files(self, message: str, edits: Mapping[str, Edit] | Callable[[Tree], Mapping[str, Edit]], *,
                     within: str = ".", expected: Mapping[str, bytes] | None = None,
                     digests: Callable[[str, bytes], bytes | None] | None = None,
                     then: Callable[[IngestReport], None] | None = None, operation: str = "write",
                     ingest: bool = True) -> Changed:
        """Change files, each by its edit (a function of its current version; `edits` may be a function of
        the working state under `within`, a folder, giving them), and commit them with `message`;
        `then(report)` runs in that commit. `expected`: the bytes the caller last saw in some files (a
        folder's file is then read only if it changed); `digests(path, bytes written)`: their hash, when the
        caller knows it; `operation`: what the write does (add, forget, compact...), for a review of it.
        `ingest=False` (no `then`): in a folder, the files are written and synced to disk but not ingested,
        which a later sync of them does (with no folder, the write is the commit). See the module."""

    def check_erase(self) -> None:
        """Refuse, before anything changes, an erasure this workspace cannot make (a UserError)."""

    def remove(self, folder: str, message: str) -> list[str]:
        """Remove every file under `folder` (a path from the root) in one commit; the paths removed."""
        return self.change_files(message, lambda tree: dict.fromkeys(paths_under(tree, folder + "/"), _gone),
                                 within=folder, operation="purge").paths

    @abstractmethod
    def held(self, folder: str):
        """A context in which this process alone writes the files under `folder` (a path from the root)."""

    @abstractmethod
    def refresh(self, folder: str, written: Mapping[str, bytes] | None = None,
                digests: Mapping[str, bytes] | None = None,
                then: Callable[[IngestReport], None] | None = None) -> IngestReport | None:
        """Bring the working state in line with this machine's files under `folder` (a path from the root):
        a sync of them, or nothing when there is no Org folder (or the store is open read-only). `written`:
        what some of those files hold, as this process wrote them (taken as read; `digests`: their hashes);
        `then(report)` runs in the sync's commit, if there is one."""

    @abstractmethod
    def unsaved(self) -> list[str]:
        """The Org files of this machine whose text differs from the working state (edits not ingested yet)."""

    def close(self) -> None:
        """Finish what this process's writes left running in the background: after this, nothing writes."""

    @abstractmethod
    def size(self, path: str, tree: Tree) -> int:
        """How many bytes a file of `tree` (the working state) takes."""

    @abstractmethod
    def ingest(self, path: str | os.PathLike | None = None, progress=None, written: Mapping[str, bytes] | None = None,
               digests: Mapping[str, bytes] | None = None, then=None) -> IngestReport:
        """Bring the Org folder's edits into the store (and the store's into the folder)."""

    @abstractmethod
    def rollback(self, ref: str | int, *, keep: bool = False, force: bool = False) -> history.RollbackReport:
        """Return the working state and HEAD (and the Org files) to a snapshot."""


class FolderWorkspace(Workspace):
    """A store and the Org folder on this machine that is a working copy of it."""

    def __init__(self, store: Store, root: Path, marker: bytes | None = None):
        super().__init__(store)
        self.root = root
        self.marker = marker  # bytes that mark a file holding definition blocks, noted in LITERATE as it syncs
        self.spare: Callable[[str], bool] | None = None  # the files a sync reads but never writes (open in an editor)
        self._holding = threading.local()  # the folders this thread holds

    def ingest(self, path=None, progress=None, written=None, digests=None, then=None) -> IngestReport:
        """Sync the Org folder (the files under `path`, default all) with the store: its edits go in, what
        others committed comes out into it; `written`: bytes just written to some files (taken as read),
        `digests` their hashes; `then(report)` runs in the sync's commit. The first ingest of a store makes
        the folder its working copy."""
        return self.synced(path, progress, written, digests, then)[0]

    def synced(self, path=None, progress=None, written=None, digests=None, then=None
               ) -> tuple[IngestReport, history.SyncReport]:
        """`ingest`, and the report of the sync it made."""
        if path is not None and Path(path).is_dir() and self.store.refs.get(ingesting.WORKING) is None:
            self.root = settle_root(self.store, path)  # the first ingest of a folder makes it the store's
        scope = "." if path is None else relative_path(self.root, Path(path))  # (outside: a UserError)
        if not self.root.is_dir() or not (self.root / scope).exists():
            raise UserError(f"{self.root / scope}: no such file or folder")
        return self._synced(scope, progress, written, digests, then)

    def refresh(self, folder: str, written=None, digests=None, then=None) -> IngestReport | None:
        if self.store.read_only or not self.root.is_dir():
            return None
        if not (self.root / folder).is_dir():
            if not any(paths_under(self.working(), folder.rstrip("/") + "/")):
                return None
            folder = "."  # (gone from the folder: its removal is sent)
        return self._synced(folder, None, written, digests, then)[0]

    def read(self, path: str) -> bytes | None:
        try:
            return read_bounded(self.root / path, ORG_FILE, "an Org file")
        except (FileNotFoundError, NotADirectoryError):
            return None

    def where(self, folder: str) -> str:
        return f"under {self.root / folder}"

    def close(self) -> None:
        history.settled(self.root)

    def unsaved(self) -> list[str]:
        if not self.root.is_dir():
            return []
        on_disk, working = ingesting.read_folder(self.store, self.root).tree.entries, self.working().entries
        return sorted(p for p in on_disk.keys() | working.keys() if on_disk.get(p) != working.get(p))

    def size(self, path: str, tree: Tree) -> int:
        try:
            return (self.root / path).stat().st_size
        except OSError:
            return 0

    def _synced(self, scope: str, progress=None, written=None, digests=None, then=None, deep: bool = True
                ) -> tuple[IngestReport, history.SyncReport]:
        synced = history.sync(self.store, self.root, tracked=True, progress=progress, marker=self.marker,
                              written=written, digests=digests, then=then, scope=scope,
                              message=f"ingest {scope}{ingesting.SYNCED}", spare=self.spare, deep=deep)
        self._note_literate_definitions(synced.sent + synced.received, synced.marked)
        return _ingest_report(self.store, synced), synced

    def _note_literate_definitions(self, changed: list[str], marked: list[str]) -> None:
        """Remember which of the Org files `changed` hold cortex definition blocks (those `marked`)."""
        literate = self.store.table(LITERATE)
        for path in marked:
            if path.encode() not in literate:
                literate[path.encode()] = b""
        for path in set(changed) - set(marked):
            if path.encode() in literate:
                del literate[path.encode()]

    def rollback(self, ref, *, keep=False, force=False) -> history.RollbackReport:
        """Return the Org files, the working state and HEAD to a snapshot; the folder is synced first (what
        store-side writers committed is an edit a rollback must not lose) and after (its base follows it)."""
        if self.root.is_dir():
            self.ingest()
        report = history.rollback(self.store, self.root, ref, keep=keep, force=force)
        self.ingest()
        return report

    @contextmanager
    def held(self, folder: str) -> Iterator[None]:
        """(A thread that holds the folder may ask again.)"""
        holding = self._holding.__dict__.setdefault("folders", set())
        if folder in holding:  # (checked when it was taken)
            yield
            return
        path = self.root / folder
        if not path.resolve().is_relative_to(self.root.resolve()):
            raise UserError(f"{path}: leads outside the Org root ({self.root}); nothing was written there")
        with folder_lock(path, FOLDER_WAIT, lambda: FilesBusy(
                f"{path}: another process has held this folder's files for too long")):
            holding.add(folder)
            try:
                yield
            finally:
                holding.discard(folder)

    def remove(self, folder: str, message: str) -> list[str]:
        """Remove the folder's files, then the folder with whatever else it held (a backup of a note keeps
        its text)."""
        with self.held(folder):
            removed = super().remove(folder, message)
            path = self.root / folder
            if path.is_symlink():
                path.unlink()
            elif path.is_dir():
                remove_tree(path)
        return removed

    def change_files(self, message, edits, *, within=".", expected=None, digests=None, then=None,
                     operation="write", ingest=True) -> Changed:
        if then is not None and not ingest:
            raise ValueError("a write that is not ingested has no commit for `then` to run in")
        if callable(edits):
            self.refresh(within)
            edits = edits(self.working())
        written: dict[str, bytes | Appended] = {}
        changed: list[str] = []
        if edits:
            self.root.mkdir(parents=True, exist_ok=True)  # a root named before it holds anything
        for path, edit in edits.items():
            def compute(old: bytes | None, path=path, edit=edit) -> bytes | None:
                new = edit(Current(path, old, store=self.store))
                return old if new is UNCHANGED else new

            done, data = edit_file(self.root, path, compute, (expected or {}).get(path))
            if done:
                changed.append(path)
                if data is not None:
                    written[path] = data
        if not ingest:
            return Changed(changed, None)
        known = {path: digest for path, data in written.items() if digests and (digest := digests(path, data))}
        written = {path: whole(data) for path, data in written.items()}
        scope = _narrowest(self.root, changed) if changed else within
        # Files changed in one folder: its own files are read (not its subfolders', which nothing here changed).
        shallow = len({os.path.dirname(path) for path in changed}) == 1 and scope == os.path.dirname(changed[0])
        report = self._synced(scope, None, written, known, then, deep=not shallow)[0] if changed or then else None
        return Changed(changed, report)


class StoreWorkspace(Workspace):
    """A store with no Org folder on this machine: files change in its working state, by compare-and-swap."""

    root = None

    def ingest(self, path=None, progress=None, written=None, digests=None, then=None) -> IngestReport:
        raise UserError("ingest needs an Org folder, and this session has none (--no-org); open the store with "
                        "--org DIR, or check out a copy with `cortex checkout DIR`")

    def rollback(self, ref, *, keep=False, force=False) -> history.RollbackReport:
        """Return the working state and HEAD to a snapshot; working copies receive it when they sync."""
        return history.rollback_state(self.store, ref, keep=keep, force=force)

    def held(self, folder: str):
        return nullcontext()  # compare-and-swap takes turns

    def refresh(self, folder: str, written=None, digests=None, then=None) -> None:
        return None  # the working state is what there is

    def read(self, path: str) -> bytes | None:
        return self.rendered(path).encode("utf-8") if path in self.working().entries else None

    def where(self, folder: str) -> str:
        return "in the store's working state"

    def unsaved(self) -> list[str]:
        return []  # the working state is what there is

    def size(self, path: str, tree: Tree) -> int:
        return len(self.rendered(path, tree).encode("utf-8"))

    def change_files(self, message, edits, *, within=".", expected=None, digests=None, then=None,
                     operation="write", ingest=True) -> Changed:
        changed: list[str] = []

        def change(tree: Tree) -> dict[str, bytes | None]:
            files: dict[str, bytes | None] = {}
            for path, edit in (edits(tree) if callable(edits) else edits).items():
                current = self.current(path, tree)
                if current.exists and (known := ingesting.known_bytes(self.store, path, tree.entries[path])):
                    current = Current(path, known, current.given_document, current.get)
                new = new_bytes(edit(current))  # (an edit that changes nothing says so: its bytes are not compared)
                if new is not UNCHANGED and (new is not None or current.exists):
                    files[path] = new
            changed[:] = files
            return files

        report = ingesting.commit_files(self.store, change, message, then, digests)
        return Changed(list(changed), report)


def open_workspace(store: Store, org_root: str | os.PathLike | None, *, folder: bool = True,
                   marker: bytes | None = None) -> Workspace:
    """The workspace of a store: with its Org folder (`org_root`, default: the one it tracks, else `org/`), or,
    with `folder=False`, none; `marker`: the bytes that mark an Org file holding definition blocks."""
    if not folder:
        if org_root is not None:
            raise UserError(f"an Org folder ({org_root}) and no Org folder were both asked for; choose one")
        return StoreWorkspace(store)
    return FolderWorkspace(store, settle_root(store, org_root), marker)


class AnotherFolder(UserError):
    """A store asked to track an Org folder other than the one it tracks."""


def settle_root(store: Store, requested: str | os.PathLike | None) -> Path:
    """The Org folder a store tracks: `requested`, recorded as the store's if it tracks none yet (a store
    tracks one folder), else the recorded one, else `org/`."""
    config = store.table(CONFIG)
    recorded = config.get(ORG_ROOT_KEY)
    if requested is None:
        return Path(recorded.decode()) if recorded else Path(os.path.abspath("org"))
    root = Path(os.path.abspath(requested))
    if recorded and Path(recorded.decode()) != root and store.refs.get(ingesting.WORKING):
        raise AnotherFolder(f"this store tracks the Org folder {recorded.decode()}, not {root}; open that folder, "
                            "or give this one a store of its own (--store DIR)")
    if recorded != str(root).encode() and not store.read_only:
        config[ORG_ROOT_KEY] = str(root).encode()
    return root


def _ingest_report(store: Store, synced: history.SyncReport) -> IngestReport:
    """An ingest's report of a sync of the Org folder: the files it read and parsed, those it sent and the
    folder no longer holds (removed), those it received, its objects and its conflicts."""
    entries = store.objects[synced.tree].entries
    read = synced.read
    return IngestReport(root=synced.tree, files=read.files, problems=read.problems, parsed=read.parsed,
                        removed=[p for p in synced.sent if p not in entries], marked=synced.marked,
                        new_objects=synced.new_objects, seconds=synced.seconds, received=synced.received,
                        conflicts=synced.conflicts)


def _gone(current: Current) -> None:
    """An edit that removes the file."""
    return None


def _narrowest(root: Path, paths: list[str]) -> str:
    """The deepest folder of the Org folder holding every one of `paths` (files, as paths from the root)."""
    common = os.path.commonpath([os.path.dirname(path) for path in paths])
    while common and not (root / common).is_dir():
        common = os.path.dirname(common)
    return common or "."


def paths_under(tree: Tree, folder: str) -> Iterable[str]:
    """The files of a tree under a folder (a path from the root, ending with `/`)."""
    return (path for path in tree.entries if path.startswith(folder))
