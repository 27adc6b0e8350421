"""The store's search indexes: derived from a tree, kept in line with the working root.

An index records the root it was built for. Before every search it is brought in line
with the state asked for: in files whose document oid differs, only the subtrees that are
not in both documents at the same outline are read, and only the items whose key changed
are removed or added (a key names a unit of text in place: path, outline, headline oid,
unit), so one new item in a file of thousands costs one item. Embeddings come from a
cache in the store keyed by the text's hash, so an update, a rollback or a rebuild never embeds a text twice. The
indexes are saved beside the store when the session closes and trusted on load only if
they say which root they match; otherwise they are updated from that root or rebuilt.

Following a tree never embeds: an item whose vector is not cached waits in `pending`, is found by its
words meanwhile (see `SearchIndex.search`), and gets its vector from `build`, run by a search within a
budget, by `cortex ingest`, or by a background thread (`build_in_background`) in long-lived sessions.
"""

from __future__ import annotations

import math
import re
import shutil
import threading
import time
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from itertools import accumulate
from pathlib import Path

import blake3
import numpy as np

from ..backends import Store
from ..backends.base import Overlay
from ..codec import decode, encode
from ..errors import UserError
from ..files import locked, remove_stale, write_atomically
from ..hashing import OID_SIZE, Oid, hash_text
from ..history.forget import PURGES
from ..memory.layout import classify
from ..objects import EMPTY_TREE, Document, Headline, OrgObject, Tree
from ..query import walk_document
from ..words import counted
from .embedders import CachedEmbedder, Embedder, default_embedder
from .dates import Period, named_period
from .fusion import METHODS, Hit, Layout, Weights, hybrid_search
from .keyword import KeywordIndex
from .vector import VectorIndex

EMBEDDINGS = "search.embeddings"
STATE_VERSION = 3  # 2: the state records the newest purge it was made after; 3: dates, speakers, twins, lines
SAVE_LOCK = "save.lock"  # held while the indexes are written (not hidden: leftovers of saves are)
MASKS_KEPT = 8  # filters whose keys are kept up to date across changes
LINES_KEPT = 200_000  # subtrees whose line counts are kept
OFFSETS_KEPT = 4096  # headlines whose children's line offsets are kept
QUERIES_KEPT = 256  # query vectors kept in memory (never in the store: it would record what was asked)
BATCH = 128  # texts embedded, then added and cached, at a time: about a second of MiniLM on 2 cores
FOLLOW_INTERVAL = 1.0  # seconds between a background build's looks at the working state
BACKGROUND_WAIT = 0.25  # seconds a search waits for a background build before answering without it
SOURCES = ("memory", "notes")
TYPES = ("fact", "procedure", "pattern", "log")
# A property drawer is found as its opening line, then the first `:END:` line after it: one pattern
# spanning both (`:PROPERTIES:.*?:END:`) would scan to the end of the text again from every
# opening line when none is closed, quadratic in the text.
_DRAWER_START = re.compile(r"^[ \t]*:PROPERTIES:[ \t]*\r?$", re.M | re.I)
_DRAWER_END = re.compile(r"^[ \t]*:END:[ \t]*\r?$\n?", re.M | re.I)
_PLANNING = re.compile(r"^[ \t]*(?:CLOSED|DEADLINE|SCHEDULED):.*\n?", re.M)
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-+]|\d+[.)])[ \t]+(.+(?:\n(?![ \t]*(?:[-+]|\d+[.)])[ \t])[ \t]+\S.*)*)", re.M)


@dataclass(frozen=True)
class Item:
    """One searchable unit: a headline's own text, or one list item of a memory section."""

    key: int
    path: str
    outline: tuple[str, ...]
    position: tuple[int, ...]
    oid: Oid
    id: str | None
    text: str
    agent: str | None = None
    type: str | None = None
    tags: tuple[str, ...] = ()
    todo: str | None = None
    date: str | None = None      # the day it belongs to (ISO): see `item_date`
    speaker: str | None = None   # who said it, for a turn of a conversation ("** Caroline: ...")
    container: bool = False      # a session entry holding turns and no text of its own

    @property
    def source(self) -> str:
        """`memory` for agent memory files, `notes` for every other Org file."""
        return "memory" if self.agent is not None else "notes"

    def record(self) -> list:
        return [self.key, self.path, list(self.outline), list(self.position), bytes(self.oid), self.id,
                self.text, self.agent, self.type, list(self.tags), self.todo, self.date, self.speaker, self.container]

    @classmethod
    def from_record(cls, r: list) -> "Item":
        return cls(r[0], r[1], tuple(r[2]), tuple(r[3]), Oid(r[4]), r[5], r[6], r[7], r[8], tuple(r[9]), *r[10:])


@dataclass(frozen=True)
class SearchResult:
    """A ranked item and the numbers that placed it (see `explain`)."""

    item: Item
    line: int
    score: float
    vector: float
    keyword: float
    exact: float
    vector_norm: float
    keyword_norm: float
    hit: Hit  # the fusion's record of the rank, which explains it
    pending: bool = False  # ranked by its words among the items with no vector yet (see `SearchIndex.search`)
    before: tuple[Item, ...] = ()  # the turns before it in its session, when asked for (`SearchIndex.context`)
    after: tuple[Item, ...] = ()   # the turns after it

    @property
    def path(self) -> str:
        return self.item.path

    @property
    def outline(self) -> tuple[str, ...]:
        return self.item.outline

    @property
    def id(self) -> str | None:
        return self.item.id

    @property
    def oid(self) -> Oid:
        return self.item.oid

    @property
    def text(self) -> str:
        return self.item.text

    @property
    def list_item(self) -> bool:
        """Whether the item is a list item of its headline's section (in memory.org), not the headline itself."""
        return self.text.split("\n", 1)[0] != self.outline[-1]

    @property
    def heading(self) -> str:
        """What a table of results shows: the outline, then the start of a list item's text."""
        where, first = " / ".join(self.outline), self.text.split("\n", 1)[0]
        return f"{where} — {first[:80]}" if self.list_item else where

    @property
    def has_vector(self) -> bool:
        """Whether the item had a vector when it was ranked (see `SearchIndex.search` for those without)."""
        return not math.isnan(self.vector)

    def explain(self) -> str:
        """Why it ranked where it did: the fusion, its weights and the sum of its parts, as printed."""
        return ("no vector yet, ranked by its words among the items without one: " if self.pending
                else "") + self.hit.explain()

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.heading}"

    def repl_view(self, renderer):
        """The REPL's view of one result: where it is, why it ranked there, and its text."""
        return renderer.group(renderer.text(f"{self.path}:{self.line}  {' / '.join(self.outline)}", "dim"),
                              renderer.text(self.explain(), "dim"), renderer.text(self.text))

    def repl_row(self, renderer, index: int) -> dict[str, str]:
        """The REPL's row of a result in a table: rank, score, file:line, outline, :ID:."""
        return {"#": str(index), "score": f"{self.score:.3f}", "file:line": f"{self.path}:{self.line}",
                "outline": self.heading, "id": self.id or ""}


@dataclass(frozen=True)
class VectorStatus:
    """How many of the indexed items have a vector, and whether a background build is embedding the rest."""

    vectors: int
    items: int
    building: bool = False

    @property
    def complete(self) -> bool:
        return self.vectors >= self.items

    def __str__(self) -> str:
        return f"vectors: {self.vectors:,} of {counted(self.items, 'item')}" + (", building" if self.building else "")


class Items(dict):
    """Items by key. Those read from a saved index are kept as their records and made into `Item`s when first
    looked up: a search looks at a few of many thousands (making 13,561 of them took 0.14 s of a 0.6 s search)."""

    def __getitem__(self, key: int) -> Item:
        value = super().__getitem__(key)
        if type(value) is list:
            value = Item.from_record(value)
            super().__setitem__(key, value)
        return value

    def get(self, key: int, default=None):
        return self[key] if key in self else default

    def pop(self, key: int, *default):
        if key not in self:
            return super().pop(key, *default)
        value = self[key]
        del self[key]
        return value

    def values(self) -> list[Item]:
        return [self[key] for key in self]

    def items(self) -> list[tuple[int, Item]]:
        return [(key, self[key]) for key in self]


class Results(list):
    """Search results, best first, and the `status` of the vectors they were ranked with."""

    def __init__(self, results: Iterable[SearchResult] = (), status: VectorStatus = VectorStatus(0, 0)):
        super().__init__(results)
        self.status = status


Progress = Callable[[int, int], None]  # told (items embedded, items to embed) as a build goes


class BuildNotices:
    """A build's progress told to `notify` in two lines, when a build of more than a batch starts and ends;
    and why it stopped, if it `failed`."""

    def __init__(self, notify: Callable[[str], None]):
        self.notify = notify
        self._started: float | None = None

    def failed(self, error: Exception) -> None:
        self.notify(f"search: building vectors stopped: {error}")

    def __call__(self, done: int, total: int) -> None:
        if done == 0 and total > BATCH and self._started is None:
            self._started = time.monotonic()
            self.notify(f"search: embedding {counted(total, 'item')} in the background; "
                        "until then, items without a vector are found by their words")
        elif done >= total and self._started is not None:
            self.notify(f"search: {counted(total, 'item')} embedded in {time.monotonic() - self._started:.0f} s")
            self._started = None


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

    def __post_init__(self):
        if self.source is not None and self.source not in SOURCES:
            raise UserError(f"unknown source {self.source!r}: use one of {', '.join(SOURCES)}")
        if self.type is not None and self.type not in TYPES:
            raise UserError(f"unknown memory type {self.type!r}: use one of {', '.join(TYPES)}")

    def any(self) -> bool:
        return any(v is not None for v in vars(self).values())


def item_key(path: str, outline: tuple[str, ...], oid: bytes, unit: int, twin: tuple[int, ...] = ()) -> int:
    """A 64-bit key for a unit of text in place; `twin` tells identical headlines under one parent apart (for
    it and each ancestor, how many identical headlines precede it among its siblings)."""
    data = encode([path, list(outline), bytes(oid), unit, list(twin)])
    return int.from_bytes(blake3.blake3(data).digest()[:8], "little")


_DAY = r"(\d{4})-(\d{2})-(\d{2})"
_ACTIVE = re.compile(rf"<{_DAY}(?:[ \t][^>\n]*)?>")  # an active Org timestamp
_DATED_TITLE = re.compile(rf"[<\[]?{_DAY}(?:[ \t][^\]>\n]*)?[\]>]?(?:[ \t]+[^\W\d_]+)?")  # 2023-05-08 Monday
_LOG_FILE = re.compile(rf"(?:^|/){_DAY}\.org$")
_SPEAKER = re.compile(r"([^\s:,][^:,\n]{0,99}?):(?:[ \t]|$)")  # "Caroline: ...", a turn's speaker (orglog)


def _day(match: re.Match | None) -> str | None:
    if match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3])).isoformat()
    except ValueError:
        return None


def item_date(path: str, outline: tuple[str, ...], own: str) -> str | None:
    """The day an item belongs to (ISO): that of the first active timestamp in its own text (`own`: its title,
    planning and body, drawers left out); else that of the nearest heading (itself or above) titled with a
    date (a date tree's 2023-05-08 Monday, or a timestamp); else that of its file, a daily log YYYY-MM-DD.org."""
    found = _day(_ACTIVE.search(own))
    for title in reversed(outline):
        if found:
            break
        found = _day(_DATED_TITLE.fullmatch(title.strip()))
    return found or _day(_LOG_FILE.search(path))


def units(path: str, outline: tuple[str, ...], position: tuple[int, ...], h: Headline,
          twin: tuple[int, ...] = ()) -> Iterable[Item]:
    """The searchable units of a headline in place: its own text; a memory section's list items one by one."""
    tag = classify(path, outline, h)
    own = _without_drawers(h.raw)
    body = _PLANNING.sub("", own.split("\n", 1)[1] if "\n" in own else "")
    turn = tag is not None and tag.type == "log" and len(outline) > 1 and _SPEAKER.match(h.title)
    common = dict(path=path, outline=outline, position=position, oid=h.oid, id=h.id,
                  agent=tag and tag.agent, type=tag and tag.type, tags=h.tags, todo=h.todo,
                  date=item_date(path, outline, own), speaker=turn[1].strip() if turn else None,
                  container=bool(tag and tag.type == "log" and len(outline) == 1 and h.children
                                 and not body.strip()))
    section = tag is not None and len(outline) == 1 and path.endswith("/memory.org")
    if section:
        for n, match in enumerate(_LIST_ITEM.finditer(body), 1):
            text = " ".join(match.group(1).split())
            yield Item(item_key(path, outline, h.oid, n, twin), text=text, **common)
        return
    text = (h.title + "\n" + body).strip()
    yield Item(item_key(path, outline, h.oid, 0, twin), text=text, **common)


def _without_drawers(text: str) -> str:
    """`text` without its property drawers: each `:PROPERTIES:` line through the first `:END:` line after it."""
    kept = []
    pos = 0
    while (start := _DRAWER_START.search(text, pos)) and (end := _DRAWER_END.search(text, start.end())):
        kept.append(text[pos:start.start()])
        pos = end.end()
    # With no `:END:` after an opening line, none comes after any later one either: the rest is kept.
    kept.append(text[pos:])
    return "".join(kept)


# (position of a headline, what tells it from identical siblings of its ancestors, its children's oids)
Parents = list[tuple[tuple[int, ...], tuple[int, ...], tuple[Oid, ...]]]


def changed_units(get: Callable[[bytes], OrgObject], path: str, old: Document | None,
                  new: Document | None) -> tuple[dict[int, Item], dict[int, Item]]:
    """The units of the `old` and the `new` document of a file outside the subtrees both hold, by key.

    A subtree found on both sides among the children of the same outline, as many times on each, has the
    same units on both sides, so it is skipped whole, unless a sibling that changed has its title and
    children: then the children of both are compared one level down, as they share an outline.
    """
    gone: dict[int, Item] = {}
    came: dict[int, Item] = {}
    levels = [((), [((), (), old.children)] if old else [], [((), (), new.children)] if new else [])]
    while levels:
        outline, before, after = levels.pop()
        counts = [Counter(oid for _, _, children in parents for oid in children) for parents in (before, after)]
        shared = {oid for oid, count in counts[0].items() if counts[1].get(oid) == count}
        below: dict[str, tuple[Parents, Parents]] = {}
        for side, (parents, found) in enumerate(((before, gone), (after, came))):
            if changed := counts[side].keys() - shared:
                for position, twin, headline in _among(get, parents, changed):
                    found.update((u.key, u) for u in units(path, (*outline, headline.title), position, headline, twin))
                    if headline.children:
                        below.setdefault(headline.title, ([], []))[side].append((position, twin, headline.children))
        if below:
            for side, parents in enumerate((before, after)):
                for position, twin, headline in _among(get, parents, shared):
                    if headline.children and headline.title in below:
                        below[headline.title][side].append((position, twin, headline.children))
        levels.extend(((*outline, title), b, a) for title, (b, a) in below.items())
    return gone, came


def _among(get: Callable[[bytes], OrgObject], parents: Parents,
           wanted: set[bytes]) -> Iterator[tuple[tuple[int, ...], tuple[int, ...], Headline]]:
    """The children of `parents` whose oids are `wanted`, with their positions and twin counts."""
    for position, twin, children in parents:
        found = _positions(children, wanted)
        if len(found) * 8 > len(children):  # many: count the identical ones before each in one pass
            seen: Counter = Counter()
            earlier = []
            for oid in children:
                earlier.append(seen[oid])
                seen[oid] += 1
        else:
            earlier = {n: children[:n].count(children[n]) for n in found}
        for n in found:
            yield (*position, n), (*twin, earlier[n]), get(children[n])


def _positions(children: tuple[Oid, ...], wanted: set[bytes]) -> list[int]:
    """Where `wanted` oids stand among `children`; a few among thousands are found by C-level search."""
    if len(wanted) * 8 > len(children):
        return [n for n, oid in enumerate(children) if oid in wanted]
    found = []
    for oid in wanted:
        n = -1
        with suppress(ValueError):
            while True:
                n = children.index(oid, n + 1)
                found.append(n)
    return sorted(found)


class SearchIndex:
    """Keyword and vector indexes over the units of one tree, updated as the tree changes.

    Items whose vector is not known yet are `pending`: the keyword index holds them at once, the
    vector index once `build` has embedded them.
    """

    def __init__(self, store: Store, embedder: CachedEmbedder, folder: Path | None = None):
        self.store = store
        self.embedder = embedder
        self.folder = folder
        self.root: Oid = EMPTY_TREE.oid
        self.tree: Tree | None = None  # the tree followed last, whose oid is `root` (a folder's view is not stored)
        self.items: dict[int, Item] = Items()
        self.by_path: dict[str, set[int]] = defaultdict(set)
        self.at: dict[tuple[str, tuple[int, ...]], int] = {}  # (path, position) -> key of the item there
        # the first line of each item of the files in `lined`, counted when they were first read (an edited file's
        # lines shift: they are counted again as results need them, see `_line`)
        self.line_of: dict[int, int] = {}
        self.lined: set[str] = set()
        self.keyword = KeywordIndex.build([])
        self.vector = VectorIndex(embedder.dim)
        self.pending: set[int] = set()  # keys of items without a vector yet
        self.queries = QueryVectors(embedder.embedder)
        self.dirty = False
        self.purged = newest_purge(store)  # a purge after this one makes these indexes hold purged text
        self._lock = threading.RLock()
        self._rebuilding: threading.Thread | None = None
        self._lines: dict[bytes, int] = {}  # headline oid -> lines of its subtree
        self._offsets: dict[bytes, list[int]] = {}  # document or headline oid -> lines before each child
        self._walked: dict[bytes, dict[bytes, int]] = {}  # document oid -> headline oid -> line, when positions moved
        self._masks: dict[Filters, set[int]] = {}  # the keys each recently used filter admits
        self._build_lock = threading.Lock()  # one build at a time
        self._built = threading.Condition(self._lock)  # told when vectors are added or the background build ends
        self._builder: threading.Thread | None = None
        self._stop = threading.Event()  # tells the background build to stop
        self._wake = threading.Event()  # tells it that items are pending
        self.building = False  # whether a background build runs

    # --- keeping in line with the store ---------------------------------------------------

    def follow(self, tree: Tree) -> None:
        """Bring the indexes in line with `tree`, touching only files whose document changed."""
        with self._lock:
            if tree.oid == self.root:
                return
            old = self.store.objects.get(self.root) if self.root != EMPTY_TREE.oid else EMPTY_TREE
            if old is None:  # the tree we were built for was collected: start over
                self._reset()
                old = EMPTY_TREE
            removed: set[int] = set()
            added: dict[int, Item] = {}
            get = self.store.objects.__getitem__
            changed = [path for path in old.entries.keys() | tree.entries.keys()
                       if old.entries.get(path) != tree.entries.get(path)]
            self.store.objects.preload(doc.entries[path] for doc in (old, tree) for path in changed
                                       if path in doc.entries)
            for path in changed:
                a, b = old.entries.get(path), tree.entries.get(path)
                gone, came = changed_units(get, path, a and get(a), b and get(b))
                indexed = self.by_path.get(path, set())
                removed |= (gone.keys() - came.keys()) & indexed
                added.update((k, i) for k, i in came.items() if k not in indexed)
                self.lined.discard(path)
                if a is None and b is not None:  # a new file: its lines are counted once, as it is read
                    lines = {node.position: node.line for node in walk_document(self.store, path, get(b))}
                    self.line_of.update((key, lines[item.position]) for key, item in came.items())
                    self.lined.add(path)
            self._apply(removed, added)
            self.root, self.tree = tree.oid, tree
            self.dirty = True

    def _apply(self, removed: set[int], added: dict[int, Item]) -> None:
        # a filter's keys change by what changed, not by the thousands of items that stay
        self._masks = {f: (mask - removed) | {k for k, i in added.items() if _admits(f, i)}
                       for f, mask in self._masks.items()}
        if removed:
            self.keyword.remove(removed)
            self.vector.remove(list(removed))
            self.pending -= removed
            for key in removed:
                item = self.items.pop(key)
                self.by_path[item.path].discard(key)
                self.line_of.pop(key, None)
                if self.at.get((item.path, item.position)) == key:
                    del self.at[item.path, item.position]
        if added:
            keys = list(added)
            texts = [added[k].text for k in keys]
            for key, item in added.items():
                self.items[key] = item
                self.by_path[item.path].add(key)
                self.at[item.path, item.position] = key
            if missing := self._adopt_cached(keys):
                self.pending.update(missing)
                self._wake.set()
            if len(added) > max(KeywordIndex.rebuild_floor, len(self.items) * KeywordIndex.rebuild_fraction):
                # a bulk change (a first build, a rollback across much): build BM25 afresh, not an overlay
                self.keyword = KeywordIndex.build((k, i.text) for k, i in self.items.items())
                return
            self.keyword.add(zip(keys, texts))
        if self.keyword.needs_rebuild and self._rebuilding is None:
            self._rebuilding = threading.Thread(target=self._rebuild_keyword, daemon=True)
            self._rebuilding.start()

    def _rebuild_keyword(self) -> None:
        """Rebuild BM25 without its mask and overlay, then catch up with changes made meanwhile."""
        with self._lock:
            items = dict(self.items.items())
        fresh = KeywordIndex.build((k, i.text) for k, i in items.items())
        with self._lock:
            fresh.remove(items.keys() - self.items.keys())
            fresh.add((k, i.text) for k, i in self.items.items() if k not in items)
            self.keyword = fresh
            self._rebuilding = None

    def wait(self) -> None:
        """Wait for a background rebuild to finish (tests and close use it)."""
        thread = self._rebuilding
        if thread is not None:
            thread.join()

    def _adopt_cached(self, keys: list[int]) -> list[int]:
        """Add the vectors the store's cache holds for these items; return the keys of those it has none for."""
        size = 4 * self.embedder.dim
        found = self.embedder.cache.get_many([self.embedder.key(self.items[k].text) for k in keys])
        have = [n for n, data in enumerate(found) if data is not None and len(data) == size]
        if have:
            self.vector.add([keys[n] for n in have], np.stack([np.frombuffer(found[n], "<f4") for n in have]))
        return [k for k, data in zip(keys, found) if data is None or len(data) != size]

    # --- embedding what lacks a vector ----------------------------------------------------------

    def build(self, budget: float | None = None, progress: Progress | None = None,
              stop: threading.Event | None = None) -> VectorStatus:
        """Embed the pending items, BATCH at a time and shortest texts first, until none is left, `stop` is
        set, or `budget` seconds would pass (a batch starts only if the last one's time fits); return the status.

        One build runs at a time: while a background build runs, or another caller builds, a caller
        waits for it within its budget instead. Each batch's vectors go to the store's cache as soon as
        they exist, so an interrupted build loses at most a batch, and the next one starts where it stopped.
        """
        if self.building and threading.current_thread() is not self._builder:
            with self._built:
                self._built.wait_for(lambda: not self.pending or not self.building, budget)
            return self.status()
        deadline = None if budget is None else time.monotonic() + budget
        if not self._build_lock.acquire(timeout=-1 if budget is None else budget):
            return self.status()
        try:
            done, last = 0, 0.0  # items embedded, seconds the last batch took
            for keys, texts in self._batches():
                started = time.monotonic()
                if (stop is not None and stop.is_set()) or (deadline is not None and started + last >= deadline):
                    break
                if progress is not None:
                    progress(done, done + len(self.pending))
                vectors = self.embedder.embed(texts)
                last = time.monotonic() - started
                with self._lock:
                    kept = [n for n, key in enumerate(keys) if key in self.pending]  # others left meanwhile
                    self.vector.add([keys[n] for n in kept], vectors[kept])
                    self.pending.difference_update(keys)
                    self.dirty = True
                    self._built.notify_all()
                done += len(keys)
            if progress is not None and done:
                progress(done, done + len(self.pending))
        finally:
            self._build_lock.release()
        return self.status()

    def _batches(self) -> Iterator[tuple[list[int], list[str]]]:
        """The pending items, BATCH at a time, shortest texts first (batches of like lengths pad least)."""
        while True:
            with self._lock:
                order = sorted(self.pending, key=lambda key: len(self.items[key].text))
            if not order:
                return
            for start in range(0, len(order), BATCH):
                with self._lock:
                    keys = [key for key in order[start:start + BATCH] if key in self.pending]
                    texts = [self.items[key].text for key in keys]
                if keys:
                    yield keys, texts

    def build_in_background(self, working: Callable[[], Tree], progress: Progress | None = None,
                            failed: Callable[[Exception], None] | None = None) -> None:
        """Keep embedding pending items in a daemon thread that follows `working()` (the working state) as it
        changes, until `stop_building`; `failed(error)` hears why it stopped if it failed."""
        if self._builder is not None:
            return
        self._stop.clear()
        self.building = True
        self._builder = threading.Thread(target=self._keep_building, args=(working, progress, failed),
                                         name="cortex-vectors", daemon=True)
        self._builder.start()

    def _keep_building(self, working: Callable[[], Tree], progress: Progress | None,
                       failed: Callable[[Exception], None] | None) -> None:
        """Follow and build every FOLLOW_INTERVAL, or at once when a search leaves items pending; the first
        time a moment after the start, which leaves a session's start-up the machine to itself."""
        try:
            while True:
                self._wake.wait(FOLLOW_INTERVAL)
                self._wake.clear()
                if self._stop.is_set():
                    return
                self.follow(working())
                self.build(progress=progress, stop=self._stop)
        except Exception as exc:  # noqa: BLE001 - a session goes on without it; searches build within their budget
            if failed is not None:
                failed(exc)
        finally:
            with self._built:
                self.building = False
                self._built.notify_all()

    def stop_building(self) -> None:
        """Stop the background build once the batch under way is added (its vectors are kept)."""
        thread = self._builder
        if thread is not None:
            self._stop.set()
            self._wake.set()
            thread.join()
            self._builder = None

    def status(self) -> VectorStatus:
        """How many items have a vector, and whether a background build is embedding the rest."""
        with self._lock:
            return VectorStatus(len(self.items) - len(self.pending), len(self.items),
                                bool(self.pending) and self.building)

    def _reset(self) -> None:
        self.root = EMPTY_TREE.oid
        self.items.clear()
        self.by_path.clear()
        self.at.clear()
        self.line_of.clear()
        self.lined.clear()
        self.pending.clear()
        self._masks.clear()
        self.keyword = KeywordIndex.build([])
        self.vector = VectorIndex(self.embedder.dim)

    # --- searching -------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 10, filters: Filters = Filters(), fusion: str = "weighted",
               weights: Weights = Weights(), today: date | None = None) -> Results:
        """The best items for `query` under `filters`, with their scores and the status of the vectors.

        While some items have no vector yet, the fusion ranks those that have one, and the others are
        ranked by the BM25 of the whole query among themselves (the fusion's keyword side counts only
        identifiers, which would leave a query in plain words nothing to find them by). The two lists
        are interleaved in proportion to the share of the admitted items each holds: vectors are made
        in an order that owes nothing to the query, so its best answers fall into the two lists in those
        proportions, and the n-th of a list holding a share s of the items stands at about n / s.

        A period the query names ("in May 2023", "last week": `cortex.search.dates`, relative to `today`) raises
        the items dated within it; a turn of a conversation is ranked with its neighbouring turns as context.
        """
        if not query.strip():
            raise UserError("empty search query")
        if fusion not in METHODS:
            raise UserError(f"unknown fusion {fusion!r}: use one of {', '.join(METHODS)}")
        # The query is embedded outside the lock, so a background build adds its batches meanwhile.
        query_vector = self.queries(query) if len(self.vector) and fusion != "keyword" else None
        layout = self._layout(named_period(query, today))
        with self._lock:
            status = self.status()
            mask = self._filter_mask(filters)
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
        with self._lock:
            if item.key not in self.items or reach < 1:
                return (), ()
            found = [self.items[k] for k in self._neighbours(item.key, reach)]
        n = item.position[-1]
        return (tuple(i for i in found if i.position[-1] < n), tuple(i for i in found if i.position[-1] > n))

    def _filter_mask(self, filters: Filters) -> set[int] | None:
        """The keys `filters` admit (None for no filter), kept for the MASKS_KEPT filters used last."""
        if not filters.any():
            return None
        mask = self._masks.pop(filters, None)
        if mask is None:
            mask = self._mask(filters)
            if len(self._masks) >= MASKS_KEPT:
                self._masks.pop(next(iter(self._masks)))
        self._masks[filters] = mask  # the most recently used last
        return mask

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

    def _mask(self, f: Filters) -> set[int]:
        paths = [p for p in self.by_path if f.path is None or p.startswith(f.path)]
        keys = set().union(*(self.by_path[p] for p in paths)) if paths else set()
        return {k for k in keys if _admits(f, self.items[k])}

    def _line(self, item: Item) -> int:
        """The first line of an item's headline in the file as it is now."""
        if item.path in self.lined and (line := self.line_of.get(item.key)) is not None:
            return line
        tree = self.tree if self.tree is not None and self.tree.oid == self.root else self.store.objects[self.root]
        doc = self.store.objects[tree.entries[item.path]]
        line = self._line_at(doc, item.position, item.oid)
        if line is None:  # headlines were inserted or removed before it since it was indexed
            lines = self._walked.get(doc.oid)
            if lines is None:
                lines = {}
                for node in walk_document(self.store, item.path, doc):
                    lines.setdefault(node.oid, node.line)
                self._walked = {doc.oid: lines}  # the file being edited
            line = lines.get(item.oid, 0)
        return line

    def _line_at(self, doc: Document, position: tuple[int, ...], oid: Oid) -> int | None:
        """The first line of the headline at `position`, from the lines of the subtrees before it; None if not `oid`."""
        parent: Document | Headline = doc
        start = line = 1 + doc.preamble.count("\n")  # where the parent's children start
        for index in position:
            if index >= len(parent.children):
                return None
            line = start + self._starts(parent)[index]
            parent = self.store.objects[parent.children[index]]
            start = line + parent.raw.count("\n")
        return line if parent.oid == oid else None

    def _starts(self, parent: Document | Headline) -> list[int]:
        """Lines before each child's subtree among the children of `parent`, then the lines of them all."""
        starts = self._offsets.get(parent.oid)
        if starts is None:
            starts = [0, *accumulate(map(self._subtree_lines, parent.children))]
            if len(self._offsets) >= OFFSETS_KEPT:
                self._offsets.clear()
            if len(self._lines) >= LINES_KEPT:
                self._lines.clear()
            self._offsets[parent.oid] = starts
        return starts

    def _subtree_lines(self, oid: bytes) -> int:
        """Lines of a headline's subtree; most are known from earlier documents, the rest are counted
        children first from a stack (files may nest thousands deep)."""
        known, stack = self._lines, [oid]
        while stack:
            top = stack[-1]
            if top in known:
                stack.pop()
                continue
            headline: Headline = self.store.objects[top]
            missing = [child for child in headline.children if child not in known]
            if missing:
                stack.extend(missing)
                continue
            known[bytes(top)] = headline.raw.count("\n") + sum(known[child] for child in headline.children)
            stack.pop()
        return known[oid]

    # --- persistence ---------------------------------------------------------------------------

    def save(self) -> None:
        """Write the indexes beside the store, each file replaced atomically, the state last."""
        if self.folder is None or not self.dirty:
            return
        if newest_purge(self.store) != self.purged:
            return  # history was purged meanwhile (by another process): these indexes may hold its text
        self.wait()
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._lock, locked(self.folder / SAVE_LOCK):  # another process closing the same store saves too
            self.keyword.save(self.folder / "keyword")
            self.vector.save(self.folder / "vectors.usearch")
            state = encode([STATE_VERSION, self.embedder.name, bytes(self.root),
                            [i.record() for i in self.items.values()], self.purged,
                            sorted(self.lined), list(self.line_of.items())])
            write_atomically(self.folder / "state.msgpack", state)
            self.dirty = False

    @classmethod
    def load(cls, store: Store, embedder: CachedEmbedder, folder: Path | None) -> "SearchIndex":
        """The saved indexes if they are whole and made by this embedder, else an empty index to build."""
        index = cls(store, embedder, folder)
        if folder is None:
            return index
        remove_stale(folder)
        if not (folder / "state.msgpack").exists():
            return index
        try:
            version, name, root, records, purged, *lines = decode((folder / "state.msgpack").read_bytes())
            if purged != index.purged:  # made before a purge (on any machine): it may hold the purged text
                shutil.rmtree(folder, ignore_errors=True)
                return index
            if version != STATE_VERSION or name != embedder.name:
                return index
            keyword = KeywordIndex.load(folder / "keyword")
            vector = VectorIndex.load(folder / "vectors.usearch")
            items = Items((r[0], r) for r in records)
            missing = vector.absent(list(items))  # saved while vectors were being built
            if len(keyword) != len(items) or len(vector) != len(items) - len(missing):
                return index
        except Exception:  # a damaged index is derived data: rebuild rather than trust it
            return index
        index.keyword, index.vector, index.items, index.root = keyword, vector, items, Oid(root)
        index.lined, index.line_of = (set(lines[0]), dict(lines[1])) if len(lines) == 2 else (set(), {})
        for key, path, _, position, *_ in records:
            index.by_path[path].add(key)
            index.at[path, tuple(position)] = key
        if missing:  # others may have embedded them since (another process, or a build the save missed)
            index.pending.update(index._adopt_cached(missing))
            index.dirty = len(index.pending) < len(missing)
        return index


def newest_purge(store: Store) -> bytes:
    """The key of the newest purge of history (b"" when there was none)."""
    keys = list(store.table(PURGES).keys_in_order())  # one per purge: few
    return keys[-1] if keys else b""


def _admits(f: Filters, item: Item) -> bool:
    return ((f.path is None or item.path.startswith(f.path))
            and (f.source is None or item.source == f.source)
            and (f.agent is None or item.agent == f.agent)
            and (f.type is None or item.type == f.type)
            and (f.tag is None or f.tag in item.tags)
            and (f.todo is None or item.todo == f.todo)
            and (f.speaker is None or (item.speaker or "").casefold() == f.speaker.casefold())
            and (f.since is None or (item.date is not None and item.date >= f.since.isoformat()))
            and (f.until is None or (item.date is not None and item.date <= f.until.isoformat())))


def forget_embeddings(store: Store, replaced: Mapping[tuple[str, bytes], bytes | None]) -> int:
    """Delete the cached vectors, under every embedder, of the texts that replaced documents held and their
    replacements do not (`replaced`: (path, document) -> its replacement or None); return how many.

    Texts are the units search indexes; call this while the replaced documents are still stored.
    A cached vector would confirm a guess of the text it was computed from.
    """
    get = store.objects.__getitem__
    before: set[str] = set()
    after: set[str] = set()
    for (path, old), new in replaced.items():
        before |= _texts(get, path, old)
        if new is not None:
            after |= _texts(get, path, new)
    digests = {hash_text(text) for text in before - after}
    table = store.table(EMBEDDINGS)
    # a key is the embedder's name, NUL, and the text's digest: scan them all to reach every embedder's
    gone = [key for key in table.keys_in_order() if key[-OID_SIZE:] in digests]
    for key in gone:
        del table[key]
    return len(gone)


def _texts(get: Callable[[bytes], OrgObject], path: str, doc: bytes) -> set[str]:
    """The texts of every unit of a document, as search indexes them."""
    return {unit.text for unit in changed_units(get, path, None, get(doc))[1].values()}


@lru_cache(maxsize=1)
def shared_embedder() -> Embedder:
    """The default embedder, loaded once per process (the model is immutable and thread-safe)."""
    return default_embedder()


def preload_model() -> None:
    """Start loading the default embedder's model, if it has one, beside what the caller does next."""
    if (preload := getattr(shared_embedder(), "preload", None)) is not None:
        preload()


def cached_embedder(store: Store, embedder: Embedder | None = None) -> CachedEmbedder:
    """The default embedder (or `embedder`) with its vectors cached in the store (in memory over what the store
    holds, for a store open read-only)."""
    table = store.table(EMBEDDINGS)
    return CachedEmbedder(embedder or shared_embedder(), Overlay(table) if store.read_only else table)

