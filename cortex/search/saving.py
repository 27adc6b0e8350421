"""Search indexes saved beside the store, and trusted on load only when whole and made for the same history.

The keyword index, the vector index and a state file (the root the indexes were made for, their items, the
newest purge of history they were made after, the items' lines) are each replaced atomically, the state
last, when a session closes. An index made before a purge may hold the purged text: it is never saved
after one, and a saved one is deleted when loaded after one (on any machine). Anything else that does not
fit is derived data: it is rebuilt from the store, not trusted.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from ..backends import Store
from ..codec import decode, encode
from ..files import remove_stale, write_atomically
from ..locks import locked
from ..hashing import Oid
from ..history.forget import PURGES
from .items import Items
from .keyword import KeywordIndex
from .vector import VectorIndex

if TYPE_CHECKING:
    from .index import SearchIndex

__all__ = ["newest_purge", "restore", "save"]

STATE_VERSION = 5  # 2: the state records the newest purge it was made after; 3: dates, speakers, twins, lines;
# 4: when items hold; 5: inherited tags
SAVE_LOCK = "save.lock"  # held while the indexes are written (not hidden: leftovers of saves are)


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
        state = encode([STATE_VERSION, index.embedder.name, bytes(index.root),
                        [i.record() for i in index.items.values()], index.purged,
                        sorted(index.lines.lined), list(index.lines.line_of.items())])
        write_atomically(folder / "state.msgpack", state)
        index.dirty = False


def restore(index: SearchIndex) -> None:
    """Fill an empty index with what its folder holds, if that is whole and made by its embedder since the
    newest purge; else leave it empty, to be built."""
    folder = index.folder
    if folder is None:
        return
    remove_stale(folder)
    if not (folder / "state.msgpack").exists():
        return
    try:
        version, name, root, records, purged, *lines = decode((folder / "state.msgpack").read_bytes())
        if purged != index.purged:  # made before a purge (on any machine): it may hold the purged text
            shutil.rmtree(folder, ignore_errors=True)
            return
        if version != STATE_VERSION or name != index.embedder.name:
            return
        keyword = KeywordIndex.load(folder / "keyword")
        vector = VectorIndex.load(folder / "vectors.usearch")
        items = Items((r[0], r) for r in records)
        missing = vector.absent(list(items))  # saved while vectors were being built
        if len(keyword) != len(items) or len(vector) != len(items) - len(missing):
            return
    except Exception:  # noqa: BLE001 - a damaged index is derived data: rebuild rather than trust it
        return
    index.keyword, index.vector, index.items, index.root = keyword, vector, items, Oid(root)
    if len(lines) == 2:
        index.lines.lined, index.lines.line_of = set(lines[0]), dict(lines[1])
    for key, path, _, position, *_ in records:
        index.by_path[path].add(key)
        index.at[path, tuple(position)] = key
    if missing:  # others may have embedded them since (another process, or a build the save missed)
        index.pending.update(index.adopt_cached(missing))
        index.dirty = len(index.pending) < len(missing)


def newest_purge(store: Store) -> bytes:
    """The key of the newest purge of history (b"" when there was none)."""
    keys = list(store.table(PURGES).keys_in_order())  # one per purge: few
    return keys[-1] if keys else b""
