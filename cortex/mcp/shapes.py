"""Cortex values as the plain JSON a tool answers with: short, and naming what a next call needs (:ID:, oid, ref)."""

from __future__ import annotations

from datetime import datetime

__all__ = ["TEXT_LIMIT", "capped", "change", "hit", "node", "oid12", "proposal", "snapshot", "turn", "when"]

TEXT_LIMIT = 1000  # characters of an item's text a search result carries; `show` gives the rest


def oid12(oid) -> str | None:
    """The 12-character prefix of an oid, which every ref argument takes."""
    return None if oid is None else bytes(oid).hex()[:12]


def when(time_ns: int) -> str:
    """A local time, to the second, ISO 8601."""
    return datetime.fromtimestamp(time_ns / 1e9).isoformat(timespec="seconds")


def node(n) -> dict:
    """A headline in place."""
    h = n.headline
    return {"path": n.path, "line": n.line, "outline": " / ".join(n.outline), "id": n.id, "todo": h.todo,
            "tags": list(h.tags)}


def hit(r) -> dict:
    """A search result, best first in its list."""
    shaped = {"score": round(r.score, 4), "path": r.path, "line": r.line, "outline": " / ".join(r.outline),
              "id": r.id, "oid": bytes(r.oid).hex(), "agent": r.item.agent, "type": r.item.type, "text": _cut(r.text)}
    for field in ("date", "speaker"):
        if (value := getattr(r.item, field)) is not None:
            shaped[field] = value
    if r.before or r.after:
        shaped["before"] = [_cut(turn.text) for turn in r.before]
        shaped["after"] = [_cut(turn.text) for turn in r.after]
    return shaped


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + " …"


def change(c) -> dict:
    """A headline added, removed, changed or moved."""
    shaped = {"kind": c.kind, "path": c.path, "outline": " / ".join(c.outline), "id": c.id}
    if c.fields:
        shaped["fields"] = list(c.fields)
    if c.kind == "moved":
        shaped["from"] = f"{c.old_path}: {' / '.join(c.old_outline)}"
    if c.headlines > 1:  # a subtree added, removed or moved whole
        shaped["headlines"] = c.headlines
    return shaped


def snapshot(s, changes: dict[str, int] | None = None) -> dict:
    """A snapshot, with the counts of what changed in it when known."""
    shaped = {"ref": oid12(s.oid), "time": when(s.time_ns), "message": s.message}
    if changes is not None:
        shaped["changes"] = changes
    return shaped


def capped(name: str, values: list, limit: int) -> dict:
    """`{name: the first limit values}`, and how many more there were."""
    shaped = {name: values[:limit]}
    if len(values) > limit:
        shaped["more"] = len(values) - limit
    return shaped


def turn(t) -> dict:
    """One exchange of a conversation."""
    return {"user": t.user_message, "assistant": t.assistant_response, "time": when(t.timestamp_ns)}


def proposal(p) -> dict:
    """A write waiting for review, or decided: its id, whose, when, what it does, its files, its status and reason."""
    shaped = {"id": p.id, "agent": p.agent, "time": when(p.time_ns), "operation": p.operation, "message": p.message,
              "paths": list(p.paths), "status": p.status}
    return shaped | ({"reason": p.reason} if p.reason else {})
