"""The query language: a query is data, read into a tree of predicates that any scope of headlines answers.

    (and (todo "TODO") (tags "security") (deadline :to "+7d"))

Names and arguments follow org-ql where it has them (`todo`, `done`, `tags`, `tags-all`, `tags-local`,
`tags-inherited`, `tags-regexp`, `property`, `priority`, `level`, `heading`, `heading-regexp`, `regexp`,
`path`, `category`, `ancestors`, `parent`, `children`, `descendants`, `scheduled`, `deadline`, `closed`,
`planning`, `ts`, `ts-active`, `ts-inactive`, `clocked`; a bare string is `(regexp "string")`), plus
`links-to` and `linked-from`. Where they differ: regexps are RE2's syntax (what Python users write; Org
match strings translate Emacs's), always case-insensitive as in org-ql; `path` takes globs or folder
prefixes of the paths in the store, not regexps of absolute file names; dates are days (`:from` `:to` `:on`
take "today", "+7d", "-2w", "2026-11-23" or a number of days from today), and a range timestamp matches
when it overlaps the period; `(property NAME OP VALUE)` compares as Org's match strings do (a missing
property reads as "" or 0), and `:regexp` matches its value.

A predicate answers `test(row, scope)` for one headline in place and `select(scope)` for all of them; a
scope (an `Index`, or a scan of a tree) offers postings by kind and key (`posting`, `keys`), day indexes
(`days`) and `memo`, which selects a sub-query once per evaluation. Predicates that are `indexed` select
through postings; the others test every row a conjunction leaves them.
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

import hy
import re2
from orgparse.date import TIMESTAMP_NOBRACE_RE

from ..errors import located
from ..words import QUOTED, quoted
from .dates import parse_when
from .errors import QueryError

_RE2 = re2.Options()
_RE2.log_errors = False
_RE2.case_sensitive = False
COMPARATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq,
    "==": operator.eq, "<>": operator.ne, "!=": operator.ne, "/=": operator.ne,
}
PRIORITY_DEFAULT = "B"  # Org's org-priority-default: what a headline without a cookie has
DEADLINE_WARNING_DAYS = 14  # Org's org-deadline-warning-days, for (deadline auto)


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
        """The indexed parts intersected, those under `not` taken away (never their complement), and the rest
        tested on what is left."""
        found, without, rest = [], [], []
        for p in self.parts:
            if isinstance(p, Not) and p.part.indexed:
                without.append(p.part)
            else:
                (found if p.indexed else rest).append(p)
        sets = sorted((p.select(scope) for p in found), key=len)
        rows = sets[0].intersection(*sets[1:]) if sets else scope.rows
        if without:
            rows = rows.difference(*(p.select(scope) for p in without))
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
        return scope.rows - self.part.select(scope)


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
        title = row.headline.title.casefold()
        return all(s.casefold() in title for s in self.strings)


@dataclass(frozen=True)
class Regexp(Predicate):
    """Every one of `patterns` matches the title (`heading` True) or the whole entry: the headline line and
    its own section, up to the first child."""

    patterns: tuple[str, ...]
    heading: bool = False

    def test(self, row, scope) -> bool:
        text = row.headline.title if self.heading else row.headline.raw
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


# --- reading a query ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """A predicate form as read: its name, positional and keyword arguments, and the form itself."""

    name: str
    args: list
    keywords: dict
    form: Any


def parse(query, today: date | None = None) -> Predicate:
    """The predicate tree of a query: Hy text, a Hy form, Python data (`["tags", "x"]`) or a predicate.

    Several top-level forms are all required (`and`). Relative dates count from `today` (default: today).
    """
    if isinstance(query, Predicate):
        return query
    today = today or date.today()
    if isinstance(query, str) and not isinstance(query, hy.models.Object):
        forms = read(query)
        return _build(forms[0], today) if len(forms) == 1 else And(tuple(_build(f, today) for f in forms))
    return _build(query, today)


def read(text: str) -> list:
    """The forms of a query written in Hy, read as data (nothing is evaluated)."""
    try:
        forms = list(hy.read_many(text))
    except hy.PrematureEndOfInput:
        raise QueryError(f"query: incomplete form (a parenthesis or quote is not closed): {text.strip()}") from None
    except Exception as exc:  # noqa: BLE001 - the reader's errors have many types; each is a user mistake
        raise QueryError(f"query: cannot read {quoted(text.strip())}: {str(exc).splitlines()[0]}") from None
    if not forms:
        raise QueryError("query: empty query; write a predicate form, e.g. (todo \"TODO\")")
    return forms


def show(form) -> str:
    """A form as Hy text, to quote it in a message: its first QUOTED characters and its length when longer."""
    text = _text(form)
    return text if len(text) <= QUOTED else f"{text[:QUOTED]}… ({len(text):,} characters)"


def _text(form) -> str:
    if isinstance(form, hy.models.Keyword):
        return f":{form.name}"
    if isinstance(form, hy.models.Symbol):
        return str(form)
    if isinstance(form, bool):
        return str(form)
    if isinstance(form, int):
        digits = form.bit_length() * 3 // 10
        return repr(int(form)) if digits < 300 else f"a number of about {digits} digits"
    if isinstance(form, float):
        return repr(float(form))
    if isinstance(form, str):
        return hy.repr(str(form)[:QUOTED + 1])
    if isinstance(form, (list, tuple)):
        return "(" + " ".join(_text(x) for x in form[:QUOTED]) + ")"
    if isinstance(form, Predicate):
        return repr(form)
    return str(form)


def error(form, message: str) -> QueryError:
    """A QueryError quoting `form`, at its line and column when it was read from text."""
    line = getattr(form, "start_line", None)
    column = getattr(form, "start_column", None)
    return QueryError(located("query", line, f"{message}", column) if line else f"query: {message}")


def _build(form, today: date) -> Predicate:
    if isinstance(form, Predicate):
        return form
    if isinstance(form, str) and not isinstance(form, (hy.models.Symbol, hy.models.Keyword)):
        return Regexp((str(form),))  # a bare string, as in org-ql
    call = _call(form)
    builder = _PREDICATES.get(call.name)
    if builder is None:
        raise error(form, f"unknown predicate {show(form)}; known: {', '.join(NAMES)}")
    predicate = builder(call, today)
    unused = set(call.keywords) - _KEYWORDS.get(call.name, set())
    if unused:
        raise error(form, f"{call.name} takes no :{sorted(unused)[0]} in {show(form)}")
    return predicate


def _call(form) -> _Call:
    """A form's name and arguments; `:name` keywords (Hy keywords, or ":name" strings in Python data) pair
    with the value after them."""
    if not isinstance(form, (list, tuple)) or not form or not isinstance(form[0], str) \
            or isinstance(form[0], hy.models.Keyword):
        raise error(form, f"expected a predicate form such as (todo \"TODO\"), got {show(form)}")
    name = ALIASES.get(str(form[0]), str(form[0]))
    plain = not isinstance(form, hy.models.Object)
    args, keywords, items = [], {}, [_value(item) for item in form[1:]]
    while items:
        item = items.pop(0)
        key = item.name if isinstance(item, hy.models.Keyword) else \
            item[1:] if plain and isinstance(item, str) and item.startswith(":") and len(item) > 1 else None
        if key is None:
            args.append(item)
        elif not items:
            raise error(form, f":{key} has no value in {show(form)}")
        else:
            keywords[key.replace("_", "-")] = items.pop(0)
    return _Call(name, args, keywords, form)


def _value(item):
    """A Hy number or string as the Python value (Hy's models compare unequal to them); symbols, keywords and
    forms stay models."""
    for model, kind in ((hy.models.Integer, int), (hy.models.Float, float), (hy.models.String, str)):
        if isinstance(item, model):
            return kind(item)
    return item


def _strings(call: _Call, at_least: int = 0) -> tuple[str, ...]:
    """The arguments as strings (numbers and symbols read as their text)."""
    for arg in call.args:
        if isinstance(arg, (list, tuple, bool)) or arg is None:
            raise error(call.form, f"{call.name} takes strings, not {show(arg)}, in {show(call.form)}")
    if len(call.args) < at_least:
        raise error(call.form, f"{call.name} needs {'an argument' if at_least == 1 else f'{at_least} arguments'}"
                               f" in {show(call.form)}")
    return tuple(str(arg) for arg in call.args)


def _no_args(call: _Call) -> None:
    if call.args:
        raise error(call.form, f"{call.name} takes no arguments, in {show(call.form)}")


def _flag(call: _Call, name: str) -> bool:
    value = call.keywords.get(name)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if str(value) in ("t", "True", "true", "yes"):
        return True
    if str(value) in ("nil", "False", "false", "no", "None"):
        return False
    raise error(call.form, f":{name} takes t or nil, not {show(value)}, in {show(call.form)}")


def _sub(call: _Call, today: date, optional: bool) -> Predicate | None:
    if not call.args and optional:
        return None
    if len(call.args) != 1:
        raise error(call.form, f"{call.name} takes {'at most ' if optional else ''}one query, in {show(call.form)}")
    return _build(call.args[0], today)


def _comparator(call: _Call, arg) -> str | None:
    text = str(arg) if isinstance(arg, str) else None
    return text if text in COMPARATORS else None


def _logic(call: _Call, today: date) -> Predicate:
    parts = tuple(_build(arg, today) for arg in call.args)
    if call.name == "not":
        if len(parts) != 1:
            raise error(call.form, f"not takes one query, in {show(call.form)}")
        return Not(parts[0])
    if not parts:
        raise error(call.form, f"{call.name} needs at least one query, in {show(call.form)}")
    return parts[0] if len(parts) == 1 else (And if call.name == "and" else Or)(parts)


def _todo(call: _Call, today: date) -> Predicate:
    return Todo(_strings(call))


def _done(call: _Call, today: date) -> Predicate:
    _no_args(call)
    return Done()


def _tags(mode: str) -> Callable[[_Call, date], Predicate]:
    return lambda call, today: Tags(_strings(call), mode)


def _tags_regexp(call: _Call, today: date) -> Predicate:
    patterns = _strings(call, 1)
    for p in patterns:
        _checked(call, p)
    return TagsRegexp(patterns)


def _checked(call: _Call, pattern: str) -> str:
    try:
        regexp(pattern)
    except QueryError as exc:
        raise error(call.form, f"{str(exc)} in {show(call.form)}") from None
    return pattern


def _property(call: _Call, today: date) -> Predicate:
    args = call.args
    if not args or not isinstance(args[0], str) or len(args) > 3:
        raise error(call.form, f"property takes a name, then a value or a comparator and a value, in {show(call.form)}")
    name, inherit = str(args[0]), _flag(call, "inherit")
    pattern = call.keywords.get("regexp")
    if pattern is not None:
        if len(args) > 1:
            raise error(call.form, f"property takes a value or a :regexp, not both, in {show(call.form)}")
        return Property(name, "~", _checked(call, str(pattern)), "regexp", inherit)
    if len(args) == 1:
        return Property(name, inherit=inherit)
    op = "=" if len(args) == 2 else _comparator(call, args[1])
    if op is None:
        raise error(call.form, f"{show(args[1])} is not a comparator (one of {' '.join(COMPARATORS)}) "
                               f"in {show(call.form)}")
    value = args[-1]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise error(call.form, f"property compares with a string or a number, not {show(value)}")
    if isinstance(value, (int, float)):
        return Property(name, op, float(value), "number", inherit)
    try:
        when = time_value(str(value))
    except QueryError as exc:
        raise error(call.form, f"{exc}, in {show(call.form)}") from None
    if when is not None:
        return Property(name, op, when, "time", inherit)
    return Property(name, op, str(value), "string", inherit)


def _priority(call: _Call, today: date) -> Predicate:
    args = _strings(call)
    op = _comparator(call, call.args[0]) if len(args) == 2 else None
    letters = args[1:] if op else args
    if op and len(letters) != 1 or any(len(x) != 1 for x in letters):
        raise error(call.form, f"priority takes letters, or a comparator and a letter, in {show(call.form)}")
    return Priority(letters, op)


def _level(call: _Call, today: date) -> Predicate:
    args = call.args
    numbers = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    if len(args) == 1 and numbers:
        return Level(numbers[0])
    if len(args) == 2 and len(numbers) == 2:
        return Level(min(numbers), max(numbers))
    if len(args) == 2 and isinstance(args[1], int) and _comparator(call, args[0]):
        return Level(args[1], op=str(args[0]))
    raise error(call.form, f"level takes N, LOW HIGH, or a comparator and N, in {show(call.form)}")


def _heading(call: _Call, today: date) -> Predicate:
    return Heading(_strings(call, 1))


def _regexps(heading: bool) -> Callable[[_Call, date], Predicate]:
    def build(call: _Call, today: date) -> Predicate:
        return Regexp(tuple(_checked(call, p) for p in _strings(call, 1)), heading)

    return build


def _path(call: _Call, today: date) -> Predicate:
    return Path(_strings(call))


def _category(call: _Call, today: date) -> Predicate:
    return Category(_strings(call, 1))


def _related(call: _Call, today: date) -> Predicate:
    return Related(call.name, _sub(call, today, optional=True))


def _when(call: _Call, today: date) -> Predicate:
    kind, keys = call.name, call.keywords
    first, last = (_day(call, keys[k], today) if k in keys else None for k in ("from", "to"))
    if "on" in keys:
        if first or last:
            raise error(call.form, f":on takes the place of :from and :to, in {show(call.form)}")
        first = last = _day(call, keys["on"], today)
    if call.args:
        if len(call.args) != 1 or keys.keys() - {"min"}:
            raise error(call.form, f"{kind} takes one number of days or :from :to :on, in {show(call.form)}")
        arg = call.args[0]
        if kind == "deadline" and str(arg) == "auto":
            first, last = None, today + timedelta(days=DEADLINE_WARNING_DAYS)
        else:
            # org-ql: a number looks back for what was done (from), ahead for what is planned (to)
            day = _day(call, arg, today)
            first, last = (day, None) if kind in ("clocked", "closed") else (None, day)
    minutes = _minutes(call, keys["min"]) if "min" in keys and kind == "clocked" else 0
    return When(kind, first, last, minutes)


def _day(call: _Call, value, today: date) -> date:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return today + timedelta(days=value)
        except OverflowError:
            raise error(call.form, f"{show(value)} days from today lies past the years 1 to 9999 that a date can "
                                   f"have, in {show(call.form)}") from None
    if not isinstance(value, str):
        raise error(call.form, f"{show(value)} is not a date in {show(call.form)}")
    try:
        return parse_when(str(value), today)
    except QueryError as exc:
        raise error(call.form, f"{exc} in {show(call.form)}") from None


def _minutes(call: _Call, value) -> int:
    """A duration: minutes as a number, or H:MM."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    hours, colon, minutes = str(value).partition(":")
    if colon and hours.isdigit() and minutes.isdigit() and len(minutes) == 2:
        return int(hours) * 60 + int(minutes)
    raise error(call.form, f":min takes minutes or H:MM, not {show(value)}, in {show(call.form)}")


def _links(direction: str) -> Callable[[_Call, date], Predicate]:
    def build(call: _Call, today: date) -> Predicate:
        if len(call.args) != 1:
            raise error(call.form, f"{call.name} takes an :ID: or a query, in {show(call.form)}")
        target = call.args[0]
        if isinstance(target, str) and not isinstance(target, hy.models.Symbol):
            return Links(direction, str(target))
        return Links(direction, _build(target, today))

    return build


_PREDICATES: dict[str, Callable[[_Call, date], Predicate]] = {
    "and": _logic, "or": _logic, "not": _logic, "todo": _todo, "done": _done,
    "tags": _tags("any"), "tags-all": _tags("all"), "tags-local": _tags("local"),
    "tags-inherited": _tags("inherited"), "tags-regexp": _tags_regexp,
    "property": _property, "priority": _priority, "level": _level, "category": _category,
    "heading": _heading, "heading-regexp": _regexps(True), "regexp": _regexps(False), "path": _path,
    "ancestors": _related, "parent": _related, "children": _related, "descendants": _related,
    **{kind: _when for kind in DATE_KINDS},
    "links-to": _links("to"), "linked-from": _links("from"),
}
ALIASES = {"tags&": "tags-all", "local-tags": "tags-local", "tags-l": "tags-local", "ltags": "tags-local",
           "inherited-tags": "tags-inherited", "tags-i": "tags-inherited", "itags": "tags-inherited",
           "tags*": "tags-regexp", "h": "heading", "h*": "heading-regexp", "r": "regexp", "ts-a": "ts-active",
           "ts-i": "ts-inactive"}  # org-ql's
_KEYWORDS = {"property": {"inherit", "regexp"}, "clocked": {"from", "to", "on", "min"},
             **{kind: {"from", "to", "on"} for kind in DATE_KINDS if kind != "clocked"}}
NAMES = tuple(sorted(_PREDICATES))
