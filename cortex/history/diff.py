"""What changed: headline diffs between states, the log of snapshots, the versions of one headline."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backends import Store
from ..errors import NotFound
from ..hashing import Oid
from ..ingest import working_tree
from ..objects import EMPTY_TREE, Headline, Snapshot, Tree
from ..query import with_id
from ..words import brief
from .siblings import pair
from .snapshots import not_negative, resolve, snapshots

__all__ = ["Change", "LogEntry", "Version", "diff", "headline_history", "log", "tree_of"]

@dataclass(frozen=True)
class Change:
    """One headline added, removed, changed or moved between two states."""

    kind: str  # added | removed | changed | moved
    path: str
    outline: tuple[str, ...]
    id: str | None
    old: Oid | None = None
    new: Oid | None = None
    old_path: str | None = None
    old_outline: tuple[str, ...] | None = None
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"{self.path}: {' / '.join(self.outline)}"
        if self.kind == "moved":
            where = f"{self.old_path}: {' / '.join(self.old_outline)} -> {where}"
        detail = f" ({', '.join(self.fields)})" if self.fields else ""
        ident = f" [{self.id}]" if self.id else ""
        return f"{self.kind:8} {where}{ident}{detail}"


def tree_of(store: Store, state: str | int | None) -> Tree:
    """The tree of a snapshot reference, or of the working state when `state` is None."""
    if state is None:
        return working_tree(store)
    return store.objects[resolve(store, state).root]


def diff(store: Store, old: Tree, new: Tree) -> list[Change]:
    """Headline changes from `old` to `new`; equal subtrees (equal oids) are never opened."""
    if old.oid == new.oid:
        return []
    get = store.objects.__getitem__
    found = _Found()
    for path in sorted(old.entries.keys() | new.entries.keys()):
        a, b = old.entries.get(path), new.entries.get(path)
        if a != b:
            _diff_children(get, path, (), get(a).children if a else (), get(b).children if b else (), found)
    return found.changes + _moves(get, found)


@dataclass
class _Found:
    changes: list[Change] = field(default_factory=list)
    added: list[tuple[str, tuple[str, ...], Headline]] = field(default_factory=list)
    removed: list[tuple[str, tuple[str, ...], Headline]] = field(default_factory=list)


def _diff_children(get, path, outline, old_oids, new_oids, found: _Found) -> None:
    """Pair two lists of siblings and record what differs, depth first (a stack: files may nest thousands deep)."""
    tasks: list = [("siblings", outline, old_oids, new_oids)]
    while tasks:
        kind, outline, a, b = tasks.pop()
        if kind == "siblings":  # their pairs are taken in order, each before its children
            tasks.extend(("pair", outline, *pair) for pair in reversed(_paired(get, a, b)))
        elif a is None:
            found.added.append((path, outline, b))
        elif b is None:
            found.removed.append((path, outline, a))
        else:
            fields = _changed_fields(a, b)
            if fields:
                found.changes.append(Change("changed", path, (*outline, b.title), b.id or a.id, a.oid, b.oid,
                                            fields=fields))
            tasks.append(("siblings", (*outline, b.title), a.children, b.children))


def _paired(get, old_oids, new_oids) -> list[tuple[Headline | None, Headline | None]]:
    """The siblings that differ, paired as a merge pairs them (`siblings.pair`), each list's order kept;
    equal subtrees are left out unopened."""
    pairs = pair(list(old_oids), list(new_oids), get, loose=True)
    paired = set(pairs.values())
    changed = [(get(old_oids[i]), get(new_oids[j])) for i, j in sorted(pairs.items()) if old_oids[i] != new_oids[j]]
    return (changed + [(get(oid), None) for i, oid in enumerate(old_oids) if i not in pairs]
            + [(None, get(oid)) for j, oid in enumerate(new_oids) if j not in paired])


def _changed_fields(a: Headline, b: Headline) -> tuple[str, ...]:
    names = ("title", "todo", "priority", "tags", "properties", "planning", "level")
    fields = [n for n in names if getattr(a, n) != getattr(b, n)]
    if not fields and a.raw != b.raw:
        fields.append("text")
    return tuple(fields)


def _moves(get, found: _Found) -> list[Change]:
    """Added and removed subtrees, with headlines found on both sides (same :ID: or content) as moves.

    Only added and removed subtrees are opened, so this stays O(changed).
    """
    def expand(roots):
        nodes = []
        stack = [(path, outline, headline, ()) for path, outline, headline in reversed(roots)]
        while stack:  # depth first, in order, without recursion
            path, outline, h, ancestors = stack.pop()
            here = (*outline, h.title)
            nodes.append((path, here, h, ancestors))
            stack.extend((path, here, get(child), (*ancestors, h.oid)) for child in reversed(h.children))
        return nodes

    added, removed = expand(found.added), expand(found.removed)
    by_id, by_oid = {}, {}  # the removed headlines, by :ID: and by oid (first found first)
    for node in removed:
        if node[2].id:
            by_id.setdefault(node[2].id, []).append(node)
        by_oid.setdefault(node[2].oid, []).append(node)
    moved_new, moved_old, moves = set(), set(), []
    for path, outline, h, ancestors in added:
        if moved_new.intersection(ancestors):
            continue  # it moved with its parent
        candidates = (by_id.get(h.id, []) if h.id else []) + by_oid.get(h.oid, [])
        twin = next((r for r in candidates if r[2].oid not in moved_old), None)
        if twin is not None:
            moved_new.add(h.oid)
            moved_old.add(twin[2].oid)
            moves.append(Change("moved", path, outline, h.id or twin[2].id, twin[2].oid, h.oid, twin[0], twin[1]))
    result = [Change("added", p, (*o, h.title), h.id, new=h.oid) for p, o, h in found.added if h.oid not in moved_new]
    result += [Change("removed", p, (*o, h.title), h.id, old=h.oid) for p, o, h in found.removed
               if h.oid not in moved_old]
    return result + moves


@dataclass(frozen=True)
class LogEntry:
    """A snapshot with what changed since its parent: how many subtrees were added, removed, changed or moved
    (a headline added with its children counts once)."""

    snapshot: Snapshot
    changes: dict[str, int]

    def __str__(self) -> str:
        changed = ", ".join(f"{n} {kind}" for kind, n in sorted(self.changes.items())) or "no changes"
        return f"{self.snapshot} [{changed}]"


def log(store: Store, limit: int | None = None) -> list[LogEntry]:
    """Kept snapshots, newest first, each with counts of what changed since its parent."""
    not_negative("log limit", limit)
    entries = []
    for snap in snapshots(store)[:limit]:
        parent = store.objects.get(snap.parent) if snap.parent else None
        parent_tree = store.objects[parent.root] if parent else EMPTY_TREE
        counts: dict[str, int] = {}
        for change in diff(store, parent_tree, store.objects[snap.root]):
            counts[change.kind] = counts.get(change.kind, 0) + 1
        entries.append(LogEntry(snap, counts))
    return entries


@dataclass(frozen=True)
class Version:
    """One headline as a snapshot recorded it, and what differed from the previous version."""

    snapshot: Snapshot
    path: str
    headline: Headline
    change: str

    def __str__(self) -> str:
        return f"{self.snapshot.oid.hex()[:12]} {self.path}: {self.headline.title} ({self.change})"


def headline_history(store: Store, org_id: str) -> list[Version]:
    """The versions of the headline with :ID: `org_id` across kept snapshots, oldest first."""
    versions: list[Version] = []
    previous: tuple[str, Headline] | None = None
    for snap in reversed(snapshots(store)):
        node = with_id(store, store.objects[snap.root], org_id)
        found = None if node is None else (node.path, node.headline)
        if found is None:
            if previous is not None:
                versions.append(Version(snap, previous[0], previous[1], "removed"))
                previous = None
            continue
        if previous is None:
            change = "added"
        elif found[1].oid == previous[1].oid and found[0] == previous[0]:
            continue
        elif found[0] != previous[0]:
            change = f"moved from {previous[0]}"
        else:
            change = ", ".join(_changed_fields(previous[1], found[1])) or "children"
        versions.append(Version(snap, found[0], found[1], change))
        previous = found
    if not versions:
        raise NotFound(f"no snapshot holds a headline with :ID: {brief(org_id)}")
    return versions
