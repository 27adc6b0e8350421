"""Diary sexps (`<%%(diary-anniversary 3 31 2000)>`) read as data, never run: the common diary functions of
Emacs's diary-lib and the days each holds.

Read are `diary-anniversary`, `diary-float`, `diary-block`, `diary-cyclic` and `diary-date`, with their optional
arguments, in Emacs's default `calendar-date-style` (american: month, day, year). Arguments are integers, `t`,
`nil` or a quoted list of integers (`'(3 4)`) where Emacs takes one; a mark (the last, optional argument) is
read and left aside. Anything else, or a date no calendar holds,
is a QueryError that says what and where.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta
from functools import lru_cache

from ..words import quoted
from .errors import QueryError

__all__ = ["DIARY_FUNCTIONS", "diary_rule", "sexp_line"]

DIARY_FUNCTIONS = ("diary-anniversary", "diary-block", "diary-cyclic", "diary-date", "diary-float")
_TOKEN = re.compile(r"""\s*(?:(?P<open>'?\()|(?P<close>\))|(?P<int>[-+]?[0-9]+)(?=[\s()]|$)"""
                    r"""|(?P<string>"(?:[^"\\]|\\.)*")|(?P<symbol>[^\s()'"]+))""")
_ARITY = {"diary-anniversary": (2, 4), "diary-block": (6, 7), "diary-cyclic": (4, 5), "diary-date": (3, 4),
          "diary-float": (3, 5)}

# A rule: for a day, the text of the entry on it (its `%d` filled in), or None when the day is not one of its days.
Rule = Callable[[date, str], str | None]


@lru_cache(maxsize=4096)
def diary_rule(sexp: str, where: str) -> Rule:
    """The rule a diary sexp (`(diary-float t 4 2)`) says; `where` (file:line) names it in errors."""
    name, args = _read(sexp, where)
    low, high = _ARITY.get(name, (None, None))
    if low is None:
        raise QueryError(f"{where}: diary sexp {quoted(sexp)}: cortex reads {', '.join(DIARY_FUNCTIONS)}, "
                         f"not {quoted(name)}")
    if not low <= len(args) <= high:
        raise QueryError(f"{where}: diary sexp {quoted(sexp)}: {name} takes {low} to {high} arguments")
    return _RULES[name](args, sexp, where)


def sexp_line(line: str) -> tuple[str, str] | None:
    """A diary sexp line (`%%(diary-anniversary 3 31 2000) Arthur is %d`): its sexp and its entry text; None for
    another line."""
    if not line.startswith(("%%(", "&%%(")):
        return None
    start = line.index("(")
    depth, quoted_, escaped = 0, False, False
    for i in range(start, len(line)):  # forward-sexp: to the parenthesis that closes the first, strings skipped
        c = line[i]
        if escaped or (quoted_ and c not in '"\\'):
            escaped = False
            continue
        if c == "\\":
            escaped = True
        elif c == '"':
            quoted_ = not quoted_
        elif c in "()":
            depth += 1 if c == "(" else -1
            if depth == 0:
                return line[start:i + 1], line[i + 1:].strip(" \t")
    return line[start:], ""


def _read(sexp: str, where: str) -> tuple[str, list]:
    """A call's function name and its arguments: integers, True (t), None (nil) or tuples of integers."""
    tokens = list(_TOKEN.finditer(sexp))
    if "".join(t[0] for t in tokens) != sexp.rstrip() or not tokens or tokens[0]["open"] != "(" \
            or tokens[-1]["close"] is None:
        raise QueryError(f"{where}: {quoted(sexp)} is not a diary sexp such as (diary-float t 4 2)")
    items, stack = [], []
    for token in tokens[1:-1]:
        if token["open"] == "'(" and not stack:
            stack.append([])
        elif token["close"] and stack:
            items.append(tuple(stack.pop()))
        elif token["int"] is not None:
            (stack[-1] if stack else items).append(int(token["int"]))
        elif token["string"] and not stack:  # a mark (a face's name or a character): what the calendar shows
            items.append(token["string"])
        elif token["symbol"] in ("t", "nil") and not stack:
            items.append(True if token["symbol"] == "t" else None)
        elif token["symbol"] and not items and not stack:
            items.append(token["symbol"])
        else:
            raise QueryError(f"{where}: diary sexp {quoted(sexp)}: cannot read {quoted(token[0].strip())} "
                             "(write integers, t, nil or '(1 2))")
    if stack or not items or not isinstance(items[0], str):
        raise QueryError(f"{where}: {quoted(sexp)} is not a diary sexp such as (diary-float t 4 2)")
    return items[0], items[1:]


def _int(value, what: str, sexp: str, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise QueryError(f"{where}: diary sexp {quoted(sexp)}: {what} must be an integer")
    return value


def _day(month, day, year, sexp: str, where: str) -> date:
    """A date the arguments name, american order; a QueryError for one no calendar holds."""
    try:
        return date(_int(year, "the year", sexp, where), _int(month, "the month", sexp, where),
                    _int(day, "the day", sexp, where))
    except (ValueError, OverflowError):
        raise QueryError(f"{where}: diary sexp {quoted(sexp)}: month {month}, day {day}, year {year} is no date "
                         "(the order is month, day, year)") from None


def _matches(value, part: int) -> bool:
    """diary-date's test of one part: t (any), an integer, or a list of integers."""
    return value is True or value == part or (isinstance(value, tuple) and part in value)


def _format(entry: str, n: int) -> str:
    """Emacs's (format entry n (diary-ordinal-suffix n)) for the `%d` and `%s` an entry may hold."""
    suffix = "th" if n % 100 in (11, 12, 13) or n % 10 > 3 else ("th", "st", "nd", "rd")[n % 10]
    values = iter((n, suffix))
    return re.sub(r"%([ds%])", lambda m: "%" if m[1] == "%" else str(next(values, "")), entry)


def _anniversary(args, sexp, where) -> Rule:
    month, day = _int(args[0], "the month", sexp, where), _int(args[1], "the day", sexp, where)
    year = args[2] if len(args) > 2 else None
    if year is not None:
        _day(month, day, year, sexp, where)

    def rule(current: date, entry: str) -> str | None:
        mm, dd = (3, 1) if (month, day) == (2, 29) and not _leap(current.year) else (month, day)
        diff = current.year - year if year is not None else 100
        return _format(entry, diff) if diff > 0 and (mm, dd) == (current.month, current.day) else None
    return rule


def _block(args, sexp, where) -> Rule:
    first, last = _day(*args[0:3], sexp, where), _day(*args[3:6], sexp, where)
    return lambda current, entry: entry if first <= current <= last else None


def _cyclic(args, sexp, where) -> Rule:
    n = _int(args[0], "the day count", sexp, where)
    if n <= 0:
        raise QueryError(f"{where}: diary sexp {quoted(sexp)}: the day count must be positive")
    base = _day(*args[1:4], sexp, where)

    def rule(current: date, entry: str) -> str | None:
        diff = (current - base).days
        return _format(entry, diff // n) if diff >= 0 and diff % n == 0 else None
    return rule


def _date(args, sexp, where) -> Rule:
    for value, what in zip(args[:3], ("month", "day", "year")):
        if not (value is True or isinstance(value, tuple) or isinstance(value, int)):
            raise QueryError(f"{where}: diary sexp {quoted(sexp)}: the {what} must be an integer, t or a list")
    month, day, year = args[:3]
    return lambda current, entry: entry if (_matches(month, current.month) and _matches(day, current.day)
                                            and _matches(year, current.year)) else None


def _float(args, sexp, where) -> Rule:
    """diary-float: the Nth DAYNAME (0 Sunday) after (N > 0) or before (N < 0) DAY (default the month's first, or
    last) of MONTH (an integer, t or a list), as Emacs tests it."""
    month = args[0]
    if not (month is True or isinstance(month, tuple) or isinstance(month, int)):
        raise QueryError(f"{where}: diary sexp {quoted(sexp)}: the month must be an integer, t or a list")
    dayname, n = _int(args[1], "the day of the week", sexp, where), _int(args[2], "N", sexp, where)
    day = args[3] if len(args) > 3 else None
    if day is not None:
        _int(day, "the day", sexp, where)

    def rule(current: date, entry: str) -> str | None:
        if current.isoweekday() % 7 != dayname:
            return None
        limit = _nth_named(-n, dayname, current.month, current.year, current.day)
        first, last = (limit - timedelta(days=6), limit) if n > 0 else (limit, limit + timedelta(days=6))

        def base(d: date) -> int:
            return day or (1 if n > 0 else _last_day(d.month, d.year))
        if first.month == last.month:
            ok = _matches(month, first.month) and first.day <= base(first) <= last.day
        else:
            ok = (_matches(month, first.month) and first.day <= base(first)) or \
                 (_matches(month, last.month) and base(last) <= last.day)
        return entry if ok else None
    return rule


def _nth_named(n: int, dayname: int, month: int, year: int, day: int | None) -> date:
    """calendar-nth-named-absday: the Nth DAYNAME on or after (N > 0) or on or before (N < 0) a day of a month."""
    if n > 0:
        return _on_or_before(dayname, date(year, month, day or 1) + timedelta(days=6)) + timedelta(days=7 * (n - 1))
    return _on_or_before(dayname, date(year, month, day or _last_day(month, year))) + timedelta(days=7 * (n + 1))


def _on_or_before(dayname: int, day: date) -> date:
    return day - timedelta(days=(day.isoweekday() % 7 - dayname) % 7)


def _last_day(month: int, year: int) -> int:
    return ((date(year + month // 12, month % 12 + 1, 1)) - timedelta(days=1)).day


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


_RULES = {"diary-anniversary": _anniversary, "diary-block": _block, "diary-cyclic": _cyclic, "diary-date": _date,
          "diary-float": _float}
