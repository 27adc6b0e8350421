"""The predicates a query is read into (`cortex.orgquery.reader`), and what each means for a headline.

A predicate answers `test(row, scope)` for one headline in place and `select(scope)` for all of them; a
scope (an `Index`, or a scan of a tree) offers postings by kind and key (`posting`, `keys`), day indexes
(`days`) and `memo`, which selects a sub-query once per evaluation. Predicates that are `indexed` select
through postings; the others test every row a conjunction leaves them. Property values compare as Org's
match strings compare them (`compare`, `string_to_number`, `time_of`, `time_value`).
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Any, ClassVar

import re2
from orgparse.date import TIMESTAMP_NOBRACE_RE

from ..words import quoted
from .errors import QueryError

__all__ = ["COMPARATORS", "DATE_KINDS", "PRIORITY_DEFAULT", "SPECIAL_PROPERTIES", "And", "Category", "Done",
           "Heading", "Level", "Links", "Not", "Or", "Path", "Predicate", "Priority", "Property", "Regexp", "Related",
           "Tags", "TagsRegexp", "Todo", "Valid", "When", "compare", "regexp", "string_to_number", "time_of", "time_value"]

_RE2 = re2.Options()
_RE2.log_errors = False
_RE2.case_sensitive = False
COMPARATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq,
    "==": operator.eq, "<>": operator.ne, "!=": operator.ne, "/=": operator.ne,
}
PRIORITY_DEFAULT = "B"  # Org's org-priority-default: what a headline without a cookie has


@lru_cache(maxsize=1024)
def regexp(pattern: str) -> "re2._Regexp":
    """A case-insensitive RE2 regexp, `^` and `$` at every line; a QueryError if RE2 cannot read it."""
    try:
        return re2.compile("(?m)" + pattern, _RE2)
    except re2.error as err:
        reason = err.args[0].decode() if err.args and isinstance(err.args[0], bytes) else str(err)
        raise QueryError(f"bad regexp {quoted(pattern)}: {reason}") from None


# --- predicates -----------------------------------------------------------------------------------


class Predicate:
    """One test of a headline in place; `select` answers it for every row of a scope."""

    indexed: ClassVar[bool] = False  # whether `select` reads postings rather than testing every row

    def test(self, row, scope) -> bool:
        """Whether it holds for one row of `scope`."""
        raise NotImplementedError

    def select(self, scope) -> set:
        """The rows of `scope` this predicate holds for (a set the caller must not change)."""
        return {row for row in scope.rows if self.test(row, scope)}

    def rejects(self, scope) -> set | None:
        """The rows it does not hold for, when postings tell them without a test of every row (else None): a
        conjunction takes them away rather than intersect with their complement."""
        return None


@dataclass(frozen=True)
class And(Predicate):
    """Every one of `parts` holds (none: every headline)."""

    parts: tuple[Predicate, ...]

    @property
    def indexed(self) -> bool:
        return any(p.indexed for p in self.parts)

    def test(self, row, scope) -> bool:
        return all(p.test(row, scope) for p in self.parts)

    def select(self, scope) -> set:
        """The indexed parts intersected, the rows of those that say what they reject (`not`, `valid`) taken away
        (never their complement), and the rest tested on what is left."""
        found, without, rest = [], [], []
        for p in self.parts:
            rejected = p.rejects(scope)
            if rejected is not None:
                without.append(rejected)
            else:
                (found if p.indexed else rest).append(p)
        sets = sorted((p.select(scope) for p in found), key=len)
        rows = sets[0].intersection(*sets[1:]) if sets else scope.rows
        if without:
            rows = rows.difference(*without)
        return {row for row in rows if all(p.test(row, scope) for p in rest)} if rest else rows


@dataclass(frozen=True)
class Or(Predicate):
    """Any of `parts` holds."""

    parts: tuple[Predicate, ...]

    @property
    def indexed(self) -> bool:
        return all(p.indexed for p in self.parts)

    def test(self, row, scope) -> bool:
        return any(p.test(row, scope) for p in self.parts)

    def select(self, scope) -> set:
        if not self.indexed:
            return super().select(scope)
        return set().union(*(p.select(scope) for p in self.parts))


@dataclass(frozen=True)
class Not(Predicate):
    """`part` does not hold."""

    part: Predicate

    @property
    def indexed(self) -> bool:
        return self.part.indexed

    def test(self, row, scope) -> bool:
        return not self.part.test(row, scope)

    def select(self, scope) -> set:
        rejected = self.part.rejects(scope)
        return rejected if rejected is not None else scope.rows - self.part.select(scope)

    def rejects(self, scope) -> set | None:
        return self.part.select(scope) if self.part.indexed else None


@dataclass(frozen=True)
class Todo(Predicate):
    """A TODO keyword among `keywords`; with none, any keyword not done (as org-ql's `todo`)."""

    keywords: tuple[str, ...] = ()
    indexed: ClassVar[bool] = True

    def test(self, row, scope) -> bool:
        todo = row.headline.todo
        return todo is not None and (todo in self.keywords if self.keywords else todo not in row.file.info.done)

    def select(self, scope) -> set:
        if not self.keywords:
            return scope.posting("state", "open")
        return _union(scope.posting("todo", k) for k in self.keywords)


@dataclass(frozen=True)
class Done(Predicate):
    """A done keyword (one after `|` in the file's TODO setup)."""

    indexed: ClassVar[bool] = True

    def test(self, row, scope) -> bool:
        return row.headline.todo in row.file.info.done

    def select(self, scope) -> set:
        return scope.posting("state", "done")


# Which tags each mode of `Tags` reads, and the posting kind holding them.
_TAG_KINDS = {"any": "tag", "all": "tag", "local": "own-tag", "inherited": "inherited-tag"}


def _tags_of(row, mode: str) -> tuple[str, ...]:
    return row.headline.tags if mode == "local" else row.inherited if mode == "inherited" else row.tags


@dataclass(frozen=True)
class Tags(Predicate):
    """Any of `tags` (all of them for mode "all") among the headline's tags: its own and inherited ones
    (#+FILETAGS included), only its own ("local"), or only inherited ones; with no tags, any tag at all."""

    tags: tuple[str, ...] = ()
    mode: str = "any"
    indexed: ClassVar[bool] = True

    def test(self, row, scope) -> bool:
        have = _tags_of(row, self.mode)
        if not self.tags:
            return bool(have)
        return (all if self.mode == "all" else any)(tag in have for tag in self.tags)

    def select(self, scope) -> set:
        kind = _TAG_KINDS[self.mode]
        tags = self.tags or tuple(scope.keys(kind))
        sets = [scope.posting(kind, tag) for tag in tags]
        if self.mode == "all" and self.tags:
            sets.sort(key=len)
            return sets[0].intersection(*sets[1:])
        return _union(sets)


@dataclass(frozen=True)
class TagsRegexp(Predicate):
    """A tag (own or inherited) matching any of `patterns`."""

    patterns: tuple[str, ...]
    indexed: ClassVar[bool] = True

    def test(self, row, scope) -> bool:
        return any(regexp(p).search(tag) for p in self.patterns for tag in row.tags)

    def select(self, scope) -> set:
        return _union(scope.posting("tag", tag) for tag in scope.keys("tag")
                      if any(regexp(p).search(tag) for p in self.patterns))


@dataclass(frozen=True)
class Property(Predicate):
    """A property of the headline (Org's special ones too: TODO, PRIORITY, ITEM, TAGS, ALLTAGS, CATEGORY,
    FILE, SCHEDULED, DEADLINE, CLOSED, TIMESTAMP, TIMESTAMP_IA), inherited from ancestors and #+PROPERTY
    with `inherit`.

    With no `op`, the headline has it. Otherwise its value compares with `value` as Org's match strings
    compare: `kind` "string" (code point order), "number" (the value's leading number, as Emacs's
    `string-to-number`), "time" (its first date and time) or "regexp" (`op` is "~" or "!~"); a missing
    value reads as "" (0 for a number), and a time comparison fails when either side has no date.
    """

    name: str
    op: str | None = None
    value: Any = None
    kind: str = "string"
    inherit: bool = False

    @property
    def indexed(self) -> bool:
        return self._posting() is not None or (
            not self._missing_matches() and not self.inherit and self.name.upper() not in SPECIAL_PROPERTIES)

    def test(self, row, scope) -> bool:
        found = row.value(self.name, self.inherit)
        if self.op is None:
            return found is not None
        return compare(self.kind, self.op, found, self.value)

    def select(self, scope) -> set:
        posting = self._posting()
        if posting is not None:
            return scope.posting(*posting)
        if not self.indexed:
            return super().select(scope)
        return {row for row in scope.posting("property", self.name.upper()) if self.test(row, scope)}

    def _posting(self) -> tuple[str, Any] | None:
        """The posting kind and key filing exactly the rows whose value equals `value`, if there is one."""
        upper = self.name.upper()
        if self.op != "=" or self.kind != "string" or self.value == "" or self.inherit:
            return None
        if upper in ("TODO", "CATEGORY"):
            return upper.lower(), self.value
        return ("value", (upper, self.value)) if upper == "PRIORITY" or upper not in SPECIAL_PROPERTIES else None

    def _missing_matches(self) -> bool:
        return self.op is not None and compare(self.kind, self.op, None, self.value)


# Org's special properties (org-special-properties): computed, never read from a drawer.
SPECIAL_PROPERTIES = frozenset({"ALLTAGS", "BLOCKED", "CATEGORY", "CLOCKSUM", "CLOCKSUM_T", "CLOSED", "DEADLINE",
                                "FILE", "ITEM", "PRIORITY", "SCHEDULED", "TAGS", "TIMESTAMP", "TIMESTAMP_IA", "TODO"})


def compare(kind: str, op: str, found: str | None, value) -> bool:
    """Org's matcher comparison of a property value (None when missing) with `value`."""
    if kind == "regexp":
        hit = regexp(value).search(found or "") is not None
        return hit if op == "~" else not hit
    if kind == "number":
        return COMPARATORS[op](string_to_number(found or ""), value)
    if kind == "time":
        have = time_of(found or "")
        return have is not None and COMPARATORS[op](have, value)
    return COMPARATORS[op](found or "", value)


def string_to_number(text: str) -> float:
    """Emacs's `string-to-number`: the number the text starts with (after spaces and tabs), else 0."""
    m = _NUMBER.match(text)
    return float(m[1]) if m else 0.0


def time_of(text: str) -> datetime | None:
    """The first date (and time) written in `text`, as Org's `org-2ft` reads a property; None without one."""
    m = TIMESTAMP_NOBRACE_RE.search(text)
    if m is None or not 1 <= int(m["month"]) <= 12:
        return None
    # Emacs's encode-time carries a day past the month's end into the next month
    try:
        day = datetime(int(m["year"]), int(m["month"]), 1) + timedelta(days=int(m["day"]) - 1)
        return day.replace(hour=int(m["hour"] or 0), minute=int(m["min"] or 0)) if m["hour"] else day
    except (OverflowError, ValueError):  # year 0, a day past 9999-12-31, an hour past 23
        return None


def time_value(text: str, now: datetime | None = None) -> datetime | None:
    """A time to compare with, as Org's `org-matcher-time` reads one: `<now>`, `<today>`, `<tomorrow>`,
    `<yesterday>`, `<+2d>` (h d w m y, from now for hours, else from today) or a timestamp; None for text in
    neither bracket, a QueryError for a bracketed one that says no time."""
    if not (text[:1] + text[-1:] in ("<>", "[]")):
        return None
    now = now or datetime.now()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    named = {"<now>": now, "<today>": today, "<tomorrow>": today + timedelta(days=1),
             "<yesterday>": today - timedelta(days=1)}
    if text in named:
        return named[text]
    if m := _RELATIVE_TIME.fullmatch(text):
        try:
            return (now if m[2] == "h" else today) + timedelta(seconds=int(m[1]) * _UNIT_SECONDS[m[2]])
        except (OverflowError, ValueError):  # ValueError: more digits than a number is read from
            raise QueryError(f"{quoted(text)} lies past the years 1 to 9999 that a time can have") from None
    found = time_of(text)
    if found is None:
        raise QueryError(f"{quoted(text)} is not a time: write <2026-11-23>, <2026-11-23 Mon 10:00>, <today>, <now>, "
                         "<tomorrow>, <yesterday> or <+2d> (h d w m y)")
    return found


_NUMBER = re.compile(r"[ \t]*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_RELATIVE_TIME = re.compile(r"<([-+][0-9]+)([hdwmy])>")
# org-matcher-time's units: a month is 31 days, a year 365.25
_UNIT_SECONDS = {"h": 3600, "d": 86400, "w": 604800, "m": 2678400, "y": 31557600}


@dataclass(frozen=True)
class Priority(Predicate):
    """A priority cookie: any (no letters), one of `letters`, or compared with `op` (A is the highest, so
    `(priority >= "B")` is A or B); a headline without a cookie never matches, as in org-ql."""

    letters: tuple[str, ...] = ()
    op: str | None = None
    indexed: ClassVar[bool] = True

    def admits(self, cookie: str | None) -> bool:
        if cookie is None:
            return False
        if self.op is not None:
            return COMPARATORS[self.op](-ord(cookie), -ord(self.letters[0]))
        return not self.letters or cookie in self.letters

    def test(self, row, scope) -> bool:
        return self.admits(row.headline.priority)

    def select(self, scope) -> set:
        return _union(scope.posting("priority", p) for p in scope.keys("priority") if self.admits(p))


@dataclass(frozen=True)
class Level(Predicate):
    """The outline level (reduced under #+STARTUP: odd) compared with `op`, or in [low, high]."""

    low: int
    high: int | None = None
    op: str = "="
    indexed: ClassVar[bool] = True

    def admits(self, level: int) -> bool:
        if self.high is not None:
            return self.low <= level <= self.high
        return COMPARATORS[self.op](level, self.low)

    def test(self, row, scope) -> bool:
        return self.admits(row.headline.level)

    def select(self, scope) -> set:
        return _union(scope.posting("level", n) for n in scope.keys("level") if self.admits(n))


@dataclass(frozen=True)
class Heading(Predicate):
    """The title holds every one of `strings`, ignoring case."""

    strings: tuple[str, ...]

    def test(self, row, scope) -> bool:
        title = row.title.casefold()
        return all(s.casefold() in title for s in self.strings)


@dataclass(frozen=True)
class Regexp(Predicate):
    """Every one of `patterns` matches the title (`heading` True) or the whole entry: the headline line and
    its own section, up to the first child."""

    patterns: tuple[str, ...]
    heading: bool = False

    def test(self, row, scope) -> bool:
        text = row.title if self.heading else row.headline.raw
        return all(regexp(p).search(text) for p in self.patterns)


@dataclass(frozen=True)
class Path(Predicate):
    """The file's path (as the store names it) matches any of `patterns`: a glob (`notes/*.org`) or a
    folder (`notes`, `notes/`) or file it names; with none, every file."""

    patterns: tuple[str, ...] = ()
    indexed: ClassVar[bool] = True

    def admits(self, path: str) -> bool:
        return not self.patterns or any(_path_matches(path, p) for p in self.patterns)

    def test(self, row, scope) -> bool:
        return self.admits(row.path)

    def select(self, scope) -> set:
        return _union(scope.posting("path", p) for p in scope.keys("path") if self.admits(p))


def _path_matches(path: str, pattern: str) -> bool:
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(path, pattern)
    folder = pattern.rstrip("/")
    return path == folder or path.startswith(folder + "/")


@dataclass(frozen=True)
class Category(Predicate):
    """The category (a CATEGORY property here or above, else #+CATEGORY, else the file's name) is one of `names`."""

    names: tuple[str, ...]
    indexed: ClassVar[bool] = True

    def test(self, row, scope) -> bool:
        return row.category in self.names

    def select(self, scope) -> set:
        return _union(scope.posting("category", n) for n in self.names)


@dataclass(frozen=True)
class Related(Predicate):
    """A relative matches `query` (any relative with none): `relation` is "parent", "ancestors", "children"
    or "descendants", named from the headline tested."""

    relation: str
    query: Predicate | None = None

    @property
    def indexed(self) -> bool:
        return self.query is None or self.query.indexed

    def test(self, row, scope) -> bool:
        found = scope.memo(self.query) if self.query is not None else None
        return any(found is None or r in found for r in _relatives(row, self.relation))

    def select(self, scope) -> set:
        if self.query is None:
            return super().select(scope)
        return _reach(scope.memo(self.query), _INVERSE[self.relation])


_INVERSE = {"parent": "children", "children": "parent", "ancestors": "descendants", "descendants": "ancestors"}


def _relatives(row, relation: str) -> Iterable:
    if relation == "parent":
        return [row.parent] if row.parent is not None else []
    if relation == "children":
        return row.children
    if relation == "ancestors":
        return _ancestors(row)
    return _descendants(row)


def _ancestors(row):
    row = row.parent
    while row is not None:
        yield row
        row = row.parent


def _descendants(row):
    stack = list(row.children)
    while stack:
        top = stack.pop()
        yield top
        stack.extend(top.children)


def _reach(rows: set, relation: str) -> set:
    """Every `relation` of any of `rows` (a subtree or a chain already reached is not walked twice)."""
    if relation == "parent":
        return {r.parent for r in rows if r.parent is not None}
    if relation == "children":
        return {c for r in rows for c in r.children}
    found: set = set()
    for row in rows:
        if relation == "ancestors":
            row = row.parent
            while row is not None and row not in found:
                found.add(row)
                row = row.parent
        else:
            stack = [c for c in row.children if c not in found]
            while stack:
                top = stack.pop()
                found.add(top)
                stack.extend(c for c in top.children if c not in found)
    return found


@dataclass(frozen=True)
class Valid(Predicate):
    """The headline holds at moment `at`, or at some time of day `at`, by its validity properties
    (`cortex.memory.validity`: VALID_FROM, else ADDED, until INVALID_AT); with no `at`, it holds now and was not
    replaced (SUPERSEDED_BY with no INVALID_AT): it is current. A headline that says none of them always holds."""

    at: date | datetime | None = None
    indexed: ClassVar[bool] = True

    def test(self, row, scope) -> bool:
        return row.validity.holds(self.at)

    def select(self, scope) -> set:
        return scope.rows - self.rejects(scope)

    def rejects(self, scope) -> set:
        return scope.not_holding(self.at)


# Which day indexes each date predicate reads (see `Row.days`).
DATE_KINDS = {
    "scheduled": ("scheduled",), "deadline": ("deadline",), "closed": ("closed",),
    "planning": ("scheduled", "deadline", "closed"), "clocked": ("clock",),
    "ts": ("active", "inactive", "clock"), "ts-active": ("active",), "ts-inactive": ("inactive", "clock"),
}


@dataclass(frozen=True)
class When(Predicate):
    """A date of `kind` (see DATE_KINDS) on a day in [first, last] (either open); `minutes`: the time clocked
    over the clock entries in the period is at least that."""

    kind: str
    first: date | None = None
    last: date | None = None
    minutes: int = 0
    indexed: ClassVar[bool] = True

    def _span(self) -> tuple[int | None, int | None]:
        return (self.first and self.first.toordinal()), (self.last and self.last.toordinal())

    def test(self, row, scope) -> bool:
        lo, hi = self._span()
        spans = [s for k in DATE_KINDS[self.kind] for s in row.days(k) if _overlaps(s, lo, hi)]
        if self.minutes:
            return sum(s[2] for s in spans) >= self.minutes
        return bool(spans)

    def select(self, scope) -> set:
        lo, hi = self._span()
        found = _union(scope.days(k).between(lo, hi) for k in DATE_KINDS[self.kind])
        return {row for row in found if self.test(row, scope)} if self.minutes else found


def _overlaps(span: tuple, lo: int | None, hi: int | None) -> bool:
    return (lo is None or span[1] >= lo) and (hi is None or span[0] <= hi)


@dataclass(frozen=True)
class Links(Predicate):
    """`links-to`: the headline links to `target`; `linked-from`: `target` links to it. A string target is
    an :ID: (or, for links-to, a URL or a file path as the link writes it); a query target is every
    headline it matches, reached by id links and file links to a `*heading` or `#custom-id`."""

    direction: str  # "to" or "from"
    target: str | Predicate

    @property
    def indexed(self) -> bool:
        return not isinstance(self.target, Predicate) or self.target.indexed

    def test(self, row, scope) -> bool:
        return row in scope.memo(self)

    def select(self, scope) -> set:
        if self.direction == "to":
            if isinstance(self.target, Predicate):
                keys = {k for r in scope.memo(self.target) for k in r.target_keys}
            else:
                keys = _named_targets(self.target)
            return _union(scope.posting("link", k) for k in keys)
        if isinstance(self.target, Predicate):
            sources = scope.memo(self.target)
        else:
            sources = scope.posting("target", ("id", self.target))
        return _union(scope.posting("target", k) for r in sources for k in r.link_keys)


def _named_targets(target: str) -> set[tuple]:
    """The link keys a string names: an :ID:, a URL, or a file path as the store names files (`id:` and
    `file:` prefixes allowed)."""
    kind, colon, rest = target.partition(":")
    keys = {("id", target), ("url", target), ("file", target)}
    if colon and kind in ("id", "file"):
        keys.add((kind, rest))
    return keys


def _union(sets: Iterable[set]) -> set:
    sets = list(sets)
    if len(sets) == 1:
        return sets[0]
    return set().union(*sets)
