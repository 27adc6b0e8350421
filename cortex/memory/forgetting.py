"""Forgetting: one item of an agent's memory, or the whole agent (a purge); soft, or hard (from history too).

Soft, a snapshot is taken first and the files change through the workspace's one write path: a rollback
brings the item or the agent back. Hard, the store is held alone from start to end and every kept state is
rewritten without it (`Workspace.erase`): its text is gone from the store, and a tombstone says what went.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import NotFound
from ..history import Forgotten, rewrite_documents
from ..objects import Document, Snapshot, Tree
from ..org import parse, render_headline
from ..words import counted, files, quoted, short
from ..workspace import UNCHANGED, Current, paths_under
from .changes import parsed_text
from .items import MemoryItem, item_from_headline, normalise
from .layout import AGENTS, MEMORY_FILE, check_agent_id, holds_items, tagged_type
from .memoryfile import Getter, MemoryFile

if TYPE_CHECKING:
    from ..hashing import Oid
    from .agents import AgentMemory

__all__ = ["ForgetReport", "NothingThere", "PurgeReport", "forget", "purge"]


@dataclass(frozen=True)
class PurgeReport:
    """What a purge removed: files (relative to the Org root) and, when hard, history."""

    files: list[str]
    history: Forgotten | None = None

    def repl_view(self, renderer):
        """The REPL's view: what was removed, from the files and, when hard, from history."""
        return renderer.text("\n".join([f"removed {files(self.files)}", *_erased(self.history)]))


@dataclass(frozen=True)
class ForgetReport:
    """What forgetting an item removed: the :ID:s of the items memory.org held, the files changed, the snapshot
    taken first (soft) and, when hard, what history lost."""

    ids: list[str]
    files: list[str]
    before: Snapshot | None = None
    history: Forgotten | None = None

    def repl_view(self, renderer):
        """The REPL's view: what changed, in the files and, when hard, in history; how to undo a soft forget."""
        lines = [f"forgot {', '.join(self.ids) or 'an item without :ID:'}; rewrote {files(self.files)}",
                 *_erased(self.history)]
        if self.before is not None:
            lines.append(f'(rollback "{short(self.before.oid)}") undoes it')
        return renderer.text("\n".join(lines))


def _erased(forgotten: Forgotten | None) -> list[str]:
    """What a hard purge or forget took from history, as lines (none when it was not hard)."""
    if forgotten is None:
        return []
    return [f"rewrote {counted(forgotten.snapshots, 'snapshot')}, collected {counted(forgotten.objects, 'object')}"]


class NothingThere(NotFound):
    """What a purge or forget names is not there (for a hard one, nor in history): nothing to do, as when it is
    run twice."""


def purge(memory: AgentMemory, agent: str, hard: bool = False) -> PurgeReport:
    """Remove the agent's files and its items from the working state; `hard` also from every snapshot."""
    workspace, folder = memory.workspace, memory.folder(agent)
    if hard:
        workspace.check_erase()
    with workspace.store.engine.exclusively() if hard else nullcontext():
        with workspace.held(folder):
            workspace.refresh(folder)
            present = any(paths_under(workspace.working(), folder + "/"))
            if not present and not hard:
                raise NothingThere(f"agent {agent!r} has no memory {workspace.where(AGENTS)}")
            if present and not hard:
                memory.checkpoint(agent, f"before purging the memory of {agent}")
            files = workspace.remove(folder, f"purged the memory of {agent}")
            memory.forget_known(files)
        forgotten = workspace.erase(_without_files(folder + "/"), f"agent {agent}") if hard else None
    if not files and forgotten is None:
        raise NothingThere(f"agent {agent!r} has no memory here or in any kept snapshot")
    return PurgeReport(sorted(files), forgotten)


def forget(memory: AgentMemory, agent: str, item: str, hard: bool = False, chain: bool = False) -> ForgetReport:
    """Remove one item, named by its :ID:, key or text, from memory.org and from the daily logs (a headline
    marked with its text); `hard` also from every snapshot. `chain`: also the items it replaced and that replaced
    it, and theirs, in turn. Other items stop naming what was removed (an :ID: is made of an item's words)."""
    workspace, folder = memory.workspace, memory.folder(agent)
    if hard:
        workspace.check_erase()
    with workspace.store.engine.exclusively() if hard else nullcontext():
        with workspace.held(folder):
            named = _named(memory, agent, item, chain)
            if not named.found and not hard:
                raise NothingThere(f"agent {agent!r} has no memory item {quoted(item)}")
            before = None if hard else memory.checkpoint(agent, f"before forgetting an item of {agent}")

            def without(current: Current):
                text = _text_without(current.path, current.document, current.get, named) if current.exists else None
                return UNCHANGED if text is None else text.encode("utf-8")

            changed = workspace.change_files(
                f"forgot {named.label} of agent {agent}",
                lambda tree: {path: without for path in paths_under(tree, folder + "/") if holds_items(agent, path)},
                within=folder, operation="forget")
            files = changed.paths
            memory.forget_known(files)
            if files and not hard and changed.proposal is None:  # a rollback to `before` finds no unsnapshotted edit
                workspace.snapshot(f"forgot an item of {agent}")
        forgotten = workspace.erase(rewrite_documents(_document_without(memory, agent, named)),
                                    f"{named.label} of agent {agent}") if hard else None
    if not files and forgotten is None:
        raise NothingThere(f"agent {agent!r} has no memory item {quoted(item)} here or in any kept snapshot")
    return ForgetReport(list(named.ids), files, before, forgotten)


@dataclass(frozen=True)
class _Named:
    """The items a name given to `forget` stands for: by :ID: or key, or by normalised text."""

    names: frozenset[str]
    texts: frozenset[str]
    ids: tuple[str, ...]  # the :ID:s of the items memory.org holds now
    found: int  # how many items memory.org holds now

    @property
    def label(self) -> str:
        """How a tombstone names the items: by count, as even an :ID: may be made of the item's words."""
        return "1 memory item" if self.found <= 1 else f"{self.found} memory items"

    def __call__(self, key: str, item: MemoryItem) -> bool:
        return key in self.names or item.id in self.names or item.normalised in self.texts


def _named(memory: AgentMemory, agent: str, name: str, chain: bool = False) -> _Named:
    """What `name` stands for, with the keys, :ID:s and texts of the items it names in memory.org now (and,
    with `chain`, of the items they replaced and that replaced them, in turn)."""
    loaded = memory.load_context(check_agent_id(agent)).loaded
    found = dict(loaded.named(name)) if loaded is not None else {}
    by_id = {item.id: (key, (kind, item)) for key, (kind, item) in (loaded.entries.items() if chain else ())}
    todo = list(found.values())
    while todo:
        validity = todo.pop()[1].validity
        for linked in (*validity.replaces, *validity.replaced_by):
            if linked in by_id and (key := by_id[linked][0]) not in found:
                found[key] = by_id[linked][1]
                todo.append(found[key])
    return _Named(names=frozenset({name, *found}),
                  texts=frozenset({normalise(name), *(item.normalised for _, item in found.values())}),
                  ids=tuple(item.id for _, item in found.values() if item.id), found=len(found))


def _without_files(prefix: str) -> Callable[[Tree], Tree]:
    """A tree rewrite that drops every file under `prefix`."""
    return lambda tree: Tree({path: oid for path, oid in tree.entries.items() if not path.startswith(prefix)})


def _document_without(memory: AgentMemory, agent: str, named: _Named) -> Callable[[str, Oid], Oid]:
    """A document rewrite for history: the agent's files without the named items, stored."""
    store = memory.workspace.store

    def rewrite(path: str, oid: Oid) -> Oid:
        text = _text_without(path, store.objects[oid], store.objects.__getitem__, named) \
            if holds_items(agent, path) else None
        if text is None:
            return oid
        parsed = parse(text)
        store.objects.add_many(parsed.objects)
        return parsed.document.oid

    return rewrite


def _text_without(path: str, doc: Document, get: Getter, named: _Named) -> str | None:
    """The text of memory.org without the named items, or of a daily log without the headlines marked with
    them; None when it holds none."""
    if not path.endswith("/" + MEMORY_FILE):
        return _log_without(doc, get, named)
    text = None
    while True:  # a repeat of an item is read (and removed) once the first is gone: read it again
        model = MemoryFile.read(path, doc, get)
        keys = [key for key, (_, item) in model.entries.items() if named(key, item)]
        gone = {*named.ids, *(model.entries[key][1].id for key in keys)} - {None}
        naming = {key: (kind, item.without_links(gone)) for key, (kind, item) in model.entries.items()
                  if key not in keys and gone.intersection((*item.validity.replaces, *item.validity.replaced_by))}
        if not keys and not naming:
            return text
        text = model.rewrite({**dict.fromkeys(keys), **naming}, [], "")[0].decode("utf-8")
        doc, get = parsed_text(text)


def _log_without(doc: Document, get: Getter, named: _Named) -> str | None:
    """A log's text without the headlines marked with a memory type that hold a named item; None if none does."""
    parts, dropped, stack = [doc.preamble], False, list(reversed(doc.children))
    while stack:  # depth first without recursion: a log may nest thousands deep
        headline = get(stack.pop())
        kind = tagged_type(headline)
        item = item_from_headline(headline, render_headline(headline, get)) if kind else None
        if item is not None and named(item.key(kind), item):
            dropped = True
            continue
        parts.append(headline.raw)
        stack.extend(reversed(headline.children))
    return "".join(parts) if dropped else None
