"""The working state's query index saved beside the store, so that a new process's first query reads one file
rather than every headline. A session saves it as it closes when the saved copy lags (`lags`).

Saved: the tree it indexes, and by file each row's headline oid, parent, title, line count and what it inherits
(tags, category), with the postings, days and validity it had collected; a restored row reads its headline when a
query first needs it (a predicate that is not indexed, a result), and the index then follows the working state
as any index does, reading only the files that changed; a kind of postings is made from the file when first asked
for (or before the rows are filed anew). The file is replaced atomically; it is trusted only when
whole, of this version, and made after the newest purge of history (it holds titles): a purge drops it, as it
drops the search indexes (`cortex.search.saving.drop`). Anything else is rebuilt from the store.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path

import msgpack

from ..backends import Store
from ..files import write_atomically
from ..hashing import Oid
from .index import DayIndex, FileInfo, FileState, Index, Row, ValidityIndex

__all__ = ["QUERY_FILE", "lags", "load", "save"]

QUERY_FILE = "query.msgpack"
VERSION = 1
SAVE_AFTER = 100  # files read again since the copy was saved or loaded, after which a close saves it again


def lags(index: Index) -> bool:
    """Whether the saved copy lags behind `index`: there is none, it holds fewer kinds than the index collected, or
    SAVE_AFTER files changed since (below that, a new process following them from the copy costs less than a
    save)."""
    if index.saved is None:
        return True
    _, kinds, dated, validity = index.state()
    _, saved_kinds, saved_dated, saved_validity = index.saved
    return not (kinds <= saved_kinds and dated <= saved_dated and validity <= saved_validity) \
        or index.changed >= SAVE_AFTER


def save(index: Index, folder: Path) -> None:
    """Write `index` into `folder` (atomically; a folder it cannot write only costs the next process a build)."""
    ids: dict[Row, int] = {}
    tag_sets: dict[tuple, int] = {}
    categories: dict[str, int] = {}
    files = []
    with index.lock:
        for path, state in sorted(index.files.items()):
            records = []
            for row, parent in _preorder(state.top):
                records.append([bytes(row.oid), parent, row.title, row.lines,
                                tag_sets.setdefault(row.inherited, len(tag_sets)),
                                tag_sets.setdefault(row.tags, len(tag_sets)),
                                categories.setdefault(row.category, len(categories))])
                ids[row] = len(ids)
            files.append([path, bytes(state.document.oid), records])
        for kind in list(index.unpacked):
            index.keys(kind)  # (made from the copy it was loaded from)
        postings = {kind: [[key, [ids[row] for row in rows]] for key, rows in keyed.items() if rows]
                    for kind, keyed in index.postings.items()}
        days = {kind: [[ids[row], row.days(kind)] for row in dated.rows()] for kind, dated in index.dated.items()}
        validity = None if index.validity is None else [
            [ids[row], _moment(start), _moment(end), replaced] for row, (start, end, replaced)
            in index.validity.moments().items()]
        data = [VERSION, index.purged, bytes(index.root), files, list(tag_sets), list(categories), postings, days,
                validity]
        state = index.state()
    try:
        write_atomically(folder / QUERY_FILE, msgpack.packb(data, use_bin_type=True), durable=False)
    except OSError:
        return
    index.saved, index.changed = state, 0


def load(store: Store, folder: Path, purged: bytes) -> Index | None:
    """The index `folder` keeps, if it is whole, of this version and made after the newest purge (`purged`)."""
    path = folder / QUERY_FILE
    if not path.exists():
        return None
    try:
        version, made_after, root, files, tag_sets, categories, postings, days, validity = msgpack.unpackb(
            path.read_bytes(), raw=False, strict_map_key=False, use_list=False)  # (keys come back as tuples)
        if version != VERSION or made_after != purged:
            return None
        index = Index(store)
        read, rows = store.objects.__getitem__, []
        documents = store.objects.load_many(document_oid for _, document_oid, _ in files)  # (one batch)
        for (file_path, _, records), document in zip(files, documents):
            state = index.files[file_path] = FileState(document, FileInfo.of(file_path, document), read)
            first = len(rows)
            for oid, (_, parent, title, height, inherited, tags, category) in zip(
                    Oid.many(record[0] for record in records), records):
                above = rows[first + parent] if parent >= 0 else None
                row = Row.restored(state, oid, above, title, height, tag_sets[inherited], tag_sets[tags],
                                   categories[category])
                (state.top if above is None else above.children).append(row)
                rows.append(row)
        index.rows = set(rows)
        index.unpacked = {kind: partial(_postings, keyed, rows.__getitem__) for kind, keyed in postings.items()}
        for kind, dated in days.items():
            day_index = index.dated[kind] = DayIndex()
            for n, spans in dated:
                day_index.add(rows[n], spans)
        if validity is not None:
            index.validity = ValidityIndex()
            for n, start, end, replaced in validity:
                index.validity.put(rows[n], _parsed(start), _parsed(end), replaced)
        index.root, index.purged = Oid(root), purged
    except Exception:  # noqa: BLE001 - derived data: unreadable, damaged or of objects gone is as good as absent
        return None
    index.saved, index.changed = index.state(), 0
    return index


def _postings(keyed: tuple, row_at: Callable[[int], Row]) -> defaultdict:
    """A kind's postings as `Index.postings` holds them, from their saved keys and row numbers."""
    return defaultdict(set, {key: set(map(row_at, ids)) for key, ids in keyed})


def _preorder(top: list[Row]) -> list[tuple[Row, int]]:
    """A file's rows in document order, each with its parent's place among them (-1: a top-level row)."""
    found: list[tuple[Row, int]] = []
    stack = [(row, -1) for row in reversed(top)]
    while stack:
        row, parent = stack.pop()
        found.append((row, parent))
        stack.extend((child, len(found) - 1) for child in reversed(row.children))
    return found


def _moment(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _parsed(at: str | None) -> datetime | None:
    return None if at is None else datetime.fromisoformat(at)
