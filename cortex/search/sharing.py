"""Saved search indexes shared through the store, so that a new machine on a store many machines open
(PostgreSQL) loads the index another one built rather than building its own from every vector.

A shared index is derived data named by the tree it indexes: the files a save wrote (`cortex.search.saving`),
cut into chunks under a fresh token, and one manifest per embedder and state version that names the root they
index, the newest purge they were made after, and each file's chunks with their blake3 digests. The chunks go
first; the manifest last, in one transaction that also deletes the chunks of the manifest it replaces, those
of uploads that died midway and the copies of the same embedder under older state versions (no machine of this
version reads them), so a reader finds a whole index or none, and concurrent sharers leave one whole.
A machine whose own folder holds no usable index fetches the shared one into it, every chunk checked against
its digest (a damaged or partial one is deleted, not trusted), and `SearchIndex.follow` then brings it from
its tree to the current one, as it does an index saved on this machine. A manifest made before the newest purge
may hold purged text: it is deleted when found, never fetched; a purge deletes them all (`drop`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import blake3

from ..backends import Store
from ..codec import decode, encode

__all__ = ["SHARED", "drop", "fetch", "manifest", "share"]

SHARED = "search.shared"
CHUNK = 8 << 20  # bytes per chunk
READERS = max(2, min(4, os.cpu_count() or 2))  # chunks read at once, each over a connection of its own: about one
# per core (on two cores, four readers contend: a fetch of 446 MiB took 1.0-1.7 s with four, 0.8-0.9 with two)
FETCHES = 3  # tries of a reader whose copy another sharer replaced while it read
DEAD_UPLOAD = 3600.0  # seconds after which an upload that wrote no manifest is taken for a dead one
MANIFEST, PIECE, UPLOAD = b"manifest\0", b"chunk\0", b"upload\0"


def manifest(store: Store, label: str) -> list | None:
    """The manifest shared under `label` ([root, purge, token, files, when]), None when there is none or it is
    unreadable."""
    return _read_manifest(store.table(SHARED).get(MANIFEST + label.encode()))


def _read_manifest(data: bytes | None) -> list | None:
    try:
        found = decode(data) if data is not None else None
    except Exception:  # noqa: BLE001 - derived data: unreadable is as good as absent
        return None
    return found if isinstance(found, list) and len(found) == 5 else None


def share(store: Store, folder: Path, label: str, root: bytes, purged: bytes) -> None:
    """Share the index files of `folder` (a save's, not changing meanwhile) under `label`, made for `root` after
    the purge `purged`, replacing the index shared there before."""
    table = store.table(SHARED)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not _hidden(p.relative_to(folder)))
    token = os.urandom(16)
    count = sum(-(-p.stat().st_size // CHUNK) for p in files)
    table[UPLOAD + token] = encode([int(time.time()), count])  # how a dead upload's chunks are found again
    entries, n = [], 0
    for path in files:
        digests, size = [], 0
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                table[_piece(token, n)] = chunk
                digests.append(blake3.blake3(chunk).digest())
                n, size = n + 1, size + len(chunk)
        entries.append([path.relative_to(folder).as_posix(), size, digests])
    if n != count:
        raise OSError(f"{folder}: the index files changed while they were shared")
    record = encode([root, purged, token, entries, int(time.time())])

    def publish() -> None:
        old = manifest(store, label)
        if old is not None:
            _delete_chunks(table, old[2], _count(old))
        for key, value in _superseded(table, label):  # the same embedder's copies of older state versions: unread now
            if (found := _read_manifest(value)) is not None:
                _delete_chunks(table, found[2], _count(found))
            del table[key]
        for key, value in table.items(UPLOAD):
            started, chunks = decode(value)
            if key[len(UPLOAD):] == token or time.time() - started > DEAD_UPLOAD:
                if key[len(UPLOAD):] != token:
                    _delete_chunks(table, key[len(UPLOAD):], chunks)
                del table[key]
        table[MANIFEST + label.encode()] = record

    store.engine.transact(publish)


def fetch(store: Store, folder: Path, label: str, purged: bytes) -> bool:
    """Write the index shared under `label` into `folder` if it was made after the purge `purged` and every chunk
    is whole; return whether it was. One made before that purge, or damaged, or partial, is deleted; one replaced
    while it was read is read again, as replaced."""
    for _ in range(FETCHES):
        found = manifest(store, label)
        if found is None:
            return False
        _, made_after, token, entries, _ = found
        if made_after != purged:  # made before a purge (on any machine): it may hold the purged text
            _forget(store, label, found)
            return False
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".fetched.", dir=folder))
        try:
            if _download(store.table(SHARED), token, entries, staging):
                (folder / "state.msgpack").unlink(missing_ok=True)  # nothing trusted until every file is in
                for entry in sorted(staging.iterdir(), key=lambda p: p.name == "state.msgpack"):
                    target = folder / entry.name
                    if target.is_dir():
                        shutil.rmtree(target)
                    os.replace(entry, target)
                return True
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if manifest(store, label) == found:  # damaged or partial, not replaced meanwhile
            _forget(store, label, found)
            return False
    return False


def drop(store: Store) -> None:
    """Delete every shared index and upload under way (after a purge: they may hold its text)."""
    table = store.table(SHARED)

    def delete() -> None:
        for key, value in table.items(MANIFEST):
            found = decode(value)
            _delete_chunks(table, found[2], _count(found))
            del table[key]
        for key, value in table.items(UPLOAD):
            _delete_chunks(table, key[len(UPLOAD):], decode(value)[1])
            del table[key]

    store.engine.transact(delete)


def _download(table, token: bytes, entries: list, staging: Path) -> bool:
    """Write the files of a manifest into `staging`, READERS chunks at a time; False if a chunk is missing or does
    not match its digest."""
    pieces = []  # (chunk number, its digest, the file it belongs to, where in it)
    for name, size, digests in entries:
        target = staging / name
        if _hidden(Path(name)) or not target.resolve().is_relative_to(staging.resolve()):
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            out.truncate(size)
        pieces += [(len(pieces) + n, digest, target, n * CHUNK) for n, digest in enumerate(digests)]

    def write(piece) -> bool:
        n, digest, target, offset = piece
        chunk = table.get(_piece(token, n))
        if chunk is None or blake3.blake3(chunk).digest() != digest:
            return False
        with target.open("r+b") as out:
            out.seek(offset)
            out.write(chunk)
        return True

    with ThreadPoolExecutor(READERS) as readers:  # the server reads, the network carries, this machine checks
        whole = all(readers.map(write, pieces))
    return whole and all((staging / name).stat().st_size == size for name, size, _ in entries)

def _forget(store: Store, label: str, found: list) -> None:
    """Delete a manifest not to be trusted, and its chunks, unless another sharer replaced it meanwhile."""
    table = store.table(SHARED)

    def delete() -> None:
        if manifest(store, label) == found:
            del table[MANIFEST + label.encode()]
            _delete_chunks(table, found[2], _count(found))

    store.engine.transact(delete)


def _superseded(table, label: str) -> list[tuple[bytes, bytes]]:
    """The manifests (key, value) of copies shared for the embedder of `label` (version/embedder) under an older
    state version."""
    version, _, embedder = label.partition("/")
    older = []
    for key, value in table.items(MANIFEST):
        other_version, _, other_embedder = key[len(MANIFEST):].decode(errors="replace").partition("/")
        if other_embedder == embedder and other_version.isdigit() and version.isdigit() \
                and int(other_version) < int(version):
            older.append((key, value))
    return older


def _count(found: list) -> int:
    """How many chunks a manifest names."""
    return sum(len(digests) for _, _, digests in found[3])


def _delete_chunks(table, token: bytes, count: int) -> None:
    for n in range(count):
        with contextlib.suppress(KeyError):
            del table[_piece(token, n)]


def _piece(token: bytes, n: int) -> bytes:
    return PIECE + token + n.to_bytes(4, "big")


def _hidden(relative: Path) -> bool:
    """Leftovers of a save (hidden names) and its lock are not part of the index."""
    return any(part.startswith(".") for part in relative.parts) or relative.name == "save.lock"
