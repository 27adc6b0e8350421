"""Agent memory in Org files: save, load and delete an agent's context, compact its logs, forget an item, purge it.

    agents/<agent-id>/memory.org            * Facts / * Procedures / * Learned Patterns
    agents/<agent-id>/logs/YYYY-MM-DD.org   * HH:MM — title   (one entry per session)

Every write is a merge: the file is read, the saved context is merged into it item by item
(a person's edits since the context was loaded are kept, or the save is refused when both
changed the same item), written atomically and ingested in the same step. Saves to one agent
that a process makes concurrently are grouped (group commit): one merges them all, each file
is written once and the folder ingested once, and every caller is answered after that.

A save costs what it changes, not what the memory holds: the context's lists are compared
with the lists it was loaded with (an agent that only appends is found out without looking
at each item), and the model of the text last read or written is kept with its bytes, so
while nobody else touches the file it is neither read nor merged whole again.

With no Org folder on this machine (`Cortex.root` None) the same changes are computed from the
files as the store's working state holds them and committed there directly (`ingest.commit_files`):
no folder, no lock; a writer that loses the compare-and-swap applies its change again to what won.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from functools import partial
from itertools import compress, groupby
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import blake3

from ..backends.group import GroupCommit, Member
from ..bounded import BoundedDict
from ..errors import NotFound, UserError, located
from ..files import remove_tree
from ..hashing import THREADED_BYTES, Oid, hash_bytes
from ..history import Forgotten, head, rewrite_documents
from ..ingest import DOCS_BY_BYTES, WORKING, IngestReport, NotOrgText, commit_files, decode_org, org_files
from ..objects import Document, Snapshot, Tree
from ..orgfile import parse, render_headline
from ..query import render_file
from ..words import counted, files, quoted, short
from .items import BadItemText, MemoryItem, check_text, item_from_headline, normalise
from .layout import (
    AGENTS,
    ITEM_TYPES,
    LOGS,
    MEMORY_FILE,
    SECTION_TITLES,
    agent_folder,
    check_agent_id,
    log_date,
    log_path,
    memory_path,
    tagged_type,
)
from .logs import Marked, log_addition, mark_compacted, marked_items, render_entry
from .memoryfile import Getter, MemoryFile, Typed, merge
from .retention import RetentionPolicy
from .writes import agent_lock, replace_file

if TYPE_CHECKING:
    from .conversation.orglog import SessionTurns

    LogEdit = str | SessionTurns  # an entry to append to a daily log, or a conversation's turns to put in it

FIELDS = {"fact": "facts", "procedure": "procedures", "pattern": "patterns"}
_KNOWN_LIMIT = 16  # memory files whose last text and model are kept
_KNOWN_LOGS = 4  # daily logs whose last bytes are kept


@dataclass
class MemoryContext:
    """What an agent remembers, as lists of items per type, plus the summary of the session being saved.

    Items may be given as plain strings. `loaded` records the memory the context was loaded
    from (and `agent` whose it was): a save removes an item only if it was loaded and is
    gone from the lists. A context built from scratch, or loaded from another agent, only adds
    and updates items.
    """

    facts: list[MemoryItem | str] = field(default_factory=list)
    procedures: list[MemoryItem | str] = field(default_factory=list)
    patterns: list[MemoryItem | str] = field(default_factory=list)
    summary: str | None = None
    title: str | None = None
    session: str | None = None
    warnings: list[str] = field(default_factory=list, compare=False)
    agent: str | None = field(default=None, compare=False)
    loaded: MemoryFile | None = field(default=None, repr=False, compare=False)

    def items(self) -> list[Typed]:
        """Every (type, item) pair, facts first, strings turned into items."""
        return [(kind, _as_item(kind, item)) for kind in ITEM_TYPES for item in getattr(self, FIELDS[kind])]

    def __len__(self) -> int:
        return sum(len(getattr(self, name)) for name in FIELDS.values())


@dataclass(frozen=True)
class AgentStats:
    """What one agent's memory occupies on disk."""

    files: int
    bytes: int
    items: int
    logs: int


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction did; roll back to `before` to undo it."""

    before: Snapshot
    after: Snapshot
    moved: list[Typed]
    duplicates: int
    deleted_logs: list[str]

    def repl_view(self, renderer):
        """The REPL's view: what moved and was deleted, and how to undo it."""
        lines = [f"  moved    {kind:9} {item.title}" for kind, item in self.moved]
        lines += [f"  deleted  {path}" for path in self.deleted_logs]
        lines.append(f"{counted(len(self.moved), 'item')} moved, {self.duplicates} already known, "
                     f"{counted(len(self.deleted_logs), 'log')} deleted; "
                     f'(rollback "{short(self.before.oid)}") undoes it')
        return renderer.text("\n".join(lines))


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


@dataclass(frozen=True)
class _Save:
    """One save waiting for its group: what it changes in memory.org since `base`, and what it adds to daily logs,
    by day: an entry to append, or a conversation's turns (`conversation.orglog.SessionTurns`)."""

    base: Mapping[str, Typed]
    ours: dict[str, Typed | None]
    logs: tuple[tuple[date, LogEdit], ...] = ()


class _Known(NamedTuple):
    """A memory.org's bytes as last read or written, what they read as, and their document once known."""

    data: bytes
    model: MemoryFile
    document: Oid | None = None


class _KnownLog(NamedTuple):
    """A daily log's bytes as last written here (known to be text), and the state of their hash."""

    data: bytes
    hasher: blake3.blake3


class AgentMemory:
    """The memory of every agent under the Org root of one cortex session."""

    def __init__(self, cortex):
        self.cortex = cortex
        self._known: BoundedDict = BoundedDict(_KNOWN_LIMIT)  # path -> the memory.org last read or written
        self._known_logs: BoundedDict = BoundedDict(_KNOWN_LOGS)  # path -> the daily log last written
        # agent folder -> the group commit of its saves, while a save is queued or being written
        self._groups: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._groups_lock = threading.Lock()

    @property
    def root(self) -> Path:
        return Path(self.cortex.root)

    @property
    def store_side(self) -> bool:
        """Whether this machine has no Org folder: every write then commits to the store's working state itself
        (the file rendered from the store, changed, parsed, committed by compare-and-swap, re-applied when
        another writer won)."""
        return self.cortex.root is None

    def _folder(self, agent: str) -> Path | None:
        """The agent's folder under the Org root; None (the id checked) when there is no Org folder."""
        return None if self.store_side and check_agent_id(agent) else agent_folder(self.root, agent)

    def _where(self) -> str:
        """Where agents' memory lives, for messages."""
        return "in the store's working state" if self.store_side else f"under {self.root / AGENTS}"

    # --- the context contract ---------------------------------------------------------

    def load_context(self, agent: str) -> MemoryContext:
        """The agent's memory.org as a context (empty when there is none); hand edits are ingested first."""
        return self._load(agent, self._folder(agent))

    def _load(self, agent: str, folder: Path, written: dict[str, bytes] | None = None) -> MemoryContext:
        """The context of memory.org once the folder is ingested (`written`: bytes just written there)."""
        return _context(agent, self._synced(agent, folder, written))

    def _synced(self, agent: str, folder: Path, written: dict[str, bytes] | None = None,
                also: Callable[[], None] | None = None) -> MemoryFile | None:
        """The model of memory.org once the folder is ingested (None: there is none); `also` runs in the
        ingest's transaction."""
        self._sync(folder, written, also)
        path = memory_path(agent)
        oid = self.cortex.working().entries.get(path)
        if oid is None:
            return None
        known = self._known.get(path)
        if known is not None and written and written.get(path) is known.data:
            known = self._known[path] = known._replace(document=oid)  # the document of what was just written
        if known is not None and known.document == oid:
            return known.model
        return self._model(path, self.cortex.store.objects[oid])

    def save_context(self, agent: str, context: MemoryContext, *, now: datetime | None = None) -> MemoryContext:
        """Merge the context into memory.org, append its summary to today's log, ingest; return the memory as saved."""
        save = _prepared_save(agent, context, now)
        return _context(agent, self._group(agent, self._folder(agent)).run(lambda: save))

    def save_contexts(self, agent: str, contexts: list[tuple[MemoryContext, datetime | None]], *,
                      then: Callable[[list[UserError | None]], None] | None = None,
                      ) -> list[MemoryContext | UserError]:
        """Save (context, now) pairs of one agent in order as one write of each file and one ingest; for each,
        the memory as saved or the error that kept it out (a conflict with memory.org, a summary Org would
        misread). What fails them all is raised.

        `then(errors)`, given each context's error (None: saved), runs in the store transaction that
        ingests the saves, so that what the caller records of them lands with them, in one commit; it
        does not run when the saves fail (nothing written, or the ingest refused)."""
        saves: list[_Save | UserError] = []
        for context, now in contexts:
            try:
                saves.append(_prepared_save(agent, context, now))
            except UserError as error:
                saves.append(error)
        model, errors = self._write_saves(agent, self._folder(agent), saves, then)
        return [_context(agent, model) if error is None else error for error in errors]

    def delete_context(self, agent: str) -> bool:
        """Remove the agent's memory.org (its logs stay); snapshot first if it holds unsnapshotted edits."""
        folder = self._folder(agent)
        if folder is None:
            if memory_path(agent) not in self.cortex.working().entries:
                return False
            self._checkpoint(folder, f"before deleting the memory of {agent}")
            commit_files(self.cortex.store, lambda tree: {memory_path(agent): None},
                         f"deleted the memory of {agent}")
            return True
        path = self.root / memory_path(agent)
        if not path.exists():
            self._sync(folder)
            return False
        with agent_lock(folder):
            self._checkpoint(folder, f"before deleting the memory of {agent}")
            path.unlink(missing_ok=True)
            self._sync(folder)
        return True

    def list_agent_contexts(self) -> list[str]:
        """Agents that have a memory.org or logs under the Org root (or in the working state), sorted."""
        if self.store_side:
            return sorted({parts[1] for path in self.cortex.working().entries
                           if len(parts := path.split("/")) > 2 and parts[0] == AGENTS and _valid(parts[1])})
        base = self.root / AGENTS
        if not base.is_dir():
            return []
        return sorted(entry.name for entry in base.iterdir()
                      if entry.is_dir() and _valid(entry.name) and _org_files(entry))

    def get_storage_stats(self) -> dict[str, AgentStats]:
        """Files, bytes, items and logs per agent."""
        stats = {}
        if self.store_side:
            tree = self.cortex.working()
            for agent in self.list_agent_contexts():
                paths = [p for p in tree.entries if p.startswith(f"{AGENTS}/{agent}/")]
                stats[agent] = AgentStats(
                    files=len(paths), logs=len(_logs_in(tree, agent)), items=len(self.load_context(agent)),
                    bytes=sum(len(render_file(self.cortex.store, tree, p).encode("utf-8")) for p in paths))
            return stats
        for agent in self.list_agent_contexts():
            files = _org_files(self._folder(agent))
            logs = [f for f in files if f.parent.name == LOGS and log_date(f.name)]
            stats[agent] = AgentStats(files=len(files), bytes=sum(f.stat().st_size for f in files),
                                      items=len(self.load_context(agent)), logs=len(logs))
        return stats

    def add_item(self, agent: str, type: str, text: str, source: str = "api", id: str | None = None,
                 *, now: datetime | None = None) -> MemoryItem:
        """Add one item (a fact, procedure or pattern) to memory.org; an item with the same text is not repeated."""
        if type not in FIELDS:
            raise UserError(f"memory type {type!r}: use one of {', '.join(ITEM_TYPES)}")
        item = MemoryItem(check_text(text, type), id=id, added=_minute(now), source=source)
        saved = self.save_context(agent, MemoryContext(**{FIELDS[type]: [item]}), now=now)
        items = getattr(saved, FIELDS[type])
        same = [i for i in items if id is not None and i.id == id]
        # not found only when a save grouped after this one removed it
        return next(iter(same or [i for i in items if i.normalised == item.normalised]), item)

    def known_item(self, agent: str, type: str, text: str) -> MemoryItem | None:
        """The item of that type in the agent's memory.org with the same text (as `add_item` compares), if any."""
        wanted = normalise(text)
        return next((item for kind, item in self.load_context(agent).items() if kind == type and item.normalised == wanted),
                    None)

    def daily_logs(self, agent: str) -> list[date]:
        """The days of the agent's daily logs, oldest first."""
        self.load_context(agent)  # brings the working state in line with the agent's files
        return sorted(self._logs(agent).values())

    def search(self, agent: str, query: str, limit: int = 10, budget: float | None = None, progress=None):
        """Hybrid search over one agent's memory items and logs (`budget` and `progress` as `Cortex.search`)."""
        return self.cortex.search(query, limit=limit, agent=agent, budget=budget, progress=progress)

    def show(self, agent: str) -> str:
        """The Org text of the agent's memory.org."""
        self.load_context(agent)
        path = memory_path(agent)
        if path not in self.cortex.working().entries:
            raise NotFound(f"{path}: agent {agent!r} has no memory.org")
        return self.cortex.show(path)

    # --- retention, compaction, purge -------------------------------------------------------

    def compact(self, agent: str, policy: RetentionPolicy | None = None, *,
                now: datetime | None = None) -> CompactionReport:
        """Move items marked in daily logs into memory.org and delete logs past retention; rollback undoes it."""
        policy = policy or RetentionPolicy()
        now = _minute(now)
        folder = self._existing(agent)
        if folder is None:
            before = self._checkpoint(folder, f"before compacting the memory of {agent}")
            moved, marks, deleted = self._compact_in_store(agent, policy, now)
            after = self.cortex.snapshot(f"compacted the memory of {agent}")
            return CompactionReport(before, after, moved, marks - len(moved), deleted)
        with agent_lock(folder):
            before = self._checkpoint(folder, f"before compacting the memory of {agent}")
            logs = self._logs(agent)
            marked = {path: self._marked(path, day) for path, day in logs.items()}
            moved = _to_move(marked.values(), self.load_context(agent))
            [error] = self._write_memory(agent, [({}, _keyed(moved))])[1]
            if error is not None:
                raise error
            for path, day in logs.items():
                if marked[path]:
                    replace_file(self.root, path, lambda old, p=path, d=day: self._marked_text(p, d, old, now))
            deleted = [path for path, day in logs.items() if policy.expired(day, now.date())]
            for path in deleted:
                (self.root / path).unlink(missing_ok=True)
            self._sync(folder)
            after = self.cortex.snapshot(f"compacted the memory of {agent}")
        return CompactionReport(before, after, moved, sum(map(len, marked.values())) - len(moved), deleted)

    def _compact_in_store(self, agent: str, policy: RetentionPolicy, now: datetime,
                          ) -> tuple[list[Typed], int, list[str]]:
        """Compact in one commit to the working state: the items moved, how many marks were read, the logs deleted."""
        store, path = self.cortex.store, memory_path(agent)
        done: dict[str, object] = {}

        def change(tree: Tree) -> dict[str, bytes | None]:
            logs = _logs_in(tree, agent)
            marked = {log: marked_items(store, log, store.objects[tree.entries[log]], day) for log, day in logs.items()}
            model = self._tree_model(tree, path)
            moved = _to_move(marked.values(), _context(agent, model))
            errors: list[UserError | None] = [None]
            data, _ = self._merged(agent, path, [({}, _keyed(moved))], model or MemoryFile(path), errors)
            if errors[0] is not None:
                raise errors[0]
            files: dict[str, bytes | None] = {} if data is None else {path: data}
            for log, found in marked.items():
                if found:
                    text = render_file(store, tree, log)
                    files[log] = mark_compacted(text, [m.line for m in found], now).encode("utf-8")
            deleted = [log for log, day in logs.items() if policy.expired(day, now.date())]
            files.update(dict.fromkeys(deleted))
            done.update(moved=moved, marks=sum(map(len, marked.values())), deleted=deleted)
            return files

        commit_files(store, change, f"compacted the memory of {agent}")
        self._known.pop(path, None)
        return done["moved"], done["marks"], done["deleted"]

    def purge(self, agent: str, hard: bool = False) -> PurgeReport:
        """Remove the agent's files and its items from the working state; `hard` also from every snapshot.

        A soft purge snapshots first (rollback brings the agent back). A hard purge holds the
        store alone from start to end (refused while another process has it open), rewrites
        every kept snapshot without the agent's files, collects their objects and their cached
        embeddings, drops the saved search indexes and compacts the file, so the text is gone
        from the store; a tombstone records the purge.
        """
        folder = self._folder(agent)
        prefix = f"{AGENTS}/{agent}/"
        with self.cortex.store.engine.exclusively() if hard else nullcontext():
            tracked = [p for p in self.cortex.working().entries if p.startswith(prefix)]
            if (folder is None or not folder.exists()) and not tracked and not hard:
                raise NotFound(f"agent {agent!r} has no memory {self._where()}")
            files: list[str] = []
            if folder is None:
                if tracked and not hard:
                    self._checkpoint(folder, f"before purging the memory of {agent}")
                if tracked:
                    commit_files(self.cortex.store, lambda tree: dict.fromkeys(p for p in tree.entries
                                                                           if p.startswith(prefix)),
                                 f"purged the memory of {agent}")
                    self._known.pop(memory_path(agent), None)
            elif folder.exists():
                with agent_lock(folder):
                    if not hard:
                        self._checkpoint(folder, f"before purging the memory of {agent}")
                    files = sorted(p.relative_to(self.root).as_posix() for p in _org_files(folder))
                    remove_tree(folder)
            self._sync(folder)
            forgotten = self.cortex.erase(_without_files(prefix), f"agent {agent}") if hard else None
        if not files and not tracked and forgotten is None:
            raise NotFound(f"agent {agent!r} has no memory here or in any kept snapshot")
        return PurgeReport(sorted(set(files) | set(tracked)), forgotten)

    def forget(self, agent: str, item: str, hard: bool = False) -> ForgetReport:
        """Remove one item, named by its :ID:, key or text, from memory.org and from the daily logs (a headline
        marked with its text); `hard` also from every snapshot.

        A soft forget snapshots first (rollback brings the item back). A hard forget rewrites every
        kept snapshot's version of the agent's files without the item and leaves no trace of it in
        the store, as a hard purge does.
        """
        folder = self._folder(agent)
        with self.cortex.store.engine.exclusively() if hard else nullcontext():
            with agent_lock(folder) if folder is not None and folder.is_dir() else nullcontext():
                self._sync(folder)
                named = self._named(agent, item)
                if not named.found and not hard:
                    raise NotFound(f"agent {agent!r} has no memory item {quoted(item)}")
                before = None if hard else self._checkpoint(folder, f"before forgetting an item of {agent}")
                files = self._forget_in_files(agent, named)
                if files and not hard:  # so that a rollback to `before` finds no unsnapshotted edit
                    self.cortex.snapshot(f"forgot an item of {agent}")
            forgotten = self.cortex.erase(rewrite_documents(self._forget_in_document(agent, named)),
                                          f"{named.label} of agent {agent}") if hard else None
        if not files and forgotten is None:
            raise NotFound(f"agent {agent!r} has no memory item {quoted(item)} here or in any kept snapshot")
        return ForgetReport(list(named.ids), files, before, forgotten)

    def _named(self, agent: str, name: str) -> _Named:
        """What `name` stands for, with the keys, :ID:s and texts of the items it names in memory.org now."""
        text = normalise(name)
        found = [(item.key(kind), item) for kind, item in self.load_context(agent).items()
                 if name in (item.key(kind), item.id) or item.normalised == text]
        return _Named(names=frozenset({name, *(key for key, _ in found)}),
                      texts=frozenset({text, *(item.normalised for _, item in found)}),
                      ids=tuple(item.id for _, item in found if item.id), found=len(found))

    def _forget_in_files(self, agent: str, named: _Named) -> list[str]:
        """Rewrite the agent's files on disk without the named items and ingest them (with no Org folder, commit
        them to the working state); return the paths changed."""
        if self.store_side:
            store, changed = self.cortex.store, []

            def change(tree: Tree) -> dict[str, bytes | None]:
                files = {}
                for path in sorted(tree.entries):
                    if _holds_items(agent, path):
                        text = _text_without(path, store.objects[tree.entries[path]], store.objects.__getitem__, named)
                        if text is not None:
                            files[path] = text.encode("utf-8")
                changed[:] = files
                return files

            commit_files(store, change, f"forgot {named.label} of agent {agent}")
            for path in changed:
                self._known.pop(path, None)
            return changed
        changed = []
        for path in sorted(self.cortex.working().entries):
            if _holds_items(agent, path) and replace_file(self.root, path,
                                                          lambda old, p=path: _bytes_without(p, old, named)):
                self._known.pop(path, None)
                changed.append(path)
        if changed:
            self._sync(self._folder(agent))
        return changed

    def _forget_in_document(self, agent: str, named: _Named) -> Callable[[str, Oid], Oid]:
        """A document rewrite for history: the agent's files without the named items, stored."""
        store = self.cortex.store

        def rewrite(path: str, oid: Oid) -> Oid:
            text = _text_without(path, store.objects[oid], store.objects.__getitem__, named) \
                if _holds_items(agent, path) else None
            if text is None:
                return oid
            parsed = parse(text)
            store.objects.add_many(parsed.objects)
            return parsed.document.oid

        return rewrite

    # --- steps ----------------------------------------------------------------------------

    def _group(self, agent: str, folder: Path) -> GroupCommit:
        """The group commit of the agent's saves (made when none is in use)."""
        with self._groups_lock:
            key = agent if folder is None else folder
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = GroupCommit(partial(self._commit, agent, folder))
            return group

    def _commit(self, agent: str, folder: Path, members: list[Member]) -> None:
        """Write a group of saves to one agent (each member's function gives its `_Save`); answer each member."""
        model, errors = self._write_saves(agent, folder, [member.fn() for member in members])
        for member, error in zip(members, errors):
            member.succeed(model) if error is None else member.fail(error)

    def _write_saves(self, agent: str, folder: Path, saves: list[_Save | UserError],
                     then: Callable[[list[UserError | None]], None] | None = None,
                     ) -> tuple[MemoryFile | None, list[UserError | None]]:
        """Write saves to one agent in order, memory.org and each day's log once, then ingest the folder once;
        return the memory.org as saved and, for each save, the error that kept it out (a save may be given as
        its error). A save that conflicts with memory.org fails alone; the others are written."""
        ready = [save for save in saves if isinstance(save, _Save)]
        if not ready:
            return None, list(saves)
        if folder is None:
            def record(errors: list[UserError | None]) -> None:  # in the commit's transaction
                if then is not None:
                    then(_outcome(saves, errors))

            model, merged = self._commit_saves(agent, ready, record)
            return model, _outcome(saves, merged)
        with agent_lock(folder):
            written, merged = self._write_memory(agent, [(save.base, save.ours) for save in ready])
            for day, edits in _log_edits_by_day(ready, merged).items():
                written.update(self._edit_log(agent, edits, day))
            outcome = _outcome(saves, merged)
            model = self._synced(agent, folder, written, then and partial(then, outcome))
        return model, outcome

    def _commit_saves(self, agent: str, ready: list[_Save], then: Callable[[list[UserError | None]], None],
                      ) -> tuple[MemoryFile | None, list[UserError | None]]:
        """Commit saves to one agent's memory.org and daily logs in the working state, as one commit (applied
        again to the newer state when another writer won), `then(errors)` in its transaction; return
        memory.org as saved and each save's error."""
        store, path = self.cortex.store, memory_path(agent)
        changes = [(save.base, save.ours) for save in ready]
        done: dict[str, object] = {}

        def change(tree: Tree) -> dict[str, bytes | None]:
            errors: list[UserError | None] = [None] * len(changes)
            model = self._tree_model(tree, path)
            data, merged = self._merged(agent, path, changes, model or MemoryFile(path), errors)
            files: dict[str, bytes | None] = {} if data is None else {path: data}
            for day, edits in _log_edits_by_day(ready, errors).items():
                log = log_path(agent, day)
                old = render_file(store, tree, log).encode("utf-8") if log in tree.entries else None
                files[log] = _log_edited(log, old, edits, _log_title(agent, day), True)
            done.update(errors=errors, data=data, model=merged if data is not None else model)
            return files

        report = commit_files(store, change, f"saved the memory of {agent}", lambda _: then(done["errors"]))
        if done["data"] is not None:
            oid = store.objects[report.root].entries.get(path)
            self._remember(path, done["data"], done["model"], oid)
        return done["model"], done["errors"]

    def _tree_model(self, tree: Tree, path: str) -> MemoryFile | None:
        """The model of the memory.org at `path` in `tree` (None: there is none), known when it was last here."""
        oid = tree.entries.get(path)
        if oid is None:
            return None
        known = self._known.get(path)
        if known is not None and known.document == oid:
            return known.model
        return self._model(path, self.cortex.store.objects[oid])

    def _write_memory(self, agent: str, changes: list[tuple[Mapping[str, Typed], dict[str, Typed | None]]],
                      ) -> tuple[dict[str, bytes], list[UserError | None]]:
        """Merge each (base, ours) in turn (what changed since base) into memory.org on disk, under the agent's
        lock; return {path: the bytes written} (empty when nothing changed) and, for each, the error that
        kept it out (None: merged)."""
        path = memory_path(agent)
        errors: list[UserError | None] = [None] * len(changes)
        written: list[tuple[bytes, MemoryFile]] = []

        def merged(old: bytes | None) -> bytes | None:
            data, model = self._merged(agent, path, changes, self._memory_file(path, old), errors)
            if data is not None:
                written.append((data, model))
            return data

        known = self._known.get(path)
        if not any(ours for _, ours in changes) or not replace_file(self.root, path, merged, known and known.data):
            return {}, errors
        data, model = written[-1]
        self._remember(path, data, model)
        return {path: data}, errors

    @staticmethod
    def _merged(agent: str, path: str, changes: list[tuple[Mapping[str, Typed], dict[str, Typed | None]]],
                model: MemoryFile, errors: list[UserError | None]) -> tuple[bytes | None, MemoryFile]:
        """Merge each (base, ours) in turn into the memory.org `model`: its new bytes (None: unchanged) and model;
        `errors[n]` is set to what kept change n out (None: merged)."""
        data = None
        for n, (base, ours) in enumerate(changes):
            try:
                changed, added = merge(path, base, ours, model, agent)
                errors[n] = None
            except UserError as error:  # a conflict with the file: this save only is refused
                errors[n] = error
                continue
            if changed or added:
                data, derived = model.rewrite(changed, added, f"Memory of {agent}")
                model = derived or MemoryFile.read(path, *_parsed(data.decode("utf-8")))
        return data, model

    def _memory_file(self, path: str, data: bytes | None) -> MemoryFile:
        """What memory.org's bytes read as: known if they are the bytes last read or written here."""
        if data is None:
            return MemoryFile(path)
        known = self._known.get(path)
        if known is not None and known.data == data:
            return known.model
        document = self._document(path, data)
        model = self._model(path, document)
        self._remember(path, data, model, document.oid)
        return model

    def _remember(self, path: str, data: bytes, model: MemoryFile, document: Oid | None = None) -> None:
        self._known.pop(path, None)  # set again, so it is the newest
        self._known[path] = _Known(data, model, document)

    def record_session(self, agent: str, turns, title: str | None = None, *, session: str = "",
                       user: str = "User", assistant: str | None = None, summary: str | None = None,
                       summarizer=None, now: datetime | None = None) -> str:
        """Log a conversation into the agent's daily logs in the conversation layout (`conversation.orglog`), ingested
        at once; return the path of the log its first turn went to.

        `turns` are exchanges (`Turn`), whose two sides `user` and `assistant` name (the agent's id by default),
        and turns of any speaker (`Utterance`); a turn with no time is taken at `now`. Turns of a `session` that
        already has an entry in their day's log go to the end of that entry; otherwise a new entry starts with
        `title` and the summary (`summary`, else `summarizer`'s over the exchanges, else none). Without
        `session`, the call is a session of its own.
        """
        from .conversation.orglog import session_turns

        days = session_turns(turns, session=session, title=title, summary=summary, summarizer=summarizer,
                             user=user, assistant=assistant or agent, now=now)
        save = _Save({}, {}, tuple((day.day, day) for day in days))
        self._group(agent, self._folder(agent)).run(lambda: save)
        return log_path(agent, days[0].day)

    def _edit_log(self, agent: str, edits: list[LogEdit], day: date) -> dict[str, bytes]:
        """Apply edits to the agent's log of `day`, replacing the file atomically; return {path: its bytes now}.
        A log that is not text is refused.

        The log's bytes as last written here are kept with the state of their hash: while nobody else
        touches the file, it is not read or decoded again before an edit (the bytes are still compared
        with the file right before the replace), and the new hash of a log the edits append to costs what
        they add."""
        path = log_path(agent, day)
        title = _log_title(agent, day)
        known: _KnownLog | None = self._known_logs.get(path)
        written, bases = {}, []

        def edited(old: bytes | None) -> bytes:
            written[path] = _log_edited(path, old, edits, title, known is not None and old is known.data)
            bases.append(old)
            return written[path]

        self._known_logs.pop(path, None)  # until the file holds what we write
        replace_file(self.root, path, edited, known and known.data)
        old, data = bases[-1], written[path]
        appended = old is not None and data.startswith(old)
        addition = data[len(old):] if appended else data
        if known is not None and old is known.data and appended:
            hasher = known.hasher.copy()
            hasher.update(addition)
        else:
            hasher = blake3.blake3(data, max_threads=blake3.blake3.AUTO if len(data) >= THREADED_BYTES else 1)
        if b"\0" not in addition:  # text, as the bytes it extends were: the next append need not decode them
            self._known_logs[path] = _KnownLog(data, hasher)
        return written

    def _document(self, path: str, data: bytes) -> Document:
        """The document parsed from a file's bytes, ingesting the file when the store has not seen them."""
        docs = self.cortex.store.table(DOCS_BY_BYTES)
        digest = hash_bytes(data)
        if docs.get(digest) is None or docs[digest] not in self.cortex.store.objects:
            text = _decoded(path, data)
            self.cortex.ingest(self.root / path)
            if docs.get(digest) is None:  # the file changed between our read and the ingest
                return parse(text).document
        return self.cortex.store.objects[docs[digest]]

    def _model(self, path: str, doc: Document) -> MemoryFile:
        return MemoryFile.read(path, doc, self.cortex.store.objects.__getitem__)

    def _marked(self, path: str, day: date) -> list[Marked]:
        doc = self.cortex.store.objects[self.cortex.working().entries[path]]
        return marked_items(self.cortex.store, path, doc, day)

    def _marked_text(self, path: str, day: date, old: bytes | None, now: datetime) -> bytes | None:
        """A log's bytes with its marked items recorded as compacted."""
        if old is None:
            return None
        found = marked_items(self.cortex.store, path, self._document(path, old), day)
        return mark_compacted(old.decode("utf-8"), [m.line for m in found], now).encode("utf-8")

    def _logs(self, agent: str) -> dict[str, date]:
        """The agent's daily logs in the working state: path -> day."""
        return _logs_in(self.cortex.working(), agent)

    def _existing(self, agent: str) -> Path | None:
        folder = self._folder(agent)
        if folder is None:
            if not any(p.startswith(f"{AGENTS}/{agent}/") for p in self.cortex.working().entries):
                raise NotFound(f"agent {agent!r} has no memory {self._where()}")
        elif not _org_files(folder):
            raise NotFound(f"agent {agent!r} has no memory {self._where()}")
        return folder

    def _sync(self, folder: Path, written: dict[str, bytes] | None = None,
              also: Callable[[], None] | None = None) -> None:
        """Bring the working state in line with the files in an agent's `folder` (`written`: bytes just
        written there, by path); refuse a memory.org that cannot be read. `also` runs in the ingest's
        transaction, unless memory.org is refused. With no Org folder (None), or a store open read-only, nothing
        is brought in: the working state is what is read."""
        if folder is None or self.cortex.store.read_only:
            return
        agent = folder.name
        tracked = any(p.startswith(f"{AGENTS}/{agent}/") for p in self.cortex.working().entries)
        if not folder.is_dir() and not tracked:
            return
        target = folder if folder.is_dir() else folder.parent
        if self.cortex.store.refs.get(WORKING) is None or not target.is_dir():
            target = None  # the whole Org root: a first ingest of a subfolder would make it the root
        report = self._ingest(target, written, also, memory_path(agent))
        refused = [str(problem) for problem in report.problems if problem.path == memory_path(agent)]
        if refused:
            raise UserError(refused[0])

    def _ingest(self, target: Path | None, written: dict[str, bytes] | None, also: Callable[[], None] | None,
                memory: str):
        """Ingest `target` (None: the whole root); then `also`, in the same store transaction, unless the
        memory.org at `memory` is refused."""
        # A log this process appended to has its hash kept: the ingest need not hash the whole log again.
        digests = {path: Oid(known.hasher.digest()) for path, data in (written or {}).items()
                   if (known := self._known_logs.get(path)) is not None and known.data is data}

        def then(report: IngestReport) -> None:
            if not any(problem.path == memory for problem in report.problems):
                also()

        return self.cortex.ingest(target, written=written, digests=digests, then=then if also else None)

    def _checkpoint(self, folder: Path, message: str) -> Snapshot:
        """A snapshot holding the files in an agent's `folder` as they are: HEAD if it already does, else a new one."""
        self._sync(folder)
        current = head(self.cortex.store)
        if current is not None and current.root == self.cortex.store.refs.get(WORKING):
            return current
        return self.cortex.snapshot(message)


def _prepared_save(agent: str, context: MemoryContext, now: datetime | None) -> _Save:
    """What saving `context` at `now` changes in the agent's memory.org, and its log entry (checked)."""
    now = _minute(now)
    source = f"session {context.session}" if context.session else f"session {now:%Y-%m-%d %H:%M}"
    loaded = context.loaded if context.agent == agent else None
    logs: tuple[tuple[date, LogEdit], ...] = ()
    if context.summary is not None or context.title is not None:
        logs = ((now.date(), render_entry(now, context.title or "Session", context.summary or "",
                                          context.session or f"s-{now:%Y-%m-%d-%H%M}")),)
    return _Save(loaded.entries if loaded is not None else {}, _changes(context, loaded, now, source), logs)


def _outcome(saves: list[_Save | UserError], merged: list[UserError | None]) -> list[UserError | None]:
    """For each save (or the error that kept it from being prepared), its error: merged ones in order."""
    errors = iter(merged)
    return [save if isinstance(save, UserError) else next(errors) for save in saves]


def _log_edits_by_day(ready: list[_Save], errors: list[UserError | None]) -> dict[date, list[LogEdit]]:
    """The log edits of the saves merged (error None), by day, in order."""
    days: dict[date, list[LogEdit]] = {}
    for save, error in zip(ready, errors):
        if error is None:
            for day, edit in save.logs:
                days.setdefault(day, []).append(edit)
    return days


def _log_edited(path: str, old: bytes | None, edits: list[LogEdit], title: str, trusted: bool) -> bytes:
    """The bytes of the log `old` (None: a new log, titled `title`) with `edits` made in order: entries appended
    (those in a row at once), conversations' turns put in their sessions' entries. Bytes not `trusted` to be text
    are refused first, saying where."""
    if old is not None and not trusted:
        _decoded(path, old)
    data = old
    for appends, run in groupby(edits, lambda edit: isinstance(edit, str)):
        if appends:
            data = (data or b"") + log_addition(data, list(run), title)
        else:
            for turns in run:
                data = turns.applied(data, title)
    return data


def _log_title(agent: str, day: date) -> str:
    return f"{agent} — {day.isoformat()}"


def _logs_in(tree: Tree, agent: str) -> dict[str, date]:
    """The agent's daily logs in `tree`: path -> day."""
    prefix = f"{AGENTS}/{agent}/{LOGS}/"
    logs = {}
    for path in tree.entries:
        name = path[len(prefix):]
        if path.startswith(prefix) and "/" not in name and (day := log_date(name)) is not None:
            logs[path] = day
    return logs


def _to_move(marked: Iterable[list[Marked]], memory: MemoryContext) -> list[Typed]:
    """The items marked in logs that memory does not hold yet (each once), to move into memory.org."""
    known = {item.normalised for _, item in memory.items()}
    moved: list[Typed] = []
    for found in marked:
        for mark in found:
            if mark.item.normalised not in known:
                known.add(mark.item.normalised)
                moved.append((mark.type, mark.item))
    return moved


def _context(agent: str, memory: MemoryFile | None) -> MemoryContext:
    if memory is None:
        return MemoryContext(agent=agent)
    context = MemoryContext(warnings=list(memory.warnings), agent=agent, loaded=memory)
    for kind in ITEM_TYPES:
        setattr(context, FIELDS[kind], list(memory.kinds[kind]))
    return context


def _changes(context: MemoryContext, loaded: MemoryFile | None, now: datetime, source: str) -> dict[str, Typed | None]:
    """What a save changes in the memory it was loaded from: key -> new (type, item), None when removed.

    New and changed items are checked and, when new, dated and sourced. Items still the very
    objects loaded are not looked at one by one: a save of one item costs one item.
    """
    base = loaded.entries if loaded is not None else {}
    diff = _diff(context, loaded)
    if diff is not None:
        new, gone = diff
        mine = _keyed(_prepared(kind, item, base, now, source) for kind, item in new)
        removed = {item.key(kind) for kind, item in gone}
        if not any(key in base and key not in removed for key in mine):
            changes = {key: typed for key, typed in mine.items() if base.get(key) != typed}
            changes.update((key, None) for key in removed if key not in mine)
            return changes
    # an item that takes the key of one kept (or a context not loaded from this memory): compare them all
    mine = _keyed(_prepared(kind, item, base, now, source) for kind, item in context.items())
    changes = {key: typed for key, typed in mine.items() if base.get(key) != typed}
    changes.update((key, None) for key in base if key not in mine)
    return changes


def _diff(context: MemoryContext, loaded: MemoryFile | None) -> tuple[list[Typed], list[Typed]] | None:
    """The items in each list that are not objects loaded into it, and the objects loaded that left it."""
    if loaded is None:
        return None
    new, gone = [], []
    for kind in ITEM_TYPES:
        items, before = getattr(context, FIELDS[kind]), loaded.kinds[kind]
        if tuple(items[:len(before)]) == before:  # an agent that only adds items: compare none of them
            items, before = items[len(before):], ()
        now_ids, before_ids = set(map(id, items)), set(map(id, before))
        came, left = (now_ids - before_ids).__contains__, (before_ids - now_ids).__contains__
        new += [(kind, _as_item(kind, item)) for item in compress(items, map(came, map(id, items)))]
        gone += [(kind, item) for item in compress(before, map(left, map(id, before)))]
    return new, gone


def _prepared(kind: str, item: MemoryItem, base: Mapping[str, Typed], now: datetime, source: str) -> Typed:
    """An item checked and, when new, dated and sourced; an item as loaded passes untouched."""
    key = item.key(kind)
    if base.get(key) != (kind, item):
        item = replace(item, text=check_text(item.text, kind))
        if key not in base and not item.plain:
            item = replace(item, added=item.added or now, source=item.source or source)
    return kind, item


def _keyed(items: Iterable[Typed]) -> dict[str, Typed]:
    """Items by key; of items with the same key, the first."""
    mine: dict[str, Typed] = {}
    for kind, item in items:
        mine.setdefault(item.key(kind), (kind, item))
    return mine


def _decoded(path: str, data: bytes) -> str:
    """A file's text, or a UserError naming the file and line of the bytes that are not UTF-8 text."""
    try:
        return decode_org(data)
    except NotOrgText as exc:
        raise UserError(located(path, exc.line, exc.reason)) from None


def _as_item(kind: str, item) -> MemoryItem:
    if isinstance(item, str):
        return MemoryItem(item)
    if not isinstance(item, MemoryItem) or not isinstance(item.text, str):
        raise BadItemText(f"{SECTION_TITLES[kind]}: an item is a MemoryItem or a string, not {item!r}")
    return item


def _minute(now: datetime | None) -> datetime:
    return (now or datetime.now()).replace(second=0, microsecond=0)


def _valid(agent: str) -> bool:
    try:
        check_agent_id(agent)
        return True
    except UserError:
        return False


def _org_files(folder: Path) -> list[Path]:
    return org_files(folder) if folder.is_dir() else []


def _without_files(prefix: str) -> Callable[[Tree], Tree]:
    """A tree rewrite that drops every file under `prefix`."""
    return lambda tree: Tree({path: oid for path, oid in tree.entries.items() if not path.startswith(prefix)})


def _holds_items(agent: str, path: str) -> bool:
    """Whether `path` is the agent's memory.org or one of its daily logs."""
    logs = f"{AGENTS}/{agent}/{LOGS}/"
    return path == memory_path(agent) or (path.startswith(logs) and log_date(path[len(logs):]) is not None)


def _bytes_without(path: str, data: bytes | None, named: _Named) -> bytes | None:
    """A file's bytes without the named items; None when it holds none."""
    if data is None:
        return None
    text = _text_without(path, *_parsed(_decoded(path, data)), named)
    return None if text is None else text.encode("utf-8")


def _text_without(path: str, doc: Document, get: Getter, named: _Named) -> str | None:
    """The text of memory.org without the named items, or of a daily log without the headlines marked with
    them; None when it holds none."""
    if not path.endswith("/" + MEMORY_FILE):
        return _log_without(doc, get, named)
    text = None
    while True:  # a repeat of an item is read (and removed) once the first is gone: read it again
        model = MemoryFile.read(path, doc, get)
        keys = [key for key, (_, item) in model.entries.items() if named(key, item)]
        if not keys:
            return text
        text = model.rewrite(dict.fromkeys(keys), [], "")[0].decode("utf-8")
        doc, get = _parsed(text)


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


def _parsed(text: str) -> tuple[Document, Getter]:
    """A text's document and a getter of the objects parsed from it."""
    parsed = parse(text)
    objects = {obj.oid: obj for obj in parsed.objects}
    return parsed.document, objects.__getitem__
