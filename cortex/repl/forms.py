"""The REPL's forms over `cortex.api`: each `@form` definition adds one, with its help and completion.

Forms are Python so that starting the REPL compiles nothing (a `.hy` module is recompiled on every
start wherever bytecode is not written). Their first parameter is the session; the REPL binds it,
so `(find :todo "TODO")` calls `find(session, todo="TODO")`.
"""

from __future__ import annotations

import inspect

from ..errors import UserError
from ..words import quoted, shown_stats, unsaved_note
from .registry import FORMS, closest, form, prelude
from .values import FileEntry, Help, HelpEntry, Message, OrgText, Outline, Patch

__all__ = ["duration", "snapshot_ref"]  # for the other forms modules; the forms register themselves (`form`)

# --- helpers every session has ----------------------------------------------------------------


@prelude
def first(items):
    """The first item of a list (or of any iterable), None when there is none: (first (find :todo "TODO"))."""
    return next(iter(items), None)


@prelude
def last(items):
    """The last item of a list, None when it is empty."""
    items = list(items)
    return items[-1] if items else None


def snapshot_ref(x):
    """A snapshot reference from what a user holds: a snapshot, a log entry, a version, or a ref."""
    if hasattr(x, "snapshot"):
        return snapshot_ref(x.snapshot)
    if hasattr(x, "time_ns"):
        return x.oid.hex()
    return x


def id_of(x) -> str:
    """An :ID: from a node, a headline or a string."""
    if isinstance(x, str):
        return x
    if getattr(x, "id", None):
        return x.id
    raise UserError(f"{x} has no :ID:")


def duration(text, option: str):
    """A duration a user wrote ("90d", "12w"), or None for None; a bad one names the option."""
    if text is None:
        return None
    from ..api import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as exc:
        raise UserError(f"{option} {quoted(text)}: {exc}") from None


# --- the store --------------------------------------------------------------------------------


@form
def ingest(session, path=None):
    """Ingest the Org folder, or one file or folder under it (paths are relative to the Org folder).

    (ingest) re-reads every Org file, parsing only those that changed;
    (ingest "notes/projects.org") re-reads one file.
    """
    return session.cortex.ingest(None if path is None else session.org_path(path))


@form
def lookup(session, org_id, *, as_of=None):
    """The headline with this :ID:, in the working state or a snapshot: (lookup "task-parse-org" :as-of "HEAD~1")."""
    return session.cortex.lookup(org_id, ref=snapshot_ref(as_of))


@form
def find(session, *, todo=None, tag=None, prop=None, text=None, as_of=None, valid_at=None,
         all=False):  # noqa: A002 - what the user writes
    """Headlines matching every criterion given.

    (find :todo "TODO")          by TODO keyword
    (find :tag "ops")            by a tag, their own or inherited (from a heading above, #+FILETAGS), as Org
                                 reads tags; (query (tags-local "ops")) for own tags only
    (find :prop "OWNER=dana")    by property, with or without a value
    (find :text "deploy")        by title text, ignoring case
    :as-of "HEAD~1" searches a snapshot instead of the working state. Only the headlines that hold now and that
    nothing replaced, unless :valid-at "2026-11-01" (those that held then) or :all True.
    """
    return session.cortex.find(todo=todo, tag=tag, prop=prop, text=text, ref=snapshot_ref(as_of), valid_at=valid_at,
                               all=all)


@form
def show(session, target):
    """Org text of a headline and its subtree, a search result, a list of them, an :ID: or a file path; of a
    headline in a chain (SUPERSEDES, SUPERSEDED_BY), a notice says what it replaced and what replaced it.

    (show (first (find :todo "TODO"))), (show (first (search "deploy"))), (show "notes/projects.org").
    """
    from ..orgquery.chains import named

    targets = target if isinstance(target, (list, tuple)) else [target]
    text = "".join(f"- {t.text}\n" if getattr(t, "list_item", False) else session.cortex.show(showable(session, t))
                   for t in targets)  # a list item of a memory section is shown alone, not its whole section
    if len(targets) == 1 and (node := _node(session, targets[0])) is not None and named(node.headline):
        for line in session.cortex.chain(node).lines():
            session.notify(line)
    paths = {getattr(t, "path", None) for t in targets}  # the file whose TODO keywords highlight it
    return OrgText(text, paths.pop() if len(paths) == 1 else None)


def _node(session, target):
    """The headline of the working state a target names by its :ID: (None: it names none)."""
    org_id = target if isinstance(target, str) else getattr(target, "id", None)
    if not org_id or org_id in session.cortex.working().entries:
        return None
    try:
        return session.cortex.lookup(org_id)
    except UserError:  # no such :ID:, or a file's own
        return None


@form
def chain(session, headline, *, as_of=None):
    """What a headline (an :ID:, a node, a search result) replaced and what replaced it, and when each held, as
    the working state (or :as-of a snapshot) says: (chain "mem-assistant-the-database-is-postgres-17-4d5e6f")."""
    return session.cortex.chain(id_of(headline), as_of=snapshot_ref(as_of))


def showable(session, target):
    """What `cortex.api`'s show takes for a value a user holds: a search result is the headline it was found in."""
    from ..search.results import SearchResult  # here: a session starts without search

    if isinstance(target, SearchResult):
        # By oid, so a result of a search :as-of a snapshot shows that snapshot's text.
        return target.oid
    return target


@form
def ls(session, path=None):
    """The files of the working state with their counts, or the outline of one file: (ls "notes/projects.org")."""
    if path is not None:
        return Outline(session.cortex.outline(path))
    return [FileEntry(file, headlines, ids) for file, (headlines, ids) in session.cortex.files().items()]


@form
def stats(session):
    """Where the store and the Org folder are; files, headlines, :ID:s (and the duplicated ones), objects, refs,
    snapshots and the size on disk."""
    return shown_stats(session.cortex)


@form
def watch(session, on=True, *, interval=1.0):
    """Re-ingest Org files in the background when they change on disk, with a short notice: (watch), (watch False)."""
    return Message(session.watch(on, interval))


# --- history ----------------------------------------------------------------------------------


@form
def snapshot(session, message=""):
    """Record the working state as a snapshot and move HEAD to it (O(1)): (snapshot "before cleanup")."""
    return session.cortex.snapshot(message)


@form
def snapshots(session):
    """Every kept snapshot, newest first; position 0 is the newest, and positions work as refs."""
    return session.cortex.snapshots()


@form
def rollback(session, ref, *, keep=False, force=False):
    """Return the Org files, the working state and HEAD to a snapshot.

    Refs: HEAD~1, HEAD@{1} (undo the last move), an oid prefix, a position, or a snapshot value.
    Refuses when the files hold edits no snapshot has, unless :keep True (snapshot them first)
    or :force True (discard them).
    """
    from ..api import DirtyWorkingFiles

    try:
        return session.cortex.rollback(snapshot_ref(ref), keep=keep, force=force)
    except DirtyWorkingFiles as exc:
        listed = "\n  ".join(exc.paths)
        raise UserError(f"these Org files hold edits that no snapshot has:\n  {listed}\n"
                        "snapshot them first (:keep True) or discard them (:force True)") from None


@form
def checkout(session, folder):
    """Write the working state into a new folder, a working copy: (checkout "~/notes-copy"); (sync "~/notes-copy")."""
    return session.cortex.checkout(folder)


@form
def sync(session, folder=None):
    """Merge a working copy's edits and the store's changes both ways, headline by headline (default: the Org
    folder). A headline changed on both sides keeps both versions, the other tagged :CONFLICT:; see (conflicts)."""
    return session.cortex.sync(folder)


@form
def conflicts(session, folder=None):
    """Conflicts left by syncs: in a working copy's files, or (no folder) in the working state."""
    return session.cortex.conflicts(folder)


@form
def diff(session, a="HEAD", b=None, *, patch=False):
    """Headline changes from snapshot `a` (default HEAD) to `b` (default: the working state): (diff "HEAD~1" "HEAD");
    :patch True shows each with its text, as a unified diff.

    Org files edited since they were last ingested are named: (ingest) includes their edits."""
    changes = session.cortex.diff(snapshot_ref(a), snapshot_ref(b))
    if b is None and (unsaved := session.cortex.unsaved()):
        session.notify(unsaved_note(unsaved, "(ingest)"))
    return _patched(session, changes) if patch else changes


@form
def history(session, headline, *, patch=False):
    """Versions of one headline (an :ID: or a node) across the kept snapshots, newest first (as (log)), each with
    when it said it held; then what it replaced and what replaced it, as the working state says. :patch True
    shows each version's text against the one before it."""
    from ..orgquery.chains import named

    versions = session.cortex.history(id_of(headline))
    if (node := _node(session, id_of(headline))) is not None and named(node.headline):
        for line in session.cortex.chain(node).lines():
            session.notify(line)
    return _patched(session, versions) if patch else versions


@form
def log(session, limit=None, *, patch=False):
    """Snapshots, newest first, with how many headlines each added, changed, moved or removed: (log 5); :patch True
    shows each snapshot's changes with their text."""
    entries = session.cortex.log(limit)
    return _patched(session, entries) if patch else entries


def _patched(session, items) -> Patch:
    """Changes, log entries or versions with their text (`Cortex.patch`), or "no changes"."""
    return Patch(session.cortex.patch(items) or "no changes")


@form
def gc(session, *, keep_last=20, max_age=None, compact=False):
    """Drop snapshots beyond the newest `keep-last` unless younger than `max-age`, then delete unreachable objects.

    (gc :keep-last 10 :max-age "30d"); HEAD is always kept. :compact True then rewrites the data file without
    the freed pages (the store alone: close other cortex processes), as `cortex gc --keep-last 10 --compact`.
    """
    dropped, deleted = session.cortex.gc(keep_last, duration(max_age, "max-age"), compact=compact)
    return {"snapshots dropped": dropped, "objects deleted": deleted}


# --- help -------------------------------------------------------------------------------------


@form
def help(session, topic=None):  # noqa: A001 - `help` is what a REPL user types
    """List the forms, or explain one: (help), (help find)."""
    if topic is None:
        return Help(HelpEntry(f.name, f.usage, f.summary) for f in FORMS.values())
    entry = getattr(topic, "form", None) or FORMS.get(str(topic))
    if entry is not None:
        return Help([HelpEntry(entry.name, entry.usage, entry.doc)])
    if isinstance(topic, str):
        close = closest(topic, list(FORMS))
        raise UserError(f"no form named {topic}; " + (f"did you mean {close}? " if close else "") + "(help) lists them")
    name = getattr(topic, "__name__", str(topic))
    return Help([HelpEntry(name, "", inspect.getdoc(topic) or f"no documentation for {name}")])
