"""Daily logs: one level-1 entry per session, and the items marked in them for long-term memory.

    * 16:45 — Reviewed pull request #482
    :PROPERTIES:
    :SESSION:  s-2026-11-20-1645
    :END:
    Pull request #482 fixes error E1042 in the staging migration.
    ** Release 2.3.1 contains the fix for E1042.                        :fact:

Compaction copies each marked headline into memory.org and records that it did so with a
`:COMPACTED:` property on the headline, so a later compaction does not bring back an item a
person removed from memory.org.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime

from ..errors import UserError
from ..files import Appended, tail_of
from ..objects import Document
from ..org import render_headline
from ..org.syntax import Section, headline_line, is_crlf
from ..query import walk_headlines
from .items import MemoryItem, item_from_headline
from .validity import org_timestamp
from .layout import tagged_type
from .memoryfile import Getter

COMPACTED = "COMPACTED"
ENTRY_TIME = re.compile(r"(\d{1,2}):(\d{2})\b")  # the time an entry's heading starts with


@dataclass(frozen=True)
class Marked:
    """An item marked in a log (`:fact:`, `:procedure:`, `:pattern:`) and not compacted yet."""

    type: str
    item: MemoryItem
    line: int


def render_entry(moment: datetime, title: str, summary: str, session: str, people: Sequence[str] = ()) -> str:
    """The Org text of one session entry: `* HH:MM — title`, its :SESSION: and :PEOPLE: (when given), the summary."""
    title = " ".join(title.split())
    if not title:
        raise UserError("session title: empty; leave it out to use 'Session'")
    summary = summary.replace("\r\n", "\n").strip("\n")
    if (entry := headline_line(1).search(summary)) is not None:
        line = summary.count("\n", 0, entry.start()) + 1
        raise UserError(f"session summary, line {line}: starts with '* ', which Org reads as a new entry; "
                        "use '** ' for a headline inside the entry")
    session = " ".join(session.split())
    drawer = f":{'SESSION:':<9} {session}\n" + (f":{'PEOPLE:':<9} {', '.join(people)}\n" if people else "")
    return f"* {moment:%H:%M} — {title}\n:PROPERTIES:\n{drawer}:END:\n" + (summary + "\n" if summary else "")


def log_addition(old: bytes | Appended | None, entries: list[str], title: str) -> bytes:
    """The bytes that append `entries` to a log's bytes `old`, each entry after one blank line; with no log yet
    (None), a new log's bytes, its title first.

    Entries take the line ends of the log's first line; only that line and the log's last
    bytes are looked at, so that appending costs what the entries do.
    """
    start = b""
    if old is None:
        start = old = f"#+TITLE: {title}\n".encode()
    head = old.first_line if isinstance(old, Appended) else old
    first = head.find(b"\n")
    nl = "\r\n" if first > 0 and head[first - 1:first] == b"\r" else "\n"
    parts, last = [], tail_of(old, 4).decode("utf-8", "replace")
    for entry in entries:
        parts += [_blank_line_after(last, nl), entry.replace("\n", nl) if nl != "\n" else entry]
        last = entry
    return start + "".join(parts).encode("utf-8")


def torn_tail(data: bytes, entries: Iterable[str]) -> int:
    """How many bytes at the end of a log (`data`) are the start of one of `entries`, cut off: what an append
    that stopped partway (a killed process) leaves; 0 when there are none. Such bytes start a line, and the
    entries are compared in the log's line ends."""
    first = data.find(b"\n")
    crlf = first > 0 and data[first - 1:first] == b"\r"
    torn = 0
    for entry in entries:
        whole = (entry.replace("\n", "\r\n") if crlf else entry).encode("utf-8")
        at = max(0, len(data) - len(whole) + 1)
        while at < len(data):
            if (at == 0 or data[at - 1:at] == b"\n") and whole.startswith(memoryview(data)[at:]):
                torn = max(torn, len(data) - at)
                break
            at = data.find(b"\n", at, len(data) - 1) + 1 or len(data)
    return torn


def _blank_line_after(text: str, nl: str) -> str:
    """What to add after `text` so that a blank line ends it (nothing after no text)."""
    if not text or text.endswith(("\n\n", "\r\n\r\n")):
        return ""
    return nl if text.endswith("\n") else nl + nl


def marked_items(get: Getter, path: str, doc: Document, day: date) -> list[Marked]:
    """Headlines of a log (its objects given by `get`) marked with a memory type and not compacted yet, as items
    (outermost only)."""
    found: list[Marked] = []
    inside: tuple[int, ...] | None = None
    for node in walk_headlines(get, path, doc):
        if inside is not None and node.position[:len(inside)] == inside:
            continue
        kind = tagged_type(node.headline)
        if kind is None or node.headline.get(COMPACTED) is not None:
            continue
        inside = node.position
        item = item_from_headline(node.headline, render_headline(node.headline, get))
        when = ENTRY_TIME.match(node.outline[0])
        moment = datetime(day.year, day.month, day.day)
        if when and int(when[1]) < 24 and int(when[2]) < 60:
            moment = moment.replace(hour=int(when[1]), minute=int(when[2]))
        item = replace(item, id=None, added=moment, source=f"log {day.isoformat()}"
                       + (f" {moment:%H:%M}" if when else ""),
                       tags=tuple(t for t in item.tags if t != kind))
        found.append(Marked(kind, item, node.line))
    return found


def mark_compacted(text: str, lines: list[int], moment: datetime) -> str:
    """`text` with a `:COMPACTED:` property added to the headline starting at each of `lines` (1-based)."""
    rows = text.split("\n")
    crlf = is_crlf(text)
    cr = "\r" if crlf else ""
    stamp = f":{COMPACTED}: {org_timestamp(moment)}{cr}"
    starts = [0]
    for row in rows:
        starts.append(starts[-1] + len(row) + 1)
    for line in sorted(set(lines), reverse=True):
        section = Section.of(text, starts[line - 1], crlf)
        if section.drawer_end is not None:
            rows.insert(line - 1 + section.drawer_end, stamp)
        else:
            at = line - 1 + section.drawer
            rows[at:at] = [f":PROPERTIES:{cr}", stamp, f":END:{cr}"]
    return "\n".join(rows)
