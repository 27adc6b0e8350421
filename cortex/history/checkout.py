"""Rollback: the working state, HEAD and the Org files on disk returned to a snapshot.

Rollback never loses what it cannot bring back: it refuses to overwrite or delete a file that
no snapshot holds (an edit, unless kept or forced; a file that is not Org text, never), it
writes only under the Org root, whatever a snapshot's tree names or a folder has become, and
it compares each file with what it read right before replacing it, stopping at an edit saved
meanwhile.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import org
from ..backends import Store
from ..errors import UserError
from ..files import (ChangedMeanwhile, DiskFull, OutsideRoot, confined, file_holds, remove_leftovers, remove_under,
                     write_under)
from ..hashing import Oid, hash_bytes
from ..ingest import DOCS_BY_BYTES, WORKING, NotOrgText, decode_org, ingest
from ..scan import scan_folder
from ..objects import Snapshot, Tree
from ..paths import tree_problems
from ..reads import ORG_FILE, TooLarge, read_bounded
from .snapshots import HEAD, resolve, snapshot, snapshots

__all__ = ["DirtyWorkingFiles", "OnDisk", "RollbackReport", "RollbackStopped", "UnsnapshottableFiles", "disk_files",
           "holds", "holds_bytes", "rollback", "rollback_state", "unsnapshotted_edits"]


class DirtyWorkingFiles(UserError):
    """Org files on disk hold edits no snapshot has."""

    def __init__(self, paths: list[str]):
        listed = "\n  ".join(paths)
        super().__init__(
            f"these Org files hold edits that no snapshot has:\n  {listed}\n"
            "roll back with keep (--keep) to snapshot them first, or force (--force) to discard them"
        )
        self.paths = paths


@dataclass
class RollbackReport:
    """What a rollback changed."""

    target: Snapshot
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: Snapshot | None = None
    folder: Path | None = None  # the Org folder written (None: the store alone)
    created: bool = False  # whether the rollback made that folder


class UnsnapshottableFiles(UserError):
    """Files a rollback would overwrite or delete that no snapshot holds or can hold."""

    def __init__(self, problems: list[str]):
        listed = "\n  ".join(problems)
        super().__init__(
            f"rollback would overwrite or delete these files, which no snapshot can hold:\n  {listed}\n"
            "move them out of the Org root (or fix them), then roll back again; nothing was changed"
        )
        self.problems = problems


class RollbackStopped(UserError):
    """A rollback stopped at a file: it changed on disk meanwhile, or the disk was full."""

    def __init__(self, changed: str, restored: list[str], left: list[str], why: str = "changed while rolling back",
                 then: str = "roll back again (--keep snapshots the new edit first)"):
        also = f" and the files after it ({', '.join(left)})" if left else ""
        done = f"; restored before it: {', '.join(restored)}" if restored else ""
        super().__init__(
            f"{changed} {why}, so the rollback stopped and left it{also} as they are{done}. "
            f"HEAD and the working state did not move and nothing is lost: {then}"
        )
        self.changed, self.restored, self.left = changed, restored, left


@dataclass(frozen=True)
class OnDisk:
    """An Org file (or a link not followed) as rollback found it: its bytes' digest, their document, or why
    no snapshot can hold it."""

    digest: bytes | None
    document: Oid | None = None
    problem: str | None = None
    skipped: bool = False


def disk_files(store: Store, root: Path) -> dict[str, OnDisk]:
    """Each Org file on disk (and each link not followed) by path from the root, as `OnDisk`."""
    if not root.exists():
        return {}
    scan = scan_folder(root)
    remove_leftovers(scan.leftovers)
    docs = store.table(DOCS_BY_BYTES)
    found = {p.path: OnDisk(None, problem=p.reason, skipped=True) for p in scan.skipped}
    with store.reading():
        for rel in scan.paths:
            found[rel] = _on_disk(root / rel, docs)
    return found


def _on_disk(path: Path, docs) -> OnDisk:
    try:
        data = read_bounded(path, ORG_FILE, "an Org file")
    except OSError as exc:
        return OnDisk(None, problem=f"cannot be read: {exc.strerror}")
    except TooLarge as exc:
        return OnDisk(None, problem=f"cannot be read: {exc.reason}")
    digest = hash_bytes(data)
    document = docs.get(digest)
    if document is None:
        try:
            decode_org(data)
        except NotOrgText as exc:
            return OnDisk(digest, problem=str(exc))
    return OnDisk(digest, None if document is None else Oid(document))


def unsnapshotted_edits(store: Store, root: Path, disk: dict[str, OnDisk] | None = None) -> list[str]:
    """Org files on disk whose bytes no kept snapshot holds at that path."""
    disk = disk_files(store, root) if disk is None else disk
    recorded: dict[str, set[bytes]] = {}
    for snap in snapshots(store):
        for path, doc in store.objects[snap.root].entries.items():
            recorded.setdefault(path, set()).add(bytes(doc))
    return [rel for rel, found in disk.items()
            if found.document is None or bytes(found.document) not in recorded.get(rel, ())]


def rollback(store: Store, root: Path, ref: str | int, *, keep: bool = False, force: bool = False) -> RollbackReport:
    """Return the working state, HEAD and the Org files on disk to a snapshot; never lose an edit silently.

    Only files whose bytes differ from the snapshot's are rendered and written; running an
    interrupted rollback again completes it.
    """
    root = Path(os.path.abspath(root))
    target = resolve(store, ref)
    tree: Tree = store.objects[target.root]
    crafted = tree_problems(tree.entries)
    if crafted:
        raise OutsideRoot(f"snapshot {target.oid.hex()[:12]} names files outside the Org root; nothing was "
                          "written:\n  " + "\n  ".join(crafted))
    disk = disk_files(store, root)
    to_write = [path for path, doc in sorted(tree.entries.items()) if disk.get(path, OnDisk(None)).document != doc]
    to_remove = [rel for rel in disk if rel not in tree.entries and not disk[rel].skipped]
    # what the scan skipped (a link not followed) is left alone unless the snapshot has a file there
    unsafe = [f"{rel}: {found.problem}" for rel, found in sorted(disk.items())
              if found.problem is not None and (rel in tree.entries or not found.skipped)]
    if unsafe:
        raise UnsnapshottableFiles(unsafe)
    for path in to_write:
        confined(root, path)
    for path in to_remove:
        confined(root, path, follow=False)
    store.objects.preload(tree.entries[path] for path in to_write)
    report = RollbackReport(target, folder=root, created=not root.exists())
    dirty = unsnapshotted_edits(store, root, {rel: disk[rel] for rel in disk if disk[rel].problem is None})
    if dirty and keep:
        ingest(store, root)
        report.kept = snapshot(store, "before rollback to " + target.oid.hex()[:12])
    elif dirty and not force:
        raise DirtyWorkingFiles(dirty)
    written = _restore(store, root, tree, disk, to_write, to_remove, report)
    _move_refs(store, target, written)
    return report


def rollback_state(store: Store, ref: str | int, *, keep: bool = False, force: bool = False) -> RollbackReport:
    """Return the working state and HEAD to a snapshot in the store alone (no Org folder on this machine):
    working copies receive it on their next sync. A working state no snapshot holds is refused, unless
    `keep` (snapshot it first) or `force` (its reflog entry still names it)."""
    target = resolve(store, ref)
    report = RollbackReport(target)
    working = store.refs.get(WORKING)
    kept = snapshots(store)
    if working is not None and working != target.root and all(snap.root != working for snap in kept):
        if keep:
            report.kept = snapshot(store, "before rollback to " + target.oid.hex()[:12])
        elif not force:
            newest = store.objects[kept[0].root].entries if kept else {}
            entries = store.objects[working].entries
            raise DirtyWorkingFiles(sorted(p for p in newest.keys() | entries.keys()
                                           if newest.get(p) != entries.get(p)))
    _move_refs(store, target, {})
    return report


def _move_refs(store: Store, target: Snapshot, written: dict[bytes, Oid]) -> None:
    """Point the working state and HEAD at `target`, noting the files just `written` (digest -> document)."""
    message = f"rollback to {target.oid.hex()[:12]}"

    def move() -> None:  # the refs are read inside the write transaction, so no other writer moves them between
        if (old_working := store.refs.get(WORKING)) != target.root:
            store.refs.set_if_equals(WORKING, target.root, old_working, message)
        if (old_head := store.refs.get(HEAD)) != target.oid:
            store.refs.set_if_equals(HEAD, target.oid, old_head, message)
        store.table(DOCS_BY_BYTES).update(written)

    store.transact(move)


def _restore(store: Store, root: Path, tree: Tree, disk: dict[str, OnDisk], to_write: list[str],
             to_remove: list[str], report: RollbackReport) -> dict[bytes, Oid]:
    """Write and remove files, each only while it holds what was read; return {digest: document} written."""
    get = store.objects.__getitem__
    written: dict[bytes, Oid] = {}
    ours: dict[Path, bytes] = {}  # a file two paths name through a link is seen again after our own write
    steps = [(path, True) for path in to_write] + [(path, False) for path in to_remove]
    if to_write:
        root.mkdir(parents=True, exist_ok=True)
    for n, (path, write) in enumerate(steps):
        real = confined(root, path, follow=write)
        unchanged = holds({disk[path].digest if path in disk else None, ours.get(real, b"")})
        try:
            if write:
                data = org.render(get(tree.entries[path]), get).encode("utf-8")
                write_under(root, path, data, unchanged)
                written[ours.setdefault(real, hash_bytes(data))] = tree.entries[path]
            else:
                remove_under(root, path, unchanged)
        except ChangedMeanwhile:
            raise RollbackStopped(path, report.written + report.removed, [p for p, _ in steps[n + 1:]]) from None
        except DiskFull:
            raise RollbackStopped(path, report.written + report.removed, [p for p, _ in steps[n + 1:]],
                                  "could not be written: the disk is full", "free some space and roll back again"
                                  ) from None
        (report.written if write else report.removed).append(path)
    return written


def holds_bytes(data: bytes) -> Callable[[Path], bool]:
    """Whether a file still holds exactly `data` (compared, not hashed: a large file's bytes read are kept)."""
    return lambda path: file_holds(path, data)


def holds(digests: set[bytes | None]) -> Callable[[Path], bool]:
    """Whether a file still holds bytes hashed to one of `digests` (None: that it still does not exist)."""

    def check(path: Path) -> bool:
        try:
            data = read_bounded(path, ORG_FILE, "an Org file")
        except FileNotFoundError:
            return None in digests
        except (OSError, TooLarge):  # no longer a file one can read (a folder, say), or one no digest is of
            return False
        return hash_bytes(data) in digests

    return check
