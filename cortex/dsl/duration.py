"""Durations in the humantime grammar (`90d`, `6months`, `1h 30m`) to and from `timedelta`."""

from __future__ import annotations

import difflib
import re
from datetime import timedelta

__all__ = ["DurationError", "format_duration", "parse_duration"]

_NS = {
    "ns": 1,
    "us": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
    "d": 86400 * 10**9,
    "w": 7 * 86400 * 10**9,
    "M": 2_630_016 * 10**9,  # 30.44 days, as humantime counts a month
    "y": 31_557_600 * 10**9,  # 365.25 days
}

# Unit spellings humantime accepts; case matters (`M` is months, `m` minutes).
_UNITS = {
    **dict.fromkeys(["nanos", "nsec", "ns"], "ns"),
    **dict.fromkeys(["usec", "us", "µs"], "us"),
    **dict.fromkeys(["millis", "msec", "ms"], "ms"),
    **dict.fromkeys(["seconds", "second", "secs", "sec", "s"], "s"),
    **dict.fromkeys(["minutes", "minute", "mins", "min", "m"], "m"),
    **dict.fromkeys(["hours", "hour", "hrs", "hr", "h"], "h"),
    **dict.fromkeys(["days", "day", "d"], "d"),
    **dict.fromkeys(["weeks", "week", "wks", "wk", "w"], "w"),
    **dict.fromkeys(["months", "month", "M"], "M"),
    **dict.fromkeys(["years", "year", "yrs", "yr", "y"], "y"),
}

_TERM = re.compile(r"(\d+)\s*([A-Za-zµ]*)")
LONGEST = 1000  # years: a longer duration is a mistake, and would not fit in a date counted back from now
_LONGEST_NS = LONGEST * _NS["y"]

# How durations are written back: one term when a unit of a minute or more divides exactly,
# else a sum of calendar-free terms.
_WHOLE = [("y", "y"), ("M", "months"), ("w", "w"), ("d", "d"), ("h", "h"), ("m", "min")]
_PARTS = [("d", "d"), ("h", "h"), ("m", "min"), ("s", "s"), ("ms", "ms"), ("us", "us")]


class DurationError(ValueError):
    """A duration that does not parse; `offset` is the index of the offending character."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


def parse_duration(text: str) -> timedelta:
    """Parse a humantime duration such as `90d`, `6months` or `1h 30m`."""
    total = 0
    pos = _skip_space(text, 0)
    if pos == len(text):
        raise DurationError("empty duration: write a number and a unit, like 90d", 0)
    while pos < len(text):
        term = _TERM.match(text, pos)
        if not term:
            raise DurationError(f"expected a number at {text[pos]!r}, like 90d or 1h 30m", pos)
        number, unit = term.groups()
        end = term.end()
        if not unit and text[end : end + 1] == ".":
            raise DurationError("only whole numbers: write 1h 30m, not 1.5h", end)
        if not unit:
            raise DurationError(f"{number} needs a unit, like {number}d or {number}h", end)
        if unit not in _UNITS:
            raise DurationError(f"unknown unit {unit!r}{_suggest(unit)}", term.start(2))
        total += int(number) * _NS[_UNITS[unit]] if len(number) <= 30 else _LONGEST_NS + 1
        if total > _LONGEST_NS:
            raise DurationError(f"longer than {LONGEST} years: write at most {LONGEST}y", term.start())
        pos = _skip_space(text, end)
    micros, rest = divmod(total, 1000)
    if rest:
        raise DurationError("durations are kept to the microsecond; drop the nanoseconds", 0)
    return timedelta(microseconds=micros)


def format_duration(duration: timedelta) -> str:
    """Write a duration the way a person would, e.g. `90d`, `6months`, `1d 2h`."""
    ns = (duration // timedelta(microseconds=1)) * 1000
    if ns <= 0:
        return "0s"
    for unit, spelled in _WHOLE:
        if ns % _NS[unit] == 0:
            return f"{ns // _NS[unit]}{spelled}"
    terms = []
    for unit, spelled in _PARTS:
        count, ns = divmod(ns, _NS[unit])
        if count:
            terms.append(f"{count}{spelled}")
    return " ".join(terms)


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _suggest(unit: str) -> str:
    close = difflib.get_close_matches(unit, _UNITS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (units: ns us ms s m h d w M y, or their names like days, months)"
