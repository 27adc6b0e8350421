"""Three-way merge of Org files and trees, headline by headline, from the store's objects.

Working copies sync by merging each file against the version both sides last agreed on (the
base). The units are a headline's own section (`Headline.raw`: its line and its text up to the
first child), split in two: the headline line (stars, TODO, title, tags) and the rest (planning,
drawer, text); each list of children; and the text before the first headline (the preamble).

Matching. Within a list of siblings, the headlines of two versions are paired as `siblings.pair`
pairs them (the pairing `diff` uses too). Lists are matched under matched parents, so the outline
path is part of a headline's name; a headline with an :ID: that one side moved to another parent is
followed there (a refile), see below.

Rules, per part of a section and per list entry: changed on one side only, take that side; changed
identically, take it once; added on one side, keep it where that side put it (after its
predecessor; where both sides add at one place, ours first); deleted on one side and unchanged on
the other, delete it; deleted on one side and changed on the other, keep the changed subtree and
mark it; a part changed differently on both sides (or a headline added on both with one name and
different sections), keep ours in place and theirs as a copy right after it. A reordering by one
side is kept (ours' order is the frame; theirs' moves and additions go after their predecessor in
theirs' list). A headline moved (by :ID:) to another parent on one side is merged where it went
with the other side's version; moved on both to different parents, it stays where ours put it,
marked.

Conflicts stay in the file, in Org, marked as `conflicts` says. Theirs' copy holds theirs' section
only, with ours' stars (so it stands beside ours), and without the :ID: it shares with ours: the
children are merged under ours' headline on their own (each conflicting child gets its own copy), so
a copy of theirs' whole subtree would duplicate every descendant and its :ID: in the file, and
deleting the copy would throw away theirs' non-conflicting child edits with it. A preamble changed on
both sides keeps ours; theirs' becomes a conflict headline at the end of the file (a one-star headline
there never captures another's children), its text in a raw block so theirs' `#+TODO:` and
`#+STARTUP:` lines, which Org reads anywhere in a file, do not change how the merged file reads.

Cost. Subtrees equal (by oid) on two sides are taken whole, never opened. A list is compared as
tuples of oids: the common ends are cut off, and when the two sides' changes are apart, the
untouched run between them stands as one entry; only the headlines left are read. So merging one
edit on each side of a 1 MB file reads a few dozen objects. A move costs a search of what the
moving side changed, and a second pass; neither happens without a headline with an :ID: leaving a
list where the other side changed it. The merged text is rendered only when asked for
(`Merged.text`), as writing the file needs it anyway; conflict lines come from that walk too.
Recursion runs on an explicit stack of generators: files nest thousands deep.

The result's objects are those `org.parse` builds from its text: a file whose last line has no
line end gets one before the merge and loses it after if the 3-way merge of that bit says so, and
new sections are parsed under the file's setup. When that setup may differ between the sides or in
the result (TODO keywords, `#+STARTUP:`, line ends), or when a level changed on one side would make
the merged outline read differently, the merged text is parsed again whole.

Known limits, all kept safe (both versions in the file, reported, or one side's addition kept): a
`#+STARTUP:` line deep inside a subtree added or deleted whole is not seen; a move is recognised
only for a headline the base has under that :ID:, arriving under a headline in its base place, and
only where it left a list that the other side changed (a move on one side and a deletion on the
other where the lists otherwise agree keeps the moved headline; both moving it to one place with
different edits is a both-added conflict).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import chain, count

from .. import org
from ..hashing import Oid
from ..ingest import decode_org
from ..objects import Document, Headline, OrgObject, Tree
from ..org.syntax import OPTION
from .conflicts import Conflict, Within, marked, origin, preamble_conflict, walk
from .siblings import Getter, increasing, pair, split_section


@dataclass(frozen=True)
class _Mark:
    """A conflict as the merge records it: its marked section's text finds it in the result."""

    raw: str
    kind: str
    id: str | None


@dataclass(frozen=True)
class _Moved:
    """A headline (by :ID:) that one side, or both, moved to another list: each side's version."""

    ident: str
    base: Oid
    ours: Oid | None  # None: deleted on that side
    theirs: Oid | None
    movers: frozenset[str]


@dataclass(frozen=True, eq=False)
class Merged:
    """A merged document, the objects the merge made for it, and its conflicts.

    `objects` holds the new objects only (children before parents, the document last);
    `get` reads any object of the result, new or not.
    """

    document: Document
    objects: tuple[OrgObject, ...]
    marks: tuple[_Mark, ...] = field(repr=False)
    get: Getter = field(repr=False)

    @property
    def clean(self) -> bool:
        """Whether the merge found no conflict."""
        return not self.marks

    @cached_property
    def text(self) -> str:
        """The merged Org text (rendering walks the whole document: the cost of writing the file)."""
        return org.render(self.document, self.get)

    @property
    def data(self) -> bytes:
        """The merged file's bytes."""
        return self.text.encode()

    @cached_property
    def conflicts(self) -> tuple[Conflict, ...]:
        """The conflicts this merge made, in text order, with their lines (found by walking the result)."""
        pending: dict[str, deque[_Mark]] = defaultdict(deque)
        for mark in self.marks:
            pending[mark.raw].append(mark)
        found: list[Conflict] = []
        for line, within, headline in walk(self.document, self.get) if self.marks else ():
            waiting = pending.get(headline.raw)
            if waiting:
                mark = waiting.popleft()
                found.append(Conflict(mark.kind, within.outline(), mark.id, line))
                if len(found) == len(self.marks):
                    break
        return tuple(found)


@dataclass(frozen=True, eq=False)
class TreeMerge:
    """A merged tree, the objects made for it (the tree last), and the files both sides changed."""

    tree: Tree
    objects: tuple[OrgObject, ...]
    files: dict[str, Merged]  # path -> the merge of a file changed on both sides
    file_conflicts: tuple[Conflict, ...]  # a file deleted on one side and changed on the other

    @cached_property
    def conflicts(self) -> tuple[Conflict, ...]:
        """Every conflict, by path then line: whole files, then headlines (rendering those files)."""
        found = list(self.file_conflicts)
        found += [replace(c, path=path) for path, merged in self.files.items() for c in merged.conflicts]
        return tuple(sorted(found, key=lambda c: (c.path, c.line or 0)))


def merge_documents(base: Document | None, ours: Document, theirs: Document, get: Getter, *,
                    labels: tuple[str, str] = ("ours", "theirs"), erased: frozenset[Oid] = frozenset()) -> Merged:
    """Merge two versions of one Org file against their base (None: both added it); `labels` name the sides;
    `erased`: base headlines a hard erasure took from theirs (one ours changed is kept as an `erased` conflict)."""
    if ours.oid == theirs.oid or (base is not None and base.oid == theirs.oid):
        return Merged(ours, (), (), get)
    if base is not None and base.oid == ours.oid:
        return Merged(theirs, (), (), get)
    return _Merge(get, ours, labels, erased).documents(base or Document(preamble=""), ours, theirs)


def merge_texts(base: str | bytes | None, ours: str | bytes, theirs: str | bytes, *,
                labels: tuple[str, str] = ("ours", "theirs")) -> Merged:
    """Merge three versions of one Org file given as text (parsing each whole)."""
    objects: dict[Oid, OrgObject] = {}

    def document(text: str | bytes) -> Document:
        parsed = org.parse(text if isinstance(text, str) else decode_org(text))
        objects.update((obj.oid, obj) for obj in parsed.objects)
        return parsed.document

    return merge_documents(None if base is None else document(base), document(ours), document(theirs),
                           objects.__getitem__, labels=labels)


def merge_trees(base: Tree | Mapping[str, Oid] | None, ours: Tree | Mapping[str, Oid],
                theirs: Tree | Mapping[str, Oid], get: Getter, *,
                labels: tuple[str, str] = ("ours", "theirs"), erased: frozenset[Oid] = frozenset()) -> TreeMerge:
    """Merge two trees (path -> document oid) against their base; only files changed on both sides are opened.
    `erased`: base headlines a hard erasure took from theirs; a file that held one, changed by ours and gone
    from theirs, keeps only what ours changed (as `erased` conflicts)."""
    base, ours, theirs = (_tree(tree) for tree in (base, ours, theirs))
    b, o, t = base.entries, ours.entries, theirs.entries
    changes: dict[str, Oid | None] = {}  # to ours: each path a side changed (the folders alike are not opened)
    files: dict[str, Merged] = {}
    conflicts: list[Conflict] = []
    objects: list[OrgObject] = []
    for path in sorted(ours.differing(base) | theirs.differing(base)):
        x, y, z = b.get(path), o.get(path), t.get(path)
        if y == z or x == z:
            kept = y
        elif x == y:
            kept = z
        elif z is None and y is not None and x is not None and erased and holds(get, x, erased):
            merged = files[path] = merge_documents(get(x), get(y), Document(preamble=""), get, labels=labels,
                                                   erased=erased)
            objects.extend(merged.objects)
            kept = merged.document.oid if merged.document.children or merged.document.preamble else None
        elif y is None or z is None:  # deleted on one side, changed on the other: keep the change
            kept = z if y is None else y
            conflicts.append(Conflict("ours-deleted" if y is None else "theirs-deleted", path=path))
        else:
            merged = files[path] = merge_documents(None if x is None else get(x), get(y), get(z), get,
                                                   labels=labels, erased=erased)
            objects.extend(merged.objects)
            kept = merged.document.oid
        if kept != y:
            changes[path] = kept
    tree = ours.with_changes(changes)
    return TreeMerge(tree, (*objects, tree), files, tuple(conflicts))


def holds(get: Getter, document: Oid, headlines: frozenset[Oid] | set[Oid]) -> bool:
    """Whether the document (or headline) holds one of `headlines` below it, at any depth."""
    stack = list(get(document).children)
    while stack:
        oid = stack.pop()
        if oid in headlines:
            return True
        stack.extend(get(oid).children)
    return False


def _tree(tree: Tree | Mapping[str, Oid] | None) -> Tree:
    """A tree, given as one or as its path -> oid entries (none for a missing base)."""
    return tree if isinstance(tree, Tree) else Tree(tree)


class _Block:
    """A run of siblings that neither side touched, one entry in a list merge instead of many."""

    __slots__ = ("oids",)

    def __init__(self, oids: tuple[Oid, ...]):
        self.oids = oids


Task = Generator["Task", object, object]


def _drive(task: Task):
    """Run generator-based recursion on an explicit stack: a task yields a subtask and is sent its result."""
    stack, value = [task], None
    while True:
        try:
            sub = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
        else:
            stack.append(sub)
            value = None


class _Merge:
    """One document merge: the objects it made, its conflict marks, and whether to parse the result again."""

    def __init__(self, get: Getter, ours: Document, labels: tuple[str, str], erased: frozenset[Oid] = frozenset()):
        self.store_get = get
        self.erased = erased
        self.made: dict[Oid, OrgObject] = {}
        self.marks: list[_Mark] = []
        self.labels = tuple(" ".join(label.split()) for label in labels)  # property values are one line
        self.eol, self.crlf = "\n", False  # the file's line end, set from the versions by `documents`
        self.todo, self.done = ours.todo_keywords, ours.done_keywords
        self.reparse = False
        # :ID:s leaving a list on a side, and arriving in one: headlines moved to another parent.
        self.left: dict[str, list[tuple[Oid, Oid | None, set[str]]]] = defaultdict(list)
        self.arrived: dict[str, list[tuple[str, Oid]]] = defaultdict(list)
        self.moves: dict[str, _Moved] = {}
        self.through: set[Oid] = set()  # headlines on the way to a moved one: opened, not taken whole
        self.merged_moves: set[tuple[str, str]] = set()  # (:ID:, the side that moved it) merged where it went

    def get(self, oid: Oid) -> OrgObject:
        made = self.made.get(oid)
        return made if made is not None else self.store_get(oid)

    def make(self, obj: OrgObject) -> Oid:
        self.made[obj.oid] = obj
        return obj.oid

    def watch(self, *texts: str) -> None:
        """Parse the result again if a changed text holds a line that sets up the whole file."""
        if not self.reparse and any(OPTION.search(text) for text in texts):
            self.reparse = True

    def documents(self, base: Document, ours: Document, theirs: Document) -> Merged:
        own, other = _eol(ours, self.get), _eol(theirs, self.get)
        # The sides' sections were parsed under different setups: parse the merged text again.
        differs = bool(own and other and own != other) or (ours.todo_keywords, ours.done_keywords) != (
            theirs.todo_keywords, theirs.done_keywords)
        self.eol = own or other or _eol(base, self.get) or "\n"  # a file of one line tells none
        self.crlf = self.eol == "\r\n"
        (base, b_ends), (ours, o_ends), (theirs, t_ends) = (self.ended(d) for d in (base, ours, theirs))
        ends = t_ends if o_ends == b_ends else o_ends
        self.reparse = differs
        document = self.whole(base, ours, theirs, ends)
        # Again while headlines turn out to have moved (one inside another shows once that one is merged).
        while (moves := self.moves_seen(base, ours, theirs)).keys() - self.moves.keys():
            done = document, self.marks, self.reparse
            self.moves = {**self.moves, **moves}
            self.marks, self.reparse, self.merged_moves = [], differs, set()
            self.left, self.arrived = defaultdict(list), defaultdict(list)
            document = self.whole(base, ours, theirs, ends)
            if self.merged_moves != {(ident, side) for ident, move in self.moves.items() for side in move.movers}:
                document, self.marks, self.reparse = done  # a move not merged where it went: keep both versions
                break
        if self.reparse:
            parsed = org.parse(org.render(document, self.get))
            objects = {obj.oid: obj for obj in parsed.objects}
            return Merged(parsed.document, parsed.objects, tuple(self.marks), objects.__getitem__)
        return Merged(document, self.new_objects(document), tuple(self.marks), self.get)

    def whole(self, base: Document, ours: Document, theirs: Document, ends: bool) -> Document:
        """The merged document (of versions that all end their last line), ending its last line if `ends`."""
        preamble, clash = self.preamble(base.preamble, ours.preamble, theirs.preamble)
        children = _drive(self.siblings(base, ours, theirs, None))
        if clash:
            children += (self.preamble_copy(theirs.preamble),)
        document = (ours.with_children(children, org.common_ends(ours.children, children))
                    if preamble == ours.preamble else replace(ours, preamble=preamble, children=children))
        return document if ends else self.last_piece(document, self.unended)

    def ended(self, document: Document) -> tuple[Document, bool]:
        """The document with a line end after its last line, and whether it had one: so a section
        that was last can be followed by another, and "x" and "x\\n" do not read as two edits."""
        spine = self.spine(document)
        last = spine[-1].raw if spine else document.preamble
        if last.endswith("\n") or not last:
            return document, True
        return self.last_piece(document, lambda text: text + self.eol), False

    def unended(self, text: str) -> str:
        """`text` without its last line end; a conflict marked by that text is found by the new one."""
        cut = text[:-len(self.eol)] if text.endswith(self.eol) else text[:-1]
        self.marks = [replace(mark, raw=cut) if mark.raw == text else mark for mark in self.marks]
        return cut

    def spine(self, document: Document) -> list[Headline]:
        """The last top-level headline, its last child, and so on down to the file's last section."""
        spine: list[Headline] = []
        children = document.children
        while children:
            spine.append(self.get(children[-1]))
            children = spine[-1].children
        return spine

    def last_piece(self, document: Document, change: Callable[[str], str]) -> Document:
        """The document with `change` applied to its last section (or its preamble when it has no headline)."""
        spine = self.spine(document)
        if not spine:
            return replace(document, preamble=change(document.preamble))
        oid = self.make(replace(spine[-1], raw=change(spine[-1].raw)))
        for headline in reversed(spine[:-1]):
            oid = self.make(replace(headline, children=headline.children[:-1] + (oid,)))
        return replace(document, children=document.children[:-1] + (oid,))

    def preamble(self, b: str, o: str, t: str) -> tuple[str, bool]:
        """The merged preamble, and whether both sides changed it differently (then ours is kept)."""
        if o == b == t:
            return o, False
        self.watch(b, o, t)
        if o == b:
            return t, False
        return o, not (t == b or t == o)

    def preamble_copy(self, text: str) -> Oid:
        """Theirs' preamble as a conflict headline (`conflicts.preamble_conflict`)."""
        return self.mark(preamble_conflict(text, self.labels[1], self.eol), "preamble", None, None, ())

    def siblings(self, hb: OrgObject | None, ho: OrgObject, ht: OrgObject, within: Within | None) -> Task:
        """Merge three versions of a list of children, those of `hb` (None: none), `ho` and `ht`; its
        result is the merged tuple of oids."""
        b, o, t = () if hb is None else hb.children, ho.children, ht.children
        # What each side shares with the base at either end (a list may hold thousands of siblings).
        (po, so), (pt, st) = ((0, 0), (0, 0)) if hb is None else (org.common_children(hb, ho),
                                                                    org.common_children(hb, ht))
        if (po, so) == (pt, st) and o == t:  # (the sides' lists differ where their ends do)
            return o
        if pt == len(b) == len(t) and not self.leads_to_move(o):
            return o
        if po == len(b) == len(o) and not self.leads_to_move(t):
            return t
        head, (bm, om, tm), tail = _middle(b, o, t, (po, so), (pt, st))
        to_o, to_t = self.pair(bm, om, loose=True), self.pair(bm, tm, loose=True, gone=self.erased)
        # A token names one headline across the versions: base entries first, then additions.
        o_tok, t_tok = [None] * len(om), [None] * len(tm)
        for i, j in to_o.items():
            o_tok[j] = i
        for i, k in to_t.items():
            t_tok[k] = i
        fresh = count(len(bm))
        o_new = [j for j, tok in enumerate(o_tok) if tok is None]
        for j in o_new:
            o_tok[j] = next(fresh)
        t_new = [k for k, tok in enumerate(t_tok) if tok is None]
        for x, y in self.pair([om[j] for j in o_new], [tm[k] for k in t_new], loose=False).items():
            t_tok[t_new[y]] = o_tok[o_new[x]]  # added on both sides under one name
        for k in t_new:
            if t_tok[k] is None:
                t_tok[k] = next(fresh)
        sides: dict[int, list] = {i: [entry, None, None] for i, entry in enumerate(bm)}
        for j, tok in enumerate(o_tok):
            sides.setdefault(tok, [None, None, None])[1] = om[j]
        for k, tok in enumerate(t_tok):
            sides.setdefault(tok, [None, None, None])[2] = tm[k]

        results: dict[int, tuple[Oid, ...]] = {}
        whole: set[int] = set()
        for tok, (x, y, z) in sides.items():
            if isinstance(x, _Block):
                results[tok] = x.oids
                whole.add(tok)
            elif out := (yield self.entry(x, y, z, within)):
                results[tok] = out
        order = _order(range(len(bm)), o_tok, t_tok, results)
        runs = [(head, True), *((results[tok], tok in whole) for tok in order), (tail, True)]
        if not self.levels_hold(runs):
            self.reparse = True
        return tuple(chain.from_iterable(run for run, _ in runs))  # at C speed: a run may hold thousands

    def leads_to_move(self, oids: tuple[Oid, ...]) -> bool:
        """Whether a list holds a headline on the way to one moved here (one side's version, to merge)."""
        return bool(self.through) and not self.through.isdisjoint(oids)

    def entry(self, x: Oid | None, y: Oid | None, z: Oid | None, within: Within | None) -> Task:
        """Merge one headline of a list (None: absent from that version); its result is the oids it
        becomes, none when it is deleted or moved away. Records :ID:s leaving and arriving, for `moves_seen`."""
        if y is not None and z is not None:
            if x is None and (ident := self.get(y).id):
                moved = self.moves.get(ident)
                if moved is not None:  # both sides moved it here
                    x = moved.base
                    self.merged_moves |= {(ident, "ours"), (ident, "theirs")}
                self.arrived[ident] += [("ours", y), ("theirs", z)]
            return (yield self.node(x, y, z, within))
        if x is None:  # added on one side
            added = y if z is None else z
            headline = self.get(added)
            self.watch(headline.raw)
            moved = self.moves.get(headline.id) if headline.id else None
            if moved is not None:
                return (yield self.moved_here(moved, y, z, within))
            if headline.id:
                self.arrived[headline.id].append(("ours" if z is None else "theirs", added))
            return (added,)
        headline = self.get(x)
        self.watch(headline.raw)
        if headline.id in self.moves:  # merged where it went
            return ()
        kept = y if z is None else z
        if kept == x:  # deleted on one side, untouched on the other
            return ()
        deleter = "theirs" if z is None else "ours"
        if headline.id:
            self.left[headline.id].append((x, kept, {"ours", "theirs"} if kept is None else {deleter}))
        if kept is None:  # deleted on both sides
            return ()
        label = self.labels[0] if z is None else self.labels[1]
        if z is None and self.erased:  # kept as ours changed it, without the erased text it did not change
            kind = "erased" if x in self.erased else "theirs-deleted"
            return (self.survivor(self.unerased(kept), kind, label, within),)
        return (self.survivor(kept, f"{deleter}-deleted", label, within),)

    def unerased(self, oid: Oid) -> Oid:
        """The subtree `oid` (not itself erased) without the erased headlines under it: the headline and the
        headlines ours changed or added, each with what it holds that was not erased."""
        done: dict[Oid, Oid | None] = {}
        stack = [oid]
        while stack:  # children before parents, without recursion: files nest thousands deep
            top = stack[-1]
            if top in done:
                stack.pop()
                continue
            if top in self.erased:
                done[top] = None
                stack.pop()
                continue
            headline = self.get(top)
            waiting = [child for child in headline.children if child not in done]
            if waiting:
                stack.extend(waiting)
                continue
            children = tuple(kept for child in headline.children if (kept := done[child]) is not None)
            done[top] = top if children == headline.children else self.make(replace(headline, children=children))
            stack.pop()
        return done[oid]

    def moved_here(self, moved: _Moved, y: Oid | None, z: Oid | None, within: Within | None) -> Task:
        """A headline one side moved here from another list, merged with the other side's version."""
        self.merged_moves.add((moved.ident, "ours" if z is None else "theirs"))
        if y is not None:
            if moved.theirs is None:
                return (self.survivor(y, "theirs-deleted", self.labels[0], within),)
            out = yield self.node(moved.base, y, moved.theirs, within)
            if "theirs" in moved.movers:  # theirs moved it elsewhere: it stays where ours put it, marked
                out = (self.survivor(out[0], "both-moved", self.labels[0], within), *out[1:])
            return out
        if "ours" in moved.movers:
            return ()
        if moved.ours is None:
            return (self.survivor(z, "ours-deleted", self.labels[1], within),)
        return (yield self.node(moved.base, moved.ours, z, within))

    def moves_seen(self, base: Document, ours: Document, theirs: Document) -> dict[str, _Moved]:
        """The :ID:s that left a list on a side (where the other side changed them, or both lacked them)
        and arrived in another list on that side, once; where an arrival was not merged, it is looked for."""
        for side, document in (("ours", ours), ("theirs", theirs)):
            wanted = {ident for ident, left in self.left.items() if side in left[0][2]
                      and all(name != side for name, _ in self.arrived.get(ident, ()))}
            if wanted:
                self.look_for(wanted, side, base, document)
        moves = {}
        for ident, left in self.left.items():
            arrivals = self.arrived.get(ident, [])
            where = dict(arrivals)
            if len(left) != 1 or not arrivals or len(where) != len(arrivals) or not where.keys() <= left[0][2]:
                continue
            base, kept, lacking = left[0]
            ours, theirs = (where.get(side, None if side in lacking else kept) for side in ("ours", "theirs"))
            moves[ident] = _Moved(ident, base, ours, theirs, frozenset(where))
        return moves

    def look_for(self, wanted: set[str], side: str, base: Document, document: Document) -> None:
        """Find where the `wanted` :ID:s are in one side's document, opening only what differs from the
        base; record them as arrived, and the headlines on the way to them in `through`.

        Only lists under headlines the base has are searched: a subtree added whole is taken whole,
        so a headline moved into it is not a move here (it stays a delete/change conflict, both kept).
        """
        stack: list[tuple[tuple[Oid, ...], tuple[Oid, ...], tuple | None]] = [(base.children, document.children, None)]
        while stack:
            b_list, s_list, way = stack.pop()  # `way`: (oid, way to its parent), the path to this list
            known = set(b_list)
            if known.issuperset(s_list):
                continue
            partner = {j: i for i, j in self.pair(list(b_list), list(s_list), loose=True).items()}
            for j, oid in enumerate(s_list):
                if oid in known:
                    continue
                headline, here = self.get(oid), (oid, way)
                if headline.id in wanted:
                    self.arrived[headline.id].append((side, oid))
                    while here is not None:
                        self.through.add(here[0])
                        here = here[1]
                if j in partner:
                    stack.append((self.get(b_list[partner[j]]).children, headline.children, (oid, way)))

    def node(self, b: Oid | None, o: Oid, t: Oid, within: Within | None) -> Task:
        """Merge one headline present on both sides; its result is the oids it becomes (with a copy on a clash)."""
        if o == t:
            return (o,)
        if b == o and t not in self.through:
            return (t,)
        if b == t and o not in self.through:
            return (o,)
        hb, ho, ht = None if b is None else self.get(b), self.get(o), self.get(t)
        base_raw = ho.raw if hb is None else hb.raw
        if not ho.raw == ht.raw == base_raw:
            self.watch(ho.raw, ht.raw, base_raw)
        # The headline line and the rest of the section (planning, drawer, text) merge on their own:
        # a retitle, a TODO state or a refile's new level on one side and new text on the other is no clash.
        (line, line_clash), (rest, rest_clash) = (
            _three_way(*parts) for parts in zip(*(split_section(raw) for raw in (base_raw, ho.raw, ht.raw))))
        clash = hb is None and ho.raw != ht.raw or line_clash or rest_clash
        raw = ho.raw if clash else line + rest
        own = ho if raw == ho.raw else ht if raw == ht.raw else \
            self.section(raw, ho if line == split_section(ho.raw)[0] else ht)
        children = yield self.siblings(hb, ho, ht, Within(within, own.title))
        oid = self.make(own if children == own.children else replace(own, children=children))
        if children and self.stars(children[-1]) <= _stars(own.raw):
            self.reparse = True  # a level changed on one side: the children would read as siblings
        if not clash:
            return (oid,)
        kind = "both-added" if hb is None else "both-changed"
        # The copy drops an :ID: ours has too (two headlines with one :ID: confuse org-id), not one theirs added.
        raw = marked(ht, origin(ho, within), self.labels[1], kind, stars=_stars(ho.raw),
                     drop_id=ho.id is not None and ht.id == ho.id, crlf=self.crlf)
        return (oid, self.mark(raw, kind, ho.id, ho, ()))

    def survivor(self, oid: Oid, kind: str, label: str, within: Within | None) -> Oid:
        """A subtree deleted on one side and changed on the other, kept whole and marked."""
        headline = self.get(oid)
        raw = marked(headline, origin(headline, within), label, kind, stars=None, drop_id=False, crlf=self.crlf)
        return self.mark(raw, kind, headline.id, headline, headline.children)

    def mark(self, raw: str, kind: str, ident: str | None, like: Headline | None, children: tuple[Oid, ...]) -> Oid:
        """Record a conflict whose marked section is `raw`, and make its headline."""
        self.marks.append(_Mark(raw, kind, ident))
        headline = self.section(raw, like)
        return self.make(replace(headline, children=children) if children else headline)

    def section(self, raw: str, like: Headline | None) -> Headline:
        """The headline `raw` reads as in this file: parsed after lines giving the file's TODO keywords
        and odd levels (a section reads the same in any file with the same setup and line ends)."""
        eol = self.eol if self.crlf else "\n"
        setup = f"#+TODO: {' '.join(self.todo)} | {' '.join(self.done)}{eol}"
        if like is not None and like.level != _stars(like.raw):
            setup += f"#+STARTUP: odd{eol}"
        headline, _document = org.parse(setup + raw).objects
        return headline

    def pair(self, xs: list, ys: list, *, loose: bool, gone: frozenset[Oid] = frozenset()) -> dict[int, int]:
        """`siblings.pair`, knowing the headlines this merge found moved."""
        return pair(xs, ys, self.get, loose=loose, moving=self.moves, gone=gone)

    def levels_hold(self, runs: list[tuple[tuple[Oid, ...], bool]]) -> bool:
        """Whether siblings read as siblings: each has no more stars than the one before (runs
        marked whole come from one version's list, so only their ends are read)."""
        previous = None
        for oids, whole in runs:
            if not oids:
                continue
            pairs = [] if previous is None else [(previous, oids[0])]
            if not whole:
                pairs += zip(oids, oids[1:])
            if any(self.stars(a) < self.stars(b) for a, b in pairs):
                return False
            previous = oids[-1]
        return True

    def stars(self, oid: Oid) -> int:
        return _stars(self.get(oid).raw)

    def new_objects(self, document: Document) -> tuple[OrgObject, ...]:
        """The objects this merge made that the result reaches, children before parents, the document last."""
        if not self.made:  # only the document is new: its children are the sides'
            return (document,)
        found: list[OrgObject] = []
        stack: list[OrgObject] = [document]
        seen: set[Oid] = set()
        while stack:
            obj = stack.pop()
            found.append(obj)
            # Its children this merge made, found at C speed (a parent may have thousands of children).
            for oid in sorted(self.made.keys() & obj.children):
                if oid not in seen:
                    seen.add(oid)
                    stack.append(self.made[oid])
        return tuple(reversed(found))


def _middle(b: tuple, o: tuple, t: tuple, o_ends: tuple[int, int], t_ends: tuple[int, int]
            ) -> tuple[tuple, list[list], tuple]:
    """Cut the ends all three lists share (`o_ends`, `t_ends`: what each side shares with the base at
    its start, then its end); when the two sides' changes are apart, the untouched run between them
    becomes one `_Block` entry in each. Returns (head, [base, ours, theirs] middles, tail)."""
    (po, so), (pt, st) = o_ends, t_ends
    lo, keep = min(po, pt), min(so, st)
    o_end, t_end = len(b) - so, len(b) - st  # where each side's change ends, in the base
    first, gap_lo, gap_hi = (1, o_end, pt) if o_end < pt else (2, t_end, po) if t_end < po else (0, 0, 0)
    if first:
        block = _Block(b[gap_lo:gap_hi])
        middles = []
        for k, seq in enumerate((b, o, t)):
            shift = len(seq) - len(b) if k == first else 0  # the gap is after this side's change
            middles.append([*seq[lo:gap_lo + shift], block, *seq[gap_hi + shift:len(seq) - keep]])
    else:
        middles = [list(seq[lo:len(seq) - keep]) for seq in (b, o, t)]
    return b[:lo], middles, b[len(b) - keep:]


def _order(base: Iterable[int], ours: list[int], theirs: list[int], present: Mapping[int, object]) -> list[int]:
    """The merged order of the tokens kept: ours' order, with what theirs added, moved or kept against
    ours' deletion placed after its predecessor in theirs' list (after ours' additions there). What ours
    added after a headline theirs moved moves with it: an addition is placed after its predecessor."""
    b = [x for x in base if x in present]
    o = [x for x in ours if x in present]
    t = [x for x in theirs if x in present]
    moved_o, moved_t = _moved(b, o), _moved(b, t)
    in_o = set(o)
    ours_only = in_o - set(b) - set(t)
    merged = list(o)
    previous = None
    for x in t:
        if x not in in_o or (x in moved_t and x not in moved_o):
            run = [x]
            if x in in_o:
                start = end = merged.index(x)
                end += 1
                while end < len(merged) and merged[end] in ours_only:
                    end += 1
                run = merged[start:end]
                del merged[start:end]
            at = 0 if previous is None else merged.index(previous) + 1
            while at < len(merged) and merged[at] in ours_only:
                at += 1
            merged[at:at] = run
        previous = x
    return merged


def _moved(base: list[int], side: list[int]) -> set[int]:
    """The tokens a side moved: those of both lists outside a longest run kept in the base's order."""
    where = {x: k for k, x in enumerate(base)}
    common = [x for x in side if x in where]
    kept = {common[k] for k in increasing([where[x] for x in common])}
    return set(common) - kept


def _eol(document: Document, get: Getter) -> str | None:
    """The file's line end, as its first line ends (None when it has no line end)."""
    text = document.preamble
    if "\n" not in text and document.children:
        text = get(document.children[0]).raw
    at = text.find("\n")
    return None if at < 0 else "\r\n" if at > 0 and text[at - 1] == "\r" else "\n"


def _three_way(base: str, ours: str, theirs: str) -> tuple[str, bool]:
    """The merge of one text: the side that changed it, and whether both changed it differently."""
    if ours == base:
        return theirs, False
    return ours, theirs not in (base, ours)


def _stars(raw: str) -> int:
    return len(raw) - len(raw.lstrip("*"))


