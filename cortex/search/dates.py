"""The period a search query names, if any: "on 7 July, 2023", "in May 2023", "in 2022", "in June", "yesterday",
"last week". Read conservatively: a date written out in full, a month with its year, a year after "in", a month
after "in", or a few words relative to today; anything else names no period.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = ["Period", "named_period"]

_MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): n for n, name in enumerate(calendar.month_abbr) if name and name != "May"})
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORDINAL = r"(?:st|nd|rd|th)?"
_PATTERNS = (  # (pattern, what its groups are), the most precise first
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), "ymd"),
    (re.compile(rf"\b(\d{{1,2}}){_ORDINAL}(?: of)? ({_MONTH})\.?,? (\d{{4}})\b", re.I), "dmy"),
    (re.compile(rf"\b({_MONTH})\.? (\d{{1,2}}){_ORDINAL},? (\d{{4}})\b", re.I), "mdy"),
    (re.compile(rf"\b({_MONTH})\.?,? (\d{{4}})\b", re.I), "my"),
    (re.compile(r"\b(?:in|during|of|since) ((?:19|20)\d\d)\b", re.I), "y"),
    (re.compile(rf"\b(?:in|during) ({_MONTH})\b(?! \d)", re.I), "m"),
)
_RELATIVE = re.compile(r"\b(today|yesterday|(?:last|this|past) (?:week|month|year))\b", re.I)


@dataclass(frozen=True)
class Period:
    """Days from `start` to `end`, both included, or (`month` given) that month of any year; `text` is how the
    query named it."""

    start: date | None
    end: date | None
    text: str
    month: int | None = None

    def __contains__(self, day: date | str | None) -> bool:
        if day is None:
            return False
        day = date.fromisoformat(day) if isinstance(day, str) else day
        if self.month is not None:
            return day.month == self.month
        return self.start <= day <= self.end


def named_period(query: str, today: date | None = None) -> Period | None:
    """The period `query` names (the first, most precise form found), or None; `today` anchors "last week"."""
    for pattern, form in _PATTERNS:
        if m := pattern.search(query):
            period = _period(m, form)
            if period is not None:
                return period
    if m := _RELATIVE.search(query):
        return _relative(m[1].lower(), m[0], today or date.today())
    return None


def _period(m: re.Match, form: str) -> Period | None:
    try:
        if form == "ymd":
            day = date(int(m[1]), int(m[2]), int(m[3]))
        elif form == "dmy":
            day = date(int(m[3]), _MONTHS[m[2].lower()], int(m[1]))
        elif form == "mdy":
            day = date(int(m[3]), _MONTHS[m[1].lower()], int(m[2]))
        elif form == "my":
            year, month = int(m[2]), _MONTHS[m[1].lower()]
            return Period(date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1]), m[0])
        elif form == "y":
            return Period(date(int(m[1]), 1, 1), date(int(m[1]), 12, 31), m[1])
        else:
            return Period(None, None, m[1], month=_MONTHS[m[1].lower()])
    except ValueError:  # 31 June, a year out of range
        return None
    return Period(day, day, m[0])


def _relative(words: str, text: str, today: date) -> Period:
    if words == "today":
        return Period(today, today, text)
    if words == "yesterday":
        return Period(today - timedelta(days=1), today - timedelta(days=1), text)
    which, unit = words.split()
    if unit == "week":
        monday = today - timedelta(days=today.weekday())
        if which == "this":
            return Period(monday, today, text)
        if which == "last":  # the calendar week before this one
            return Period(monday - timedelta(days=7), monday - timedelta(days=1), text)
        return Period(today - timedelta(days=7), today, text)
    if unit == "month":
        first = today.replace(day=1)
        if which == "this":
            return Period(first, today, text)
        if which == "last":
            before = first - timedelta(days=1)
            return Period(before.replace(day=1), before, text)
        return Period(today - timedelta(days=30), today, text)
    if which == "this":
        return Period(today.replace(month=1, day=1), today, text)
    if which == "last":
        return Period(date(today.year - 1, 1, 1), date(today.year - 1, 12, 31), text)
    return Period(today - timedelta(days=365), today, text)
