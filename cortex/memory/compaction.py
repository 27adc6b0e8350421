"""Compaction: the items marked in an agent's daily logs move into its memory.org, and logs past retention go.

One change of the agent's files (`Workspace.change_files`) between two snapshots, so a rollback undoes it:
memory.org gains the marked items it does not hold yet, each log that marked one records it as
compacted (`logs.mark_compacted`), and the logs older than the retention are removed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import NotFound, UserError
from ..objects import Snapshot
from ..words import counted, short
from ..workspace import UNCHANGED, Current
from .changes import context_of, keyed, merged_into, minute
from .layout import AGENTS, check_agent_id, logs_in, memory_path
from .logs import Marked, mark_compacted, marked_items
from .memoryfile import MemoryFile, Typed
from .retention import RetentionPolicy

if TYPE_CHECKING:
    from .agents import AgentMemory

__all__ = ["CompactionReport", "compact"]


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction did; roll back to `before` to undo it."""

    before: Snapshot
    after: Snapshot
    moved: list[Typed]
    duplicates: int  # marked items memory.org already held
    deleted_logs: list[str]

    def repl_view(self, renderer):
        """The REPL's view: what moved and was deleted, and how to undo it."""
        lines = [f"  moved    {kind:9} {item.title}" for kind, item in self.moved]
        lines += [f"  deleted  {path}" for path in self.deleted_logs]
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
        moved = _to_move(marked.values(), context_of(agent, memory.model(agent, tree), every=True))
        deleted = [log for log, day in logs.items() if policy.expired(day, now.date())]
        done.update(moved=moved, marks=sum(map(len, marked.values())), deleted=deleted)

        def into_memory(current: Current):
            errors: list[UserError | None] = [None]
            data, _ = merged_into(agent, path, [({}, keyed(moved))], memory.model_of(current) or MemoryFile(path),
                                  errors)
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
        changed = workspace.change_files(f"compacted the memory of {agent}", edits, within=memory.folder(agent))
        memory.forget_known(changed.paths)
        after = workspace.snapshot(f"compacted the memory of {agent}")
    return CompactionReport(before, after, done["moved"], done["marks"] - len(done["moved"]), done["deleted"])


def _marked(current: Current, day) -> list[Marked]:
    """The items marked in a log's current version (none when it is gone)."""
    return [] if not current.exists else marked_items(current.get, current.path, current.document, day)


def _to_move(marked: Iterable[list[Marked]], memory) -> list[Typed]:
    """The items marked in logs that memory does not hold yet (each once), to move into memory.org."""
    known = {item.normalised for _, item in memory.items()}
    moved: list[Typed] = []
    for found in marked:
        for mark in found:
            if mark.item.normalised not in known:
                known.add(mark.item.normalised)
                moved.append((mark.type, mark.item))
    return moved
