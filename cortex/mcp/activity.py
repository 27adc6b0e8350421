"""What changed, within a server's scope: diff, log, and the recent activity since a snapshot or a time."""

from __future__ import annotations

import re
import time
from datetime import datetime

from ..api import DurationError, parse_duration
from ..errors import NotFound, UserError
from ..history import change_counts
from ..words import quoted
from . import shapes
from .session import Session

__all__ = ["SINCE", "changes", "log", "recent"]

SINCE = "a snapshot (HEAD~3, an oid prefix), a time (2026-11-20, 2026-11-20T09:30) or an age (3d, 12h, 2w)"
_AGE = re.compile(r"(\d+\s*[A-Za-zµ]+\s*)+")


def changes(session: Session, a: str | None, b: str | None) -> list:
    """Headline changes from state `a` (None: before anything) to `b` (None: the working state), as this server
    sees the two states."""
    return session.cx.diff(a, b, within=session.prefix)


def log(session: Session, limit: int, after_ns: int | None = None) -> list[dict]:
    """Snapshots, newest first (those taken after `after_ns`, if given), with counts of what each changed; a bound
    server lists only the snapshots that changed its agent's files, and the message of those only that changed
    nothing else (a message may speak of other agents' files)."""
    cx = session.cx
    if session.prefix is None:
        if after_ns is not None:
            limit = min(limit, sum(1 for s in cx.snapshots() if s.time_ns > after_ns))
        return [shapes.snapshot(e.snapshot, e.changes) for e in cx.log(limit)] if limit else []
    found: list[dict] = []
    for snap in cx.snapshots():
        if len(found) >= limit or (after_ns is not None and snap.time_ns <= after_ns):
            break
        parent = _parent(session, snap)
        counts = change_counts(changes(session, parent, snap.oid.hex()))
        if counts:
            shaped = shapes.snapshot(snap, counts)
            if not _only_within(session, parent, snap):
                shaped["message"] = None
            found.append(shaped)
    return found


def _only_within(session: Session, parent: str | None, snap) -> bool:
    """Whether a snapshot changed no file outside the server's scope."""
    old = session.cx.state(parent).entries if parent is not None else {}
    new = session.cx.state(snap.oid.hex()).entries
    return all(session.covers(p) for p in old.keys() | new.keys() if old.get(p) != new.get(p))


def recent(session: Session, since: str, limit: int) -> dict:
    """The snapshots taken since `since` and every change from the state then to the working state."""
    cx = session.cx
    after_ns = _time(since)
    if after_ns is None:
        try:
            base = cx.resolve(since)
        except UserError as exc:
            raise UserError(f"since {quoted(since)}: {exc}; or give {SINCE}") from None
        after_ns, point = base.time_ns, {"snapshot": shapes.oid12(base.oid)}
    else:
        base = next((s for s in cx.snapshots() if s.time_ns <= after_ns), None)
        point = {"time": shapes.when(after_ns)}
    found = [shapes.change(c) for c in changes(session, None if base is None else base.oid.hex(), None)]
    return {"since": point, "compared_with": shapes.oid12(base.oid) if base else "nothing (before every snapshot)",
            "snapshots": log(session, limit, after_ns), **shapes.capped("changes", found, limit),
            "not_ingested": [p for p in cx.unsaved() if session.covers(p)]}


def _time(text: str) -> int | None:
    """`text` as a time in ns since the epoch: an ISO date or time (local unless it says), or an age before now;
    None when it is neither."""
    text = text.strip()
    if not text:
        raise UserError(f"since is empty: give {SINCE}")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is not None:
        try:
            ns = int(moment.timestamp() * 1e9)
            datetime.fromtimestamp(ns / 1e9)  # as it is shown back, in local time
            return ns
        except (ValueError, OverflowError, OSError):  # the first or the last moments of the calendar
            raise UserError(f"since {quoted(text)}: a time no clock of this machine holds; give {SINCE}") from None
    if _AGE.fullmatch(text):
        try:
            return time.time_ns() - int(parse_duration(text).total_seconds() * 1e9)
        except DurationError:
            pass  # perhaps an oid prefix such as 3d5e
    return None


def _parent(session: Session, snap) -> str | None:
    """The ref of a snapshot's parent, None when it has none or retention dropped it."""
    if snap.parent is None:
        return None
    try:
        return session.cx.resolve(snap.parent.hex()).oid.hex()
    except NotFound:
        return None
