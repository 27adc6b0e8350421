"""One snapshot as one portable, verified file: export and import."""

from __future__ import annotations

from pathlib import Path

from ..backends import Store
from ..codec import decode, encode
from ..errors import UserError
from ..files import write_atomically
from ..hashing import hash_bytes
from ..objects import Snapshot
from ..objects import decode as decode_object
from ..query import references
from .gc import reach
from .snapshots import SNAPSHOTS, resolve, snapshot_key

MAGIC = b"CORTEX-SNAPSHOT\n"
EXPORT_VERSION = 1


class DamagedExport(UserError):
    """An export file that is truncated, altered or not an export at all."""


def export_snapshot(store: Store, ref: str | int, path: Path) -> tuple[Snapshot, int]:
    """Write one snapshot and every object it reaches to a single file; return it and the object count."""
    snap = resolve(store, ref)
    closure = reach(store, [snap.root]) | {snap.oid}
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
