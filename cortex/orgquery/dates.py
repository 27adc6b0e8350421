"""Dates as Emacs reads them: a headline's planning, timestamps, ranges, repeaters, delays and clocks.

Timestamps are those org-element finds (`cortex.org.inline`: not in verbatim, code or links, not a date glued
to more text), their dates read as `org-parse-time-string` reads them (single-digit hours too) into orgparse's
date kinds (`orgparse.date`), with the repeater and warning-delay cookies as org-element reads them. Diary sexps
(`<%%(diary-float t 4 2)>`) are kept apart, as `Diary`. Relative dates ("+7d", "tomorrow") are read by
`parse_when`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import MAXYEAR, MINYEAR, date, datetime, time, timedelta
from typing import NamedTuple

from orgparse.date import OrgDate, OrgDateClock, OrgDateClosed, OrgDateDeadline, OrgDateScheduled

from ..bounded import BoundedDict
from ..errors import UserError
from ..memory.validity import moment_of
from ..objects import Headline
from ..org.blocks import BLOCK_BEGIN, BLOCK_END, VERBATIM_BLOCKS
from ..org.inline import MAX_STAMP, timestamps
from ..org.syntax import PLANNING_LINE, Section, file_drawer
from ..words import quoted
from .errors import QueryError

__all__ = ["Cookie", "Diary", "HeadlineDates", "Stamp", "add_months", "day_of", "headline_dates", "object_lines",
           "parse_moment", "parse_when", "planning_date", "repeater", "section_diaries", "section_lines",
           "section_stamps", "timestamps_in", "warning"]

# Emacs's own cookie patterns (org-element-timestamp-parser); the first match in a timestamp counts.
_REPEATER = re.compile(r"([.+]?\+)([0-9]+)([hdwmy])")
_DELAY = re.compile(r"(-)?-([0-9]+)([hdwmy])")
# A timestamp's parts (org-element-timestamp-parser), and a date and time within one (org-ts-regexp0).
_PARTS = re.compile(r"([<\[](%%)?.*?)[\]>](?:--([<\[].*?[\]>]))?")
_DAY_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?: +[^\]+0-9>\r\n -]+)?(?: +([0-9]{1,2}):([0-9]{2}))?")
_TIME_RANGE = re.compile(r"[012]?[0-9]:[0-5][0-9]-([012]?[0-9]):([0-5][0-9])")
_HEADING_STARS = re.compile(r"\*+[ \t]")
_CLOCK_LINE = re.compile(r"[ \t]*CLOCK:")
_NO_OBJECTS = re.compile(r"[ \t]*(?:#|:)(?: |$)")  # comment and fixed-width lines
_RELATIVE = re.compile(r"([+-])([0-9]+)([dwmy])")
_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_PLANNING_KINDS = {"SCHEDULED": OrgDateScheduled, "DEADLINE": OrgDateDeadline, "CLOSED": OrgDateClosed}
WHEN_FORMS = "today, tomorrow, yesterday, +7d, -2w, +1m, +1y or YYYY-MM-DD"
MOMENT_FORMS = f"a day ({WHEN_FORMS}), now, YYYY-MM-DD HH:MM or an Org timestamp"
_ISO_MINUTE = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})[ T]([0-9]{1,2}):([0-9]{2})")


class Cookie(NamedTuple):
    """A repeater (`+1w`, `.+2d`, `++1m`) or a warning delay (`-3d`, `--3d`): its prefix, count and unit."""

    prefix: str
    value: int
    unit: str


class Stamp(NamedTuple):
    """A timestamp (or range) as written: its date, its text, its line within the section (0: the heading)."""

    date: OrgDate
    raw: str
    line: int


class Diary(NamedTuple):
    """A diary sexp timestamp (`<%%(diary-float t 4 2)>`): its sexp, its text, its line within the section."""

    sexp: str
    raw: str
    line: int


@dataclass(frozen=True)
class HeadlineDates:
    """What a headline's dates say. `timestamps` are those of its own section, the planning line and CLOCK
    lines excluded, each with whether it is active; a range is one date with an `end`."""

    scheduled: OrgDateScheduled | None
    deadline: OrgDateDeadline | None
    closed: OrgDateClosed | None
    timestamps: tuple[tuple[OrgDate, bool], ...]
    clocks: tuple[OrgDateClock, ...]

    @property
    def clocked(self) -> timedelta:
        """The time of the closed CLOCK lines, added up (a running clock has no end yet)."""
        return sum((clock.duration for clock in self.clocks if clock.has_end()), timedelta())


# By headline oid: content never changes.
_CACHE: BoundedDict = BoundedDict(200_000)
_OBJECTS: BoundedDict = BoundedDict(200_000)


def headline_dates(headline: Headline) -> HeadlineDates:
    """The planning dates, timestamps and clocks of one headline."""
    found = _CACHE.get(headline.oid)
    if found is None:
        planning = {keyword: planning_date(keyword, raw) for keyword, raw in headline.planning}
        found = _CACHE[headline.oid] = HeadlineDates(
            scheduled=planning.get("SCHEDULED"),
            deadline=planning.get("DEADLINE"),
            closed=planning.get("CLOSED"),
            timestamps=tuple((stamp.date, stamp.date.is_active()) for stamp in section_stamps(headline)),
            clocks=tuple(clock for _, line in section_lines(headline) if _CLOCK_LINE.match(line)
                         if (clock := _clock(line))),
        )
    return found


def planning_date(keyword: str, raw: str) -> OrgDate | None:
    """A planning entry (`SCHEDULED`, `<2026-11-23 Mon +1w>`) as its orgparse kind; None for a diary sexp."""
    found = _date(raw)
    if found is None:
        return None
    return _PLANNING_KINDS[keyword](found.start, found.end, active=found.is_active(),
                                    repeater=_repeater(raw), warning=_delay(raw))


def section_stamps(headline: Headline) -> tuple[Stamp, ...]:
    """The timestamps and ranges of a headline's heading and section, in order, but for planning and CLOCK lines."""
    return _section_objects(headline)[0]


def section_diaries(headline: Headline) -> tuple[Diary, ...]:
    """The diary sexp timestamps of a headline's heading and section, in order, but for planning and CLOCK lines."""
    return _section_objects(headline)[1]


def _section_objects(headline: Headline) -> tuple[tuple[Stamp, ...], tuple[Diary, ...]]:
    found = _OBJECTS.get(headline.oid)
    if found is None:
        both = [found for offset, line in section_lines(headline) if not _CLOCK_LINE.match(line)
                for found in _stamps(line, offset)]
        found = _OBJECTS[headline.oid] = (tuple(x for x in both if isinstance(x, Stamp)),
                                          tuple(x for x in both if isinstance(x, Diary)))
    return found


def timestamps_in(text: str, line: int = 0) -> Iterator[Stamp]:
    """The timestamps of one line of text as org-element finds them, a range (`<a>--<b>`) as one."""
    return (found for found in _stamps(text, line) if isinstance(found, Stamp))


def _stamps(text: str, line: int) -> Iterator[Stamp | Diary]:
    """The timestamps and diary sexps of one line (a heading's after its stars), but those no calendar holds."""
    heading = _HEADING_STARS.match(text)
    for span in timestamps(text, heading.end() if heading else 0):
        raw = text[span.start:span.end]
        if raw.startswith("<%%("):
            yield Diary(raw[3:raw.rindex(")") + 1], raw, line)
        elif (found := _date(raw)) is not None:
            yield Stamp(found, raw, line)


def _date(raw: str) -> OrgDate | None:
    """A timestamp or range as org-element reads it, its dates as `org-parse-time-string` reads them; None for a
    diary sexp, one too long to be a timestamp, or one no calendar holds (year 0, a month 13)."""
    m = _PARTS.match(raw)
    if m is None or m[2] or len(raw) > 2 * MAX_STAMP + 2:
        return None
    start = _moment(m[1])
    end = _moment(m[3]) if m[3] else None
    if start is None or (m[3] and end is None):
        return None
    if end is None and isinstance(start, datetime) and (span := _TIME_RANGE.search(m[1])):
        try:
            end = start.replace(hour=int(span[1]), minute=int(span[2]))
        except ValueError:  # an hour past 23
            return None
    return OrgDate(start, end, raw.startswith("<"), _repeater(raw), _delay(raw))


def _moment(text: str) -> date | datetime | None:
    """The first date, and time if one follows, in a timestamp's text (org-ts-regexp0); None for none, or a date
    no calendar holds."""
    m = _DAY_TIME.search(text)
    if m is None:
        return None
    try:
        day = date(int(m[1]), int(m[2]), int(m[3]))
        return datetime(day.year, day.month, day.day, int(m[4]), int(m[5])) if m[4] else day
    except ValueError:
        return None


def _clock(line: str) -> OrgDateClock | None:
    """A CLOCK line as orgparse reads it; None for one too long to be a clock, or whose dates no calendar holds."""
    if len(line) > 3 * MAX_STAMP:
        return None
    try:
        return OrgDateClock.from_str(line)
    except (OverflowError, ValueError):
        return None


def section_lines(headline: Headline, *, properties: bool = True) -> Iterator[tuple[int, str]]:
    """The lines of a headline where Org reads timestamps and links, with their index in its section (0: the
    heading): not the planning line, raw blocks (src, example, export, comment), comment or fixed-width lines;
    the property drawer only with `properties`."""
    return object_lines(headline.raw, properties=properties)


def object_lines(text: str, *, heading: bool = True, properties: bool = True) -> Iterator[tuple[int, str]]:
    """`section_lines` of a headline's raw text, or (not `heading`) of the text before a file's first headline."""
    lines = _lines(text)
    ends = _block_ends(lines)
    # The planning line is the heading's next line; the drawer (read only when it is left out) follows them.
    planning = 1 if heading and len(lines) > 1 and PLANNING_LINE.match(lines[1]) else None
    drawer = (0, 0) if properties else _property_drawer(text, Section.of(text) if heading else None)
    skip_to = 0
    for index, line in enumerate(lines):
        if index < skip_to or drawer[0] <= index < drawer[1] or index == planning:
            continue
        block = BLOCK_BEGIN.match(line)
        if block and block[1].upper() in VERBATIM_BLOCKS:
            close = ends.get(block[1].upper(), [])
            k = bisect_right(close, index)
            if k < len(close):
                skip_to = close[k] + 1
                continue
        if (index or not heading) and _NO_OBJECTS.match(line):
            continue
        yield index, line


def repeater(stamp: OrgDate) -> Cookie | None:
    """A timestamp's repeater, if any."""
    return stamp._repeater  # orgparse keeps it unexposed; `timestamps_in` and `planning_date` set it


def warning(stamp: OrgDate) -> Cookie | None:
    """A timestamp's warning period (a deadline's) or delay (a scheduled date's), if any."""
    return stamp._warning


def day_of(value: date | datetime) -> date:
    """The calendar day of a date or datetime."""
    return value.date() if isinstance(value, datetime) else value


def add_months(day: date, months: int) -> date:
    """`day` moved by whole months as Emacs moves dates: a day past the month's end runs into the next;
    OverflowError past the years a date can have, as for days."""
    month = day.month - 1 + months
    year = day.year + month // 12
    if not MINYEAR <= year <= MAXYEAR:
        raise OverflowError("date value out of range")
    return date(year, month % 12 + 1, 1) + timedelta(days=day.day - 1)


def parse_when(text: str, today: date) -> date:
    """A day a user wrote: today, tomorrow, yesterday, +7d, -2w, +1m, +1y (relative to `today`) or YYYY-MM-DD."""
    if isinstance(text, (date, datetime)):
        return day_of(text)
    word = str(text).strip().lower()
    named = {"today": 0, "tomorrow": 1, "yesterday": -1}
    if word in named:
        return today + timedelta(days=named[word])
    if m := _RELATIVE.fullmatch(word):
        try:
            n = int(m[2]) * (1 if m[1] == "+" else -1)
            if m[3] in "dw":
                return today + timedelta(days=n * (7 if m[3] == "w" else 1))
            return add_months(today, n * (12 if m[3] == "y" else 1))
        except (OverflowError, ValueError):  # ValueError: more digits than a number is read from
            raise QueryError(f"{quoted(text)} lies past the years 1 to 9999 that a date can have") from None
    if _ISO_DAY.fullmatch(word):
        try:
            return date.fromisoformat(word)
        except ValueError as exc:
            raise QueryError(f"{quoted(text)} is not a date ({exc}); write {WHEN_FORMS}") from None
    raise QueryError(f"{quoted(text)} is not a date; write {WHEN_FORMS}")


def parse_moment(text, now: datetime) -> date | datetime:
    """A day or a moment a user wrote: a day as `parse_when` reads one (`2026-11-01`, `today`, `-30d`: the whole
    day), `now`, a day and a time (`2026-11-01 14:00`, `2026-11-01T9:05`) or an Org timestamp. A date or a
    datetime is taken as it is (one with a time zone in local time, as Org's timestamps are)."""
    if isinstance(text, datetime):
        return text if text.tzinfo is None else text.astimezone().replace(tzinfo=None)
    if isinstance(text, date):
        return text
    word = str(text).strip()
    if word.lower() == "now":
        return now
    if m := _ISO_MINUTE.fullmatch(word):
        try:
            return datetime.combine(date.fromisoformat(m[1]), time(int(m[2]), int(m[3])))
        except ValueError as exc:
            raise QueryError(f"{quoted(text)} is not a moment ({exc}); write {MOMENT_FORMS}") from None
    try:
        return moment_of(word, "") if word[:1] in "[<" else parse_when(word, now.date())
    except UserError:
        if _ISO_DAY.fullmatch(word) or _RELATIVE.fullmatch(word.lower()):
            raise  # a day that does not exist, or one past the years a date can have: said so
        raise QueryError(f"{quoted(text)} is not a moment; write {MOMENT_FORMS}") from None


def _lines(text: str) -> list[str]:
    """The lines of a text, without their line ends."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _repeater(stamp: str) -> Cookie | None:
    m = _REPEATER.search(stamp)
    return Cookie(m[1], int(m[2]), m[3]) if m else None


def _delay(stamp: str) -> Cookie | None:
    m = _DELAY.search(stamp)
    return Cookie("--" if m[1] else "-", int(m[2]), m[3]) if m else None


def _block_ends(lines: list[str]) -> dict[str, list[int]]:
    """The lines that end blocks, by block name."""
    ends: dict[str, list[int]] = {}
    for index, line in enumerate(lines):
        if m := BLOCK_END.match(line):
            ends.setdefault(m[1].upper(), []).append(index)
    return ends


def _property_drawer(text: str, section: Section | None) -> tuple[int, int]:
    """The lines of a headline's property drawer (`section`), or (None) of the file's property drawer that
    `text`, a preamble, opens with; empty if there is none."""
    if section is not None:
        return (0, 0) if section.drawer_end is None else (section.drawer, section.drawer_end + 1)
    found = file_drawer(text)
    return (0, 0) if found is None else (found[0], found[1] + 1)
