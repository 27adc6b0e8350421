"""Agent memory in Org files: save, load, list and delete an agent's context, and log its conversations.

    agents/<agent-id>/memory.org            * Facts / * Procedures / * Learned Patterns
    agents/<agent-id>/logs/YYYY-MM-DD.org   * HH:MM — title   (one entry per session)

Every write is a merge, through the workspace's one write path (`Workspace.change_files`): memory.org is
read, the saved context is merged into it item by item (a person's edits since the context was loaded
are kept, or the save is refused when both changed the same item), and written in one step, with or
without an Org folder on this machine. Saves to one agent that a process makes concurrently are grouped
(group commit): one merges them all, each file is written once and committed once, and every caller is
answered after that. What a save changes is `changes`; forgetting and purging are `forgetting`;
compaction is `compaction`.

The model of the memory.org last read or written is kept with its bytes (and its document), and a daily
log's last bytes with the state of their hash: while nobody else touches a file, it is neither read,
merged whole nor hashed whole again.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from typing import NamedTuple

import blake3

from ..backends.group import GroupCommit, Member
from ..bounded import BoundedDict
from ..errors import NotFound, UserError
from ..files import as_appended, whole
from ..hashing import THREADED_BYTES, Oid
from ..history import head
from ..objects import Snapshot, Tree
from ..paths import agent_folder_of
from ..words import quoted
from ..workspace import UNCHANGED, Appended, Current, Workspace, paths_under
from . import compaction, consolidation, forgetting
from .changes import (FIELDS, MemoryContext, Save, context_of, log_edited, log_edits_by_day, log_title, merged_into,
                      minute, outcome, prepared_save)
from .items import MemoryItem, check_text, make_id, normalise
from .layout import AGENTS, ITEM_TYPES, LOGS, check_agent_id, log_path, logs_in, memory_path
from .compaction import CompactionReport
from .consolidation import Consolidation
from .forgetting import ForgetReport, PurgeReport
from .memoryfile import MemoryFile, Typed, with_unique_id
from .retention import RetentionPolicy
from .similar import Embed, similar_to
from .validity import VALID_FROM, moment, moment_of, org_timestamp, parse_timestamp, shown
from .views import MemoryView, no_memory

__all__ = ["AgentMemory", "AgentStats", "CompactionReport", "Consolidation", "ForgetReport", "MemoryContext",
           "MemoryView", "PurgeReport"]

_KNOWN_LIMIT = 16  # memory files whose last texts and models are kept
_VERSIONS_KNOWN = 2  # versions of each of them
_KNOWN_LOGS = 4  # daily logs whose last bytes are kept


@dataclass(frozen=True)
class AgentStats:
    """What one agent's memory occupies."""

    files: int
    bytes: int
    items: int
    logs: int


class _Known(NamedTuple):
    """A memory.org's bytes as last read or written, what they read as, and their document once known."""

    data: bytes | None
    model: MemoryFile
    document: Oid | None = None


class _KnownLog(NamedTuple):
    """A daily log's bytes as last written here (known to be text; as `Appended` while appends add to them), and
    the state of their hash."""

    data: bytes | Appended
    hasher: blake3.blake3


class AgentMemory:
    """The memory of every agent in one workspace (`search`: the session's search, for `search`; `embed`: the
    session's embedder, `texts -> unit rows`, for `similar`, `consolidate` and compaction)."""

    def __init__(self, workspace: Workspace, search: Callable | None = None, embed: Embed | None = None):
        self.workspace = workspace
        self._search = search
        self.embed = embed
        self._known: BoundedDict = BoundedDict(_KNOWN_LIMIT)  # path -> the memory.org versions last read or written
        self._known_logs: BoundedDict = BoundedDict(_KNOWN_LOGS)  # path -> the daily log last written
        # agent -> the group commit of its saves, while a save is queued or being written
        self._groups: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._groups_lock = threading.Lock()

    # --- the context contract ---------------------------------------------------------

    def load_context(self, agent: str, *, every: bool = False) -> MemoryContext:
        """The agent's memory.org as a context (empty when there is none): the items that hold now, or `every`
        item (those superseded or retired too); hand edits are brought in first. A save removes only an item
        loaded into the lists and gone from them."""
        self.refresh(agent)
        return context_of(agent, self.model(agent, self.workspace.working()), every)

    def save_context(self, agent: str, context: MemoryContext, *, now: datetime | None = None,
                     operation: str = "save") -> MemoryContext:
        """Merge the context into memory.org and append its summary to today's log, in one commit; return the
        memory as saved (`operation`: what the save does, for a review of it)."""
        save = prepared_save(check_agent_id(agent), context, now, operation)
        return context_of(agent, self._group(agent).run(lambda: save))

    def save_contexts(self, agent: str, contexts: list[tuple[MemoryContext, datetime | None]], *,
                      then: Callable[[list[UserError | None]], None] | None = None, operation: str = "save",
                      ingest: bool = True) -> list[MemoryContext | UserError]:
        """Save (context, now) pairs of one agent in order as one write of each file and one commit; for each,
        the memory as saved or the error that kept it out (a conflict with memory.org, a summary Org would
        misread). What fails them all is raised.

        `then(errors)`, given each context's error (None: saved), runs in the store transaction that
        commits the saves, so that what the caller records of them lands with them; it does not run when
        the saves fail (nothing written, or the commit refused). `ingest=False` (no `then`; contexts that
        only add to daily logs): in an Org folder, the logs are written and synced to disk, and the next
        write or sync of the agent's folder ingests them."""
        check_agent_id(agent)
        saves: list[Save | UserError] = []
        for context, now in contexts:
            try:
                saves.append(prepared_save(agent, context, now, operation))
            except UserError as error:
                saves.append(error)
        model, errors = self._write_saves(agent, saves, then, ingest)
        return [context_of(agent, model) if error is None else error for error in errors]

    def delete_context(self, agent: str) -> bool:
        """Remove the agent's memory.org (its logs stay); snapshot first if it holds unsnapshotted edits."""
        path = memory_path(check_agent_id(agent))
        with self.workspace.held(self.folder(agent)):
            self.refresh(agent)
            if path not in self.workspace.working().entries:
                return False
            self.checkpoint(agent, f"before deleting the memory of {agent}")
            self.workspace.change_files(f"deleted the memory of {agent}", {path: lambda current: None},
                                        operation="delete")
            self._known.pop(path, None)
        return True

    def list_agent_contexts(self) -> list[str]:
        """Agents that have a memory.org or logs, sorted."""
        self.workspace.refresh(AGENTS)
        return sorted({agent for path in self.workspace.working().entries
                       if (folder := agent_folder_of(path)) is not None and _valid(agent := folder.split("/")[1])})

    def get_storage_stats(self) -> dict[str, AgentStats]:
        """Files, bytes, items and logs per agent."""
        stats = {}
        for agent in self.list_agent_contexts():
            tree = self.workspace.working()
            paths = list(paths_under(tree, self.folder(agent) + "/"))
            stats[agent] = AgentStats(files=len(paths), logs=len(logs_in(tree, agent)),
                                      items=len(context_of(agent, self.model(agent, tree), every=True)),
                                      bytes=sum(self.workspace.size(path, tree) for path in paths))
        return stats

    def add_item(self, agent: str, type: str, text: str, source: str = "api", id: str | None = None,
                 *, supersedes: str | None = None, valid_from: datetime | date | str | None = None,
                 now: datetime | None = None) -> MemoryItem:
        """Add one item (a fact, procedure or pattern) to memory.org; an item with the same text is not repeated.

        `supersedes` names the item it replaces (by :ID:, key or text, as `forget` takes it), which then stops
        holding when this one starts: at `valid_from`, else now (`validity`); both change in one commit."""
        if type not in FIELDS:
            raise UserError(f"memory type {type!r}: use one of {', '.join(ITEM_TYPES)}")
        item = MemoryItem(check_text(text, type), id=id, added=minute(now), source=source)
        start = None if valid_from is None else moment_of(valid_from, "valid from")
        if supersedes is not None:
            return self._supersede(agent, type, item, supersedes, start)
        if start is not None:
            item = item.with_properties(**{VALID_FROM: org_timestamp(start)})
        saved = self.save_context(agent, MemoryContext(**{FIELDS[type]: [item]}), now=now, operation="add")
        items = getattr(saved, FIELDS[type])
        same = [i for i in items if id is not None and i.id == id]
        # not found only when a save grouped after this one removed it
        return next(iter(same or [i for i in items if i.normalised == item.normalised and i.current]), item)

    def similar(self, agent: str, type: str, text: str, limit: int = 3) -> list[tuple[MemoryItem, float]]:
        """The agent's current items of that type closest in meaning to `text`, closest first, with the cosine of
        their embeddings (`similar`: at least `SIMILAR`), at most `limit`; an item with the same text is not
        among them (it is the same item: `known_item`). None are found without an embedder."""
        if type not in FIELDS:
            raise UserError(f"memory type {type!r}: use one of {', '.join(ITEM_TYPES)}")
        text = check_text(text, type)
        if self.embed is None:
            return []
        wanted = normalise(text)
        items = [item for item in getattr(self.load_context(agent), FIELDS[type]) if item.normalised != wanted]
        return [(items[n], score) for n, score in similar_to(self.embed, text, [item.text for item in items], limit)]

    def retire(self, agent: str, item: str, *, at: datetime | date | str | None = None,
               now: datetime | None = None) -> MemoryItem:
        """Say that an item (named as `forget` takes it) stopped holding at `at` (default: now), with no successor:
        it keeps its text and place, with `:INVALID_AT:` and the ARCHIVE tag. Returns it as saved."""
        end = minute(now) if at is None else moment_of(at, "retired at")
        retired = {}

        def edit(model: MemoryFile) -> dict:
            if (done := _done_already(model, item, lambda old: old.validity.end == end
                                      and not old.validity.replaced_by)) is not None:
                retired[done[0]] = done[1]  # retired so already (said twice): nothing to write
                return {}
            key, kind, old = _current_item(agent, model, item, "retire")
            _check_end(old, end, "its end")
            retired[kind] = self._with_id(agent, kind, old, model).retired(end, minute(now))
            return {key: (kind, retired[kind])}

        saved = self._group(check_agent_id(agent)).run(lambda: Save({}, edit, operation="retire"))
        (kind, new), = retired.items()
        return saved.entries.get(new.key(kind), (kind, new))[1]

    def _supersede(self, agent: str, kind: str, item: MemoryItem, name: str,
                   start: datetime | date | None) -> MemoryItem:
        """Add `item` in place of the current item `name` names, in one save, on memory.org as it is then."""
        end = start if start is not None else item.added
        added = []

        def edit(model: MemoryFile) -> dict:
            def successor(old: MemoryItem) -> MemoryItem | None:  # the current item of this text that replaced it
                return next((entry[1] for i in old.validity.replaced_by if (entry := model.entries.get(i))
                             and entry[0] == kind and entry[1].current and entry[1].normalised == item.normalised), None)

            if (done := _done_already(model, name, successor)) is not None:
                added.append(successor(done[1]))  # replaced so already (said twice): nothing to write
                return {}
            key, old_kind, old = _current_item(agent, model, name, "supersede")
            same = model.current_with_text(kind, item.normalised)
            if same is not None and same.key(kind) == key:
                raise UserError(f"{_named(item)} cannot replace itself: a successor says something new")
            _check_end(old, end, "its successor's start")
            old = self._with_id(agent, old_kind, old, model)
            successor = item if same is None else same  # already there: it replaces `old` as it stands
            new = self._with_id(agent, kind, successor, model, taken={old.id}).superseding(old.id, start)
            added.append(new)
            return {key: (old_kind, old.superseded_by(new.id, end, item.added)),
                    (new.id if same is None else same.key(kind)): (kind, new)}

        saved = self._group(check_agent_id(agent)).run(lambda: Save({}, edit, operation="supersede"))
        return saved.entries.get(added[-1].id, (kind, added[-1]))[1]

    @staticmethod
    def _with_id(agent: str, kind: str, item: MemoryItem, loaded: MemoryFile, taken=frozenset()) -> MemoryItem:
        """The item with an :ID: (its own, else a new one no other item has), so that another can name it."""
        if item.id is not None:
            return item
        return with_unique_id(item, make_id(agent, kind, item.text), lambda i: i in loaded.entries or i in taken)

    def known_item(self, agent: str, type: str, text: str) -> MemoryItem | None:
        """The current item of that type in the agent's memory.org with the same text (as `add_item` compares), if
        any."""
        wanted = normalise(text)
        return next((item for kind, item in self.load_context(agent).items()
                     if kind == type and item.normalised == wanted and item.current), None)

    def daily_logs(self, agent: str) -> list[date]:
        """The days of the agent's daily logs, oldest first."""
        self.refresh(agent)
        return sorted(logs_in(self.workspace.working(), agent).values())

    def search(self, agent: str, query: str, limit: int = 10, budget: float | None = None, progress=None, *,
               valid_at=None, all: bool = False):  # noqa: A002 - as `Cortex.search` names it
        """Hybrid search over one agent's memory items and logs (`budget`, `progress`, `valid_at` and `all` as
        `Cortex.search`: current items by default)."""
        return self._search(query, limit=limit, agent=check_agent_id(agent), budget=budget, progress=progress,
                            valid_at=valid_at, all=all)

    def show(self, agent: str) -> str:
        """The Org text of the agent's memory.org."""
        self.refresh(agent)
        path = memory_path(agent)
        if path not in self.workspace.working().entries:
            raise no_memory(agent)
        return self.workspace.rendered(path)

    def view(self, agent: str, *, at: datetime | date | None = None, every: bool = False) -> MemoryView:
        """The agent's memory as `memory inspect` shows it: memory.org with the items that hold at `at` (a moment,
        or some time of a day; None: the current ones), or with every item (`every`), and those that do not
        (`MemoryView`)."""
        context = self.load_context(agent, every=True)
        apart = tuple((kind, item) for kind, item in context.items() if not item.validity.holds(at))
        model = context.loaded
        if model is None:
            text = None
        elif every or not apart:
            text = self.show(agent)
        else:
            text = model.render_without({item.key(kind) for kind, item in apart}).decode("utf-8")
        return MemoryView(agent, text, context, tuple(self.daily_logs(agent)), apart, at, every)

    def record_session(self, agent: str, turns, title: str | None = None, *, session: str = "",
                       user: str = "User", assistant: str | None = None, summary: str | None = None,
                       summarizer=None, now: datetime | None = None) -> str:
        """Log a conversation into the agent's daily logs in the conversation layout (`conversation.orglog`), in
        one commit; return the path of the log its first turn went to.

        `turns` are exchanges (`Turn`), whose two sides `user` and `assistant` name (the agent's id by default),
        and turns of any speaker (`Utterance`); a turn with no time is taken at `now`. Turns of a `session` that
        already has an entry in their day's log go to the end of that entry; otherwise a new entry starts with
        `title` and the summary (`summary`, else `summarizer`'s over the exchanges, else none). Without
        `session`, the call is a session of its own.
        """
        from .conversation.orglog import session_turns

        check_agent_id(agent)
        days = session_turns(turns, session=session, title=title, summary=summary, summarizer=summarizer,
                             user=user, assistant=assistant or agent, now=now)
        save = Save({}, {}, tuple((day.day, day) for day in days), "turns")
        self._group(agent).run(lambda: save)
        return log_path(agent, days[0].day)

    # --- compaction, consolidation and forgetting ----------------------------------------

    def compact(self, agent: str, policy: RetentionPolicy | None = None, *,
                now: datetime | None = None) -> CompactionReport:
        """Move items marked in daily logs into memory.org and delete logs past retention (`compaction`)."""
        return compaction.compact(self, agent, policy, now=now)

    def consolidate(self, agent: str, apply: bool | Iterable[int] = False, base: str | None = None, *,
                    now: datetime | None = None) -> Consolidation:
        """Suggest merges of duplicates and supersessions by likely successors in the agent's memory.org, and
        with `apply` (True: all; numbers: those) apply them in one commit after a snapshot (`consolidation`)."""
        return consolidation.consolidate(self, agent, apply, base, now=now)

    def purge(self, agent: str, hard: bool = False) -> PurgeReport:
        """Remove the agent's files, `hard` also from every snapshot (`forgetting`)."""
        return forgetting.purge(self, agent, hard)

    def forget(self, agent: str, item: str, hard: bool = False, chain: bool = False) -> ForgetReport:
        """Remove one item, named by its :ID:, key or text, `hard` also from every snapshot, `chain` with what it
        replaced and what replaced it (`forgetting`)."""
        return forgetting.forget(self, agent, item, hard, chain)

    # --- what the other operations build on -------------------------------------------

    def folder(self, agent: str) -> str:
        """The agent's folder, as a path from the Org root (the id checked)."""
        return f"{AGENTS}/{check_agent_id(agent)}"

    def refresh(self, agent: str) -> None:
        """Bring the working state in line with the agent's files on this machine; refuse a memory.org that
        cannot be read."""
        report = self.workspace.refresh(self.folder(agent))
        refused = [str(problem) for problem in (report.problems if report else ()) if problem.path == memory_path(agent)]
        if refused:
            raise UserError(refused[0])

    def model(self, agent: str, tree: Tree) -> MemoryFile | None:
        """The model of the agent's memory.org in `tree` (None: there is none), known when it was last here."""
        path = memory_path(agent)
        oid = tree.entries.get(path)
        return None if oid is None else self.model_of(self.workspace.current(path, tree))

    def model_of(self, current: Current) -> MemoryFile | None:
        """What a memory.org's current version reads as (None: there is none): known if it is the version last
        read or written here."""
        if not current.exists:
            return None
        for known in self._known.get(current.path, ()):
            if (current.given_data is not None and current.given_data == known.data or
                    current.given_document is not None and current.given_document.oid == known.document):
                return known.model
        model = MemoryFile.read(current.path, current.document, current.get)
        self.remember(current.path, current.given_data, model, current.document.oid)
        return model

    def remember(self, path: str, data: bytes | None, model: MemoryFile, document: Oid | None = None) -> None:
        """Keep what a memory.org's version (its bytes, or its document) reads as, as the newest known, and the
        one known before it (under review, a write reads two: the working state's and its agent's view)."""
        kept = self._known.pop(path, ())
        self._known[path] = (_Known(data, model, document), *kept[:_VERSIONS_KNOWN - 1])

    def forget_known(self, paths) -> None:
        """Forget what was kept of these files' versions (they changed some other way)."""
        for path in paths:
            self._known.pop(path, None)
            self._known_logs.pop(path, None)

    def checkpoint(self, agent: str, message: str) -> Snapshot:
        """A snapshot holding the agent's files as they are: HEAD if it already does, else a new one."""
        self.refresh(agent)
        current = head(self.workspace.store)
        if current is not None and current.root == self.workspace.working().oid:
            return current
        return self.workspace.snapshot(message)

    # --- saves, grouped -------------------------------------------------------------------

    def _group(self, agent: str) -> GroupCommit:
        """The group commit of the agent's saves (made when none is in use)."""
        with self._groups_lock:
            group = self._groups.get(agent)
            if group is None:
                group = self._groups[agent] = GroupCommit(partial(self._commit, agent))
            return group

    def _commit(self, agent: str, members: list[Member]) -> None:
        """Write a group of saves to one agent (each member's function gives its `Save`); answer each member."""
        model, errors = self._write_saves(agent, [member.fn() for member in members])
        for member, error in zip(members, errors):
            member.succeed(model) if error is None else member.fail(error)

    def _write_saves(self, agent: str, saves: list[Save | UserError],
                     then: Callable[[list[UserError | None]], None] | None = None, ingest: bool = True,
                     ) -> tuple[MemoryFile | None, list[UserError | None]]:
        """Write saves to one agent in order, memory.org and each day's log once, in one commit; return the
        memory.org as saved and, for each save, the error that kept it out (a save may be given as its error).
        A save that conflicts with memory.org fails alone; the others are written."""
        ready = [save for save in saves if isinstance(save, Save)]
        if not ready:
            return None, list(saves)
        path, changes = memory_path(agent), [(save.base, save.ours) for save in ready]
        errors: list[UserError | None] = [None] * len(ready)
        saved: dict[str, object] = {}

        def memory(current: Current):
            model = self.model_of(current)
            data, merged = merged_into(agent, path, changes, model or MemoryFile(path), errors)
            saved.update(model=model if data is None else merged, data=data)
            return UNCHANGED if data is None else data

        edits: dict[str, Callable] = {path: memory} if any(ours for _, ours in changes) else {}
        days = sorted({day for save in ready for day, _ in save.logs})
        edits.update((log_path(agent, day), partial(self._log, agent, day, ready, errors)) for day in days)
        with self.workspace.held(self.folder(agent)):
            known = self._known.get(path, (None,))[0]
            expected = {path: known.data} if known is not None and known.data is not None else {}
            expected.update((log, known_log.data) for log in edits if (known_log := self._known_logs.get(log)))
            changed = self.workspace.change_files(
                f"saved the memory of {agent}", edits, expected=expected, digests=self._log_digest,
                then=None if then is None else lambda _: then(outcome(saves, errors)),
                operation="+".join(sorted({save.operation for save in ready})), ingest=ingest or path in edits)
        if saved.get("data") is not None:  # (a proposal's document is not what its agent reads next)
            tree = None if changed.proposal is not None else self.workspace.working() if changed.report is None \
                else self.workspace.store.objects[changed.report.root]
            self.remember(path, saved["data"], saved["model"], None if tree is None else tree.entries.get(path))
        model = saved["model"] if "model" in saved else self.model(agent, self.workspace.working())
        return model, outcome(saves, errors)

    def _log(self, agent: str, day: date, ready: list[Save], errors: list[UserError | None],
             current: Current) -> bytes | Appended | object:
        """The agent's log of `day` with the edits of the saves merged (`errors` None) made; a log that is not
        text is refused. Entries appended to it are `Appended`: the file grows by what they add. Its bytes as
        written here are kept with the state of their hash: while nobody else touches the file, it is not
        decoded again before an edit, and the new hash of a log the edits append to costs what they add."""
        edits = log_edits_by_day(ready, errors).get(day)
        if not edits:
            return UNCHANGED
        path, old = current.path, current.data
        known: _KnownLog | None = self._known_logs.pop(path, None)  # until the file holds what is written
        trusted = known is not None and (old is known.data or whole(old) == whole(known.data))
        new = log_edited(path, old, edits, log_title(agent, day), trusted)
        addition = new.addition if isinstance(new, Appended) else new
        if trusted and addition is not new:
            hasher = known.hasher.copy()
        else:
            data = whole(new.old) if addition is not new else new  # (what the addition is hashed after)
            hasher = blake3.blake3(data, max_threads=blake3.blake3.AUTO if len(data) >= THREADED_BYTES else 1)
        if addition is not new:
            hasher.update(addition)
        if b"\0" not in addition:  # text, as the bytes it extends were: the next append need not decode them
            self._known_logs[path] = _KnownLog(new, hasher)
        return new

    def ingest_logs(self, agent: str, then: Callable[[], None] | None = None) -> None:
        """Ingest the agent's daily logs in an Org folder (`save_contexts(ingest=False)` wrote them); `then()` runs
        in the commit. Bytes this process appended are taken as written, unread, while the file is as it left them."""
        folder = self.folder(agent)
        if self.workspace.root is None:
            return
        with self.workspace.held(folder):
            written = {path: known.data for path, known in list(self._known_logs.items())
                       if path.startswith(folder + "/") and as_appended(self.workspace.root, path, known.data)}
            digests = {path: digest for path, data in written.items() if (digest := self._log_digest(path, data))}
            self.workspace.refresh(f"{folder}/{LOGS}", {path: whole(data) for path, data in written.items()}, digests,
                                   None if then is None else lambda _: then())

    def _log_digest(self, path: str, data: bytes) -> bytes | None:
        """The hash of bytes just written to a log, when its state was kept as they were made."""
        known = self._known_logs.get(path)
        return Oid(known.hasher.digest()) if known is not None and known.data is data else None


def _done_already(model: MemoryFile, name: str, done: Callable[[MemoryItem], object]) -> Typed | None:
    """The item `name` names alone, if it no longer holds and `done` says the change asked of it is made already."""
    found = model.named(name)
    if len(found) == 1 and not (typed := found[0][1])[1].current and done(typed[1]):
        return typed
    return None


def _current_item(agent: str, model: MemoryFile, name: str, doing: str) -> tuple[str, str, MemoryItem]:
    """The one current item of memory.org (`model`) that `name` names: its key, type and item."""
    found = model.named(name)
    if not found:
        raise NotFound(f"agent {agent!r} has no memory item {quoted(name)} to {doing}")
    if len(found) > 1 and len(holding := [entry for entry in found if entry[1][1].current]) == 1:
        found = holding  # the text of an item that a later one replaced, added again: the one that holds
    if len(found) > 1:
        listed = ", ".join(item.id or key for key, (_, item) in found[:5])
        raise UserError(f"{quoted(name)} names {len(found)} items of {agent} ({listed}): name one by its :ID:")
    key, (kind, item) = found[0]
    if not item.current:
        raise UserError(f"{_named(item)}: {item.validity.why_not()}; only a current item can be {doing}d")
    return key, kind, item


def _check_end(item: MemoryItem, end: datetime | date, what: str) -> None:
    """Refuse an end before the start the item states (`:VALID_FROM:`; when it was added does not bind)."""
    start = parse_timestamp(item.value_of(VALID_FROM))
    if start is not None and moment(end) < start:
        raise UserError(f"{_named(item)} holds from {shown(start)} (:VALID_FROM:): {what} cannot be before, "
                        f"at {shown(end)}")


def _named(item: MemoryItem) -> str:
    return f"item {item.id + ' ' if item.id else ''}{quoted(item.title)}"


def _valid(agent: str) -> bool:
    try:
        check_agent_id(agent)
        return True
    except UserError:
        return False
