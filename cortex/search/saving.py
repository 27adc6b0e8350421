"""Search indexes saved beside the store, and trusted on load only when whole and made for the same history.

The keyword index, the vector index, the items' records (memory-mapped as loaded) and a state file (the root the
indexes were made for, the items' keys, the newest purge of history they were made after, the items' lines) are
each replaced atomically, the state last, when a session closes; the state names the records by a token they
start with. An index made before a purge may hold the purged text: it is never saved
after one, and a saved one is deleted when loaded after one (on any machine). Anything else that does not
fit is derived data: it is rebuilt from the store, not trusted.

On a store other machines open too (PostgreSQL), each machine's folder is its own: a save also shares the
indexes through the store when the copy shared there lags (`cortex.search.sharing`), and a machine whose folder
holds nothing usable fetches that copy into it before building anything.
"""

from __future__ import annotations

import mmap
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..backends import Store
from ..codec import decode, encode
from ..errors import CortexError
from ..files import remove_stale, write_atomically
from ..locks import locked
from ..hashing import Oid
from ..history.forget import newest_purge
from . import sharing
from .keyword import KeywordIndex
from .vector import VectorIndex

if TYPE_CHECKING:
    from .index import SearchIndex

__all__ = ["drop", "restore", "save"]

STATE_VERSION = 8  # 2: the state records the newest purge it was made after; 3: dates, speakers, twins, lines;
# 4: when items hold; 5: inherited tags; 6: each record encoded on its own, keys and lines packed (100,000
# records decode in 0.12 s, not 2.2); 7: the keyword index's vocabulary memory-mapped (its format 4); 8: items,
# their files' keys and their lines kept packed as loaded (`Items`, `KeysByPath`, `Lines`; a million items
# loaded in 2.2 s before, most of it making dicts and sets a first search does not need), the records in a file
# of their own, memory-mapped
RECORDS = "items.records"  # a token, then the items' encoded records (`Items.packed`)
SAVE_LOCK = "save.lock"  # held while the indexes are written (not hidden: leftovers of saves are)
SHARE_AFTER = 1000  # items changed since the index was loaded, or
SHARE_AGE = 3600.0  # seconds since the shared copy was made, after which a save shares its indexes again


def save(index: SearchIndex) -> None:
    """Write an index into its folder, if it has one and changed since it was loaded or saved."""
    folder = index.folder
    if folder is None or not index.dirty:
        return
    if newest_purge(index.store) != index.purged:
        return  # history was purged meanwhile (by another process): these indexes may hold its text
    index.wait()
    folder.mkdir(parents=True, exist_ok=True)
    with index.lock, locked(folder / SAVE_LOCK):  # another process closing the same store saves too
        index.keyword.save(folder / "keyword")
        index.vector.save(folder / "vectors.usearch")
        keys, ends, records = index.items.packed()
        token = os.urandom(16)
        write_atomically(folder / RECORDS, token + records)
        state = encode([STATE_VERSION, index.embedder.name, bytes(index.root), index.purged, token, keys, ends,
                        index.by_path.packed(), _packed(index.timed), *index.lines.packed()])
        write_atomically(folder / "state.msgpack", state)
        index.dirty = False
        if _lags(index):
            try:
                sharing.share(index.store, folder, _label(index), bytes(index.root), index.purged)
            except (CortexError, OSError):  # derived data: the next save shares it again
                pass


def restore(index: SearchIndex) -> None:
    """Fill an empty index with what its folder holds, if that is whole and made by its embedder since the
    newest purge; else leave it empty, to be built."""
    folder = index.folder
    if folder is None:
        return
    remove_stale(folder)
    if _load(index) or not index.store.engine.remote or index.store.read_only:
        return
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / SAVE_LOCK):  # another process of this machine may be saving or fetching
        if not _load(index) and sharing.fetch(index.store, folder, _label(index), index.purged):
            _load(index)


def _load(index: SearchIndex) -> bool:
    """Fill an empty index with what its folder holds, if that is whole and current; return whether it did."""
    folder = index.folder
    if not (folder / "state.msgpack").exists():
        return False
    try:
        version, name, root, purged, *state = decode((folder / "state.msgpack").read_bytes())
        if purged != index.purged:  # made before a purge (on any machine): it may hold the purged text
            shutil.rmtree(folder, ignore_errors=True)
            return False
        if version != STATE_VERSION or name != index.embedder.name:
            return False
        token, keys, ends, by_path, timed, line_keys, line_numbers, lined = state
        with (folder / RECORDS).open("rb") as file:
            records = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        if records[:len(token)] != token:
            raise ValueError("records of another save")
        index.items.load(keys, ends, memoryview(records)[len(token):])
        index.lines.load(line_keys, line_numbers, lined)
        keys = np.frombuffer(keys, "<u8")
        keyword = KeywordIndex.load(folder / "keyword")
        vector = VectorIndex.load(folder / "vectors.usearch")
        missing = vector.absent(keys)  # saved while vectors were being built
        if not len(keyword) == len(keys) or len(vector) != len(keys) - len(missing) \
                or sum(map(len, by_path.values())) != 8 * len(keys):
            raise ValueError("indexes that do not match their items")
    except Exception:  # noqa: BLE001 - a damaged index is derived data: rebuild rather than trust it
        index.items.clear()
        index.lines.clear()
        return False
    index.keyword, index.vector, index.root = keyword, vector, Oid(root)
    index.by_path.load(by_path)
    index.timed = set(_unpacked(timed))
    if missing:  # others may have embedded them since (another process, or a build the save missed)
        index.pending.update(index.adopt_cached(missing))
        index.dirty = len(index.pending) < len(missing)
    return True


def _packed(numbers, dtype: str = "<u8") -> bytes:
    return np.fromiter(numbers, dtype=dtype).tobytes()


def _unpacked(data: bytes, dtype: str = "<u8") -> list[int]:
    return np.frombuffer(data, dtype=dtype).tolist()


def drop(index_folder: Path | None, store: Store) -> None:
    """Delete the indexes saved in `index_folder` and, on a store other machines open, those shared through it
    (after a purge: they may hold its text)."""
    if index_folder is not None and index_folder.exists():
        shutil.rmtree(index_folder)
    if store.engine.remote and not store.read_only:
        sharing.drop(store)


def _label(index: SearchIndex) -> str:
    """What a shared copy is filed under: the state version and the embedder (a copy serves only those)."""
    return f"{STATE_VERSION}/{index.embedder.name}"


def _lags(index: SearchIndex) -> bool:
    """Whether this index should be shared: the store is open on other machines, and the copy shared there is
    missing, made before the newest purge, or behind by many changes or a long time."""
    if not index.store.engine.remote:
        return False
    found = sharing.manifest(index.store, _label(index))
    if found is None or found[1] != index.purged:
        return True
    root, _, _, _, when = found
    return root != bytes(index.root) and (index.changed >= SHARE_AFTER or time.time() - when >= SHARE_AGE)
