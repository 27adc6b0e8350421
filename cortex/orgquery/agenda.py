"""An agenda: what is scheduled, due and timestamped, day by day, as Emacs's org-agenda lists it.

The rules and the layout are org-agenda's (Org 9.5) with Org's defaults: scheduled items carried to
today as "Sched. Nx:", overdue deadlines shown today as "N d. ago:", deadlines within their warning
period (14 days, or the timestamp's own `-Nd`) as "In N d.:", repeaters expanded (future repeats shown),
DONE items only on their own date, date ranges listed on each day as "(k/n):", archived and COMMENT
subtrees left out (and, beyond Org, the subtrees of items whose validity ended: invalid from before today, or
replaced with no end said, `cortex.memory.validity`); entries ordered by time of day, then priority (where deadlines
and carried items gain urgency), then file order. The agenda starts on `start`, not on the week's Monday,
and has no time grid. Diary sexp timestamps (`<%%(diary-float t 4 2)>`) are listed on the days they hold, read as
data by `cortex.orgquery.diary`, and diary sexp lines (`%%(diary-anniversary 3 31 2000) %d years`) as their text
with `%d` filled in; diary sexps in planning lines are not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from pathlib import PurePosixPath
from typing import NamedTuple

from ..objects import Document, Headline
from ..org.blocks import keyword, keywords as file_keywords
from ..org.syntax import PRIORITY_COOKIE
from ..query import Node
from .dates import (Cookie, Diary, Stamp, add_months, day_of, headline_dates, repeater, section_diaries,
                    section_lines, section_stamps, warning)
from .diary import diary_rule, sexp_line
from .index import headline_validity
from .summaries import may_list

__all__ = ["Agenda", "AgendaDay", "AgendaEntry", "AgendaFile", "agenda"]

DEADLINE_WARNING_DAYS = 14  # org-deadline-warning-days
PAST_DAYS = 10000  # org-scheduled-past-days and org-deadline-past-days
TAGS_COLUMN = 80  # where tags end, as in a batch Emacs's 80-column window
_NO_TIME = 9901  # entries without a time of day sort after the others (org-agenda-sort-notime-is-late)
_KINDS = ("deadline", "scheduled", "block", "timestamp", "sexp")  # the order org-agenda gathers a file's entries in
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_UNIT_DAYS = {"h": 0.041667, "d": 1, "w": 7, "m": 30.4, "y": 365.25}  # org-get-wdays
# Times of day, as org-agenda finds them in a timestamp (org-stamp-time-of-day-regexp) or in text
# (org-plain-time-of-day-regexp), and reads one (org-get-time-of-day).
_STAMP_TIME = re.compile(r"<([0-9]{4}-[0-9]{2}-[0-9]{2} +\w+ +)([012][0-9]:[0-5][0-9])(-([012][0-9]:[0-5][0-9]))?"
                         r"[^\n\r>]*?>(--?<\1([012][0-9]:[0-5][0-9])>)?")
_CLOCK = r"\b[012]?[0-9](?::[0-5][0-9](?:[AaPp][Mm])?|[AaPp][Mm])\b"
_PLAIN_TIME = re.compile(rf"({_CLOCK})(?:--?({_CLOCK}))?")
_TIME_OF_DAY = re.compile(r"([012]?[0-9])(?::([0-5][0-9]))?([AaPp][Mm])?")
_PLANNING_TIME = re.compile(r" ([012]?[0-9]:[0-9][0-9])")
_PRIORITY = re.compile(PRIORITY_COOKIE)
_ACTIVE_STAMP = re.compile(r"<[0-9]{4}-[0-9]{2}-[0-9]{2}(?: .*?)?>")  # org-ts-regexp, as the agenda removes it
_CLOSING_REPEATER = re.compile(r"\+[0-9]+[hdwmy]>$")
_TAGS = re.compile(r"(?<![ \t])[ \t]+:\S+:[ \t]*$")  # tried from the start of a run of blanks only
_KEYWORD = keyword("FILETAGS", "CATEGORY")


class AgendaFile(NamedTuple):
    """One file the agenda reads: its path, document and headlines in document order."""

    path: str
    document: Document
    nodes: Sequence[Node]


@dataclass(frozen=True)
class AgendaEntry:
    """One line of a day: a headline scheduled, due or timestamped then.

    `kind` is "scheduled", "past-scheduled", "deadline", "upcoming-deadline", "timestamp", "block"
    (a date range) or "sexp" (a diary sexp line); `leader` is org-agenda's text before the heading ("Sched. 2x: ", "In   3 d.: ", ...),
    `time` its time column ("10:00......", "10:00-11:30" or empty), `text` the heading as listed
    (TODO keyword, priority, title), `tags` its tags as listed, inherited ones first (":a::b:").
    """

    day: date
    kind: str
    leader: str
    time: str
    text: str
    tags: str
    category: str
    node: Node
    time_of_day: int | None
    priority: int

    @property
    def label(self) -> str:
        """The leader without its padding: "Scheduled:", "Sched. 2x:", "In   3 d.:", "3 d. ago:", "(1/3):"."""
        return self.leader.strip()

    def __str__(self) -> str:
        prefix = f"  {self.category + ':':<12}{self.time:<12}" if self.time else f"  {self.category + ':':<12}"
        return _align_tags(prefix + (self.leader + " " if self.leader else "") + self.text, self.tags)


@dataclass(frozen=True)
class AgendaDay:
    """One day of the agenda and its entries, in org-agenda's order."""

    day: date
    entries: tuple[AgendaEntry, ...]

    @property
    def header(self) -> str:
        """The day as org-agenda heads it: "Monday     23 November 2026 W48"."""
        week = f" W{self.day.isocalendar()[1]:02d}" if self.day.weekday() == 0 else ""
        day = self.day
        return f"{_DAYS[day.weekday()]:<10} {day.day:2d} {_MONTHS[day.month - 1]} {day.year:4d}{week}"

    def __str__(self) -> str:
        return "\n".join([self.header, *map(str, self.entries)])


@dataclass(frozen=True)
class Agenda:
    """The days of an agenda, from its start, each listed even when empty; its text is org-agenda's."""

    days: tuple[AgendaDay, ...]
    today: date

    def __iter__(self) -> Iterator[AgendaDay]:
        return iter(self.days)

    def __len__(self) -> int:
        return len(self.days)

    def __getitem__(self, index: int) -> AgendaDay:
        return self.days[index]

    @property
    def entries(self) -> list[AgendaEntry]:
        """Every entry, day after day."""
        return [entry for day in self.days for entry in day.entries]

    @property
    def header(self) -> str:
        """org-agenda's first line: "Week-agenda (W48):"."""
        span = len(self.days)
        name = {1: "Day", 7: "Week", 14: "Fortnight"}.get(span, f"{span} days")
        first, last = (day.isocalendar()[1] for day in (self.days[0].day, self.days[-1].day))
        weeks = "" if span > 350 else f" (W{first:02d})" if first == last else f" (W{first:02d}-W{last:02d})"
        return f"{name}-agenda{weeks}:"

    def __str__(self) -> str:
        return "\n".join([self.header, *map(str, self.days)])


def agenda(files: Iterable[AgendaFile], start: date, span: int = 7, today: date | None = None) -> Agenda:
    """The agenda of `span` days from `start`, with labels relative to `today` (default: the real today)."""
    today = today or date.today()
    days = [start + timedelta(days=n) for n in range(span)]
    found: list[tuple[tuple, AgendaEntry]] = []
    for file_index, file in enumerate(files):
        for item_index, item in enumerate(_items(file, today)):
            try:
                entries = list(_entries(item, days, today))
            except OverflowError:  # a repeat or warning that reaches past the years 1 to 9999: not listed
                continue
            for kind, stamp_index, entry in entries:
                order = (file_index, _KINDS.index(kind), item_index, stamp_index)
                found.append(((_NO_TIME if entry.time_of_day is None else entry.time_of_day, -entry.priority,
                               *order), entry))
    found.sort(key=lambda pair: pair[0])
    by_day: dict[date, list[AgendaEntry]] = {day: [] for day in days}
    for _, entry in found:
        by_day[entry.day].append(entry)
    return Agenda(tuple(AgendaDay(day, tuple(entries)) for day, entries in by_day.items()), today)


# --- the headlines the agenda reads ---------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    """A headline with what org-agenda shows of it: heading text, category, tags, whether it is done."""

    node: Node
    head: str
    category: str
    tags: str
    done: bool


def _items(file: AgendaFile, today: date) -> Iterator[_Item]:
    """The headlines of a file that may be listed, outside archived and COMMENT subtrees and those of items that
    no longer held when `today` began, with what is inherited: tags (`#+FILETAGS` first) and the CATEGORY
    property (else `#+CATEGORY`, else the file's name)."""
    began = datetime.combine(today, time())
    keywords: dict[str, list[str]] = {"FILETAGS": [], "CATEGORY": []}
    for name, value in file_keywords(file.document.preamble, _KEYWORD):
        keywords[name].append(value)
    file_tags = [tag for value in keywords["FILETAGS"] for word in value.split() for tag in word.split(":") if tag]
    if "ARCHIVE" in file_tags:
        return
    default_category = keywords["CATEGORY"][-1] if keywords["CATEGORY"] else PurePosixPath(file.path).stem
    done_keywords = set(file.document.done_keywords)
    open_: list[tuple[int, list[str], str, bool]] = []  # enclosing headlines: depth, tags, category, skipped
    for node in file.nodes:
        depth, headline = len(node.position), node.headline
        while open_ and open_[-1][0] >= depth:
            open_.pop()
        _, inherited, category, skipped = open_[-1] if open_ else (0, file_tags, default_category, False)
        category = headline.get("CATEGORY") or category
        skipped = skipped or "ARCHIVE" in headline.tags or _commented(headline) or _ended(headline, began)
        open_.append((depth, inherited + list(headline.tags), category, skipped))
        if not skipped and may_list(headline):
            yield _Item(node, _head(headline), category, _tag_text(inherited, headline.tags),
                        headline.todo in done_keywords)


def _ended(headline: Headline, began: datetime) -> bool:
    """Whether an item's validity ended by `began`: it was invalid from then, or something replaced it with no end
    said."""
    validity = headline_validity(headline)
    return validity.end <= began if validity.end is not None else bool(validity.replaced_by)


def _commented(headline: Headline) -> bool:
    """Whether the heading carries the COMMENT keyword (after its TODO keyword and priority)."""
    rest = headline.raw.split("\n", 1)[0].lstrip("*").strip(" \t\r")
    if headline.todo and rest.startswith(headline.todo + " "):
        rest = rest[len(headline.todo):].lstrip(" \t")
    if m := _PRIORITY.match(rest):
        rest = rest[m.end():].lstrip(" \t")
    return rest == "COMMENT" or rest.startswith("COMMENT ")


def _head(headline: Headline) -> str:
    """The heading as org-agenda lists it: after the stars, without its tags, one space after the keyword."""
    head = headline.raw.split("\n", 1)[0].removesuffix("\r").lstrip("*").strip(" \t")
    if headline.tags:
        head = _TAGS.sub("", head)
    if headline.todo and head.startswith(headline.todo + " "):
        head = f"{headline.todo} {head[len(headline.todo):].lstrip(' ')}"
    return head


def _tag_text(inherited: list[str], own: tuple[str, ...]) -> str:
    """Tags as org-agenda shows them: inherited ones first, then "::" and the headline's own (":a:b::c:")."""
    inherited = list(dict.fromkeys(inherited))
    own_only = [tag for tag in dict.fromkeys(own) if tag not in inherited]
    own_text = f"{':'.join(own_only)}:" if own_only else ""
    if not inherited:
        return f":{own_text}" if own_only else ""
    return f":{':'.join(inherited)}::{own_text}"


# --- the entries of one headline ---------------------------------------------------------------------


def _entries(item: _Item, days: list[date], today: date) -> Iterator[tuple[str, int, AgendaEntry]]:
    """The headline's entries on each of `days`, with their kind and which of its timestamps each is."""
    headline = item.node.headline
    dates = headline_dates(headline)
    planning = dict(headline.planning)
    stamps: list[Stamp | Diary] = sorted([stamp for stamp in section_stamps(headline) if stamp.date.is_active()]
                                         + list(section_diaries(headline)), key=lambda found: found.line)
    sexps = [(index, found) for index, line in section_lines(headline, properties=False)
             if index and (found := sexp_line(line)) is not None]
    for current in days:
        if dates.deadline and (entry := _deadline(item, dates.deadline, planning["DEADLINE"], current, today)):
            yield "deadline", 0, entry
        if dates.scheduled and (entry := _scheduled(item, dates.scheduled, planning["SCHEDULED"], current, today)):
            yield "scheduled", 0, entry
        for n, stamp in enumerate(stamps):
            if isinstance(stamp, Diary):
                if diary_rule(stamp.sexp, f"{item.node.path}:{item.node.line + stamp.line}")(current, "") is not None:
                    yield "timestamp", n, _entry(item, current, "timestamp", "", stamp.raw, 0, stamps_shown=False)
            elif _is_range(stamp):
                if entry := _block(item, stamp, current):
                    yield "block", n, entry
            elif entry := _timestamp(item, stamp, current, today):
                yield "timestamp", n, entry
        for index, (sexp, text) in sexps:
            found = diary_rule(sexp, f"{item.node.path}:{item.node.line + index}")(current, text)
            if found is not None:  # org-agenda-get-sexps: the entry's own text, its time read from it; no priority
                entry = _entry(replace(item, head=found or "SEXP entry returned empty string"), current, "sexp", "",
                               "", 0)
                yield "sexp", index, replace(entry, priority=0)


def _scheduled(item: _Item, scheduled, raw: str, current: date, today: date) -> AgendaEntry | None:
    """org-agenda-get-scheduled: on its date and repeats, carried to today while not done, after any delay."""
    base = day_of(scheduled.start)
    repeat = base if current <= today else _closest(scheduled, current, "future")
    diff = (current - base).days
    delay = _days(warning(scheduled))
    if (delay > 0 and diff < delay) or diff > PAST_DAYS or base > current or current not in (base, today, repeat):
        return None
    if item.done and base != current:
        return None
    past = base < today
    leader = f"Sched.{diff:2d}x: " if current == today and past else "Scheduled: "
    dotime = _planning_time(raw) if current in (base, repeat) else None
    return _entry(item, current, "past-scheduled" if past else "scheduled", leader, dotime, 99 + diff)


def _deadline(item: _Item, deadline, raw: str, current: date, today: date) -> AgendaEntry | None:
    """org-agenda-get-deadlines: on its date and repeats; today also when overdue or within its warning period."""
    base = day_of(deadline.start)
    repeat = base if current <= today else _closest(deadline, current, "future")
    diff = (base - current).days
    lead = _days(warning(deadline)) if warning(deadline) else DEADLINE_WARNING_DAYS
    if current not in (base, repeat):
        if current != today or (base > current and diff > lead) or (base < current and -diff > PAST_DAYS):
            return None
    if item.done and base != current:
        return None
    upcoming = current == today and base > today
    if current == today and base < today:
        leader = f"{-diff:2d} d. ago: "
    else:
        leader = f"In {diff:3d} d.: " if upcoming else "Deadline:  "
    dotime = _planning_time(raw) if current in (base, repeat) else None
    return _entry(item, current, "upcoming-deadline" if upcoming else "deadline", leader, dotime,
                  -diff if current == today else 0)


def _timestamp(item: _Item, stamp: Stamp, current: date, today: date) -> AgendaEntry | None:
    """org-agenda-get-timestamps: an active timestamp on its date, and on each repeat from its date on."""
    base = day_of(stamp.date.start)
    # org-agenda repeats a plain timestamp only when its repeater closes it: <... +1w>, not <... +1w -2d>
    if repeater(stamp.date) and _CLOSING_REPEATER.search(stamp.raw):
        past = _closest(stamp.date, min(current, today), "past")
        future = past if current <= today else _closest(stamp.date, current, "future")
        if current not in (past, future):
            return None
    elif base != current:
        return None
    return _entry(item, current, "timestamp", "", stamp.raw, 0, stamps_shown=False)


def _block(item: _Item, stamp: Stamp, current: date) -> AgendaEntry | None:
    """org-agenda-get-blocks: a date range on each of its days, as "(k/n):" when it spans several."""
    first, last = day_of(stamp.date.start), day_of(stamp.date.end)
    if not first <= current <= last:
        return None
    leader = "" if first == last else f"({(current - first).days + 1}/{(last - first).days + 1}): "
    split = stamp.raw.index(">--<") + 1
    opening, closing = stamp.raw[:split], stamp.raw[split + 2:]
    if _hour(stamp.date.start) == _hour(stamp.date.end) or first == current == last:
        dotime = stamp.raw
    else:
        dotime = opening if current == first else closing if current == last else None
    return _entry(item, current, "block", leader, dotime, 0)


def _entry(item: _Item, current: date, kind: str, leader: str, dotime: str | None, urgency: int,
           stamps_shown: bool = True) -> AgendaEntry:
    """The entry of `item` on `current`, its time of day read from `dotime` (None: none), else from its heading;
    without the heading's active timestamps unless `stamps_shown` (org-agenda-get-timestamps removes them)."""
    time, time_of_day, head = _time(dotime, item.head)
    if not stamps_shown:
        while m := _ACTIVE_STAMP.search(head):
            head = head[:m.start()] + head[m.end():]
    return AgendaEntry(current, kind, leader, time, head, item.tags, item.category, item.node, time_of_day,
                       _priority(head) + urgency)


def _time(dotime: str | None, head: str) -> tuple[str, int | None, str]:
    """The time column, the time of day (HHMM) and the heading without the time shown (org-agenda-format-item)."""
    if dotime is None:
        return "", None, head
    text = dotime + head
    if m := _STAMP_TIME.search(text):
        shown, start, end = m[0], m[2], m[4] or m[6]
    elif m := _PLAIN_TIME.search(text):
        shown, start, end = m[0], m[1], m[2]
    else:
        return "", None, head
    at = head.find(shown)
    if at >= 0:
        after = at + len(shown)
        while head[after:after + 1] == " ":
            after += 1
        if head[after:after + 1] != "]":
            head = head[:at] + head[after:]
    hour, minute = _read_time(start)
    column = f"{hour}:{minute:02d}".rjust(5)
    column += "-{}:{:02d}".format(*_read_time(end)) if end else "......"
    return column, hour * 100 + minute, head


def _read_time(text: str) -> tuple[int, int]:
    """Hour and minute of "9:30", "09:30", "9pm" or "9:30am" (org-get-time-of-day)."""
    m = _TIME_OF_DAY.match(text)
    hour, minute, half = int(m[1]), int(m[2] or 0), (m[3] or "").lower()
    if half == "pm" and hour < 12:
        hour += 12
    elif half == "am" and hour == 12:
        hour = 0
    return hour, minute


def _planning_time(raw: str) -> str:
    """What org-agenda reads a planning entry's time from: its text from the time on, or "" (the heading's)."""
    inner = raw[1:-1]
    m = _PLANNING_TIME.search(inner)
    return inner[m.start(1):] + " " if m else ""


def _priority(head: str) -> int:
    """org-get-priority: 1000 per step below the lowest priority (C), the default being B."""
    m = _PRIORITY.search(head)
    value = 66 if m is None else int(m[1]) if m[1].isdigit() else ord(m[1][0])
    return 1000 * (67 - value)


def _closest(stamp, current: date, prefer: str) -> date:
    """org-closest-date: the repeat of `stamp` nearest `current`, at or before it ("past") or at or after it."""
    base, cookie = day_of(stamp.start), repeater(stamp)
    if cookie is None or cookie.value == 0 or current <= base:
        return base
    n = cookie.value
    if cookie.unit == "h":
        missing = (24 * (current - base).days - _hour(stamp.start, 0)) % n
        before = current if missing == 0 else current - timedelta(days=1 + missing // 24)
        after = current + timedelta(days=(n - missing) // 24)
    elif cookie.unit in "dw":
        step = n * (7 if cookie.unit == "w" else 1)
        before = base + timedelta(days=step * ((current - base).days // step))
        after = before + timedelta(days=step)
    elif cookie.unit == "m":
        months = 12 * (current.year - base.year) + current.month - base.month - (current.day <= base.day)
        months = months // n * n
        before, after = add_months(base, months), add_months(base, months + n)
    else:
        later = (current.month, current.day) > (base.month, base.day)
        years = (current.year - base.year - (not later)) // n * n
        before, after = add_months(base, 12 * years), add_months(base, 12 * (years + n))
    if prefer == "past":
        return after if current == after else before
    return before if current == before else after


def _days(cookie: Cookie | None) -> int:
    """A warning period or delay in whole days (org-get-wdays); 0 for none."""
    return int(cookie.value * _UNIT_DAYS[cookie.unit]) if cookie else 0


def _hour(value, default=None):
    """The hour of a datetime; `default` for a date."""
    return value.hour if isinstance(value, datetime) else default


def _is_range(stamp: Stamp) -> bool:
    """Whether a timestamp is a date range, <a>--<b> (not a time range within one day, <a 10:00-11:00>)."""
    return ">--<" in stamp.raw


def _align_tags(line: str, tags: str) -> str:
    """A line with its tags at the end, ending at TAGS_COLUMN when there is room (org-agenda-align-tags)."""
    if not tags:
        return line
    line = line.rstrip(" \t")
    return line + " " * max(1, TAGS_COLUMN - len(line) - len(tags)) + tags
