"""Rollback: the working state, HEAD and the Org files on disk returned to a snapshot."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import orgfile
from ..backends import Store
from ..errors import UserError
from ..files import write_atomically
from ..hashing import Oid, hash_bytes
from ..ingest import DOCS_BY_BYTES, WORKING, ingest, org_paths
from ..objects import Snapshot, Tree
from .snapshots import HEAD, resolve, snapshot, snapshots

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
