"""Consolidation: an agent's exact and near duplicates and likely successors, found by `similar` among the current
items of each type, suggested as a reviewable change (numbered suggestions, each with the Org diff of what applying
it alone would change); applied, all or some, in one commit after a snapshot, so a rollback undoes it.

A *merge* keeps the older item (its :ID:, text and place: whatever names it still does) and removes the newer
one. The kept item takes what only the newer had: its tags, its other properties, its :SOURCE: after its own
(`; `), and its :ID: in `:MERGED:` so that what named it can still be found; items that named the newer by
:SUPERSEDES: or :SUPERSEDED_BY: name the kept one. The newer's words stay in the snapshot taken before.

A *supersession* keeps both: the newer gets `:SUPERSEDES:` (the older's :ID:) and, unless it says when it
started, `:VALID_FROM:` when it was added; the older gets `:INVALID_AT:` (then), `:SUPERSEDED_BY:` and the
ARCHIVE tag (`validity`). An item with no :ID: is given one.

Suggestions are made again from memory.org as it is when they are applied, so a person's edit in between is
kept; `base`, the version the suggestions were listed for, refuses an apply once memory.org changed since.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import NotFound, UserError
from ..objects import Snapshot
from ..words import brief, counted, quoted, short
from ..workspace import UNCHANGED, Current
from .changes import merged_into, minute
from .items import MemoryItem, make_id
from .layout import ITEM_TYPES, check_agent_id, memory_path
from .memoryfile import MemoryFile, Typed, with_unique_id
from .similar import Embed, Relation, close_pairs, relation, same_subject_pairs
from .validity import INVALID_AT, SUPERSEDED_BY, SUPERSEDES, VALID_FROM

if TYPE_CHECKING:
    from .agents import AgentMemory

__all__ = ["MERGED", "Consolidation", "Suggestion", "consolidate", "find_suggestions", "is_newer", "merged",
           "succession"]

MERGED = "MERGED"  # the :ID:s of the items merged into an item

Changes = dict[str, Typed | None]  # key of an item of memory.org -> its new version (None: removed)


@dataclass(frozen=True)
class Suggestion:
    """A merge (`newer` into `older`) or a supersession (`newer` replaces `older`) of two items of one type, the
    relation that suggests it, and the Org diff of applying it alone to memory.org."""

    number: int
    kind: str  # "merge" or "supersede"
    type: str
    older: tuple[str, MemoryItem]  # (key, item)
    newer: tuple[str, MemoryItem]
    relation: Relation
    diff: str = field(default="", repr=False)

    def lines(self) -> list[str]:
        """What a person reviews: what is suggested, why, and the diff."""
        older, newer = quoted(self.older[1].title, 60), quoted(self.newer[1].title, 60)
        what = f"{newer} into {older}" if self.kind == "merge" else f"{newer} replaces {older}"
        return [f"[{self.number}] {self.kind} ({self.type}, {self.relation.score:.2f}): {what}",
                f"    differ in: {self.relation.why}", *("    " + line for line in self.diff.splitlines())]


@dataclass(frozen=True)
class Consolidation:
    """The suggestions made for an agent's memory.org at `version` (its document, short), those `applied` (by
    number), and around them the snapshots `before` (roll back to it to undo) and `after`."""

    agent: str
    version: str
    suggestions: tuple[Suggestion, ...]
    applied: tuple[int, ...] = ()
    before: Snapshot | None = None
    after: Snapshot | None = None

    def listing(self) -> str:
        """The suggestions as a reviewable change and how to apply them; once applied, those applied and how to
        undo it."""
        path = memory_path(self.agent)
        lines = [f"{path} at {self.version}: {counted(len(self.suggestions), 'suggestion')}"]
        for suggestion in self.suggestions:
            if self.before is None or suggestion.number in self.applied:
                lines += suggestion.lines()
        if self.before is not None:
            lines.append(f"applied {', '.join(map(str, self.applied))} to {path}; undo with "
                         f"`cortex rollback {short(self.before.oid)}`")
        elif self.suggestions:
            lines.append(f"apply them with `cortex memory consolidate {self.agent} --apply --base {self.version}` "
                         "(some: --apply 1 3 ...)")
        return "\n".join(lines)

    def repl_view(self, renderer):
        """The REPL's view: the listing."""
        return renderer.text(self.listing())


def consolidate(memory: AgentMemory, agent: str, apply: bool | Iterable[int] = False, base: str | None = None, *,
                now: datetime | None = None) -> Consolidation:
    """Suggest merges and supersessions for the agent's memory.org; `apply` (True: all; numbers: those) applies
    them in one commit between two snapshots. `base`: refuse unless memory.org is still at that version."""
    workspace, path, now = memory.workspace, memory_path(check_agent_id(agent)), minute(now)
    with workspace.held(memory.folder(agent)):
        memory.refresh(agent)
        tree = workspace.working()
        model = memory.model(agent, tree)
        if model is None:
            raise NotFound(f"agent {agent!r} has no memory.org {workspace.where(memory.folder(agent))}")
        version = short(tree.entries[path])
        suggestions = find_suggestions(model, memory.embed, agent, now)
        found = Consolidation(agent, version, tuple(suggestions))
        if apply is False:
            return found
        if base is not None and not base.strip():
            raise UserError(f"base is empty: give the version of {path} the suggestions were listed for "
                            f"(now {version})")
        if base is not None and not version.startswith(base.strip()):
            raise UserError(f"{path} changed since the suggestions were listed (at {brief(base.strip())}, "
                            f"now {version}): nothing applied; run `cortex memory consolidate {agent}` again")
        chosen = _chosen(apply, len(suggestions))
        if not chosen:
            return found
        changes = _composed([suggestions[n - 1] for n in chosen], model, agent, now)
        before = memory.checkpoint(agent, f"before consolidating the memory of {agent}")

        def into_memory(current: Current):
            errors: list[UserError | None] = [None]
            data, _ = merged_into(agent, path, [(model.entries, changes)], memory.model_of(current) or
                                  MemoryFile(path), errors)
            if errors[0] is not None:
                raise errors[0]
            return UNCHANGED if data is None else data

        changed = workspace.change_files(f"consolidated the memory of {agent}", {path: into_memory},
                                         operation="consolidate")
        memory.forget_known(changed.paths)
        after = workspace.snapshot(f"consolidated the memory of {agent}")
    return replace(found, applied=tuple(chosen), before=before, after=after)


def find_suggestions(model: MemoryFile, embed: Embed | None, agent: str, now: datetime) -> list[Suggestion]:
    """The merges and supersessions that consolidate `model`'s current items, closest pairs first: an item is
    merged away, merged into or superseded once at most (and one merged away takes part in nothing else); by
    exact text alone without an embedder."""
    found: list[tuple[str, tuple[str, MemoryItem], tuple[str, MemoryItem], Relation]] = []
    for kind in ITEM_TYPES:
        items = [(key, item) for key, (k, item) in model.entries.items() if k == kind and item.current]
        pairs = _exact_pairs(items)
        if embed is not None and len(items) > 1:
            texts = [item.text for _, item in items]
            vectors = embed(texts)
            close = {(i, j): score for i, j, score in (*close_pairs(vectors), *same_subject_pairs(texts, vectors))}
            pairs += sorted(((i, j, score) for (i, j), score in close.items()), key=lambda p: (-p[2], p[0], p[1]))
        removed: set[int] = set()
        replaced: set[int] = set()
        involved: set[int] = set()
        for i, j, score in pairs:
            old, new = (j, i) if is_newer(items[i][1], items[j][1]) else (i, j)
            if old in removed or new in removed or old in replaced:
                continue
            found_relation = relation(items[old][1].text, items[new][1].text, score)
            if found_relation is None:
                continue
            if found_relation.kind == "duplicate":
                if new in involved:  # another suggestion changes it: it cannot also go
                    continue
                removed.add(new)
            else:
                replaced.add(old)
            involved.update((old, new))
            found.append((kind, items[old], items[new], found_relation))
    suggestions = [Suggestion(number, "merge" if found_relation.kind == "duplicate" else "supersede", kind, older,
                              newer, found_relation)
                   for number, (kind, older, newer, found_relation) in enumerate(found, 1)]
    changes = [_composed([suggestion], model, agent, now) for suggestion in suggestions]
    placed = model.placed(key for changed in changes for key in changed)
    return [replace(suggestion, diff=_diff(model, changed, placed, agent))
            for suggestion, changed in zip(suggestions, changes)]


def merged(kept: MemoryItem, dropped: MemoryItem) -> MemoryItem:
    """`kept` with what only `dropped` had: tags, properties (links joined), source, and its :ID: in MERGED."""
    joined = {name: _joined(kept.value_of(name), dropped.value_of(name)) for name in (SUPERSEDES, SUPERSEDED_BY)}
    joined[MERGED] = _joined(kept.value_of(MERGED), dropped.value_of(MERGED), dropped.id)
    own = {name.upper() for name, _ in kept.properties} | set(joined) | {VALID_FROM, INVALID_AT}  # its own times
    item = replace(kept, tags=tuple(dict.fromkeys((*kept.tags, *dropped.tags))),
                   properties=(*kept.properties, *((name, value) for name, value in dropped.properties
                                                   if name.upper() not in own)),
                   source="; ".join(dict.fromkeys(s for s in (kept.source, dropped.source) if s)))
    return item.with_properties(**{name: value for name, value in joined.items() if value})


def succession(older: MemoryItem, newer: MemoryItem, now: datetime) -> tuple[MemoryItem, MemoryItem]:
    """`older` and `newer` (both with an :ID:) once `newer` replaces `older` from when it started (its
    `:VALID_FROM:`, else when it was added, else `now`)."""
    start = newer.validity.start or now
    return (older.superseded_by(newer.id, start, now),
            newer.superseding(older.id, None if newer.value_of(VALID_FROM) is not None else start))


def _composed(suggestions: list[Suggestion], model: MemoryFile, agent: str, now: datetime) -> Changes:
    """What applying `suggestions` in turn changes in `model` (each applied to the items as the earlier left them)."""
    entries: dict[str, Typed] = dict(model.entries)
    changes: Changes = {}
    taken = set(model.entries)

    def identified(key: str) -> MemoryItem:
        kind, item = entries[key]
        if item.id is None:
            item = with_unique_id(item, make_id(agent, kind, item.text), taken.__contains__)
            taken.add(item.id)
        return item

    def change(key: str, item: MemoryItem | None) -> None:
        changes[key] = None if item is None else (entries[key][0], item)
        if item is None:
            del entries[key]
        else:
            entries[key] = (entries[key][0], item)

    for suggestion in suggestions:
        (old_key, _), (new_key, _) = suggestion.older, suggestion.newer
        if suggestion.kind == "supersede":
            older, newer = succession(identified(old_key), identified(new_key), now)
            change(old_key, older)
            change(new_key, newer)
            continue
        older, newer = entries[old_key][1], entries[new_key][1]
        change(old_key, merged(older, newer))
        change(new_key, None)
        if newer.id is not None:
            for key, (_, item) in list(entries.items()):
                if newer.id in (*item.validity.replaces, *item.validity.replaced_by):
                    change(key, item.with_links_renamed({newer.id: older.id}))
    return changes


def _chosen(apply: bool | Iterable[int], count: int) -> list[int]:
    """The numbers of the suggestions to apply (True: all), each checked."""
    if apply is True:
        return list(range(1, count + 1))
    numbers = list(dict.fromkeys(apply))
    wrong = [n for n in numbers if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= count]
    if wrong:
        raise UserError(f"no suggestion {quoted(wrong[0])}: there {'is' if count == 1 else 'are'} "
                        f"{counted(count, 'suggestion')}" + (f", numbered 1 to {count}" if count > 1 else ""))
    return sorted(numbers)


def _exact_pairs(items: list[tuple[str, MemoryItem]]) -> list[tuple[int, int, float]]:
    """Pairs of items with the same text (as `normalise` compares), each with the first of its text."""
    first: dict[str, int] = {}
    pairs = []
    for n, (_, item) in enumerate(items):
        if item.normalised in first:
            pairs.append((first[item.normalised], n, 1.0))
        else:
            first[item.normalised] = n
    return pairs


def is_newer(first: MemoryItem, second: MemoryItem) -> bool:
    """Whether `first`, before `second` in the file, is the newer: it started later (when both say when they
    started); otherwise the later in the file is."""
    a, b = first.validity.start, second.validity.start
    return a is not None and b is not None and a > b


def _joined(*values: str | None) -> str:
    return " ".join(dict.fromkeys(i for value in values if value for i in value.split()))


def _diff(model: MemoryFile, changes: Changes, placed: dict[str, tuple[int, str]], agent: str) -> str:
    """The unified diff of what `changes` make of memory.org: item by item where each stays in place (`placed`:
    where each stands and its text), else the two versions of the file compared."""
    edits = []
    for key, new in changes.items():
        line, text = placed[key]
        after = model.replacement(key, text, new)
        if after is None:  # it moves: compare the files, from the first line that differs to the last
            old, data = model.render(), model.rewrite(changes, [], f"Memory of {agent}")[0]
            head = old.count(b"\n", 0, _common_prefix(old, data))
            end = _common_prefix(old[::-1], data[::-1])
            edits = [(head + 1, old[:len(old) - end].decode("utf-8").split("\n", head)[-1],
                      data[:len(data) - end].decode("utf-8").split("\n", head)[-1])]
            break
        edits.append((line, text, after))
    lines = [f"--- a/{model.path}", f"+++ b/{model.path}"]
    shift = 0
    for line, before, after in sorted(edits):
        a, b = before.splitlines(), after.splitlines()
        for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(2):
            (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
            lines.append(f"@@ -{_range(line - 1 + i1, i2 - i1)} +{_range(line - 1 + shift + j1, j2 - j1)} @@")
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    lines += [" " + text for text in a[i1:i2]]
                else:
                    lines += ["-" + text for text in a[i1:i2]] + ["+" + text for text in b[j1:j2]]
        shift += len(b) - len(a)
    return "\n".join(lines)


def _range(start: int, length: int) -> str:
    """A hunk's range as unified diffs write it (1-based; an empty range names the line before)."""
    return f"{start + 1},{length}" if length else f"{start},0"


def _common_prefix(a: bytes, b: bytes) -> int:
    """How many first bytes `a` and `b` share (slices compared in C, halving)."""
    low, high = 0, min(len(a), len(b))
    left, right = memoryview(a), memoryview(b)
    while low < high:
        middle = (low + high + 1) // 2
        if left[:middle] == right[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
