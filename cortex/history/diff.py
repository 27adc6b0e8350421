"""What changed: headline diffs between states, the log of snapshots, the versions of one headline, and the text of
each change as a patch.

A headline changed when its fields or its text did. The blank lines that end its section are the layout between
it and the next headline (Org's post-blank), not its content: a headline written after another takes them over
from it, and that one has not changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..backends import Store
from ..errors import NotFound
from ..hashing import Oid
from ..ingest import working_tree
from ..objects import EMPTY_TREE, Headline, Snapshot, Tree
from ..org import render_headline, split_blank_end
from ..query import headline_ids, in_file
from ..words import brief, counted
from .siblings import pair
from .snapshots import not_negative, resolve, snapshots

__all__ = ["Change", "LogEntry", "Version", "change_counts", "diff", "headline_history", "log", "patch", "patched",
           "tree_of", "unified"]

@dataclass(frozen=True)
class Change:
    """One headline added, removed, changed or moved between two states; `headlines`: how many it adds, removes
    or moves with its subtree."""

    kind: str  # added | removed | changed | moved
    path: str
    outline: tuple[str, ...]
    id: str | None
    old: Oid | None = None
    new: Oid | None = None
    old_path: str | None = None
    old_outline: tuple[str, ...] | None = None
    fields: tuple[str, ...] = ()
    headlines: int = 1

    def __str__(self) -> str:
        where = f"{self.path}: {' / '.join(self.outline)}"
        if self.kind == "moved":
            where = f"{self.old_path}: {' / '.join(self.old_outline)} -> {where}"
        ident = f" [{self.id}]" if self.id else ""
        return f"{self.kind:8} {where}{ident}" + (f" ({self.detail})" if self.detail else "")

    @property
    def detail(self) -> str:
        """Which fields changed, or how many headlines the subtree added, removed or moved holds (when not one)."""
        return ", ".join(self.fields) or (counted(self.headlines, "headline") if self.headlines > 1 else "")


def tree_of(store: Store, state: str | int | None) -> Tree:
    """The tree of a snapshot reference, or of the working state when `state` is None."""
    if state is None:
        return working_tree(store)
    return store.objects[resolve(store, state).root]


def differing(a: Tree, b: Tree) -> set[str]:
    """The paths whose documents two trees do not share (the folders both hold alike are not opened)."""
    return a.differing(b)


def diff(store: Store, old: Tree, new: Tree) -> list[Change]:
    """Headline changes from `old` to `new`; equal subtrees (equal oids) are never opened, and only the paths whose
    documents differ are looked at."""
    if old.oid == new.oid:
        return []
    get = store.objects.__getitem__
    found = _Found()
    for path in sorted(differing(old, new)):
        a, b = old.entries.get(path), new.entries.get(path)
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
    if not fields and split_blank_end(a.raw)[0] != split_blank_end(b.raw)[0]:
        fields.append("text")
    return tuple(fields)


def _moves(get, found: _Found) -> list[Change]:
    """Added and removed subtrees, with headlines found on both sides (same :ID: or content) as moves, each
    counting the headlines it adds, removes or moves (those that moved with another count with it).

    Only added and removed subtrees are opened, so this stays O(changed).
    """
    added, removed = _expanded(get, found.added), _expanded(get, found.removed)
    taken: set[int] = set()  # the removed headlines found again
    by_id, by_oid = {}, {}  # the removed headlines' positions, by :ID: and by oid (first found first)
    for k, (_, _, h, _) in enumerate(removed):
        if h.id:
            by_id.setdefault(h.id, []).append(k)
        by_oid.setdefault(h.oid, []).append(k)
    twins: dict[int, int] = {}  # an added headline that moved -> the removed one it was
    moved_with: list[int] = []  # for each added headline, the one it moved with (itself, an ancestor), or -1
    for n, (_, _, h, parent) in enumerate(added):
        mover = moved_with[parent] if parent >= 0 else -1
        if mover < 0:
            candidates = (by_id.get(h.id, []) if h.id else []) + by_oid.get(h.oid, [])
            twin = next((k for k in candidates if k not in taken), None)
            if twin is not None:
                twins[n], mover = twin, n
                taken.add(twin)
        moved_with.append(mover)
    gone_with: list[int] = []  # for each removed headline, the one that moved it away (itself, an ancestor), or -1
    for k, (_, _, _, parent) in enumerate(removed):
        gone_with.append(k if k in taken else gone_with[parent] if parent >= 0 else -1)
    result = [Change("added", p, o, h.id, new=h.oid, headlines=count)
              for p, o, h, count in _left(added, moved_with)]
    result += [Change("removed", p, o, h.id, old=h.oid, headlines=count)
               for p, o, h, count in _left(removed, gone_with)]
    sizes = _sizes(added)
    for n, k in twins.items():
        path, outline, h, _ = added[n]
        old_path, old_outline, twin, _ = removed[k]
        result.append(Change("moved", path, outline, h.id or twin.id, twin.oid, h.oid, old_path, old_outline,
                             headlines=sizes[n]))
    return result


def _expanded(get, roots) -> list[tuple[str, tuple[str, ...], Headline, int]]:
    """Every headline of these subtrees, depth first in order, as (path, outline, headline, its parent's position
    in the list, -1 for a root), without recursion."""
    nodes: list = []
    stack = [(path, outline, headline, -1) for path, outline, headline in reversed(roots)]
    while stack:
        path, outline, h, parent = stack.pop()
        here = (*outline, h.title)
        stack.extend((path, here, get(child), len(nodes)) for child in reversed(h.children))
        nodes.append((path, here, h, parent))
    return nodes


def _left(nodes: list, moved: list[int]) -> Iterator[tuple[str, tuple[str, ...], Headline, int]]:
    """The roots of `nodes` that did not move, each with how many of its headlines did not move with another."""
    counts: dict[int, int] = {}
    roots: list[int] = []
    for n, (_, _, _, parent) in enumerate(nodes):
        roots.append(n if parent < 0 else roots[parent])
        if moved[n] < 0:
            counts[roots[n]] = counts.get(roots[n], 0) + 1
    return ((*nodes[n][:3], count) for n, count in counts.items())


def _sizes(nodes: list) -> list[int]:
    """How many headlines each subtree of `nodes` (as `_expanded` lists them) holds."""
    sizes = [1] * len(nodes)
    for n in range(len(nodes) - 1, -1, -1):
        if (parent := nodes[n][3]) >= 0:
            sizes[parent] += sizes[n]
    return sizes


def change_counts(changes: Iterable[Change]) -> dict[str, int]:
    """How many headlines were added, removed, changed and moved (a headline added with its children counts each)."""
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.kind] = counts.get(change.kind, 0) + change.headlines
    return counts


@dataclass(frozen=True)
class LogEntry:
    """A snapshot with what changed since its parent: the changes `diff` lists, and how many headlines each kind
    took (`change_counts`)."""

    snapshot: Snapshot
    changes: dict[str, int]
    diff: tuple[Change, ...] = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        changed = ", ".join(f"{n} {kind}" for kind, n in sorted(self.changes.items())) or "no changes"
        return f"{self.snapshot} [{changed}]"


def log(store: Store, limit: int | None = None) -> list[LogEntry]:
    """Kept snapshots, newest first, each with what changed since its parent."""
    not_negative("log limit", limit)
    entries = []
    for snap in snapshots(store)[:limit]:
        parent = store.objects.get(snap.parent) if snap.parent else None
        parent_tree = store.objects[parent.root] if parent else EMPTY_TREE
        changes = tuple(diff(store, parent_tree, store.objects[snap.root]))
        entries.append(LogEntry(snap, change_counts(changes), changes))
    return entries


@dataclass(frozen=True)
class Version:
    """One headline as a snapshot recorded it, what differed from the version before it, and that version (its
    path and headline; None for the first)."""

    snapshot: Snapshot
    path: str
    headline: Headline
    change: str
    before: tuple[str, Headline] | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.snapshot.oid.hex()[:12]} {self.path}: {self.headline.title} ({self.change})"


def headline_history(store: Store, org_id: str) -> list[Version]:
    """The versions of the headline with :ID: `org_id` across kept snapshots, newest first (as `log` lists
    snapshots); a version whose only change is the blank lines ending its section is none."""
    versions: list[Version] = []
    previous: tuple[str, Headline] | None = None
    for snap, found in located(store, org_id):
        if found is None:
            if previous is not None:
                versions.append(Version(snap, previous[0], previous[1], "removed", previous))
                previous = None
            continue
        if previous is None:
            change = "added"
        elif found[1].oid == previous[1].oid and found[0] == previous[0]:
            continue
        elif found[0] != previous[0]:
            change = f"moved from {previous[0]}"
        else:
            fields = _changed_fields(previous[1], found[1])
            if not fields and found[1].children == previous[1].children:
                continue
            change = ", ".join(fields) or "children"
        versions.append(Version(snap, found[0], found[1], change, previous))
        previous = found
    if not versions:
        raise NotFound(f"no snapshot holds a headline with :ID: {brief(org_id)}")
    return versions[::-1]


def located(store: Store, org_id: str) -> Iterator[tuple[Snapshot, tuple[str, Headline] | None]]:
    """Each kept snapshot, oldest first, with where the headline with :ID: `org_id` is in it (its path and
    headline, as `with_id` finds it: in the first file by path holding one), or None; only the files a snapshot
    changed are read."""
    holding: set[str] = set()  # the files holding one
    before: Tree | None = None
    found: tuple[str, Headline] | None = None
    for snap in reversed(snapshots(store)):
        tree = store.objects[snap.root]
        changed = tree.entries.keys() if before is None else before.differing(tree)
        before = tree
        for path in changed:
            if (document := tree.entries.get(path)) is not None and org_id in headline_ids(store, document):
                holding.add(path)
            else:
                holding.discard(path)
        path = min(holding, default=None)
        if path is None:
            found = None
        elif found is None or path != found[0] or path in changed:  # else the same document: the same headline
            found = (path, in_file(store, tree, path, org_id).headline)
        yield snap, found


def patch(store: Store, item: Change | Version) -> str:
    """The text of a change as a unified diff, as `git diff` shows it, under a header naming the file and the
    headline: a changed headline's own section (its children's changes are changes of their own); a subtree
    added, removed or moved, whole; a version of one headline against the version before it. The blank lines
    that end the text are layout and left out. Empty when no text differs (a subtree moved as it was)."""
    get = store.objects.__getitem__
    if isinstance(item, Version):
        sides = [item.before and (item.before[0], (item.before[1].title,), item.before[1]),
                 None if item.change == "removed" else (item.path, (item.headline.title,), item.headline)]
    else:
        sides = [item.old and (item.old_path or item.path, item.old_outline or item.outline, get(item.old)),
                 item.new and (item.path, item.outline, get(item.new))]
    subtree = getattr(item, "kind", None) != "changed"
    texts = [side and (render_headline(side[2], get) if subtree else side[2].raw) for side in sides]
    names = [side and f"{side[0]}: {' / '.join(side[1])}" for side in sides]
    return unified(*texts, *names)


def unified(old: str | None, new: str | None, old_name: str | None, new_name: str | None) -> str:
    """The unified diff from text `old` to `new` (None: nothing there), under a header naming each side (`a/NAME`,
    `b/NAME`, or /dev/null for nothing), as `git diff` shows it; the blank lines that end each text are layout,
    left out. Empty when the texts do not differ."""
    lines = [split_blank_end(text)[0].splitlines() if text is not None else [] for text in (old, new)]
    names = [f"{side}/{name}" if text is not None else "/dev/null"
             for side, name, text in (("a", old_name, old), ("b", new_name, new))]
    return "\n".join(difflib.unified_diff(*lines, *names, lineterm=""))


def patched(store: Store, items: Iterable[Change | LogEntry | Version]) -> Iterator[str]:
    """The lines of changes, log entries or versions with their text: each one's line, then its patch (a log
    entry's changes, each with its patch, after its line)."""
    for item in items:
        yield str(item)
        for change in item.diff if isinstance(item, LogEntry) else (item,):
            if change is not item:
                yield str(change)
            if text := patch(store, change):
                yield from text.split("\n")
