"""One snapshot as one portable, verified file: export and import."""

from __future__ import annotations

from pathlib import Path

from ..backends import Store
from ..codec import decode, encode
from ..errors import UserError
from ..files import write_atomically
from ..hashing import hash_bytes
from ..paths import folder_problems, tree_problems
from ..reads import read_file_bounded
from ..words import quoted
from ..objects import Document, Folder, Headline, OrgObject, Snapshot, Tree
from ..objects import decode as decode_object
from .gc import reach
from .snapshots import SNAPSHOTS, resolve, snapshot_key

__all__ = ["EXPORT_VERSION", "MAGIC", "MAX_EXPORT", "DamagedExport", "export_snapshot", "import_snapshot"]

MAGIC = b"CORTEX-SNAPSHOT\n"
EXPORT_VERSION = 1
MAX_EXPORT = 4 << 30  # bytes an export may hold: it is read whole to be verified before anything is added


class DamagedExport(UserError):
    """An export file that is truncated, altered or not an export at all."""


def export_snapshot(store: Store, ref: str | int, path: Path) -> tuple[Snapshot, int]:
    """Write one snapshot and every object it reaches to a single file; return it and the object count."""
    snap = resolve(store, ref)
    closure = reach(store, [snap.root]) | {snap.oid}
    objects = store.objects.load_many(sorted(closure))
    body = encode([EXPORT_VERSION, snap.oid, [[obj.oid, obj.encoded] for obj in objects]])
    try:
        write_atomically(Path(path), MAGIC + body + hash_bytes(body))
    except OSError as exc:
        raise UserError(f"{quoted(str(path))}: cannot write an export there ({exc.strerror or exc})") from None
    return snap, len(closure)


def import_snapshot(store: Store, path: Path) -> Snapshot:
    """Verify an export file completely, then add its snapshot and what it reaches (HEAD does not move).

    An export is a file anyone can craft: every object must hash to its oid, decode, be of
    the kind its referrer expects, and every tree may name only Org files under the root.
    """
    where = str(path)
    snap_oid, objects = _read_export(Path(path))
    try:
        decoded = {oid: decode_object(raw) for oid, raw in objects.items()}
    except Exception as exc:  # a crafted object can fail anywhere in decoding
        raise DamagedExport(f"{where}: an object cannot be decoded ({exc})") from None
    snap = decoded.get(snap_oid)
    if not isinstance(snap, Snapshot):
        raise DamagedExport(f"{where}: the snapshot object is missing")
    reached = _reached(store, where, snap, decoded)

    def add() -> None:
        store.objects.add_raw((oid, objects[oid]) for oid in reached)
        store.table(SNAPSHOTS)[snapshot_key(snap)] = snap.oid

    store.transact(add)
    return snap


def _read_export(path: Path) -> tuple[bytes, dict[bytes, bytes]]:
    """The snapshot oid and the objects (oid -> bytes) of an export file whose checksums all hold."""
    with path.open("rb") as file:
        head = file.read(len(MAGIC))  # first, so that a file that is no export is not read further
        if head != MAGIC:
            raise DamagedExport(f"{path}: not a cortex snapshot export")
        data = head + read_file_bounded(file, MAX_EXPORT, "a snapshot export", str(path))
    if len(data) < len(MAGIC) + 32:
        raise DamagedExport(f"{path}: not a cortex snapshot export")
    body, digest = data[len(MAGIC):-32], data[-32:]
    if hash_bytes(body) != digest:
        raise DamagedExport(f"{path}: damaged or truncated (checksum does not match)")
    try:
        version, snap_oid, pairs = decode(body)
        if version > EXPORT_VERSION:
            raise DamagedExport(f"{path}: written by a newer cortex (export format {version})")
        objects = {bytes(oid): bytes(raw) for oid, raw in pairs}
    except (ValueError, TypeError):
        raise DamagedExport(f"{path}: unreadable export") from None
    for oid, raw in objects.items():
        if hash_bytes(raw) != oid:
            raise DamagedExport(f"{path}: object {oid.hex()} does not match its content")
    return bytes(snap_oid), objects


_CHILD_KIND = {Snapshot: Tree, Folder: Document, Document: Headline, Headline: Headline}


def _reached(store: Store, where: str, snap: Snapshot, decoded: dict[bytes, OrgObject]) -> set[bytes]:
    """The exported objects `snap` reaches, each checked to be what its referrer expects."""
    seen: set[bytes] = set()
    trees: list[Tree] = []
    wanted: list[tuple[bytes, OrgObject]] = [(bytes(snap.oid), snap)]
    while wanted:
        referrer, obj = wanted.pop()
        # A tree names its folders; one stored by an older cortex, its documents.
        expected = (Document if obj.stored_flat else Folder) if isinstance(obj, Tree) else _CHILD_KIND[type(obj)]
        for ref in obj.references:
            ref = bytes(ref)
            if ref in seen:
                continue
            child = decoded.get(ref)
            if child is None:
                if ref not in store.objects:
                    raise DamagedExport(f"{where}: object {referrer.hex()[:12]} refers to {ref.hex()[:12]}, "
                                        "which is missing")
                continue  # the store's own objects were checked when they entered it
            if not isinstance(child, expected):
                raise DamagedExport(f"{where}: object {referrer.hex()[:12]} refers to {ref.hex()[:12]}, a "
                                    f"{child.kind} where a {expected.kind} belongs")
            if isinstance(child, Folder) and (problems := folder_problems(child.files)):
                raise DamagedExport(f"{where}: a folder of its tree names files by path:\n  " + "\n  ".join(problems))
            if isinstance(child, Tree):
                trees.append(child)
            seen.add(ref)
            wanted.append((ref, child))
    for tree in trees:  # every folder found and checked: the paths they make
        if problems := tree_problems(tree.bind(lambda oid: decoded.get(oid) or store.objects[oid]).entries):
            raise DamagedExport(f"{where}: its tree names files that cannot be under an Org root:\n  "
                                + "\n  ".join(problems))
    return seen | {bytes(snap.oid)}
