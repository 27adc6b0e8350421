"""The one public surface: the CLI, the REPL, notebooks and users' code all go through here.

    import cortex.api as cx
    with cx.open("snapshots", "org") as c:
        c.ingest()
        c.snapshot("first")
        print(c.find(todo="TODO"))
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path

from . import history, ingest as ingesting, query
from .bounded import BoundedDict
from .files import EDIT_ATTEMPTS, ChangedMeanwhile, holds, read_or_none, write_atomically
from .backends import NoStore, Store, is_database_url, open_store
from .backends.base import TABLES
from .errors import CortexError, NotFound, UserError, located
from .hashing import Oid
from .history import Change, DirtyWorkingFiles, LogEntry, RollbackReport, Version, proposals as reviews
from .ingest import IngestReport
from .lazy import lazy_names
from .location import NotACopy, copy_around, default_store_path
from .objects import Headline, Snapshot, Tree
from .org.blocks import DEFINITIONS_MARKER
from .query import Node
from .scan import org_files
from .workspace import CONFIG, LITERATE, open_workspace
from .words import brief, quoted

__all__ = ["CONFIG", "DEFINITIONS_FILE", "LITERATE", "Change", "Cortex", "DirtyWorkingFiles", "Headline",
           "IngestReport", "LogEntry", "Node", "NotFound", "Oid", "RollbackReport", "Snapshot", "Tree", "UserError",
           "Version", "convert_brace_file", "default_store_path", "open", "store_name"]  # and the names in _LAZY

DEFINITIONS_FILE = "definitions.hy"
PAST_INDEXES = 8  # search indexes of snapshots and folders a session keeps
SEARCH_BUDGET = 2.5  # seconds a search asked by a person or an agent embeds before it answers (the rest by words)
MAX_AGENDA_DAYS = 3660  # ten years: an agenda lists every day it spans


# Public names of the features, by the module that defines them: each loads on first use, so that
# importing the api (and starting the REPL) costs no more than opening a store needs.
_LAZY = {
    ".dsl": ("Definitions", "DslError", "DurationError", "Encoding", "HmacAlgorithm", "JwtSettings",
             "MemoryDefinition", "Provider", "ROW_HEADERS", "Registry", "SignatureScheme", "WebhookDefinition",
             "WebhookFilter", "definition_rows", "load_definitions", "parse_duration"),
    ".memory.conversation": ("ExtractiveSummarizer", "Identity", "TrajectoryDigest", "Turn", "Utterance"),
    ".memory.layout": ("memory_path",),
    ".memory.retention": ("RetentionPolicy",),
    ".webhooks.secrets": ("resolve_secret",),
}
_LAZY_NAMES, __getattr__, __dir__ = lazy_names(__name__, _LAZY)
__all__ += _LAZY_NAMES


def convert_brace_file(path: str | os.PathLike, output: str | os.PathLike | None = None) -> str:
    """The defmemory / defwebhook forms of a brace-syntax file (memory "x" { ... }), also written to `output`."""
    from .dsl import convert_brace_syntax
    from .dsl.reader import MAX_SIZE
    from .reads import read_bounded

    data = read_bounded(path, MAX_SIZE, "a definitions file")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(located(str(path), data.count(b"\n", 0, exc.start) + 1, "not UTF-8 text")) from None
    converted = convert_brace_syntax(source, str(path))
    if output is not None:
        write_atomically(Path(output), converted.encode("utf-8"))
    return converted


def open(store: str | os.PathLike | None = None, org_root: str | os.PathLike | None = None,
         in_memory: bool = False, *, folder: bool = True, read_only: bool = False,
         review: bool = False, create: bool = True) -> "Cortex":  # noqa: A001
    """Open a store (default: `default_store_path(org_root)`): a folder, or a postgresql://user@host/db URL for a
    shared one; it tracks an Org folder (default: the one it tracked, else `org/`). With `folder=False` there is no
    Org folder on this machine: writes commit to the store's working state directly. `read_only`: nothing is
    written to the store or beside it (every write is refused; what a read would cache stays in memory).
    Where there is no store, one is made unless `create` is False or `read_only` (NoStore, saying how to make
    one). `review`: every agent-memory write of this handle waits for a person's review, as a proposal
    (`cortex review`); without it, those the definitions' `:review` names do."""
    location = None if in_memory else (store or default_store_path(org_root))
    try:
        backend = open_store(location, read_only, **({} if create and not read_only else {"create": False}))
    except NoStore as exc:
        raise NoStore(f"{exc}; make one by ingesting an Org folder (`cortex ingest DIR`) or by importing an "
                      "export (`cortex import FILE`), or name another (--store, CORTEX_STORE)") from None
    try:
        return Cortex(backend, org_root, location, folder=folder, review=review)
    except BaseException:
        backend.close()
        raise


def store_name(location: str | os.PathLike | None) -> str:
    """How messages name a store: its folder, or its server's URL with any password hidden."""
    if location is None:
        return "(in memory)"
    if not is_database_url(location):
        return os.path.abspath(location)
    from .backends.postgres import redact

    return redact(str(location))


class Cortex:
    """An open store and the Org folder it tracks (`root`; None when this machine has no Org folder)."""

    def __init__(self, store: Store, org_root: str | os.PathLike | None = None,
                 location: str | os.PathLike | None = None, *, folder: bool = True, review: bool = False):
        self.store = store
        self.review = review  # every agent-memory write of this handle is a proposal
        self.location = store_name(location)  # where the store is, password hidden
        self.workspace = open_workspace(store, org_root, folder=folder, marker=DEFINITIONS_MARKER.encode())
        self.workspace.erasing.append(self._drop_indexes)  # first: a crash halfway must not leave them holding it
        self.workspace.replacing.append(self._forget_embeddings)
        self._closed = False

    @property
    def root(self) -> Path | None:
        """The Org folder this machine has of the store (None: none, --no-org)."""
        return self.workspace.root

    def _copy_here(self) -> Path | None:
        """The working copy of this store the current folder is in (None: none, another store's, no Org folder)."""
        try:
            around = copy_around() if self.root is not None else None
        except NotACopy:  # an unreadable record: its own sync says so
            return None
        return around[0] if around is not None and around[1].store == self.store.id else None

    def _folder(self, what: str) -> Path:
        """The Org root, or a UserError saying that `what` needs one when this session has none."""
        if self.root is None:
            raise UserError(f"{what} needs an Org folder, and this session has none (--no-org); "
                            "open the store with --org DIR, or check out a copy with `cortex checkout DIR`")
        return self.root

    # --- the store itself ---------------------------------------------------------------

    def ingest(self, path: str | os.PathLike | None = None, progress=None, written: dict[str, bytes] | None = None,
               digests: dict[str, bytes] | None = None, then=None) -> IngestReport:
        """Ingest an Org file or folder (default: the whole Org root), incrementally.

        The first ingest of a folder makes it the Org root this store tracks, and a working copy of the
        store: each ingest syncs it, so that what other writers committed is kept (and written into it),
        never replaced by its files. `written` holds bytes just written to some of the files (by path
        from the Org root), taken as read, and `digests` their hashes when known; `then(report)` runs in
        the ingest's transaction (see `ingest.ingest`).
        """
        self._folder("ingest")
        return self.workspace.ingest(path, progress, written, digests, then)

    def spare(self, open_files: Callable[[str], bool] | None) -> None:
        """Name the Org files an editor holds open (`open_files(path from the root)`; None: none): this session's
        syncs read and send them but never write them, and what the store changed in them waits for a sync that
        does not spare them (the sync report's `deferred`)."""
        if self.root is not None:
            self.workspace.spare = open_files

    def working(self) -> Tree:
        """The tree of the working state."""
        return self.workspace.working()

    def read_state(self) -> Tree:
        """The working state as this handle's reads see it: under review (`review`), an agent's handle, with its
        pending proposals (it must not write again what it wrote); else the working state."""
        return self.memory.workspace.working() if self.review else self.working()

    def state(self, ref: str | int | None = None, within: str | None = None) -> Tree:
        """The tree of a snapshot reference, or of the working state as this handle reads it (`read_state`) when
        `ref` is None; `within`: of its files under that folder only (`agents/assistant/`)."""
        tree = self.read_state() if ref is None else history.tree_of(self.store, ref)
        return tree if within is None else Tree({p: oid for p, oid in tree.entries.items() if p.startswith(within)})

    def headlines(self, ref: str | int | None = None) -> list[Node]:
        """Every headline of a state, in file and document order."""
        return list(query.walk(self.store, self.state(ref)))

    def lookup(self, org_id: str, ref: str | int | None = None) -> Node:
        """The headline with this :ID:."""
        return query.lookup(self.store, self.state(ref), org_id)

    def find(self, *, todo=None, tag=None, prop=None, text=None, ref=None, valid_at=None,
             all: bool = False) -> list[Node]:  # noqa: A002 - what the user asks for
        """Headlines by TODO keyword, tag (own or inherited: `query.tagged`), property (NAME or (NAME, VALUE)) and
        title text: those that hold now and that nothing replaced (`cortex.memory.validity`; a headline that says
        nothing of it always holds), those that held at `valid_at` (a date, a datetime or text: "2026-11-01", "-30d",
        "2026-11-01 14:00"), or `all` of them."""
        from .orgquery.index import headline_validity

        keep, at = _holding(valid_at, all)
        if isinstance(prop, str):
            name, _, value = prop.partition("=")
            prop = (name, value or None)
        if tag is not None and ref is None:  # only the files naming it can hold one tagged so
            from .orgquery.summaries import files_naming

            tree = files_naming(self.store, self.read_state, tag, self._index_folder())
        else:
            tree = self.state(ref)
        found = query.find(self.store, tree, todo=todo, tag=tag, prop=prop, text=text)
        return [n for n in found if headline_validity(n.headline).holds(at)] if keep else found

    def query(self, q, *, as_of: str | int | None = None, match: bool | None = None,
              within: str | None = None, valid_at=None, all: bool = False) -> list[Node]:  # noqa: A002
        """Headlines matching an Org query, in the working state or the snapshot `as_of`: a predicate form
        (`(and (todo "TODO") (tags "security") (deadline :to "+7d"))`, as Hy text, Hy data or Python lists)
        or an Org match string (`+security-ops/TODO`); text not starting with "(" is a match string unless
        `match` says otherwise. See `cortex.orgquery.reader` for the predicates. `within`: only the files
        under this folder (`agents/assistant/`), as if there were no other (a backlink from elsewhere included).
        Only the headlines that hold now and that nothing replaced, as `find` keeps them, unless `valid_at` or
        `all` says otherwise: the predicate `(valid)` is added to the query."""
        from .orgquery import parse_query
        from .orgquery.predicates import And, Valid

        keep, at = _holding(valid_at, all)
        predicate = parse_query(q, match=match)
        return self._query_index(as_of, within).nodes(And((predicate, Valid(at))) if keep else predicate)

    def _query_index(self, as_of: str | int | None, within: str | None = None):
        """The query index of a state: indexes kept in this session, each following its trees incrementally (the
        working state's and the snapshots', of every file or of those `within` a folder)."""
        from .orgquery import Index, saving

        indexes = self.__dict__.setdefault("_query_indexes", {})
        index = indexes.get((as_of is None, within))
        if index is None:
            folder = self._index_folder() if as_of is None and within is None else None  # the working state's: saved
            purged = None if folder is None else history.newest_purge(self.store)  # (read before the state)
            saved = None if folder is None else saving.load(self.store, folder, purged)
            index = indexes[as_of is None, within] = saved or Index(self.store)
            index.purged = purged
        index.follow(self.state(as_of, within))
        return index

    def show(self, target, *, as_of: str | int | None = None) -> str:
        """Org text of a node, a headline or its oid (a search result's `oid`), an :ID: (a file's own :ID:
        shows the file), or a file path, in the working state or the snapshot `as_of`."""
        if isinstance(target, Oid):
            oid, target = target, self.store.objects[target]
            if not isinstance(target, Headline):
                raise UserError(f"{oid.hex()[:12]}: not a headline")
        if isinstance(target, (Node, Headline)):
            return query.show(self.store, target)
        tree = self.state(as_of)
        if str(target) in tree.entries:
            return query.render_file(self.store, tree, str(target))
        try:
            return query.show(self.store, query.lookup(self.store, tree, str(target)))
        except query.FileIdNotHeadline as named:
            return query.render_file(self.store, tree, named.path)

    def chain(self, target, *, as_of: str | int | None = None):
        """What a headline (an :ID:, or a node, headline or search result with one) replaced and what replaced it,
        and when each held, as the properties of the working state (or snapshot `as_of`) say: a `Chain`, whose
        `lines()` tell it (`cortex.orgquery.chains`)."""
        from .orgquery.chains import chain

        org_id = target if isinstance(target, str) else getattr(target, "id", None)
        if not org_id:
            raise UserError(f"{brief(target)}: a chain is followed from a headline's :ID:, and this has none")
        return chain(self._query_index(as_of), org_id)

    def outline(self, path: str | None = None) -> list[Node]:
        """The headlines of one file, or of every file."""
        tree = self.working()
        if path is not None and path not in tree.entries:
            raise NotFound(f"{brief(path)}: not in the working state")
        return list(query.walk(self.store, tree, None if path is None else [path]))

    def files(self) -> dict[str, tuple[int, int]]:
        """Each file of the working state, sorted, with its number of headlines and of headline :ID:s."""
        counts = {path: [0, 0] for path in sorted(self.working().entries)}
        for node in self.outline():
            counts[node.path][0] += 1
            counts[node.path][1] += node.id is not None
        return {path: (headlines, ids) for path, (headlines, ids) in counts.items()}

    def file_ids(self, ref: str | int | None = None) -> dict[str, str]:
        """The :ID:s files give themselves (a property drawer before the first headline), with their files."""
        return query.file_ids(self.store, self.state(ref))

    def org_files(self) -> list[Path]:
        """Every Org file under the Org root, as `ingest` reads them."""
        return org_files(self._folder("listing the Org files"))

    def todo_keywords(self, path: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The TODO and DONE keywords of a file of the working state; None for a path it does not hold."""
        oid = self.working().entries.get(path)
        if oid is None:
            return None
        document = self.store.objects[oid]
        return document.todo_keywords, document.done_keywords

    @property
    def working_oid(self) -> Oid | None:
        """The oid of the working state's tree (None before the first ingest): it changes whenever the state does."""
        return self.store.refs.get(ingesting.WORKING)

    @property
    def object_count(self) -> int:
        """How many objects the store holds."""
        return len(self.store.objects)

    def stats(self) -> dict[str, int | list[str]]:
        """Files, headlines, ids (and the duplicated ones), objects, refs, snapshots and bytes."""
        return {**query.stats(self.store, self.working()), "snapshots": len(history.snapshots(self.store)),
                "proposals pending": len(self.store.table(reviews.PENDING))}

    def fsck(self, repair: bool = False) -> list[history.FsckProblem]:
        """Check every object, ref and table; list the damage (empty when the store is sound).

        With `repair`, damaged derived tables are dropped (cortex rebuilds them) and entries nothing
        can read are removed, then the store is checked again: the problems fixed come first, each
        saying what was done (`repaired`), then whatever damage remains.
        """
        problems = history.fsck(self.store)
        if repair and (fixed := history.repair(self.store, problems)):
            return fixed + history.fsck(self.store)
        return problems

    @property
    def table_entry_count(self) -> int:
        """How many entries the store's named tables hold (fsck checks each)."""
        return self.store.engine.count(TABLES)

    # --- history -----------------------------------------------------------------------

    def snapshot(self, message: str = "", *, empty: bool = True) -> Snapshot:
        """Record the working state (O(1)), the Org folder's edits synced into it first, and move HEAD to it;
        with `empty` False, when nothing changed since HEAD, HEAD is returned and nothing recorded."""
        if self.root is not None and self.root.is_dir() and not self.review:
            self.ingest()
        head = history.head(self.store)
        if not empty and head is not None and head.root == self.working_oid:
            return head
        return self.workspace.snapshot(message)

    def snapshots(self) -> list[Snapshot]:
        """Kept snapshots, most recent first."""
        return history.snapshots(self.store)

    @property
    def snapshot_count(self) -> int:
        """How many snapshots are kept, without reading them."""
        return len(self.store.table(history.SNAPSHOTS))

    @property
    def head_oid(self) -> Oid | None:
        """The oid of the snapshot HEAD points at (None before the first snapshot)."""
        return self.store.refs.get(history.HEAD)

    def resolve(self, ref: str | int) -> Snapshot:
        """A snapshot by oid, prefix, HEAD, HEAD~N, HEAD@{N} or position."""
        return history.resolve(self.store, ref)

    def rollback(self, ref: str | int, *, keep: bool = False, force: bool = False) -> RollbackReport:
        """Return the working state, HEAD and the Org files to a snapshot (with no Org folder here: the working
        state and HEAD, which working copies receive when they sync)."""
        return self.workspace.rollback(ref, keep=keep, force=force)

    def checkout(self, folder: str | os.PathLike) -> "history.SyncReport":
        """Write the working state into a new (or empty) folder, a working copy that `sync` keeps in step.

        The Org folder this store tracks is synced first, so that the new copy holds its edits.
        """
        self.workspace.refresh(".")
        return history.check_out(self.store, folder)

    def sync(self, folder: str | os.PathLike | None = None) -> "history.SyncReport":
        """Merge a working copy's edits and the store's changes both ways (default folder: the copy the current
        folder is in, else the Org folder).

        The Org folder this store tracks is a working copy too: syncing it ingests it.
        """
        folder = folder if folder is not None else self._copy_here()
        folder = Path(os.path.abspath(folder)) if folder is not None else self._folder("sync with no folder named")
        if folder != self.root:
            return history.sync(self.store, folder)
        return self.workspace.synced()[1]

    def copies(self) -> list["history.Copy"]:
        """The working copies of this store (folder, machine, when made), oldest first."""
        return history.working_copies(self.store)

    def forget_copy(self, copy_id: str) -> "history.Copy":
        """Forget a working copy by its id (or a unique prefix): its folder syncs no more."""
        return history.forget_copy(self.store, copy_id)

    def conflicts(self, folder: str | os.PathLike | None = None) -> list["history.conflicts.Conflict"]:
        """Conflicts a sync left unresolved: in a working copy's files (default: the copy the current folder is
        in, if not the Org folder), or in the working state."""
        if folder is None and (here := self._copy_here()) != self.root:
            folder = here
        return history.conflicts(self.store, folder)

    def diff(self, a: str | int | None = "HEAD", b: str | int | None = None, *,
             within: str | None = None) -> list[Change]:
        """Headline changes from state `a` (default HEAD) to `b` (default: the working state); `within`: of the
        files under this folder, as if there were no other (a headline moved in from elsewhere is added)."""
        before_any = a is None or (a == "HEAD" and self.head_oid is None)  # everything is added
        old = Tree() if before_any else self.state(a, within)
        return history.diff(self.store, old, self.state(b, within))

    def unsaved(self) -> list[str]:
        """The Org files whose text differs from the working state: edits not ingested yet (none with no folder)."""
        return self.workspace.unsaved()

    def log(self, limit: int | None = None) -> list[LogEntry]:
        """Snapshots, newest first, with what changed in each."""
        return history.log(self.store, limit)

    def history(self, org_id: str) -> list[Version]:
        """Versions of one headline across snapshots, newest first."""
        return history.headline_history(self.store, org_id)

    def patch(self, items: Iterable[Change | LogEntry | Version]) -> str:
        """The changes (`diff`), log entries (`log`) or versions (`history`), each on its line and followed by its
        text as a unified diff, as `git diff` and `git log --patch` show them."""
        return "\n".join(history.patched(self.store, items))

    def gc(self, keep_last: int | None = 20, max_age: timedelta | None = None, *,
           compact: bool = False) -> tuple[int, int]:
        """Apply retention, then delete unreachable objects; return (snapshots dropped, objects deleted).

        Kept: the newest `keep_last` snapshots and those younger than `max_age` (HEAD always), what
        refs point at, and what reflog entries within that retention name. With `compact` the data
        file is rewritten without the freed pages, which still hold deleted bytes; that needs the
        store alone, so it is refused (before anything changes) while another process has it open, and
        a background build of the search vectors here stops first (the next search starts it again).
        """
        if compact and "_search_index" in self.__dict__:
            self._search_index.stop_building()
        with self.store.engine.exclusively() if compact else nullcontext():
            dropped = history.apply_retention(self.store, keep_last, max_age)
            deleted = history.gc(self.store)
            if compact:
                self.store.engine.compact()
        return len(dropped), deleted

    def purges(self) -> list[history.Tombstone]:
        """Every purge of history recorded (what, which files, when, by whom; never the content), newest first."""
        return history.purges(self.store)

    def erase(self, rewrite, what: str) -> history.Forgotten | None:
        """Rewrite every kept state with `rewrite` (a Tree -> Tree function) and remove every trace of what it
        dropped: its objects, its texts' cached embeddings, the saved search indexes; record a tombstone naming
        `what` and compact the file. None when `rewrite` changes nothing.

        Refused (before anything changes) while another process has the store open.
        """
        return self.workspace.erase(rewrite, what)

    def _forget_embeddings(self, replaced) -> None:
        """Delete the cached vectors of the texts an erasure took (see `search.embeddings.forget_embeddings`)."""
        from .search.embeddings import forget_embeddings

        forget_embeddings(self.store, replaced)
        if "_embedder" in self.__dict__:
            self._embedder.forget_recent()

    def export(self, ref: str | int = "HEAD", path: str | os.PathLike | None = None) -> tuple[Path, int]:
        """Write a snapshot and what it reaches to one file (default in `store_folder()`); return it and the count."""
        snap = history.resolve(self.store, ref)
        target = Path(path) if path else self.store_folder() / f"snapshot-{snap.oid.hex()[:12]}.cortex"
        _, count = history.export_snapshot(self.store, snap.oid.hex(), target)
        return target, count

    def import_(self, path: str | os.PathLike) -> Snapshot:
        """Verify and add an exported snapshot."""
        return history.import_snapshot(self.store, Path(path))

    # --- features built on the store ---------------------------------------------------

    @cached_property
    def registry(self):
        """Definitions evaluated live in this session (the REPL's defmemory / defwebhook)."""
        from .dsl import Registry

        return Registry()

    # --- agenda and links ---------------------------------------------------------------

    def agenda(self, span: int = 7, start=None, *, as_of: str | int | None = None, today=None):
        """What is scheduled, due and timestamped on each of `span` days from `start` (default: today), as
        Emacs's org-agenda lists it, in the working state or snapshot `as_of`. `today` (default: the real
        today) is the day labels count from ("Sched. 2x:", "3 d. ago:"). Days are dates or text: "today",
        "tomorrow", "+7d", "-2w", "2026-11-23". The result's text is org-agenda's; `.days` and `.entries` hold it."""
        from datetime import date

        from .orgquery.agenda import agenda
        from .orgquery.dates import parse_when
        from .orgquery.errors import QueryError

        today = date.today() if today is None else parse_when(today, date.today())
        start = today if start is None else parse_when(start, today)
        if isinstance(span, bool) or not isinstance(span, int) or not 1 <= span <= MAX_AGENDA_DAYS:
            raise QueryError(f"an agenda spans a whole number of days from 1 to {MAX_AGENDA_DAYS:,}; "
                             f"got {quoted(span)}")
        if (date.max - start).days < span - 1:
            raise QueryError(f"an agenda of {span:,} days from {start} runs past {date.max}, the last day a date "
                             "can have")
        return agenda(self._org_files(as_of, dated=True), start, span, today)

    def links(self, node, *, as_of: str | int | None = None) -> list:
        """The links of a headline's title and section (a node, an :ID:, an oid, a search result), or of the text
        before a file's first headline (a file path), in order: `Link`s with kind, target, search, description."""
        from .orgquery.links import document_links, headline_links

        target = self._link_target(node, as_of)
        if isinstance(target, str):
            return list(document_links(self.store.objects[self.state(as_of).entries[target]]))
        return list(headline_links(target.headline))

    def backlinks(self, node, *, as_of: str | int | None = None) -> list:
        """The links that lead to a headline (by :ID:, by a file link's `::*heading` or `::#custom-id`, or
        in its file by `[[*heading]]`), or to a file (a file path: by file link, or by the file's own :ID:), as
        org-roam lists backlinks: each a `Backlink`, the node holding the link, with `.link` and `.link_line`."""
        from .orgquery import links

        target = self._link_target(node, as_of)
        if isinstance(target, str):
            keys = links.file_keys(target, query.file_id(self.store.objects[self.state(as_of).entries[target]]))
        else:
            keys = links.target_keys(target)
        return self._query_index(as_of).backlinks(keys, self.root)

    def broken_links(self, *, as_of: str | int | None = None) -> list:
        """The id links whose :ID: no headline or file holds, each a `Backlink` (the node holding it, `.link_line`)."""
        from .orgquery import links

        files = list(self._org_files(as_of))
        return links.broken(links.sources(files), links.target_index(files))

    def _org_files(self, ref: str | int | None, dated: bool = False):
        """Each file of a state with its document and its headlines in document order; `dated`: of the working
        state, only those that may hold an agenda entry (`orgquery.summaries`)."""
        from .orgquery.agenda import AgendaFile
        from .orgquery.summaries import files_dated

        tree = files_dated(self.store, self.read_state, self._index_folder()) if dated and ref is None \
            else self.state(ref)
        for path in sorted(tree.entries):
            document = self.store.objects[tree.entries[path]]
            yield AgendaFile(path, document, list(query.walk_document(self.store, path, document)))

    def _link_target(self, node, ref: str | int | None) -> Node | str:
        """The headline a user names (a node, an oid or what has one, an :ID:), or a file (its path, or its :ID:)."""
        if isinstance(node, Node):
            return node.path if node.headline.level == 0 else node  # level 0: a file's node (see `links.file_node`)
        tree = self.state(ref)
        oid = node if isinstance(node, Oid) else getattr(node, "oid", None)
        if isinstance(oid, Oid):
            found = next((n for n in query.walk(self.store, tree) if n.oid == oid), None)
            if found is None:
                raise NotFound(f"{oid.hex()[:12]}: no headline of this state has it")
            return found
        if str(node) in tree.entries:
            return str(node)
        try:
            return query.lookup(self.store, tree, str(node))
        except query.FileIdNotHeadline as named:
            return named.path

    # --- search ------------------------------------------------------------------------

    _background_build = None  # the BuildNotices of build_search_in_background, once asked for

    @cached_property
    def _embedder(self):
        """The embedder of this session: the default model, its vectors cached in the store."""
        from .search.embeddings import cached_embedder

        return cached_embedder(self.store)

    def _embed(self, texts):
        """`texts` as unit rows of the session's embedder (agent memory's `similar` and consolidation)."""
        return self._embedder.embed(texts)

    @cached_property
    def _search_index(self):
        from .search.index import SearchIndex

        index = SearchIndex.load(self.store, self._embedder, self._index_folder())
        if (notices := self._background_build) is not None:  # again after the indexes were dropped (a purge)
            index.build_in_background(self.working, notices, notices.failed)
        return index

    def _index_folder(self) -> Path | None:
        """Where the search indexes are saved: in the store's local folder (nowhere for an in-memory store, or
        one open read-only: those are built in memory)."""
        folder = None if self.store.read_only else self.store.engine.local_folder
        return None if folder is None else folder / "index"

    def _drop_indexes(self) -> None:
        """Forget the search and query indexes held here and the search indexes saved in the local folder (they
        are rebuilt on the next search or query).

        After a purge they hold its text: a removal only masks it, and a save would write it back.
        A background build stops first (the next search starts it again).
        """
        index = self.__dict__.pop("_search_index", None)
        if index is not None:
            index.stop_building()
        self._past_indexes.clear()
        self.__dict__.pop("_query_indexes", None)
        from .search import saving

        saving.drop(self._index_folder(), self.store)

    def search(self, query: str, *, limit: int = 10, agent: str | None = None, type: str | None = None,
               source: str | None = None, path: str | None = None, tag: str | None = None,
               todo: str | None = None, speaker: str | None = None, since=None, until=None, context: int = 0,
               as_of: str | int | None = None, fusion: str | None = None,
               vector_weight: float | None = None, keyword_weight: float | None = None,
               budget: float | None = None, progress=None, today=None, within: str | None = None, valid_at=None,
               all: bool = False):  # noqa: A002 - what the user asks for
        """Hybrid search over the working state (or snapshot `as_of`), filtered, with explainable scores;
        `within`: only the files under this folder (`agents/assistant/`), in indexes of their own, so that no
        score depends on a file outside it. Only the items that hold now and that nothing replaced
        (`cortex.memory.validity`; an item that says nothing of it always holds), or those that held at `valid_at`
        (a date, a datetime or text: "2026-11-01", "-30d", "2026-11-01 14:00"), or `all` items; each as the
        state searched says (a snapshot's properties for `as_of`), before the `limit` best are taken.

        `path` is a prefix of the files' paths; `tag` keeps the items whose headline carries or inherits it (as
        `find` reads tags); `speaker` keeps the turns one person said; `since` and `until`
        keep the items dated within those days (a daily log's day, a dated heading's, an active timestamp's;
        dates or text: "2023-05-01", "today", "-7d"), and a period the query itself names ("in May 2023",
        "last week", relative to `today`) raises the items dated within it. `context` brings each result that
        is a turn of a conversation that many turns before and after it (`before`, `after`).
        Weights and fusion default to the first `defmemory :search`, else 0.5 / 0.5 weighted.
        Items without a vector yet are embedded first for up to `budget` seconds (default: all of them;
        while a background build runs, only a moment's wait for it); those still without one are found
        by their words. `progress(done, total)` hears of the embedding; the results' `status` says how
        many items had a vector (`cortex.search.results.Results`).
        """
        from dataclasses import replace
        from datetime import date

        from .memory.layout import check_agent_id
        from .search.building import BACKGROUND_WAIT
        from .search.embeddings import preload_model
        from .search.fusion import Weights
        from .search.index import Filters, SearchIndex

        if fusion != "keyword":  # the model's session is made while the definitions and the indexes load
            preload_model()
        if agent is not None:
            check_agent_id(agent)
        if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= 50:
            raise UserError(f"search context is a number of turns from 0 to 50; got {context!r}")
        if today is not None or since is not None or until is not None:
            from .orgquery.dates import parse_when

            today = date.today() if today is None else parse_when(today, date.today())
            since, until = (None if day is None else parse_when(day, today) for day in (since, until))
        if budget is not None and not budget >= 0:
            raise UserError(f"a search budget is a number of seconds, at least 0; got {budget}")
        config = self._search_config()
        fusion = fusion or config.fusion.value
        weights = Weights(config.vector_weight if vector_weight is None else vector_weight,
                          config.keyword_weight if keyword_weight is None else keyword_weight)
        keep, at = _holding(valid_at, all)
        filters = Filters(source=source, agent=agent, type=type, path=path, tag=tag, todo=todo, speaker=speaker,
                          since=since, until=until, valid_at=at, current=keep and at is None)
        index = self._search_index
        if as_of is not None or within is not None:
            tree = self.state(as_of, within)
            index = self._past_indexes.get(tree.oid)
            if index is None:
                index = self._past_indexes[tree.oid] = SearchIndex(self.store, self._search_index.embedder)
            index.follow(tree)
        else:
            index.follow(self.read_state())
        if budget is None and index.building:
            budget = BACKGROUND_WAIT
        index.build(budget, progress)
        results = index.search(query, limit=limit, filters=filters, fusion=fusion, weights=weights, today=today)
        if context:
            results[:] = [replace(r, **dict(zip(("before", "after"), index.context(r.item, context))))
                          for r in results]
        return results

    def build_search(self, progress=None, budget: float | None = None):
        """Bring the search indexes in line with the working state and embed every item still without a
        vector (within `budget` seconds, if given); `progress(done, total)` hears how it goes.

        Each batch is kept as it is done (in the store's cache of embeddings), so an interrupted build
        loses little, and the next build, or search, starts where it stopped. Returns the `VectorStatus`.
        """
        index = self._search_index
        index.follow(self.read_state())
        return index.build(budget, progress)

    def build_search_in_background(self, notify=None) -> None:
        """Embed the items without a vector in a daemon thread that follows the working state as it changes,
        until the session closes (what it embedded is kept); searches meanwhile answer at once.

        `notify(line)` hears when a long build starts and ends, and why it stopped if it failed.
        """
        from .search.building import BuildNotices

        self._background_build = BuildNotices(notify or (lambda line: None))
        self._search_index.build_in_background(self.working, self._background_build, self._background_build.failed)

    def search_status(self):
        """How many items of the working state have a vector (`VectorStatus`); the others are found by their words."""
        index = self._search_index
        index.follow(self.read_state())
        return index.status()

    def _search_config(self):
        """The first memory's search settings, else the defaults: broken definitions warn and give the defaults."""
        import warnings

        from .dsl import DslError, MemorySearchConfig

        # the registry is made by the first definition evaluated here: none made means none defined
        if not ((self.root is not None and self.definitions_path.exists())
                or ("registry" in self.__dict__ and len(self.registry.memories))):
            return MemorySearchConfig()
        try:
            memories = self.definitions().memories
        except UserError as error:
            # Search needs the definitions only for its weights: a mistake in them must not stop it.
            others = len(error.diagnostics) + error.more - 1 if isinstance(error, DslError) else 0
            warnings.warn(f"search uses its default weights, as the definitions have problems: "
                          f"{str(error).splitlines()[0]}" + (f" (and {others} more)" if others else ""),
                          RuntimeWarning, stacklevel=3)
            return MemorySearchConfig()
        return memories[0].search if memories else MemorySearchConfig()

    @cached_property
    def _past_indexes(self) -> BoundedDict:
        """Search indexes of snapshots and of folders (`within`), by their tree's oid: the last few used."""
        return BoundedDict(PAST_INDEXES)

    @property
    def definitions_path(self) -> Path:
        """The session's definitions file: `definitions.hy` in the Org root."""
        return self._folder("the definitions file") / DEFINITIONS_FILE

    def load_dsl(self, path: str | os.PathLike):
        """Load a definitions file (Hy, or Org with marked blocks) into this session's live definitions.

        Nothing is loaded when it has a problem or conflicts with the definitions in force.
        """
        from .dsl import Registry, load_definitions

        definitions = load_definitions(path)
        together = Registry()  # a conflict with the definitions in force is found before any is kept
        together.load(self.definitions())
        together.load(definitions)
        self.registry.load(definitions)
        return definitions

    def definitions(self):
        """Every definition in force: the definitions file, marked blocks of ingested Org files, then live ones."""
        from .dsl import Registry, extract_from_org, load_definitions

        merged = Registry()
        if self.root is not None and self.definitions_path.exists():
            merged.load(load_definitions(self.definitions_path))
        tree = self.working()
        for key in self.store.table(LITERATE):
            path = key.decode()
            if path in tree.entries:
                where = path if self.root is None else str(self.root / path)
                merged.load(extract_from_org(query.render_file(self.store, tree, path), where))
        merged.load(self.registry.definitions())
        return merged.definitions()

    @cached_property
    def memory(self):
        """Agent memory: memory.org and daily logs per agent, over this session; under review (this handle's
        `review`, or the definitions' `:review` policies as they are when it is first used) its writes are
        proposals, and each agent reads its own pending ones with the working state."""
        from .memory.agents import AgentMemory

        return AgentMemory(self._memory_workspace(), self.search, self._embed)

    def _memory_workspace(self):
        """The workspace agent memory writes through: this one, or a view of it under review."""
        from .review import ReviewedWorkspace

        if self.review:
            return ReviewedWorkspace(self.workspace)
        policies = self._review_policies()
        if not policies:
            return self.workspace
        from .memory.review import needs_review

        return ReviewedWorkspace(self.workspace, needs_review(policies))

    def _review_policies(self) -> list:
        """The review policies the definitions declare (a definitions file that never says `:review` is not read
        for them). A mistake in the definitions is raised: writes that may be meant to wait are not let through."""
        tree = self.working()
        texts = [query.render_file(self.store, tree, key.decode()) for key in self.store.table(LITERATE)
                 if key.decode() in tree.entries]
        if self.root is not None and self.definitions_path.exists():
            texts.append(self.definitions_path.read_text(errors="replace"))
        if not (any(":review" in text for text in texts) or ("registry" in self.__dict__
                                                             and len(self.registry.memories))):
            return []
        return [memory.review for memory in self.definitions().memories if memory.review is not None]

    # --- review ----------------------------------------------------------------------------

    def proposals(self, status: str | None = "pending", agent: str | None = None) -> list:
        """Proposals (`history.proposals.Proposal`), oldest first: those pending (default), `accepted`,
        `rejected`, or all (None); of one agent, or every agent's."""
        return reviews.proposals(self.store, status, agent)

    def proposal(self, name: str):
        """The proposal `name` names: its id, or a unique prefix of it."""
        return reviews.find(self.store, name)

    def proposal_changes(self, name: str) -> list[Change]:
        """The headlines a pending proposal adds, removes, changes or moves, as `diff` names them."""
        return reviews.changes(self.store, self.proposal(name))

    def proposal_patch(self, name: str) -> str:
        """The text of a pending proposal's changes, as a patch."""
        return reviews.patch(self.store, self.proposal(name))

    def accept_proposal(self, name: str, only=None):
        """Merge a pending proposal into the working state in one commit (`only`: the headlines of it to take,
        by :ID: or outline path, as `proposal_changes` names them); the Org folder receives it. Returns
        `Accepted`: the proposal as decided (`undo`: the snapshot a rollback to undoes it), the files it
        changed, the conflicts it left in them."""
        if isinstance(only, str):
            only = [only]
        done = reviews.accept(self.store, name, only)
        if done.paths:
            self.workspace.refresh(os.path.commonpath([os.path.dirname(path) for path in done.paths]) or ".")
        return done

    def reject_proposal(self, name: str, reason: str = ""):
        """Reject a pending proposal: it never reaches the files; its record keeps `reason`."""
        return reviews.reject(self.store, name, reason)

    def inspect_memory(self, agent: str, *, valid_at=None, all: bool = False):  # noqa: A002
        """An agent's memory as `cortex memory inspect` shows it (`MemoryView`): memory.org with its current items
        (holding now, nothing replaced them), those that held at `valid_at` (as `search` reads it) or `all`
        items; the items apart and why, its counts and the days of its daily logs."""
        keep, at = _holding(valid_at, all)
        return self.memory.view(agent, at=at, every=not keep)

    def brief(self, agent: str, budget: int | None = None, *, now: datetime | None = None):
        """What `agent` is told when a session starts (`memory.brief.Briefing`), within `budget` tokens (default
        2,000): its current facts, procedures and patterns; its open TODOs (in its folder, or tagged with its
        name anywhere); what changed since its last session began. NotFound when it has no memory nor logs."""
        from .memory import brief as briefing
        from .memory.layout import AGENTS, check_agent_id, logs_in, memory_path

        check_agent_id(agent)
        items = self.memory.load_context(agent).items()
        tree = self.working()
        if memory_path(agent) not in tree.entries and not logs_in(tree, agent):
            raise NotFound(f"{AGENTS}/{agent}: agent {agent!r} has no memory nor daily logs yet")
        todos = {node.oid: node for node in self.query(["todo"], within=f"{AGENTS}/{agent}/")}
        todos.update((node.oid, node) for node in self._tagged_todos(agent))
        since = briefing.last_session(self.store, tree, agent)
        base = briefing.snapshot_at(self.store, since) if since else None
        changes = [] if base is None else [change for change in history.diff(self.store, self.store.objects[base.root],
                                                                             tree)
                                           if not briefing.own_log(agent, change.path)]
        return briefing.brief(agent, items, list(todos.values()), changes, since,
                              budget=briefing.DEFAULT_BUDGET if budget is None else budget, now=now)

    def _tagged_todos(self, tag: str) -> list[Node]:
        """The open TODOs tagged `tag` (own or inherited) that hold now, read from the files naming it only
        (`orgquery.summaries`), so that a briefing costs the same beside many other notes."""
        from .orgquery import Index, parse_query
        from .orgquery.predicates import And, Valid
        from .orgquery.summaries import files_naming

        index = Index(self.store)
        index.follow(files_naming(self.store, self.read_state, tag, self._index_folder()))
        return index.nodes(And((parse_query(["and", ["todo"], ["tags", tag]]), Valid(None))))

    # --- webhooks ------------------------------------------------------------------------

    def webhooks(self):
        """The webhook definitions in force."""
        return self.definitions().webhooks

    def add_webhook(self, definition) -> Path:
        """Append a `WebhookDefinition` to the definitions file, keeping the rest of it as it is; return the file.

        Refused when a webhook of that name is already in force.
        """
        from .dsl import add_definition

        if any(w.name == definition.name for w in self.webhooks()):
            raise UserError(f"a webhook named {definition.name!r} is already defined; "
                            "remove it first or choose another name")
        target = self.definitions_path

        def added(source: bytes | None) -> bytes:
            return add_definition((source or b"").decode("utf-8"), definition, str(target)).encode("utf-8")

        _rewrite(target, added)
        return target

    def remove_webhook(self, name: str) -> Path:
        """Remove webhook `name` from the definitions file, keeping the rest of it as it is; return the file."""
        from .dsl import WebhookDefinition, remove_definition

        target = self.definitions_path
        elsewhere = [w for w in self.webhooks() if w.name == name and w.location and Path(w.location.file) != target]
        if elsewhere:
            raise UserError(f"webhook {name!r} is defined at {elsewhere[0].location}, not in {target}; "
                            "remove it there")

        def removed(source: bytes | None) -> bytes:
            if source is None:
                raise NotFound(f"no webhook named {name!r}: {target} does not exist")
            return remove_definition(source.decode("utf-8"), name, WebhookDefinition, str(target)).encode("utf-8")

        _rewrite(target, removed)
        return target

    def webhook_server(self, host: str = "127.0.0.1", port: int = 8787, max_body: int | None = None,
                       keep_logs: timedelta | None = None):
        """The HTTP receiver of the webhooks in force, as (service, server).

        The service's `endpoints` (by path) and `warnings` say what it serves; `server.run()` serves
        until interrupted. A missing secret raises here, naming its webhook. Logged deliveries older
        than `keep_logs` (default 30 days) are dropped as new ones come.
        """
        from .webhooks.deliveries import KEEP_FOR
        from .webhooks.receiver import make_server
        from .webhooks.service import MAX_BODY

        service = self.webhook_service(max_body=MAX_BODY if max_body is None else max_body,
                                       keep_logs=keep_logs or KEEP_FOR)
        return service, make_server(service, host, port)

    def webhook_service(self, webhooks=None, **options):
        """The service that receives deliveries of `webhooks` (default: those in force) into this session's
        agent memory; `options` as `WebhookService`'s."""
        from .webhooks.service import WebhookService

        webhooks = self.definitions().webhooks if webhooks is None else webhooks
        return WebhookService(self.workspace, self.memory, webhooks, **options)

    def webhook(self, name: str):
        """The webhook in force called `name`."""
        from .webhooks.service import find_webhook

        where = str(self.definitions_path) if self.root is not None else "a marked block of an Org file"
        return find_webhook(self.definitions().webhooks, name, where)

    def webhook_test(self, name: str, payload, *, event: str | None = None, url: str | None = None,
                     tamper: bool = False, stale: bool = False, private_key: bytes | None = None):
        """Sign `payload` with webhook `name`'s real scheme and secret and deliver it (in-process, or to `url`).

        A JWT webhook verified with a public key signs with `private_key` (PEM bytes).
        """
        from .webhooks.simulate import simulate

        return simulate(self.webhook_service([self.webhook(name)]), name, payload, event=event, url=url,
                        tamper=tamper, stale=stale, private_key=private_key)

    def webhook_logs(self, name: str | None = None, tail: int | None = None):
        """Logged deliveries, oldest first, of one webhook or all."""
        from .webhooks.deliveries import DeliveryLog

        return DeliveryLog(self.store).deliveries(name, tail)

    def prune_webhook_logs(self, older_than: timedelta) -> int:
        """Remove logged deliveries older than `older_than`, with their bodies; return how many."""
        from .webhooks.deliveries import DeliveryLog

        return DeliveryLog(self.store).prune(older_than)

    def webhook_redeliver(self, delivery_id: str):
        """Run a logged delivery through filtering and routing again (not verification: it may be stale)."""
        return self.webhook_service(verify=False).redeliver(delivery_id)

    def conversations(self, strategy: str = "truncation", *, driver: str = "lmdb", summarizer=None, bus=None,
                      **limits):
        """Identity-scoped conversation memory: driver `lmdb` keeps turns in this store, `memory` in process."""
        from .memory.conversation import Deps, MemoryConfig, open_memory

        config = MemoryConfig(driver=driver, strategy=strategy, **limits)
        return open_memory(config, Deps(bus=bus, summarizer=summarizer, store=self.store))

    def store_folder(self) -> Path:
        """Where this machine keeps files of the store (exports, the REPL's history): the store folder itself,
        a per-user cache folder for a store on a server, the current folder for an in-memory store."""
        return self.store.engine.local_folder or Path(".")

    def close(self) -> None:
        """Stop building vectors, save what the session derived (search indexes, unless read-only) and close the
        store; idempotent."""
        if "_search_index" in self.__dict__ and not self._closed:
            self._search_index.stop_building()
            if not self.store.read_only:
                self._search_index.save()
        self._save_query_index()
        try:
            if not self._closed:
                self.workspace.close()
            if not self._closed and not self.store.read_only:
                ingesting.store_written(self.store)
        except UserError:  # a cache only (a full disk, say): those files are parsed when next read
            pass
        finally:
            self._closed = True
            self.store.close()

    def _save_query_index(self) -> None:
        """Save the working state's query index beside the store when the saved copy lags (`orgquery.saving.lags`)
        and no purge came since it was made (it would hold the purged text)."""
        index = self.__dict__.get("_query_indexes", {}).get((True, None))
        folder = None if index is None else self._index_folder()
        if folder is None or self._closed:
            return
        from .orgquery import saving

        if saving.lags(index) and history.newest_purge(self.store) == index.purged:
            try:
                saving.save(index, folder)
            except CortexError:  # derived data (objects gone meanwhile): the next session builds it
                pass

    def __enter__(self) -> "Cortex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _holding(valid_at, every) -> tuple[bool, datetime | None]:
    """Which items a read keeps, as (whether only those that hold, the moment they hold at: None for now, and
    nothing replaced them): `every` keeps all, `valid_at` (a date, a datetime or text, `parse_moment`) those
    that held then, neither the current ones."""
    if not isinstance(every, bool):
        raise UserError(f"all is true or false, not {quoted(every)}")
    if every and valid_at is not None:
        raise UserError("all and valid_at exclude each other: all keeps every item, valid_at those that held then")
    if every or valid_at is None:
        return not every, None
    from .orgquery.dates import parse_moment

    return True, parse_moment(valid_at, datetime.now())


def _rewrite(target: Path, change: Callable[[bytes | None], bytes]) -> None:
    """Write `change(the file's bytes)` (None: no file) over `target` atomically, never over an edit saved
    meanwhile: then again, on the bytes saved."""
    for _ in range(EDIT_ATTEMPTS):
        old = read_or_none(target)
        try:
            write_atomically(target, change(old), unchanged=lambda path: holds(path, old))
            return
        except ChangedMeanwhile:
            continue
    raise UserError(f"{target}: changed {EDIT_ATTEMPTS} times while it was being saved; nothing was written")
