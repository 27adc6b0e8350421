"""When a memory item is true (valid time), kept as Org properties a person reads and edits in Emacs.

    ** The database is Postgres 16.                                               :ARCHIVE:
    :PROPERTIES:
    :ID:            mem-assistant-the-database-is-postgres-16-1a2b3c
    :ADDED:         [2026-10-02 Fri 09:12]
    :VALID_FROM:    [2026-10-01 Thu]
    :INVALID_AT:    [2026-11-03 Tue 14:00]
    :SUPERSEDED_BY: mem-assistant-the-database-is-postgres-17-4d5e6f
    :END:

An item holds from `:VALID_FROM:` (else from when it was `:ADDED:`, else always) until `:INVALID_AT:` (else
still). `:SUPERSEDES:` and `:SUPERSEDED_BY:` name the items it replaced and that replaced it by :ID:
(several, blank separated). The properties are the truth; the `ARCHIVE` tag is how Org shows an item that
no longer holds: it stays in place with its text (its history is one headline's), Emacs keeps it folded,
and the agenda, sparse trees and tag searches skip it. A person retires an item by hand by writing
`:INVALID_AT:` (the tag is then a courtesy).

An item replaced with no `:INVALID_AT:` (a hand edit) no longer holds, but when it stopped is unknown: a
question about a past moment counts it as holding from its start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from ..errors import UserError
from ..words import quoted

__all__ = ["ARCHIVE", "INVALID_AT", "PROPERTIES", "SUPERSEDED_BY", "SUPERSEDES", "VALID_FROM", "Validity", "moment",
           "moment_of", "org_timestamp", "parse_timestamp", "shown"]

VALID_FROM, INVALID_AT, SUPERSEDES, SUPERSEDED_BY = "VALID_FROM", "INVALID_AT", "SUPERSEDES", "SUPERSEDED_BY"
PROPERTIES = (VALID_FROM, INVALID_AT, SUPERSEDES, SUPERSEDED_BY)
ARCHIVE = "ARCHIVE"

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# An Org timestamp, active or inactive, its time optional: `[2026-11-18 Wed 09:12]`, `<2026-11-18>`.
_STAMP = re.compile(r"[\[<](\d{4})-(\d{2})-(\d{2})(?: [^\]>\d\s]+)?(?: (\d{1,2}):(\d{2}))?[^\]>]*[\]>]")


def org_timestamp(moment: datetime | date) -> str:
    """An inactive Org timestamp: `[2026-11-18 Wed 09:12]`, or `[2026-11-18 Wed]` for a day."""
    day = f"{moment:%Y-%m-%d} {_WEEKDAYS[moment.weekday()]}"
    return f"[{day} {moment:%H:%M}]" if isinstance(moment, datetime) else f"[{day}]"


def parse_timestamp(text: str | None) -> datetime | None:
    """The moment an Org timestamp (active or inactive, time optional: midnight) names, or None."""
    text = text or ""
    # Searched only up to the last closing bracket, where any stamp ends: without one to stop at, the
    # pattern would read to the end of the text for each opening bracket.
    m = _STAMP.search(text, 0, max(text.rfind("]"), text.rfind(">")) + 1)
    if m is None:
        return None
    try:
        return datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4] or 0), int(m[5] or 0))
    except ValueError:
        return None


def moment_of(value: datetime | date | str, what: str) -> datetime | date:
    """A moment given as a date, a datetime or text (`2026-11-01`, `2026-11-01 14:00`, an Org timestamp);
    a UserError naming `what` otherwise."""
    if isinstance(value, (datetime, date)):
        return value
    text = value.strip() if isinstance(value, str) else ""
    try:
        found = datetime.fromisoformat(text)
        return found.date() if len(text) <= 10 else found.replace(second=0, microsecond=0, tzinfo=None)
    except ValueError:
        stamp = parse_timestamp(text) if text[:1] in "[<" else None
        if stamp is not None:
            return stamp if ":" in text else stamp.date()
    raise UserError(f"{what} {quoted(value)}: not a date; write 2026-11-01, 2026-11-01 14:00 or an Org timestamp")


def shown(when: datetime | date) -> str:
    """A moment as messages write it: `2026-11-03`, or `2026-11-03 14:00` when it has a time of day."""
    text = f"{when:%Y-%m-%d %H:%M}" if isinstance(when, datetime) else f"{when:%Y-%m-%d}"
    return text.removesuffix(" 00:00")


def moment(when: datetime | date) -> datetime:
    """A date as the moment it starts; a moment as it is."""
    return when if isinstance(when, datetime) else datetime.combine(when, time())


@dataclass(frozen=True)
class Validity:
    """When an item holds (`start` <= moment < `end`; None: unbounded), and what it replaced and was replaced by.
    `problems`: the validity properties whose values are not Org timestamps (ignored), as (name, value)."""

    start: datetime | None = None
    end: datetime | None = None
    replaces: tuple[str, ...] = ()
    replaced_by: tuple[str, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()
    stated: bool = False  # whether a validity property says it (else it holds from ADDED on)

    @classmethod
    def of(cls, properties: Iterable[tuple[str, str]], added: datetime | None = None) -> Validity:
        """The validity a headline's properties say (names in any case); without `VALID_FROM`, it starts when it
        was added (`ADDED`, else `added`)."""
        found: dict[str, str] = {}
        for name, value in properties:
            found.setdefault(name.upper(), value)
        if "ADDED" in found:
            added = parse_timestamp(found["ADDED"]) or added
        if not any(name in found for name in PROPERTIES):
            return ALWAYS if added is None else cls(start=added)
        problems = []
        start, end = (parse_timestamp(found.get(name)) for name in (VALID_FROM, INVALID_AT))
        for name, value in ((VALID_FROM, start), (INVALID_AT, end)):
            if value is None and found.get(name, "").strip():
                problems.append((name, found[name]))
        if start is None and VALID_FROM not in found:
            start = added
        return cls(start, end, tuple(found.get(SUPERSEDES, "").split()), tuple(found.get(SUPERSEDED_BY, "").split()),
                   tuple(problems), stated=True)

    @property
    def ended(self) -> bool:
        """Whether it was said to stop holding: an end, or a successor."""
        return self.end is not None or bool(self.replaced_by)

    def holds(self, at: datetime | date | None = None) -> bool:
        """Whether the item holds at moment `at`, or at some time of day `at` (None: now, and not replaced: a
        current item)."""
        if at is None:  # replaced with no end said: it stopped when it was replaced, which is past
            return self.holds(datetime.now()) and (self.end is not None or not self.replaced_by)
        first = moment(at)
        after = first + timedelta(days=1) if not isinstance(at, datetime) else first + timedelta.resolution
        return (self.start is None or self.start < after) and (self.end is None or first < self.end)

    def why_not(self, at: datetime | date | None = None) -> str:
        """Why it does not hold at `at` (a moment, or some time of a day; None: is not current):
        `superseded by mem-x on 2026-11-03`, `invalid from 2026-11-03`, `valid from 2027-01-01`."""
        if self.start is not None and not Validity(self.start).holds(at):
            return f"valid from {shown(self.start)}"
        replaced = f"superseded by {', '.join(self.replaced_by)}" if self.replaced_by else ""
        if self.end is not None:
            return f"{replaced} on {shown(self.end)}" if replaced else f"invalid from {shown(self.end)}"
        return replaced or "does not hold"

    def repl_pairs(self) -> list[tuple[str, str]]:
        """What the REPL and `show` say of it: when it held, what it replaced and what replaced it."""
        pairs = []
        if self.stated and (self.start is not None or self.end is not None):
            since = "…" if self.start is None else shown(self.start)
            pairs.append(("valid", f"{since} – {'now' if self.end is None else shown(self.end)}"))
        pairs += [("supersedes", " ".join(self.replaces))] if self.replaces else []
        pairs += [("superseded by", " ".join(self.replaced_by))] if self.replaced_by else []
        return pairs


ALWAYS = Validity()
