"""Derived indexes over a tree's headlines, kept in line with the tree as it changes, and scans.

Each headline in place is a `Row`: its headline object, its file, its parent and children, and what it
inherits (tags, with #+FILETAGS, and its category). An `Index` posts every row under keys of several
kinds (`KEYS`): tag (own and inherited), own tag, inherited tag, TODO keyword, open or done, priority,
level, own property name, own property value (and PRIORITY as Org's matcher reads it), path, category,
where its links lead and the keys links lead to it by (its :ID:, heading and CUSTOM_ID, as `links` names
them), its :ID:, and the :ID:s it says it replaced and was replaced by; days, for planning dates,
timestamps (active and inactive) and clocks; and when the rows that may not hold start and end
(`cortex.memory.validity`).
Predicates (`predicates.py`) select through these postings.

`follow(tree)` brings the index in line with another tree as `SearchIndex.follow` does: only files whose
document oid differs are read, and in them only subtrees that are not the same object under a parent
whose inherited context (tags, category) stayed. A changed headline keeps its row, re-posted; its
children are compared one level down. A file whose setup changed (TODO keywords, #+FILETAGS,
#+CATEGORY, #+PROPERTY, its property drawer) is read again whole. A rebuild from the objects gives the
same index (the tests check it after random edits).

Nothing is kept in the store: a table of per-headline facts keyed by oid would be shareable across machines,
but a purge of history would then have to erase the facts of what it forgets (titles, links, dates), and gc and
fsck would have to know the table. The working state's index is saved beside the store instead, as the search
indexes are (`orgquery.saving`): a new process restores its rows, which read their headlines when first asked
for, rather than reading every headline (a few seconds per 100k).

Postings of a kind are collected when a predicate first asks for that kind, in one pass over every row,
and kept up to date from then on: building an index costs the walk of the tree, and the dates and links
of every headline are read only once a query needs them. So a scan (`scan`, the baseline of
bench/query.py) is an index made for one query.
"""

from __future__ import annotations

import posixpath
import re
import threading
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from operator import attrgetter
from pathlib import Path

from ..backends import Store
from ..bounded import BoundedDict
from ..hashing import Oid
from ..memory.validity import Validity
from ..objects import EMPTY_TREE, Document, Headline, Tree
from ..org import file_properties, file_tags
from ..org.blocks import keyword, keywords
from ..org.syntax import PRIORITY_COOKIE
from ..query import Node
from . import links
from .dates import day_of, headline_dates, section_lines, timestamps_in
from .predicates import PRIORITY_DEFAULT, SPECIAL_PROPERTIES, Predicate

__all__ = ["DAY_KINDS", "KEYS", "DayIndex", "FileInfo", "FileState", "Index", "Row", "ValidityIndex",
           "headline_validity", "scan"]

# org-priority-regexp, matched from the start of the headline as Emacs's `looking-at` does (ignoring case)
_PRIORITY_COOKIE = re.compile(rf"\*++.*{PRIORITY_COOKIE}", re.I)  # `.*` alone gives back: no retry per star
_KEYWORD = keyword("CATEGORY", "PROPERTY")


@dataclass(frozen=True)
class FileInfo:
    """What a file gives every headline in it: its path, done keywords, #+FILETAGS, category and the
    properties its keywords (#+PROPERTY) and property drawer set for inheritance."""

    path: str
    done: frozenset[str]
    filetags: tuple[str, ...]
    category: str
    properties: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, path: str, document: Document) -> "FileInfo":
        """A file's setup as Emacs reads its keywords (in the text before the first headline)."""
        category = posixpath.splitext(posixpath.basename(path))[0]
        properties: dict[str, str] = {}
        for name, value in keywords(document.preamble, _KEYWORD):
            if name == "CATEGORY":
                category = value
            elif " " in value or "\t" in value:
                key, rest = value.split(None, 1)
                properties[key.upper()] = rest.strip()
        for key, value in file_properties(document.preamble):
            properties[key.upper()] = value
            if key.upper() == "CATEGORY":
                category = value
        return cls(path, frozenset(document.done_keywords), file_tags(document.preamble), category,
                   tuple(properties.items()))


class Row:
    """A headline in place: its file, headline object, parent and children, and what it inherits."""

    __slots__ = ("file", "oid", "_headline", "title", "height", "parent", "children", "inherited", "tags",
                 "category", "key", "line", "position", "outline", "node", "_links")

    def __init__(self, file: "FileState", headline: Headline, parent: "Row | None"):
        self.file = file
        self._headline, self.oid, self.title, self.height = headline, headline.oid, headline.title, None
        self.parent = parent
        self.children: list[Row] = []
        self.key: tuple[str, int] = ("", 0)  # (path, order in the file): results are sorted by it
        self.node: Node | None = None
        self.line = 0
        self.position: tuple[int, ...] = ()
        self.outline: tuple[str, ...] = ()
        self._links: tuple | None = None
        self.inherited, self.tags, self.category = self.context()

    @classmethod
    def restored(cls, file: "FileState", oid: Oid, parent: "Row | None", title: str, height: int,
                 inherited: tuple[str, ...], tags: tuple[str, ...], category: str) -> "Row":
        """A row of a saved index (`orgquery.saving`): its headline is read when first asked for."""
        row = cls.__new__(cls)
        row.file, row.oid, row._headline, row.title, row.height, row.parent = file, oid, None, title, height, parent
        row.children, row.inherited, row.tags, row.category = [], inherited, tags, category
        row.key, row.node, row.line, row.position, row.outline, row._links = ("", 0), None, 0, (), (), None
        return row

    @property
    def headline(self) -> Headline:
        """Its headline object (a restored row's is read from the store when first asked for)."""
        if self._headline is None:
            self._headline = self.file.read(self.oid)
        return self._headline

    @headline.setter
    def headline(self, headline: Headline) -> None:
        self._headline, self.oid, self.title, self.height = headline, headline.oid, headline.title, None

    @property
    def lines(self) -> int:
        """How many lines its own section takes (a restored row knows it without reading its headline)."""
        if self.height is None:
            self.height = self.headline.raw.count("\n")
        return self.height

    def context(self) -> tuple[tuple[str, ...], tuple[str, ...], str]:
        """Inherited tags, all tags and category, from the parent (or the file) and the headline."""
        parent, headline = self.parent, self.headline
        inherited = parent.tags if parent is not None else self.file.info.filetags
        own = headline.tags
        tags = tuple(dict.fromkeys(inherited + own)) if own else inherited
        category = _own(headline, "CATEGORY") or (parent.category if parent else self.file.info.category)
        return inherited, tags, category

    def value(self, name: str, inherit: bool = False) -> str | None:
        """A property as Org's `org-entry-get` reads it: special properties computed, others from the drawer
        (`NAME+` entries appended), with `inherit` from ancestors, then the file's keywords and drawer."""
        upper = name.upper()
        special = _SPECIAL.get(upper)
        if special is not None:
            return special(self)
        row = self
        while row is not None:
            found = _own(row.headline, upper)
            if found is not None or not inherit:
                return found
            row = row.parent
        return dict(self.file.info.properties).get(upper)

    def days(self, kind: str) -> tuple:
        """The days of its dates of `kind` as (first, last) ordinals; clocks as (first, last, minutes)."""
        return day_spans(self.headline).get(kind, ())

    @property
    def path(self) -> str:
        return self.file.info.path

    @property
    def id(self) -> str | None:
        return self.headline.id

    @property
    def validity(self) -> Validity:
        """When it holds and what replaced what, as its own properties say (`headline_validity`)."""
        return headline_validity(self.headline)

    @property
    def link_keys(self) -> tuple:
        """Where its links lead, as `links.link_key` names targets (a file link with a search also leads to
        its file), and ("url", "https://...") for links out of the store."""
        if self._links is None:
            keys: list[tuple] = []
            for link in links.headline_links(self.headline):
                key = links.link_key(link, self.path)
                if key is None:
                    keys.append(("url", f"{link.kind}:{link.target}"))
                    continue
                keys.append(key)
                if link.kind == "file" and key[0] != "file":
                    keys.append(("file", key[1]))
            self._links = tuple(dict.fromkeys(keys))
        return self._links

    @property
    def target_keys(self) -> tuple:
        """The keys of the links that lead to it (`links.target_keys`): its :ID:, title and CUSTOM_ID."""
        return tuple(links.target_keys(self))


def _own(headline: Headline, upper: str) -> str | None:
    """A property of the drawer, as `org-entry-properties` reads it: the first NAME, `NAME+` values appended."""
    value = None
    for key, found in headline.properties:
        key = key.upper()
        if key == upper and value is None:
            value = found
        elif key == upper + "+":
            value = found if value is None else f"{value} {found}"
    return value


def _tag_string(tags: tuple[str, ...]) -> str | None:
    return f":{':'.join(tags)}:" if tags else None


def _planning(row: Row, keyword: str) -> str | None:
    return dict(row.headline.planning).get(keyword)


def _first_stamp(row: Row, active: bool) -> str | None:
    """TIMESTAMP or TIMESTAMP_IA as `org-entry-properties` finds it: the first such timestamp of the heading,
    then of the section, outside planning and CLOCK lines and the property drawer."""
    for index, line in section_lines(row.headline, properties=False):
        if not line.lstrip(" \t").startswith("CLOCK:"):
            for stamp in timestamps_in(line, index):
                if stamp.date.is_active() == active:
                    return stamp.raw
    return None


def _priority(row: Row) -> str:
    """PRIORITY as `org-entry-properties` reads it: the last [#X] cookie of the headline line (inside a
    link too), else the default."""
    m = _PRIORITY_COOKIE.match(row.headline.raw)
    return m[1] if m else PRIORITY_DEFAULT


# How each of SPECIAL_PROPERTIES is read.
_SPECIAL: dict[str, Callable[[Row], str | None]] = {
    "TODO": lambda r: r.headline.todo,
    "PRIORITY": _priority,
    "ITEM": lambda r: r.title,
    "TAGS": lambda r: _tag_string(r.headline.tags),
    "ALLTAGS": lambda r: _tag_string(r.tags),
    "CATEGORY": lambda r: r.category,
    "FILE": lambda r: r.file.info.path,
    "BLOCKED": lambda r: "",
    "CLOCKSUM": lambda r: None,
    "CLOCKSUM_T": lambda r: None,
    "SCHEDULED": lambda r: _planning(r, "SCHEDULED"),
    "DEADLINE": lambda r: _planning(r, "DEADLINE"),
    "CLOSED": lambda r: _planning(r, "CLOSED"),
    "TIMESTAMP": lambda r: _first_stamp(r, True),
    "TIMESTAMP_IA": lambda r: _first_stamp(r, False),
}

_SPANS: BoundedDict = BoundedDict(200_000)  # headline oid -> day spans by kind: content never changes


def day_spans(headline: Headline) -> dict[str, tuple]:
    """The days of a headline's dates by kind: scheduled, deadline, closed, active and inactive
    (timestamps of the section, and planning dates by their brackets), clock (with minutes)."""
    found = _SPANS.get(headline.oid)
    if found is None:
        dates = headline_dates(headline)
        spans: dict[str, list] = defaultdict(list)
        for kind, stamp in (("scheduled", dates.scheduled), ("deadline", dates.deadline), ("closed", dates.closed)):
            if stamp is not None:
                spans[kind].append(_days(stamp))
                spans["active" if stamp.is_active() else "inactive"].append(_days(stamp))
        for stamp, active in dates.timestamps:
            spans["active" if active else "inactive"].append(_days(stamp))
        for clock in dates.clocks:
            minutes = int(clock.duration.total_seconds() // 60) if clock.has_end() else 0
            spans["clock"].append((*_days(clock), minutes))
        found = _SPANS[headline.oid] = {kind: tuple(values) for kind, values in spans.items()}
    return found


_VALIDITY: BoundedDict = BoundedDict(200_000)  # headline oid -> its Validity, for headlines with properties
_ALWAYS = Validity()


def headline_validity(headline: Headline) -> Validity:
    """When a headline holds, and what it replaced and was replaced by, as its own properties say (`Validity.of`);
    one that says nothing of it (no validity property, no ADDED) always holds."""
    if not headline.properties:
        return _ALWAYS
    found = _VALIDITY.get(headline.oid)
    if found is None:
        found = _VALIDITY[headline.oid] = Validity.of(headline.properties)
    return found


def _days(stamp) -> tuple[int, int]:
    first = day_of(stamp.start).toordinal()
    last = day_of(stamp.end).toordinal() if stamp.has_end() else first
    return first, max(first, last)


# The keys each posting kind files a row under.
KEYS: dict[str, Callable[[Row], Iterable]] = {
    "tag": lambda r: r.tags,
    "own-tag": lambda r: r.headline.tags,
    "inherited-tag": lambda r: r.inherited,
    "todo": lambda r: (r.headline.todo,) if r.headline.todo else (),
    "state": lambda r: (("done" if r.headline.todo in r.file.info.done else "open"),) if r.headline.todo else (),
    "priority": lambda r: (r.headline.priority,) if r.headline.priority else (),
    "level": lambda r: (r.headline.level,),
    "property": lambda r: {key.upper().removesuffix("+") for key, _ in r.headline.properties},
    "value": lambda r: [("PRIORITY", _priority(r)), *((name, _own(r.headline, name)) for name in KEYS["property"](r)
                                                       if name not in SPECIAL_PROPERTIES)],
    "path": lambda r: (r.file.info.path,),
    "category": lambda r: (r.category,),
    "link": lambda r: r.link_keys,
    "target": lambda r: r.target_keys,
    "id": lambda r: (r.headline.id,) if r.headline.id else (),
    "supersedes": lambda r: r.validity.replaces,
    "superseded-by": lambda r: r.validity.replaced_by,
}
DAY_KINDS = ("scheduled", "deadline", "closed", "active", "inactive", "clock")
_PLACE = attrgetter("key")
_EMPTY: frozenset = frozenset()


class DayIndex:
    """Rows by the days of their dates of one kind: by first day, and spans of several days apart."""

    def __init__(self):
        self.starts: dict[int, set[Row]] = {}
        self.spans: dict[Row, list[tuple[int, int]]] = {}  # rows with dates lasting more than a day
        self._days: list[int] | None = []  # the days of `starts`, sorted; None when to sort again

    def add(self, row: Row, spans: Iterable[tuple]) -> None:
        for first, last, *_ in spans:
            rows = self.starts.get(first)
            if rows is None:
                rows = self.starts[first] = set()
                self._days = None
            rows.add(row)
            if last > first:
                self.spans.setdefault(row, []).append((first, last))

    def remove(self, row: Row, spans: Iterable[tuple]) -> None:
        for first, _, *_ in spans:
            rows = self.starts.get(first)
            if rows is not None:
                rows.discard(row)
                if not rows:
                    del self.starts[first]
                    self._days = None
        self.spans.pop(row, None)

    def rows(self) -> set[Row]:
        """The rows with a date of its kind."""
        return set().union(*self.starts.values())

    def between(self, first: int | None, last: int | None) -> set[Row]:
        """Rows with a date on a day in [first, last] (either open), a span counting on each of its days."""
        if self._days is None:
            self._days = sorted(self.starts)
        lo = 0 if first is None else bisect_left(self._days, first)
        hi = len(self._days) if last is None else bisect_right(self._days, last)
        found = set().union(*(self.starts[day] for day in self._days[lo:hi]))
        if first is not None:
            found.update(row for row, spans in self.spans.items()
                         if any(a < first <= b and (last is None or a <= last) for a, b in spans))
        return found


class ValidityIndex:
    """Rows that may not hold at some moment (`cortex.memory.validity`), by when they start and end, so that those
    not holding at a moment are found by bisection, not by testing every item of every agent's memory."""

    def __init__(self):
        self.starts: dict[datetime, set[Row]] = {}
        self.ends: dict[datetime, set[Row]] = {}
        self.replaced: set[Row] = set()  # replaced with no end said: held, but is not current
        self._sorted: tuple[list[datetime], list[datetime]] | None = ([], [])  # None: to sort again

    def add(self, row: Row, validity: Validity) -> None:
        self.put(row, validity.start, validity.end, bool(validity.replaced_by) and validity.end is None)

    def put(self, row: Row, start: datetime | None, end: datetime | None, replaced: bool) -> None:
        """File a row that starts holding at `start`, stops at `end` (either None: it says nothing), and was
        `replaced` with no end said."""
        for moments, at in ((self.starts, start), (self.ends, end)):
            if at is not None:
                if at not in moments:
                    moments[at], self._sorted = set(), None
                moments[at].add(row)
        if replaced:
            self.replaced.add(row)

    def moments(self) -> dict[Row, list]:
        """What `put` filed, by row: [start, end, replaced]."""
        found: dict[Row, list] = defaultdict(lambda: [None, None, False])
        for n, moments in enumerate((self.starts, self.ends)):
            for at, rows in moments.items():
                for row in rows:
                    found[row][n] = at
        for row in self.replaced:
            found[row][2] = True
        return found

    def remove(self, row: Row, validity: Validity) -> None:
        for moments, at in ((self.starts, validity.start), (self.ends, validity.end)):
            rows = moments.get(at)
            if rows is not None:
                rows.discard(row)
                if not rows:
                    del moments[at]
                    self._sorted = None
        self.replaced.discard(row)

    def rejects(self, at: datetime | date | None) -> set[Row]:
        """The rows that do not hold at moment `at`, or at any time of day `at` (None: now, or were replaced)."""
        if at is None:
            return self.rejects(datetime.now()) | self.replaced
        if self._sorted is None:
            self._sorted = sorted(self.starts), sorted(self.ends)
        starts, ends = self._sorted
        first = at if isinstance(at, datetime) else datetime.combine(at, time())
        after = first + (timedelta.resolution if isinstance(at, datetime) else timedelta(days=1))
        late = (self.starts[s] for s in starts[bisect_left(starts, after):])  # starts at `after` or later
        over = (self.ends[e] for e in ends[:bisect_right(ends, first)])  # ended at `first` or before
        return set().union(*late, *over)


class FileState:
    """One file of the indexed tree: its document, setup, top-level rows, whether rows know their lines, and how
    its rows read their headlines."""

    __slots__ = ("document", "info", "top", "laid_out", "read")

    def __init__(self, document: Document, info: FileInfo, read: Callable[[Oid], Headline]):
        self.document = document
        self.info = info
        self.top: list[Row] = []
        self.laid_out = False
        self.read = read

    def lay_out(self) -> None:
        """Give every row its place: document order, first line, position and outline path."""
        if self.laid_out:
            return
        path = self.info.path
        line = 1 + self.document.preamble.count("\n")
        order = 0
        stack = [(self.top, 0, (), ())]  # a stack, not recursion: files may nest thousands deep
        while stack:
            rows, index, position, outline = stack.pop()
            if index >= len(rows):
                continue
            stack.append((rows, index + 1, position, outline))
            row = rows[index]
            row.key, row.line, row.node = (path, order), line, None
            row.position, row.outline = (*position, index), (*outline, row.title)
            order += 1
            line += row.lines
            if row.children:
                stack.append((row.children, 0, row.position, row.outline))
        self.laid_out = True


class Index:
    """Postings of a tree's rows, kept in line with the trees it follows (see the module docstring)."""

    def __init__(self, store: Store):
        self.store = store
        self.root: Oid = EMPTY_TREE.oid
        self.files: dict[str, FileState] = {}
        self.rows: set[Row] = set()
        self.postings: dict[str, dict] = {}  # kind -> key -> rows, for the kinds asked for so far
        self.dated: dict[str, DayIndex] = {}  # kind -> the rows' days of their dates of that kind, once asked for
        self.validity: ValidityIndex | None = None  # once asked for
        self.purged: bytes | None = None  # the newest purge of history when it was made, for one that is saved
        self.saved: tuple | None = None  # `state()` as it was saved or loaded
        self.changed = 0  # files read again since it was saved or loaded (`orgquery.saving.lags`)
        self.unpacked: dict[str, Callable[[], dict]] = {}  # kind -> its saved postings, made when first asked for
        self._memo: dict[Predicate, set] = {}
        self.lock = threading.RLock()

    def state(self) -> tuple:
        """What it indexes and has collected: the tree, the kinds of postings and of days, the validity."""
        return self.root, frozenset(self.postings) | frozenset(self.unpacked), frozenset(self.dated), \
            self.validity is not None

    # --- what predicates read -------------------------------------------------------------------

    def posting(self, kind: str, key) -> set[Row] | frozenset:
        """The rows filed under `key` of `kind` (to read, not to change)."""
        return self._kind(kind).get(key, _EMPTY)

    def keys(self, kind: str) -> Iterable:
        """The keys of `kind` some row is filed under."""
        return [key for key, rows in self._kind(kind).items() if rows]

    def days(self, kind: str) -> DayIndex:
        found = self.dated.get(kind)
        if found is None:  # first asked for: collect them now
            found = self.dated[kind] = DayIndex()
            for row in self.rows:
                found.add(row, row.days(kind))
        return found

    def not_holding(self, at: datetime | date | None) -> set[Row]:
        """The rows that do not hold at `at` (see `ValidityIndex.rejects`)."""
        if self.validity is None:  # first asked for: collect them now
            self.validity = ValidityIndex()
            for row in self.rows:
                self.validity.add(row, row.validity)
        return self.validity.rejects(at)

    def memo(self, predicate: Predicate) -> set[Row]:
        """`predicate.select(self)`, once per evaluation."""
        found = self._memo.get(predicate)
        if found is None:
            found = self._memo[predicate] = predicate.select(self)
        return found

    def _kind(self, kind: str) -> dict:
        found = self.postings.get(kind)
        if found is None and kind in self.unpacked:  # saved: made from the saved copy
            found = self.postings[kind] = self.unpacked.pop(kind)()
        elif found is None:  # first asked for: collect them now, in one pass
            found = self.postings[kind] = defaultdict(set)
            keys = KEYS[kind]
            for row in self.rows:
                for key in keys(row):
                    found[key].add(row)
        return found

    # --- answering ------------------------------------------------------------------------------

    def select(self, predicate: Predicate) -> list[Row]:
        """The rows matching `predicate`, in file and document order."""
        with self.lock:
            self._memo = {}
            try:
                found = predicate.select(self)
            finally:
                self._memo = {}
            paths = {row.file for row in found}
            for file in paths:
                file.lay_out()
            return sorted(found, key=_PLACE)

    def nodes(self, predicate: Predicate) -> list[Node]:
        """The headlines matching `predicate`, as the nodes every other form takes."""
        return [self.node(row) for row in self.select(predicate)]

    def node(self, row: Row) -> Node:
        """A row as the node every other form takes."""
        with self.lock:
            row.file.lay_out()  # a file laid out anew gives its rows new nodes
            if row.node is None:
                row.node = Node(row.path, row.outline, row.position, row.line, row.headline)
            return row.node

    def backlinks(self, keys: Iterable[tuple], org_root: str | Path | None = None) -> list[links.Backlink]:
        """The links that lead by one of `keys` (`links.target_keys` of a headline, `links.file_keys` of a file),
        where they are, in file and document order (a file's text before its first headline first): read from
        the rows filed under those keys, not from every headline. With `org_root`, absolute file links lead into
        it too (rows file them as links out of the store)."""
        wanted = set(keys)
        with self.lock:
            rows = set().union(*(self.posting("link", key) for key in wanted))
            if org_root is not None:
                rows.update(*(self.posting("link", key) for key in self.keys("link")
                              if key[0] == "url" and key[1].startswith(("file:/", "file:~"))))
            found = []
            for row in rows:
                leading = [link for link in links.headline_links(row.headline)
                           if links.link_key(link, row.path, org_root) in wanted]
                if leading:
                    node = self.node(row)  # (its file laid out: the row's place is known)
                    found += [(row.key, node, link) for link in leading]
            for path, state in self.files.items():
                ahead = [link for link in links.document_links(state.document)
                         if links.link_key(link, path, org_root) in wanted]
                if ahead:
                    top = links.file_node(path, state.document)
                    found += [((path, -1), top, link) for link in ahead]
        found.sort(key=lambda place: place[0])
        return [links.Backlink(n.path, n.outline, n.position, n.line, n.headline, link) for _, n, link in found]

    # --- following a tree -----------------------------------------------------------------------

    def follow(self, tree: Tree) -> None:
        """Bring the index in line with `tree`, reading only the files whose document changed."""
        with self.lock:
            if tree.oid == self.root:
                return
            old = {path: state.document.oid for path, state in self.files.items()}
            changed = [path for path in old.keys() | tree.entries.keys() if old.get(path) != tree.entries.get(path)]
            for kind in list(self.unpacked) if changed else ():  # made before rows are filed anew
                self._kind(kind)
            self.store.objects.preload(tree.entries[path] for path in changed if path in tree.entries)
            for path in sorted(changed):
                oid = tree.entries.get(path)
                self._update(path, None if oid is None else self.store.objects[oid])
            self.root, self.changed = tree.oid, self.changed + len(changed)

    def _update(self, path: str, document: Document | None) -> None:
        state = self.files.get(path)
        info = None if document is None else FileInfo.of(path, document)
        if state is not None and (info is None or info != state.info):
            for row in state.top:  # gone, or read differently throughout: drop it and read it anew
                self._drop(row)
            del self.files[path]
            state = None
        if document is None:
            return
        if state is None:
            state = self.files[path] = FileState(document, info, self.store.objects.__getitem__)
            state.top = self._grow(state, None, document.children)
            return
        state.document, state.laid_out = document, False
        state.top = self._reconcile(state, None, state.top, document.children)

    def _reconcile(self, state: FileState, parent: Row | None, old: list[Row], oids: tuple[Oid, ...]) -> list[Row]:
        """The rows of `oids` under `parent`: rows of `old` for the same object are kept (re-posted, and their
        children compared, if what they inherit changed); changed headlines take the rows of old ones with
        the same title (else the next left), their children compared one level down; the rest are new."""
        result = self._match(state, parent, old, oids)
        work = [(row, kids) for row, kids in result[1]]
        while work:
            row, oids_below = work.pop()
            kept, pending = self._match(state, row, row.children, oids_below)
            row.children = kept
            work.extend(pending)
        return result[0]

    def _match(self, state: FileState, parent: Row | None, old: list[Row],
               oids: tuple[Oid, ...]) -> tuple[list[Row], list[tuple[Row, tuple[Oid, ...]]]]:
        """Rows for `oids` under `parent` from `old`, and the rows whose children are still to compare."""
        by_oid: dict[bytes, list[Row]] = defaultdict(list)
        for row in reversed(old):
            by_oid[row.oid].append(row)
        rows: list[Row | None] = [None] * len(oids)
        pending, below, taken = [], [], set()
        for n, oid in enumerate(oids):
            same = by_oid.get(oid)
            if same:
                row = rows[n] = same.pop()
                taken.add(row)
                if row.context() != (row.inherited, row.tags, row.category):
                    self._repost(row, row.headline)  # what it inherits changed: its children may inherit it
                    below.append((row, row.headline.children))
            else:
                pending.append(n)
        left = [row for row in old if row not in taken]
        by_title: dict[str, list[Row]] = defaultdict(list)
        for row in reversed(left):
            by_title[row.title].append(row)
        headlines = {n: self.store.objects[oids[n]] for n in pending}
        unpaired = []
        for n in pending:
            same_title = by_title.get(headlines[n].title)
            if same_title:
                rows[n] = same_title.pop()
                taken.add(rows[n])
            else:
                unpaired.append(n)
        rest = [row for row in left if row not in taken]
        for n, row in zip(unpaired, rest):
            rows[n] = row
        for row in rest[len(unpaired):]:
            self._drop(row)
        for n in pending:
            row = rows[n]
            if row is None:
                rows[n] = self._grow(state, parent, (oids[n],))[0]
            else:
                self._repost(row, headlines[n])
                below.append((row, headlines[n].children))
        return rows, below

    def _grow(self, state: FileState, parent: Row | None, oids: Iterable[Oid]) -> list[Row]:
        """New rows for the subtrees of `oids` under `parent`, posted."""
        top: list[Row] = []
        stack = [(parent, list(oids), top)]
        while stack:
            above, below, siblings = stack.pop()
            for oid in below:
                headline = self.store.objects[oid]
                row = Row(state, headline, above)
                self._post(row)
                siblings.append(row)
                if headline.children:
                    stack.append((row, list(headline.children), row.children))
        return top

    def _drop(self, row: Row) -> None:
        """Remove a row and its subtree from the postings."""
        stack = [row]
        while stack:
            top = stack.pop()
            self._unpost(top)
            stack.extend(top.children)

    def _repost(self, row: Row, headline: Headline) -> None:
        """File a row again after its headline (or what it inherits) changed."""
        self._unpost(row)
        row.headline, row._links = headline, None
        row.inherited, row.tags, row.category = row.context()
        row.file.laid_out = False
        self._post(row)

    def _post(self, row: Row) -> None:
        self.rows.add(row)
        for kind, postings in self.postings.items():
            for key in KEYS[kind](row):
                postings[key].add(row)
        for kind, days in self.dated.items():
            days.add(row, row.days(kind))
        if self.validity is not None:
            self.validity.add(row, row.validity)

    def _unpost(self, row: Row) -> None:
        self.rows.discard(row)
        for kind, postings in self.postings.items():
            for key in KEYS[kind](row):
                rows = postings.get(key)
                if rows is not None:
                    rows.discard(row)
                    if not rows:
                        del postings[key]
        for kind, days in self.dated.items():
            days.remove(row, row.days(kind))
        if self.validity is not None:
            self.validity.remove(row, row.validity)


def scan(store: Store, tree: Tree, predicate: Predicate) -> list[Node]:
    """The headlines of `tree` matching `predicate`, read and tested without an index kept."""
    index = Index(store)
    index.follow(tree)
    return index.nodes(predicate)
