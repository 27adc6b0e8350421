"""What an agent is told when a session starts: its current facts, procedures and patterns, its open TODOs and what
changed since its last session, within a budget of tokens.

    #+TITLE: Briefing for assistant (2026-11-27 14:40)
    * Facts
    - The staging cluster is k8s-stg-2.
    * Open TODOs
    - TODO [#A] Rotate the deploy key (projects.org)
    * Changed since its last session (2026-11-26 16:45)
    - changed  projects.org: Deploy / Rotate the deploy key
    Left out for the budget of 2,000 tokens: 12 facts, 3 changes (`cortex brief assistant --budget 4000` shows them).

Tokens are estimated as characters / 4 (`estimate_tokens`), close enough for English prose and Org without a
tokenizer. Whole items are cut, never a part of one: the sections take turns (facts, procedures, open TODOs, changes,
patterns), each offering its next item, most useful first (the newest items, the TODOs of highest priority), until
one does not fit; that section then stops and the others go on. Its last session began at the newest entry of its
newest daily log; what changed since is the diff from the newest snapshot at or before that moment to the working
state, the agent's own daily logs left out (they are the sessions themselves).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, time

from ..backends.base import Store
from ..history import Change, snapshots
from ..objects import Snapshot, Tree
from ..query import Node
from ..words import counted
from .items import MemoryItem
from .layout import AGENTS, LOGS, logs_in
from .logs import ENTRY_TIME

CHARS_PER_TOKEN = 4
DEFAULT_BUDGET = 2000  # tokens
_HEADINGS = {"fact": "Facts", "procedure": "Procedures", "todo": "Open TODOs", "change": "Changed since its last "
             "session", "pattern": "Learned Patterns"}
_TURNS = ("fact", "procedure", "todo", "change", "pattern")  # the order sections take turns in
_ORDER = ("fact", "procedure", "pattern", "todo", "change")  # the order they are shown in
_NOUNS = {"fact": "fact", "procedure": "procedure", "pattern": "pattern", "todo": "open TODO", "change": "change"}
_LEFT_OUT_RESERVE = 40  # tokens kept for the line that says what was left out


@dataclass(frozen=True)
class Briefing:
    """A briefing's text, its estimated tokens, and how many items of each section the budget left out."""

    agent: str
    text: str
    tokens: int
    left_out: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.text


def estimate_tokens(text: str) -> int:
    """Tokens of `text`, estimated as characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def last_session(store: Store, tree: Tree, agent: str) -> datetime | None:
    """When the agent's last session began: the latest entry time (`* HH:MM — title`) of its newest daily log
    that has one; None when none has."""
    for path, day in sorted(logs_in(tree, agent).items(), key=lambda log: log[1], reverse=True):
        doc = store.objects[tree.entries[path]]
        clocks = [(int(m[1]), int(m[2])) for oid in doc.children
                  if (m := ENTRY_TIME.match(store.objects[oid].title)) and int(m[1]) < 24 and int(m[2]) < 60]
        if clocks:
            return datetime.combine(day, time(*max(clocks)))
    return None


def snapshot_at(store: Store, moment: datetime) -> Snapshot | None:
    """The newest snapshot taken at or before `moment` (local time), if any."""
    limit = moment.timestamp() * 1e9
    return next((snap for snap in snapshots(store) if snap.time_ns <= limit), None)


def own_log(agent: str, path: str) -> bool:
    """Whether `path` is one of the agent's daily logs (or in their folder)."""
    return path.startswith(f"{AGENTS}/{agent}/{LOGS}/")


def brief(agent: str, items: Sequence[tuple[str, MemoryItem]], todos: Sequence[Node], changes: Sequence[Change],
          since: datetime | None, *, budget: int = DEFAULT_BUDGET, now: datetime | None = None) -> Briefing:
    """The briefing of `agent` within `budget` tokens: its current `items` ((type, item) pairs), its open `todos`
    (headlines), the `changes` since its last session (`since`; None:
    it had none)."""
    now = now or datetime.now()
    lines = {
        **{kind: [_item_line(item) for _, item in sorted(((k, i) for k, i in items if k == kind),
                                                      key=_newest_first)] for kind in ("fact", "procedure", "pattern")},
        "todo": [todo_line(node) for node in sorted(todos, key=lambda node: node.headline.priority or "B")],
        "change": [f"- {change}" for change in changes],
    }
    title = f"#+TITLE: Briefing for {agent} ({now:%Y-%m-%d %H:%M})\n"
    room = budget - estimate_tokens(title) - _LEFT_OUT_RESERVE
    taken: dict[str, list[str]] = {kind: [] for kind in _TURNS}
    open_sections = [kind for kind in _TURNS if lines[kind]]
    while open_sections:
        for kind in list(open_sections):
            line = lines[kind][len(taken[kind])]
            cost = estimate_tokens(line + "\n") + (0 if taken[kind] else estimate_tokens(_heading(kind, since)))
            if cost > room:
                open_sections.remove(kind)
                continue
            room -= cost
            taken[kind].append(line)
            if len(taken[kind]) == len(lines[kind]):
                open_sections.remove(kind)
    body = "".join(_heading(kind, since) + "".join(line + "\n" for line in taken[kind])
                   for kind in _ORDER if taken[kind])
    left_out = {kind: len(lines[kind]) - len(taken[kind]) for kind in _ORDER if len(lines[kind]) > len(taken[kind])}
    if not body and not left_out:
        body = "Nothing to brief: no current memory item, no open TODO, no change since its last session.\n"
    text = title + body
    if left_out:
        shown = ", ".join(counted(n, _NOUNS[kind]) for kind, n in left_out.items())
        text += (f"Left out for the budget of {budget:,} tokens: {shown} (`cortex brief {agent} --budget "
                 f"{budget * 2}` shows more).\n")
    return Briefing(agent, text, estimate_tokens(text), left_out)


def todo_line(node: Node) -> str:
    """An open TODO as one list item: keyword, priority, title and its file."""
    h = node.headline
    priority = f"[#{h.priority}] " if h.priority else ""
    return f"- {h.todo} {priority}{h.title} ({node.path})"


def _heading(kind: str, since: datetime | None) -> str:
    return f"* {_HEADINGS[kind]}" + (f" ({since:%Y-%m-%d %H:%M})\n" if kind == "change" and since else "\n")


def _item_line(item: MemoryItem) -> str:
    """An item as one list item: its text, continuation lines indented."""
    return "- " + item.text.replace("\n", "\n  ")


def _newest_first(typed: tuple[str, MemoryItem]):
    added = typed[1].added
    return (added is None, -(added.timestamp() if added else 0))
