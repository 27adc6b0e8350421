"""What a save changes: a context's items against the memory it was loaded from, merged into memory.org, and the
entries and turns it adds to daily logs. Pure: no store, no files.

A save costs what it changes, not what the memory holds: the context's lists are compared with the lists it
was loaded with, so an agent that only appends is found out without looking at each item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from itertools import compress, groupby
from typing import TYPE_CHECKING

from ..errors import UserError, located
from ..ingest import NotOrgText, decode_org
from ..org import parse
from ..files import whole
from ..workspace import Appended
from .items import BadItemText, MemoryItem, check_text
from .layout import ITEM_TYPES, SECTION_TITLES
from .logs import log_addition, render_entry
from .memoryfile import Getter, MemoryFile, Typed, merge

if TYPE_CHECKING:
    from ..objects import Document
    from .conversation.orglog import SessionTurns

    LogEdit = str | SessionTurns  # an entry to append to a daily log, or a conversation's turns to put in it

__all__ = ["FIELDS", "MemoryContext", "Save", "context_of", "decoded", "keyed", "log_edited", "log_edits_by_day",
           "log_entry", "log_title", "merged_into", "minute", "outcome", "parsed_text", "prepared_save"]

FIELDS = {"fact": "facts", "procedure": "procedures", "pattern": "patterns"}


@dataclass
class MemoryContext:
    """What an agent remembers, as lists of items per type, plus the summary of the session being saved.

    Items may be given as plain strings. `loaded` records the memory the context was loaded
    from (and `agent` whose it was): a save removes an item only if it was loaded into the lists
    and is gone from them. A context built from scratch, or loaded from another agent, only adds
    and updates items. `shown` holds what was loaded into the lists, by type, when that is not
    every item (items that no longer hold are left out unless asked for: see `validity`).
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
    shown: dict[str, tuple[MemoryItem, ...]] | None = field(default=None, repr=False, compare=False)

    def loaded_lists(self) -> dict[str, tuple[MemoryItem, ...]]:
        """What was loaded into each list (nothing when the context was not loaded)."""
        if self.loaded is None:
            return {kind: () for kind in ITEM_TYPES}
        return self.loaded.kinds if self.shown is None else self.shown

    def items(self) -> list[Typed]:
        """Every (type, item) pair, facts first, strings turned into items."""
        return [(kind, _as_item(kind, item)) for kind in ITEM_TYPES for item in getattr(self, FIELDS[kind])]

    def __len__(self) -> int:
        return sum(len(getattr(self, name)) for name in FIELDS.values())


Edit = Callable[[MemoryFile], dict[str, "Typed | None"]]  # what to change, given the memory.org as it is


@dataclass(frozen=True)
class Save:
    """One save: what it changes in memory.org since `base` (or, as an `Edit`, in memory.org as it is when it is
    written), and what it adds to daily logs, by day: an entry to append, or a conversation's turns
    (`conversation.orglog.SessionTurns`)."""

    base: Mapping[str, Typed]
    ours: dict[str, Typed | None] | Edit
    logs: tuple[tuple[date, LogEdit], ...] = ()
    operation: str = "save"  # what it does, for a review of it: add, retire, supersede, turns, delivery...


def prepared_save(agent: str, context: MemoryContext, now: datetime | None, operation: str = "save") -> Save:
    """What saving `context` at `now` changes in the agent's memory.org, and its log entry (checked)."""
    now = minute(now)
    source = f"session {context.session}" if context.session else f"session {now:%Y-%m-%d %H:%M}"
    loaded = context.loaded if context.agent == agent else None
    entry = log_entry(context, now)
    logs: tuple[tuple[date, LogEdit], ...] = () if entry is None else ((now.date(), entry),)
    return Save(loaded.entries if loaded is not None else {}, _changes(context, loaded, now, source), logs, operation)


def log_entry(context: MemoryContext, now: datetime | None) -> str | None:
    """The daily-log entry saving `context` at `now` appends (None: it has no summary or title), with `\n` line
    ends."""
    if context.summary is None and context.title is None:
        return None
    now = minute(now)
    return render_entry(now, context.title or "Session", context.summary or "",
                        context.session or f"s-{now:%Y-%m-%d-%H%M}")


def outcome(saves: list[Save | UserError], merged: list[UserError | None]) -> list[UserError | None]:
    """For each save (or the error that kept it from being prepared), its error: merged ones in order."""
    errors = iter(merged)
    return [save if isinstance(save, UserError) else next(errors) for save in saves]


def merged_into(agent: str, path: str, changes: list[tuple[Mapping[str, Typed], dict[str, Typed | None] | Edit]],
                model: MemoryFile, errors: list[UserError | None]) -> tuple[bytes | None, MemoryFile]:
    """Merge each (base, ours) in turn into the memory.org `model` (an `Edit` is made on the model as it is then):
    its new bytes (None: unchanged) and model; `errors[n]` is set to what kept change n out (None: merged)."""
    data = None
    for n, (base, ours) in enumerate(changes):
        try:
            if callable(ours):
                base, ours = model.entries, ours(model)
            changed, added = merge(path, base, ours, model, agent)
            errors[n] = None
        except UserError as error:  # a conflict with the file: this save only is refused
            errors[n] = error
            continue
        if changed or added:
            data, derived = model.rewrite(changed, added, f"Memory of {agent}")
            model = derived or MemoryFile.read(path, *parsed_text(data.decode("utf-8")))
    return data, model


def log_edits_by_day(saves: list[Save], errors: list[UserError | None]) -> dict[date, list[LogEdit]]:
    """The log edits of the saves merged (error None), by day, in order."""
    days: dict[date, list[LogEdit]] = {}
    for save, error in zip(saves, errors):
        if error is None:
            for day, edit in save.logs:
                days.setdefault(day, []).append(edit)
    return days


def log_edited(path: str, old: bytes | Appended | None, edits: list[LogEdit], title: str,
               trusted: bool) -> bytes | Appended:
    """The bytes of the log `old` (None: a new log, titled `title`) with `edits` made in order: entries appended
    (those in a row at once), conversations' turns put in their sessions' entries; `Appended` to `old` when the
    edits only append entries. Bytes not `trusted` to be text are refused first, saying where."""
    if old is not None and not trusted:
        decoded(path, whole(old))
    if old is not None and all(isinstance(edit, str) for edit in edits):
        return Appended(old, log_addition(old, list(edits), title))
    data = whole(old)
    for appends, run in groupby(edits, lambda edit: isinstance(edit, str)):
        if appends:
            data = (data or b"") + log_addition(data, list(run), title)
        else:
            for turns in run:
                data = turns.applied(data, title)
    return data


def log_title(agent: str, day: date) -> str:
    return f"{agent} — {day.isoformat()}"


def context_of(agent: str, memory: MemoryFile | None, every: bool = False) -> MemoryContext:
    """The context of an agent's memory.org (None: it has none): its current items, or `every` item."""
    if memory is None:
        return MemoryContext(agent=agent)
    context = MemoryContext(warnings=list(memory.warnings), agent=agent, loaded=memory)
    if not every and (ended := {id(item) for item in memory.dated if not item.current}):
        context.shown = {kind: tuple(item for item in memory.kinds[kind] if id(item) not in ended)
                         for kind in ITEM_TYPES}
    for kind, items in context.loaded_lists().items():
        setattr(context, FIELDS[kind], list(items))
    return context


def minute(now: datetime | None) -> datetime:
    return (now or datetime.now()).replace(second=0, microsecond=0)


def decoded(path: str, data: bytes) -> str:
    """A file's text, or a UserError naming the file and line of the bytes that are not UTF-8 text."""
    try:
        return decode_org(data)
    except NotOrgText as exc:
        raise UserError(located(path, exc.line, exc.reason)) from None


def parsed_text(text: str) -> tuple[Document, Getter]:
    """A text's document and a getter of the objects parsed from it."""
    parsed = parse(text)
    objects = {obj.oid: obj for obj in parsed.objects}
    return parsed.document, objects.__getitem__


def _changes(context: MemoryContext, loaded: MemoryFile | None, now: datetime, source: str) -> dict[str, Typed | None]:
    """What a save changes in the memory it was loaded from: key -> new (type, item), None when removed.

    New and changed items are checked and, when new, dated and sourced. Items still the very
    objects loaded are not looked at one by one: a save of one item costs one item.
    """
    base = loaded.entries if loaded is not None else {}
    diff = _diff(context, loaded)
    if diff is not None:
        new, gone = diff
        mine = keyed(_prepared(kind, item, base, now, source) for kind, item in new)
        removed = {item.key(kind) for kind, item in gone}
        if not any(key in base and key not in removed for key in mine):
            changes = {key: typed for key, typed in mine.items() if base.get(key) != typed}
            changes.update((key, None) for key in removed if key not in mine)
            return changes
    # an item that takes the key of one kept (or a context not loaded from this memory): compare them all
    mine = keyed(_prepared(kind, item, base, now, source) for kind, item in context.items())
    changes = {key: typed for key, typed in mine.items() if base.get(key) != typed}
    shown = base if context.shown is None or loaded is None else \
        {item.key(kind) for kind, items in context.shown.items() for item in items}
    changes.update((key, None) for key in shown if key not in mine)
    return changes


def _diff(context: MemoryContext, loaded: MemoryFile | None) -> tuple[list[Typed], list[Typed]] | None:
    """The items in each list that are not objects loaded into it, and the objects loaded that left it."""
    if loaded is None:
        return None
    new, gone = [], []
    lists = context.loaded_lists()
    for kind in ITEM_TYPES:
        items, before = getattr(context, FIELDS[kind]), lists[kind]
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


def keyed(items: Iterable[Typed]) -> dict[str, Typed]:
    """Items by key; of items with the same key, the first."""
    mine: dict[str, Typed] = {}
    for kind, item in items:
        mine.setdefault(item.key(kind), (kind, item))
    return mine



def _as_item(kind: str, item) -> MemoryItem:
    if isinstance(item, str):
        return MemoryItem(item)
    if not isinstance(item, MemoryItem) or not isinstance(item.text, str):
        raise BadItemText(f"{SECTION_TITLES[kind]}: an item is a MemoryItem or a string, not {item!r}")
    return item
