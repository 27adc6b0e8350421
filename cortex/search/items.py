"""What search sees of a tree: its items (a headline's own text, or one list item of a memory section), their
keys, tags, dates and when they hold, and which items a document's change removes and adds.

A key names a unit of text in place (path, outline, headline oid, unit, what tells identical siblings apart,
and the tags it inherits), so an edit changes the keys of the items it touched and of no other, and a tag
given to a heading (or to the file, #+FILETAGS) changes those of the items below it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from itertools import accumulate
from sys import intern

import blake3
import numpy as np

from ..codec import decode, encode
from ..hashing import Oid
from ..memory.layout import classify
from ..memory.validity import Validity
from ..objects import Document, Headline, OrgObject
from ..org import Section, file_tags
from ..org.syntax import BULLET
from ..orgquery.dates import day_of, timestamps_in

__all__ = ["SOURCES", "TYPES", "Item", "Items", "KeysByPath", "changed_units", "item_date", "item_key", "span_of", "texts", "units"]

SOURCES = ("memory", "notes")
TYPES = ("fact", "procedure", "pattern", "log")
_ALWAYS = Validity()
_LIST_ITEM = re.compile(rf"^[ \t]*{BULLET}(.+(?:\n(?![ \t]*{BULLET})[ \t]+\S.*)*)", re.M)


@dataclass(frozen=True, slots=True)
class Item:
    """One searchable unit: a headline's own text, or one list item of a memory section (slotted: an index holds
    a million of them)."""

    key: int
    path: str
    outline: tuple[str, ...]
    position: tuple[int, ...]
    oid: Oid
    id: str | None
    text: str
    agent: str | None = None
    type: str | None = None
    tags: tuple[str, ...] = ()   # its own and those it inherits (#+FILETAGS, its headings')
    todo: str | None = None
    date: str | None = None      # the day it belongs to (ISO): see `item_date`
    speaker: str | None = None   # who said it, for a turn of a conversation ("** Caroline: ...")
    container: bool = False      # a session entry holding turns and no text of its own
    valid_from: str | None = None  # when it starts to hold (ISO, to the minute; `cortex.memory.validity`)
    invalid_at: str | None = None  # when it stops holding
    replaced: bool = False         # whether something replaced it (SUPERSEDED_BY)

    @property
    def source(self) -> str:
        """`memory` for agent memory files, `notes` for every other Org file."""
        return "memory" if self.agent is not None else "notes"

    def holds(self, span: tuple[str, str], current: bool = False) -> bool:
        """Whether it holds at some time of `span` (the first minute and the one after, ISO: `span_of`), as
        `Validity.holds` says; `current`: and it was not replaced with no end said."""
        first, after = span
        return ((self.valid_from is None or self.valid_from < after) and (self.invalid_at is None or first < self.invalid_at)
                and not (current and self.replaced and self.invalid_at is None))

    @property
    def timed(self) -> bool:
        """Whether it says when it holds (most items say nothing: they always hold)."""
        return bool(self.valid_from or self.invalid_at or self.replaced)

    def turns_after(self, first: str) -> str | None:
        """The first minute after `first` at which it starts or stops holding (None: none)."""
        return min((m for m in (self.valid_from, self.invalid_at) if m is not None and m > first), default=None)

    def record(self) -> list:
        return [self.key, self.path, list(self.outline), list(self.position), bytes(self.oid), self.id,
                self.text, self.agent, self.type, list(self.tags), self.todo, self.date, self.speaker, self.container,
                self.valid_from, self.invalid_at, self.replaced]

    @classmethod
    def from_record(cls, r: list) -> "Item":
        return cls(r[0], r[1], tuple(r[2]), tuple(r[3]), Oid(r[4]), r[5], r[6], r[7], r[8], tuple(r[9]), *r[10:])


class Items(MutableMapping):
    """Items by key. Those of a saved index stay packed (their keys sorted in one array, their encoded records in
    one buffer) and each becomes an `Item` when first looked up: a search looks at a few of many thousands, and a
    million loaded as one dict took a second before the first search could start. Items added, and those looked
    up, are kept in a dict above the packed ones, which hide those removed or replaced."""

    def __init__(self):
        self._above: dict[int, Item] = {}
        self._keys = np.zeros(0, dtype="<u8")  # the packed items' keys, sorted
        self._ends = np.zeros(0, dtype="<u8")  # where each one's record ends in `_records`
        self._records: bytes | memoryview = b""
        self._hidden: set[int] = set()  # packed keys removed, or held above

    def load(self, keys: bytes, ends: bytes, records: bytes | memoryview) -> None:
        """Take the items `packed` made, in place of those held (none, as a saved index is loaded)."""
        self.clear()
        self._keys, self._ends, self._records = np.frombuffer(keys, "<u8"), np.frombuffer(ends, "<u8"), records
        if len(self._keys) != len(self._ends) or (len(self._ends) and int(self._ends[-1]) != len(records)) \
                or not (np.all(self._keys[1:] > self._keys[:-1]) and np.all(self._ends[1:] >= self._ends[:-1])):
            self.clear()
            raise ValueError("packed items that do not match their records")

    def packed(self) -> tuple[bytes, bytes, bytes]:
        """Every item, as `load` takes them: the keys sorted, where each record ends, the records."""
        records = {key: bytes(self._record(n)) for n, key in enumerate(self._keys.tolist()) if key not in self._hidden}
        records.update((key, encode(item.record())) for key, item in self._above.items())
        keys = sorted(records)
        ordered = [records[key] for key in keys]
        ends = np.fromiter(accumulate(map(len, ordered)), dtype="<u8", count=len(ordered))
        return np.array(keys, dtype="<u8").tobytes(), ends.tobytes(), b"".join(ordered)

    def _find(self, key: int) -> int:
        """Where `key` is among the packed items, -1 when it is not or is hidden."""
        if not isinstance(key, int) or key in self._hidden or not 0 <= key < 1 << 64:
            return -1
        n = int(np.searchsorted(self._keys, key))
        return n if n < len(self._keys) and int(self._keys[n]) == key else -1

    def _record(self, n: int) -> memoryview:
        start = int(self._ends[n - 1]) if n else 0
        return memoryview(self._records)[start:int(self._ends[n])]

    def __getitem__(self, key: int) -> Item:
        found = self._above.get(key)
        if found is None:
            n = self._find(key)
            if n < 0:
                raise KeyError(key)
            found = self._above[key] = Item.from_record(decode(self._record(n)))
            self._hidden.add(key)
        return found

    def __setitem__(self, key: int, item: Item) -> None:
        if key not in self._above and self._find(key) >= 0:
            self._hidden.add(key)
        self._above[key] = item

    def __delitem__(self, key: int) -> None:
        if key in self._above:
            del self._above[key]
        elif self._find(key) >= 0:
            self._hidden.add(key)
        else:
            raise KeyError(key)

    def __contains__(self, key) -> bool:
        return key in self._above or self._find(key) >= 0

    def __len__(self) -> int:
        return len(self._keys) - len(self._hidden) + len(self._above)

    def __iter__(self) -> Iterator[int]:
        # the keys as they stand when it begins: an item looked up meanwhile moves above, and is not met twice
        above, hidden = list(self._above), set(self._hidden)
        yield from (key for key in self._keys.tolist() if key not in hidden)
        yield from above

    def clear(self) -> None:
        self._above.clear()
        self._hidden.clear()
        self._keys, self._ends, self._records = self._keys[:0], self._ends[:0], b""


class KeysByPath(dict):
    """A file's path -> the keys of its items (an empty set for a path not held yet). Those of a saved index stay
    packed, one array per file, until the file is looked at (a million keys made into sets took half a second)."""

    def __missing__(self, path: str) -> set[int]:
        found = self[path] = set()
        return found

    def __getitem__(self, path: str) -> set[int]:
        found = super().__getitem__(path)
        if type(found) is bytes:
            found = set(np.frombuffer(found, "<u8").tolist())
            super().__setitem__(path, found)
        return found

    def get(self, path: str, default=None):
        return self[path] if path in self else default

    def values(self) -> list[set[int]]:
        return [self[path] for path in self]

    def items(self) -> list[tuple[str, set[int]]]:
        return [(path, self[path]) for path in self]

    def packed(self) -> dict[str, bytes]:
        """Each path that has items -> their keys, packed (as `load` takes them)."""
        return {path: keys if type(keys) is bytes else np.fromiter(keys, dtype="<u8", count=len(keys)).tobytes()
                for path, keys in super().items() if keys}

    def load(self, packed: dict[str, bytes]) -> None:
        """Take what `packed` made, in place of the paths held."""
        self.clear()
        self.update(packed)


def item_key(path: str, outline: tuple[str, ...], oid: bytes, unit: int, twin: tuple[int, ...] = (),
             inherited: tuple[str, ...] = ()) -> int:
    """A 64-bit key for a unit of text in place; `twin` tells identical headlines under one parent apart (for
    it and each ancestor, how many identical headlines precede it among its siblings); `inherited`: the tags it
    inherits."""
    data = encode([path, list(outline), bytes(oid), unit, list(twin), *([list(inherited)] if inherited else [])])
    return int.from_bytes(blake3.blake3(data).digest()[:8], "little")


_DAY = r"(\d{4})-(\d{2})-(\d{2})"
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
    found = next((day_of(stamp.date.start).isoformat() for line in own.split("\n") if "<" in line
                  for stamp in timestamps_in(line) if stamp.date.is_active()), None)  # active: within <...>
    for title in reversed(outline):
        if found:
            break
        found = _day(_DATED_TITLE.fullmatch(title.strip()))
    return found or _day(_LOG_FILE.search(path))


def units(path: str, outline: tuple[str, ...], position: tuple[int, ...], h: Headline,
          twin: tuple[int, ...] = (), inherited: tuple[str, ...] = ()) -> Iterable[Item]:
    """The searchable units of a headline in place, which inherits the tags `inherited`: its own text; a memory
    section's list items one by one."""
    tag = classify(path, outline, h)
    own, body = _own_text(h.raw)
    turn = tag is not None and tag.type == "log" and len(outline) > 1 and _SPEAKER.match(h.title)
    validity = Validity.of(h.properties) if h.properties else _ALWAYS
    common = dict(path=path, outline=outline, position=position, oid=h.oid, id=h.id,
                  agent=tag and _shared(tag.agent), type=tag and tag.type, tags=_with(inherited, h.tags), todo=h.todo,
                  date=_shared(item_date(path, outline, own)), speaker=_shared(turn[1].strip()) if turn else None,
                  container=bool(tag and tag.type == "log" and len(outline) == 1 and h.children
                                 and not body.strip()),
                  valid_from=_minute(validity.start), invalid_at=_minute(validity.end),
                  replaced=bool(validity.replaced_by))
    section = tag is not None and len(outline) == 1 and path.endswith("/memory.org")
    if section:
        for n, match in enumerate(_LIST_ITEM.finditer(body), 1):
            text = " ".join(match.group(1).split())
            yield Item(item_key(path, outline, h.oid, n, twin, inherited), text=text, **common)
        return
    text = (h.title + "\n" + body).strip()
    yield Item(item_key(path, outline, h.oid, 0, twin, inherited), text=text, **common)


def _shared(text: str | None) -> str | None:
    """One string object for every item that says the same agent, day or speaker (an index holds a million)."""
    return None if text is None else intern(text)


def _with(inherited: tuple[str, ...], own: tuple[str, ...]) -> tuple[str, ...]:
    """A headline's tags, those it inherits first, each once."""
    return tuple(dict.fromkeys(inherited + own)) if own else inherited


def span_of(at: date | datetime) -> tuple[str, str]:
    """The minutes an item must hold at some time of, as `Item.holds` takes them: a day's, or a moment's minute."""
    if isinstance(at, datetime):
        first = at.replace(second=0, microsecond=0)
        return _minute(first), _minute(first + timedelta(minutes=1))
    first = datetime.combine(at, time())
    return _minute(first), _minute(first + timedelta(days=1))


def _minute(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="minutes")


def _own_text(raw: str) -> tuple[str, str]:
    """A headline's text without its property drawer, and its body alone (after its planning line too)."""
    section = Section.of(raw)
    lines = raw.split("\n")
    return "\n".join(lines[:section.drawer] + lines[section.body:]), "\n".join(lines[section.body:])


# (position of a headline, what tells it from identical siblings of its ancestors, its children's oids)
Parents = list[tuple[tuple[int, ...], tuple[int, ...], tuple[Oid, ...]]]


def changed_units(get: Callable[[bytes], OrgObject], path: str, old: Document | None,
                  new: Document | None) -> tuple[dict[int, Item], dict[int, Item]]:
    """The units of the `old` and the `new` document of a file outside the subtrees both hold, by key.

    A subtree found on both sides among the children of the same outline, as many times on each, has the
    same units on both sides, so it is skipped whole, unless a sibling that changed has its title and
    children: then the children of both are compared one level down, as they share an outline, if it still gives
    them the same tags. A file whose #+FILETAGS changed has every unit changed.
    """
    gone: dict[int, Item] = {}
    came: dict[int, Item] = {}
    tags = [file_tags(doc.preamble) if doc else () for doc in (old, new)]
    sides = [[((), (), doc.children)] if doc else [] for doc in (old, new)]
    if tags[0] == tags[1]:
        levels = [((), tags[1], *sides)]
    else:
        levels = [((), tags[0], sides[0], []), ((), tags[1], [], sides[1])]
    while levels:
        outline, inherited, before, after = levels.pop()
        counts = [Counter(oid for _, _, children in parents for oid in children) for parents in (before, after)]
        shared = {oid for oid, count in counts[0].items() if counts[1].get(oid) == count}
        below: dict[tuple[str, tuple[str, ...]], tuple[Parents, Parents]] = {}
        for side, (parents, found) in enumerate(((before, gone), (after, came))):
            if changed := counts[side].keys() - shared:
                for position, twin, headline in _among(get, parents, changed):
                    found.update((u.key, u) for u in units(path, (*outline, headline.title), position, headline, twin,
                                                           inherited))
                    if headline.children:
                        below.setdefault((headline.title, _with(inherited, headline.tags)), ([], []))[side].append(
                            (position, twin, headline.children))
        if below:
            for side, parents in enumerate((before, after)):
                for position, twin, headline in _among(get, parents, shared):
                    if headline.children and (key := (headline.title, _with(inherited, headline.tags))) in below:
                        below[key][side].append((position, twin, headline.children))
        levels.extend(((*outline, title), passed, b, a) for (title, passed), (b, a) in below.items())
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


def texts(get: Callable[[bytes], OrgObject], path: str, doc: bytes) -> set[str]:
    """The texts of every unit of a document, as search indexes them."""
    return {unit.text for unit in changed_units(get, path, None, get(doc))[1].values()}

