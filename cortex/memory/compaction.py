"""Compaction: the items marked in an agent's daily logs move into its memory.org, and logs past retention go.

One change of the agent's files (`Workspace.change_files`) between two snapshots, so a rollback undoes it:
memory.org gains the marked items it does not hold yet, each log that marked one records it as
compacted (`logs.mark_compacted`), and the logs older than the retention are removed.

What memory.org holds is told as consolidation tells it (`similar`): a marked item with the text of an item
there is not added, nor one that repeats a current item in other words (a near duplicate, reported); a likely
successor of a current item is added superseding it (or superseded by it, when the current item is newer).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import NotFound, UserError
from ..objects import Snapshot
from ..words import counted, short
from ..workspace import UNCHANGED, Current
from .changes import keyed, merged_into, minute
from .consolidation import is_newer, succession
from .items import MemoryItem, make_id
from .layout import AGENTS, check_agent_id, logs_in, memory_path
from .logs import Marked, mark_compacted, marked_items
from .memoryfile import MemoryFile, Typed, with_unique_id
from .retention import RetentionPolicy
from .similar import SAME_SUBJECT, Embed, relation

if TYPE_CHECKING:
    import numpy as np

    from .agents import AgentMemory

__all__ = ["CompactionReport", "Near", "compact"]

Near = tuple[str, MemoryItem, MemoryItem, float]  # (type, marked item, the current item it repeats, cosine)


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction did; roll back to `before` to undo it."""

    before: Snapshot
    after: Snapshot
    moved: list[Typed]
    duplicates: int  # marked items memory.org already held, as they are or in other words
    deleted_logs: list[str]
    near: list[Near] = field(default_factory=list)  # of those, the ones in other words

    def lines(self) -> list[str]:
        """What moved (and what it supersedes or is superseded by), what was already known in other words, and
        what was deleted."""
        lines = []
        for kind, item in self.moved:
            links = [f"supersedes {' '.join(item.validity.replaces)}"] if item.validity.replaces else []
            links += [f"superseded by {' '.join(item.validity.replaced_by)}"] if item.validity.replaced_by else []
            lines.append(f"  moved    {kind:9} {item.title}" + (f"  ({'; '.join(links)})" if links else ""))
        lines += [f"  known    {kind:9} {item.title}  (as {known.id or known.key(kind)}, {score:.2f})"
                  for kind, item, known, score in self.near]
        return lines + [f"  deleted  {path}" for path in self.deleted_logs]

    def repl_view(self, renderer):
        """The REPL's view: what moved and was deleted, and how to undo it."""
        lines = self.lines()
        lines.append(f"{counted(len(self.moved), 'item')} moved, {self.duplicates} already known, "
                     f"{counted(len(self.deleted_logs), 'log')} deleted; "
                     f'(rollback "{short(self.before.oid)}") undoes it')
        return renderer.text("\n".join(lines))


def compact(memory: AgentMemory, agent: str, policy: RetentionPolicy | None = None, *,
            now: datetime | None = None) -> CompactionReport:
    """Move items marked in the agent's daily logs into memory.org and delete logs past retention, between two
    snapshots (rollback undoes it)."""
    policy, now, workspace = policy or RetentionPolicy(), minute(now), memory.workspace
    path = memory_path(check_agent_id(agent))
    done: dict[str, object] = {}

    def edits(tree) -> dict:
        logs = logs_in(tree, agent)
        if not logs and path not in tree.entries:
            raise NotFound(f"agent {agent!r} has no memory {workspace.where(AGENTS)}")
        marked = {log: _marked(workspace.current(log, tree), day) for log, day in logs.items()}
        model = memory.model(agent, tree) or MemoryFile(path)
        moves = _Moves(model, memory.embed, agent, now)
        moves.add(mark for found in marked.values() for mark in found)
        moved = moves.moved
        deleted = [log for log, day in logs.items() if policy.expired(day, now.date())]
        done.update(moved=moved, near=moves.near, marks=sum(map(len, marked.values())), deleted=deleted)

        def into_memory(current: Current):
            errors: list[UserError | None] = [None]
            data, _ = merged_into(agent, path, [(model.entries, keyed(moved) | moves.changed)],
                                  memory.model_of(current) or MemoryFile(path), errors)
            if errors[0] is not None:
                raise errors[0]
            return UNCHANGED if data is None else data

        def marking(day):
            def mark(current: Current):
                found = _marked(current, day)
                if not found:
                    return UNCHANGED
                return mark_compacted(current.data.decode("utf-8"), [m.line for m in found], now).encode("utf-8")
            return mark

        changes = {path: into_memory} if moved else {}
        changes.update((log, marking(logs[log])) for log, found in marked.items() if found and log not in deleted)
        changes.update((log, lambda current: None) for log in deleted)
        return changes

    with workspace.held(memory.folder(agent)):
        before = memory.checkpoint(agent, f"before compacting the memory of {agent}")
        changed = workspace.change_files(f"compacted the memory of {agent}", edits, within=memory.folder(agent),
                                         operation="compact")
        memory.forget_known(changed.paths)
        after = memory.checkpoint(agent, f"compacted the memory of {agent}")  # HEAD again when nothing changed
    return CompactionReport(before, after, done["moved"], done["marks"] - len(done["moved"]), done["deleted"],
                            done["near"])


def _marked(current: Current, day) -> list[Marked]:
    """The items marked in a log's current version (none when it is gone)."""
    return [] if not current.exists else marked_items(current.get, current.path, current.document, day)


class _Moves:
    """The marked items to move into a memory.org (`model`), each once: what moves, how it changes the items
    there it supersedes or is superseded by, and what it already holds in other words."""

    def __init__(self, model: MemoryFile, embed: Embed | None, agent: str, now: datetime):
        self.model, self.embed, self.agent, self.now = model, embed, agent, now
        self.rows: list[list] = []  # [key (None: moved), item] of the items a marked item is compared with
        self.moving: list[tuple[int, str, int]] = []  # (order marked, type, row) of each item moved
        self.touched: set[int] = set()  # rows of memory.org's items changed
        self.near: list[Near] = []
        self.taken = set(model.entries)  # the :ID:s given

    @property
    def moved(self) -> list[Typed]:
        return [(kind, self.rows[row][1]) for _, kind, row in self.moving]

    @property
    def changed(self) -> dict[str, Typed]:
        return {self.rows[row][0]: (self.model.entries[self.rows[row][0]][0], self.rows[row][1])
                for row in self.touched}

    def add(self, marks: Iterable[Marked]) -> None:
        """Move the marked items whose text memory.org does not hold yet (of any type), each once, in order; an
        item is compared with the current items of its type and the items of its type moved before it."""
        known = {text for _, text in self.model.texts}
        by_type: dict[str, dict[str, tuple[int, MemoryItem]]] = {}
        for order, mark in enumerate(marks):
            if mark.item.normalised not in known:
                known.add(mark.item.normalised)
                by_type.setdefault(mark.type, {})[mark.item.normalised] = (order, mark.item)
        for kind, items in by_type.items():
            current = [[key, item] for key, (k, item) in self.model.entries.items() if k == kind and item.current]
            start = len(self.rows)
            self.rows += current + [[None, item] for _, item in items.values()]
            vectors = self.embed([item.text for _, item in self.rows[start:]]) \
                if self.embed is not None and len(self.rows) - start > 1 else None
            active = list(range(start, start + len(current)))
            for n, (order, _) in enumerate(items.values(), start + len(current)):
                self._move(kind, order, n, active, None if vectors is None else (vectors, start))
        self.moving.sort()

    def _move(self, kind: str, order: int, row: int, active: list[int],
              embedded: tuple[np.ndarray, int] | None) -> None:
        """Move the marked item of `row`, unless a current item repeats it; supersede, or be superseded by, the
        closest item it is a successor of, or that is its successor."""
        item = self.rows[row][1]
        if embedded is not None and active:
            vectors, start = embedded
            scores = vectors[[r - start for r in active]] @ vectors[row - start]
            for at in (-scores).argsort(kind="stable")[:3]:
                other, score = active[at], float(scores[at])
                if score < SAME_SUBJECT:
                    break
                known = self.rows[other][1]
                older, newer = (row, other) if is_newer(known, item) else (other, row)
                found = relation(self.rows[older][1].text, self.rows[newer][1].text, score)
                if found is None:
                    continue
                if found.kind == "duplicate":
                    self.near.append((kind, item, known, score))
                    return
                self._identify(kind, older)
                self._identify(kind, newer)
                self.rows[older][1], self.rows[newer][1] = succession(self.rows[older][1], self.rows[newer][1],
                                                                      self.now)
                self.touched.update(r for r in (older, newer) if self.rows[r][0] is not None)
                if older == other:
                    active.remove(other)
                break
        self.moving.append((order, kind, row))
        if self.rows[row][1].current:
            active.append(row)

    def _identify(self, kind: str, row: int) -> None:
        """Give the item of `row` an :ID: if it has none."""
        item = self.rows[row][1]
        if item.id is None:
            self.rows[row][1] = with_unique_id(item, make_id(self.agent, kind, item.text), self.taken.__contains__)
            self.taken.add(self.rows[row][1].id)
