"""The search index of one tree: keyword (BM25) and vector indexes over its items, kept in line with the state
asked for, and the query that fuses them.

An index records the root it was built for. Before every search it is brought in line with the state asked
for: in files whose document oid differs, only the subtrees that are not in both documents at the same outline
are read, and only the items whose key changed are removed or added (`cortex.search.items`), so one new item in
a file of thousands costs one item. Vectors come from the store's cache of embeddings, keyed by the text's
hash, so an update, a rollback or a rebuild never embeds a text twice.

Following a tree never embeds: an item whose vector is not cached waits in `pending`, is found by its words
meanwhile (see `SearchIndex.search`), and gets its vector from the index's `Builder` (`cortex.search.building`),
run by a search within a budget, by `cortex ingest`, or in the background in long-lived sessions. The indexes
are saved beside the store when the session closes (`cortex.search.saving`); an item's file:line comes from
`cortex.search.lines`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import NamedTuple
from pathlib import Path

import numpy as np

from ..backends import Store
from ..errors import NotFound, UserError
from ..hashing import Oid
from ..history.forget import newest_purge
from ..objects import EMPTY_TREE, Tree
from . import saving
from .building import Builder, Progress
from .dates import Period, named_period
from .embedders import CachedEmbedder, Embedder
from .fusion import METHODS, Hit, Layout, Weights, hybrid_search
from .items import SOURCES, TYPES, Item, Items, KeysByPath, changed_units, span_of
from .keyword import KeywordIndex
from .lines import Lines
from .results import Results, SearchResult, VectorStatus
from .vector import VectorIndex

__all__ = ["Filters", "QueryVectors", "SearchIndex"]

MASKS_KEPT = 8  # filters whose keys are kept up to date across changes
QUERIES_KEPT = 256  # query vectors kept in memory (never in the store: it would record what was asked)
ADOPTED_AT_ONCE = 8192  # cached vectors read and added at a time (12 MB of MiniLM's)


@dataclass(frozen=True)
class Filters:
    """What a search may return."""

    source: str | None = None
    agent: str | None = None
    type: str | None = None
    path: str | None = None  # a prefix of the path: "notes/", "agents/a/logs/2023-05"
    tag: str | None = None
    todo: str | None = None
    speaker: str | None = None  # turns said by this person (any case)
    since: date | None = None  # items dated on or after this day (undated items are left out)
    until: date | None = None  # items dated on or before this day
    valid_at: date | datetime | None = None  # items that held then: on that day, at that moment (`memory.validity`)
    current: bool = False  # items that hold now and that nothing replaced

    def __post_init__(self):
        if self.source is not None and self.source not in SOURCES:
            raise UserError(f"unknown source {self.source!r}: use one of {', '.join(SOURCES)}")
        if self.type is not None and self.type not in TYPES:
            raise UserError(f"unknown memory type {self.type!r}: use one of {', '.join(TYPES)}")
        if self.current and self.valid_at is not None:
            raise UserError("a search keeps the items current now or those valid at a moment, not both")

    def any(self) -> bool:
        return self.current or any(v is not None for v in vars(self).values() if not isinstance(v, bool))

    def moment(self, now: datetime) -> tuple[str, str] | None:
        """The minutes (`span_of`) the items must hold at some time of: `valid_at`'s, or `now`'s for current ones;
        None when any will do."""
        at = self.valid_at if self.valid_at is not None else now if self.current else None
        return None if at is None else span_of(at)

    def admits(self, item: Item, at: tuple[str, str] | None = None) -> bool:
        """Whether an item passes every filter given; `at`: the filter's `moment`."""
        return ((self.path is None or item.path.startswith(self.path))
                and (self.source is None or item.source == self.source)
                and (self.agent is None or item.agent == self.agent)
                and (self.type is None or item.type == self.type)
                and (self.tag is None or self.tag in item.tags)
                and (self.todo is None or item.todo == self.todo)
                and (self.speaker is None or (item.speaker or "").casefold() == self.speaker.casefold())
                and (self.since is None or (item.date is not None and item.date >= self.since.isoformat()))
                and (self.until is None or (item.date is not None and item.date <= self.until.isoformat()))
                and (at is None or item.holds(at, self.current)))


class _Mask(NamedTuple):
    """The keys a filter admits (None: every item), as of `at` (its `moment`), right until the minute `until`
    (None: while the items stay)."""

    keys: set[int] | None
    at: tuple[str, str] | None = None
    until: str | None = None


class Places:
    """(path, position) -> the key of the item there, made for a file when first asked about (the items of a saved
    index stay encoded until looked at)."""

    def __init__(self, items: Items, by_path: KeysByPath):
        self._items, self._by_path = items, by_path
        self._of: dict[str, dict[tuple[int, ...], int]] = {}

    def _file(self, path: str) -> dict[tuple[int, ...], int]:
        found = self._of.get(path)
        if found is None:
            found = self._of[path] = {self._items[k].position: k for k in self._by_path.get(path, ())}
        return found

    def get(self, place: tuple[str, tuple[int, ...]]) -> int | None:
        return self._file(place[0]).get(place[1])

    def __setitem__(self, place: tuple[str, tuple[int, ...]], key: int) -> None:
        self._file(place[0])[place[1]] = key

    def __delitem__(self, place: tuple[str, tuple[int, ...]]) -> None:
        del self._file(place[0])[place[1]]

    def clear(self) -> None:
        self._of.clear()


class QueryVectors:
    """Query vectors from the embedder itself, the QUERIES_KEPT latest kept in memory: never in the
    store's cache, where every query asked would stay (and outlive a purge)."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, query: str) -> np.ndarray:
        with self._lock:
            vector = self._kept.get(query)
            if vector is not None:
                self._kept.move_to_end(query)
                return vector
        vector = self.embedder.embed([query])[0]
        with self._lock:
            self._kept[query] = vector
            if len(self._kept) > QUERIES_KEPT:
                self._kept.popitem(last=False)
        return vector


class SearchIndex:
    """Keyword and vector indexes over the units of one tree, updated as the tree changes.

    Items whose vector is not known yet are `pending`: the keyword index holds them at once, the
    vector index once `build` has embedded them.
    """

    def __init__(self, store: Store, embedder: CachedEmbedder, folder: Path | None = None):
        self.store = store
        self.embedder = embedder
        self.folder = folder  # where the indexes are saved (None: nowhere)
        self.root: Oid = EMPTY_TREE.oid
        self.tree: Tree | None = None  # the tree followed last, whose oid is `root` (a folder's view is not stored)
        self.items = Items()
        self.by_path = KeysByPath()
        self.at = Places(self.items, self.by_path)  # (path, position) -> key of the item there
        self.timed: set[int] = set()  # keys of the items that say when they hold
        self.lines = Lines(store)
        self.keyword = KeywordIndex.build([])
        self.vector = VectorIndex(embedder.dim)
        self.pending: set[int] = set()  # keys of items without a vector yet
        self.queries = QueryVectors(embedder.embedder)
        self.dirty = False
        self.changed = 0  # items added or removed since the index was made or loaded (`cortex.search.saving`)
        self.purged = newest_purge(store)  # a purge after this one makes these indexes hold purged text
        self.lock = threading.RLock()  # held while the indexes change, and while they are read
        self.builder = Builder(self)
        self._rebuilding: threading.Thread | None = None
        self._masks: dict[Filters, _Mask] = {}  # the keys each recently used filter admits

    @classmethod
    def load(cls, store: Store, embedder: CachedEmbedder, folder: Path | None) -> SearchIndex:
        """The indexes saved in `folder` if they are whole and made by this embedder, else an empty index to build."""
        index = cls(store, embedder, folder)
        saving.restore(index)
        return index

    def save(self) -> None:
        """Write the indexes into their folder, each file replaced atomically, the state last."""
        saving.save(self)

    # --- keeping in line with the store ---------------------------------------------------

    def follow(self, tree: Tree) -> None:
        """Bring the indexes in line with `tree`, touching only files whose document changed."""
        with self.lock:
            if tree.oid == self.root:
                return
            old = self.store.objects.get(self.root) if self.root != EMPTY_TREE.oid else EMPTY_TREE
            if old is None:  # the tree we were built for was collected: start over
                self._reset()
                old = EMPTY_TREE
            try:
                self._follow(old, tree)
            except NotFound:
                if old is EMPTY_TREE:
                    raise
                # what that tree reached was collected (gc in another process) while its root stayed cached here
                self._reset()
                self._follow(EMPTY_TREE, tree)

    def _follow(self, old: Tree, tree: Tree) -> None:
        """`follow` from `old`, the tree the indexes were built for."""
        removed: set[int] = set()
        added: dict[int, Item] = {}
        get = self.store.objects.__getitem__
        changed = old.differing(tree)
        self.store.objects.preload(doc.entries[path] for doc in (old, tree) for path in changed
                                   if path in doc.entries)
        for path in changed:
            a, b = old.entries.get(path), tree.entries.get(path)
            gone, came = changed_units(get, path, a and get(a), b and get(b))
            indexed = self.by_path.get(path, set())
            removed |= (gone.keys() - came.keys()) & indexed
            added.update((k, i) for k, i in came.items() if k not in indexed)
            self.lines.changed(path)
            if a is None and b is not None:  # a new file: its lines are counted once, as it is read
                self.lines.count(path, get(b), came)
        self._apply(removed, added)
        self.root, self.tree = tree.oid, tree
        self.dirty = True

    def _apply(self, removed: set[int], added: dict[int, Item]) -> None:
        # a filter's keys change by what changed, not by the thousands of items that stay
        self._masks = {f: _Mask(self._changed(f, m, removed, added), m.at,
                                _sooner(m.until, added.values(), m.at) if f.current else None)
                       for f, m in self._masks.items()}
        self.changed += len(removed) + len(added)
        if removed:
            self.keyword.remove(removed)
            self.vector.remove(list(removed))
            self.pending -= removed
            self.timed -= removed
            for key in removed:
                item = self.items.pop(key)
                self.by_path[item.path].discard(key)
                self.lines.removed(key)
                if self.at.get((item.path, item.position)) == key:
                    del self.at[item.path, item.position]
        if added:
            keys = list(added)
            for key, item in added.items():
                self.items[key] = item
                self.by_path[item.path].add(key)
                self.at[item.path, item.position] = key
                if item.timed:
                    self.timed.add(key)
            if missing := self.adopt_cached(keys):
                self.pending.update(missing)
                self.builder.wake()
            if len(added) > max(KeywordIndex.rebuild_floor, len(self.items) * KeywordIndex.rebuild_fraction):
                # a bulk change (a first build, a rollback across much): build BM25 afresh, not an overlay
                self.keyword = KeywordIndex.build((k, self.items[k].text) for k in self.items)
                return
            self.keyword.add((k, added[k].text) for k in keys)
        if self.keyword.needs_rebuild and self._rebuilding is None:
            self._rebuilding = threading.Thread(target=self._rebuild_keyword, daemon=True)
            self._rebuilding.start()

    def _rebuild_keyword(self) -> None:
        """Rebuild BM25 without its mask and overlay, then catch up with changes made meanwhile."""
        with self.lock:
            items = dict(self.items.items())
        fresh = KeywordIndex.build((k, i.text) for k, i in items.items())
        with self.lock:
            fresh.remove(items.keys() - self.items.keys())
            fresh.add((k, i.text) for k, i in self.items.items() if k not in items)
            self.keyword = fresh
            self._rebuilding = None

    def wait(self) -> None:
        """Wait for a background rebuild to finish (tests and close use it)."""
        thread = self._rebuilding
        if thread is not None:
            thread.join()

    def adopt_cached(self, keys: list[int]) -> list[int]:
        """Add the vectors the store's cache holds for these items, ADOPTED_AT_ONCE at a time (a rebuild of a million
        items never holds all their vectors twice); return the keys of those it has none for."""
        size, missing = 4 * self.embedder.dim, []
        for start in range(0, len(keys), ADOPTED_AT_ONCE):
            part = keys[start:start + ADOPTED_AT_ONCE]
            found = self.embedder.cache.get_many([self.embedder.key(self.items[k].text) for k in part])
            have = [n for n, data in enumerate(found) if data is not None and len(data) == size]
            if have:
                self.vector.add([part[n] for n in have], np.stack([np.frombuffer(found[n], "<f4") for n in have]))
            missing += [k for k, data in zip(part, found) if data is None or len(data) != size]
        return missing

    # --- embedding what lacks a vector (`cortex.search.building`) -------------------------------

    @property
    def building(self) -> bool:
        """Whether a background build runs."""
        return self.builder.running

    def build(self, budget: float | None = None, progress: Progress | None = None,
              stop: threading.Event | None = None) -> VectorStatus:
        """Embed the pending items within `budget` seconds, or until `stop` is set; return the status."""
        return self.builder.build(budget, progress, stop)

    def build_in_background(self, working: Callable[[], Tree], progress: Progress | None = None,
                            failed: Callable[[Exception], None] | None = None) -> None:
        """Keep embedding pending items in a daemon thread that follows `working()` (the working state) as it
        changes, until `stop_building`; `failed(error)` hears why it stopped if it failed."""
        self.builder.start(working, progress, failed)

    def stop_building(self) -> None:
        """Stop the background build once the batch under way is added (its vectors are kept)."""
        self.builder.stop()

    def status(self) -> VectorStatus:
        """How many items have a vector, and whether a background build is embedding the rest."""
        with self.lock:
            return VectorStatus(len(self.items) - len(self.pending), len(self.items),
                                bool(self.pending) and self.building)

    def _reset(self) -> None:
        self.root = EMPTY_TREE.oid
        self.items.clear()
        self.by_path.clear()
        self.at.clear()
        self.timed.clear()
        self.lines.clear()
        self.pending.clear()
        self._masks.clear()
        self.keyword = KeywordIndex.build([])
        self.vector = VectorIndex(self.embedder.dim)

    # --- searching -------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 10, filters: Filters = Filters(), fusion: str = "weighted",
               weights: Weights = Weights(), today: date | None = None, now: datetime | None = None) -> Results:
        """The best items for `query` under `filters`, with their scores and the status of the vectors.

        While some items have no vector yet, the fusion ranks those that have one, and the others are
        ranked by the BM25 of the whole query among themselves (the fusion's keyword side counts only
        identifiers, which would leave a query in plain words nothing to find them by). The two lists
        are interleaved in proportion to the share of the admitted items each holds: vectors are made
        in an order that owes nothing to the query, so its best answers fall into the two lists in those
        proportions, and the n-th of a list holding a share s of the items stands at about n / s.

        A period the query names ("in May 2023", "last week": `cortex.search.dates`, relative to `today`) raises
        the items dated within it; a turn of a conversation is ranked with its neighbouring turns as context.
        Filters of what holds are applied before the `limit` best are taken, current items' at `now`.
        """
        if not query.strip():
            raise UserError("empty search query")
        if fusion not in METHODS:
            raise UserError(f"unknown fusion {fusion!r}: use one of {', '.join(METHODS)}")
        # The query is embedded outside the lock, so a background build adds its batches meanwhile.
        query_vector = self.queries(query) if len(self.vector) and fusion != "keyword" else None
        layout = self._layout(named_period(query, today))
        with self.lock:
            status = self.status()
            mask = self._filter_mask(filters, now)
            if mask is not None and not mask:
                return Results([], status)
            # a copy: the indexes remember the last mask they were given by its identity
            without = set(self.pending) if mask is None else mask & self.pending
            if not without or fusion == "keyword":
                return Results(self._fused(query, limit, mask, fusion, weights, query_vector, layout), status)
            admitted = self.items.keys() if mask is None else mask
            with_vectors = {key for key in admitted if key not in without}
            share = len(with_vectors) / (len(with_vectors) + len(without))
            fused = (self._fused(query, limit, with_vectors, fusion, weights, query_vector, layout)
                     if with_vectors else [])
            by_words = self._by_words(query, limit, without, layout)
            placed = [((n + 0.5) / share, r) for n, r in enumerate(fused)]
            placed += [((n + 0.5) / (1 - share), r) for n, r in enumerate(by_words)]
            placed.sort(key=lambda pair: pair[0])  # stable: on a tie, the fused result first
            return Results([r for _, r in placed[:limit]], status)

    def _layout(self, period: Period | None) -> Layout:
        """What fusion is told of the items: their neighbouring turns, dates within `period`, containers."""
        dated = None if period is None else (lambda key: self.items[key].date in period)
        return Layout(self._neighbours, dated, period.text if period else "", lambda key: self.items[key].container)

    def _neighbours(self, key: int, reach: int = 1) -> tuple[int, ...]:
        """The keys of the turns up to `reach` before and after a turn of a conversation in its session."""
        item = self.items[key]
        if item.speaker is None:
            return ()
        *parent, n = item.position
        found = []
        for m in (*range(n - reach, n), *range(n + 1, n + reach + 1)):
            other = self.at.get((item.path, (*parent, m)))
            if other is not None and self.items[other].outline[:-1] == item.outline[:-1]:
                found.append(other)
        return tuple(found)

    def context(self, item: Item, reach: int) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
        """The turns up to `reach` before and after a turn of a conversation in its session, in order."""
        with self.lock:
            if item.key not in self.items or reach < 1:
                return (), ()
            found = [self.items[k] for k in self._neighbours(item.key, reach)]
        n = item.position[-1]
        return (tuple(i for i in found if i.position[-1] < n), tuple(i for i in found if i.position[-1] > n))

    def _filter_mask(self, filters: Filters, now: datetime | None = None) -> set[int] | None:
        """The keys `filters` admit at `now` (default: the real now), None when they admit every item; kept for the
        MASKS_KEPT filters used last, a filter of current items from its moment until an item starts or stops
        holding."""
        if not filters.any():
            return None
        at = filters.moment(now or datetime.now())
        mask = self._masks.pop(filters, None)
        if mask is None or mask.at is not None and (at < mask.at or mask.until is not None and at[0] >= mask.until):
            mask = self._mask(filters, at)
            if len(self._masks) >= MASKS_KEPT:
                self._masks.pop(next(iter(self._masks)))
        self._masks[filters] = mask  # the most recently used last
        # every item admitted: no mask (most stores have no item that stopped holding)
        return None if mask.keys is None or len(mask.keys) == len(self.items) else mask.keys

    def _fused(self, query: str, limit: int, mask: set[int] | None, fusion: str, weights: Weights,
               query_vector: np.ndarray | None, layout: Layout) -> list[SearchResult]:
        if query_vector is None and fusion != "keyword":  # the vector index was empty when the search began
            query_vector = self.queries(query)
        hits = hybrid_search(query, self.embedder, self.keyword, self.vector, limit=limit, mask=mask,
                             method=fusion, weights=weights, query_vector=query_vector, layout=layout)
        return [self._result(h) for h in hits]

    def _by_words(self, query: str, limit: int, keys: set[int], layout: Layout) -> list[SearchResult]:
        """The best of `keys` (items without a vector) by their words alone: the fusion's keyword mode."""
        hits = hybrid_search(query, self.embedder, self.keyword, self.vector, limit=limit, mask=keys,
                             method="keyword", layout=layout)
        return [self._result(h, pending=True) for h in hits]

    def _result(self, hit: Hit, pending: bool = False) -> SearchResult:
        item = self.items[hit.key]
        return SearchResult(item, self._line(item), hit.score, hit.vector, hit.keyword, hit.exact, hit.vector_norm,
                            hit.keyword_norm, hit, pending)

    def _mask(self, f: Filters, at: str | None) -> _Mask:
        keys = None if f.path is None else self._under(f.path)  # None: every file's
        if replace(f, path=None, current=False, valid_at=None).any():
            items = [self.items[k] for k in (self._under("") if keys is None else keys)]
            return _Mask({i.key for i in items if f.admits(i, at)}, at, _sooner(None, items, at) if f.current else None)
        # only where and what holds: an item that says nothing of when it holds always does, and over every file no
        # key is gathered unless one does not hold (at a million items, gathering them was most of a first search)
        timed = [self.items[k] for k in (self.timed if keys is None else keys & self.timed)]
        out = {i.key for i in timed if not f.admits(i, at)}
        if keys is None and out:
            keys = set(self.items.keys())
        return _Mask(None if keys is None else keys - out, at, _sooner(None, timed, at) if f.current else None)

    def _under(self, folder: str) -> set[int]:
        """The keys of the items in the files whose path starts with `folder`."""
        return set().union(*(self.by_path[p] for p in self.by_path if p.startswith(folder)))

    def _changed(self, f: Filters, m: _Mask, removed: set[int], added: dict[int, Item]) -> set[int] | None:
        """The keys `f` admits once `removed` are gone and `added` came, from those of its mask `m` before."""
        admitted = {k for k, i in added.items() if f.admits(i, m.at)}
        if m.keys is not None:
            return (m.keys - removed) | admitted
        if len(admitted) == len(added):
            return None
        return (set(self.items.keys()) - removed) | admitted

    def _line(self, item: Item) -> int:
        """The first line of an item's headline in the file as it is now."""
        tree = self.tree if self.tree is not None and self.tree.oid == self.root else self.store.objects[self.root]
        return self.lines.of(item, tree)


def _sooner(until: str | None, items, at: tuple[str, str]) -> str | None:
    """The first minute after `at`'s at which one of `items` starts or stops holding, if sooner than `until`."""
    turns = [t for i in items if (i.valid_from or i.invalid_at) and (t := i.turns_after(at[0])) is not None]
    return min(turns + ([until] if until is not None else []), default=None)
