"""Re-parsing an edited file from what is known of it: a parsed file's `Layout` (its bytes and
outline), `reparse` of an edit of them, and `Layout.splice` of an edited document into bytes.

An edit of a file whose layout is known is parsed from the bytes around it: only the sections it
touched are scanned, decoded and parsed; every subtree outside it keeps its oid without being read.
Rendering an edited document copies the bytes of the subtrees it shares with the old one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from ..hashing import Oid
from ..objects import CHILD_BYTES, Document, OrgObject, children_in_encoding
from .parser import (Cached, Getter, Parsed, Setup, build_subtrees, child_keys, finish, key_prefix, kids, parent_of,
                     subtree_ends, subtree_key)
from .rendering import subtree_parts
from .syntax import OPTION_BYTES, headline_starts

__all__ = ["Layout", "Splice", "common_children", "common_ends", "reparse"]


def _spliced_ends(old_after: list[int], stars: list[int], a: int, touched: int, moved: int) -> list[int]:
    """`subtree_ends(stars)` when headlines [a, a + touched) replaced others and those after moved:
    only the subtrees open across the change are followed again."""
    count = len(stars)
    after = old_after[:a] + [count] * touched + _shifted(old_after[a + touched + moved:], -moved)
    open_ = []  # the headlines open at `a`, outermost first: the last one before it and its ancestors
    i = a - 1
    while i >= 0:
        open_.append(i)
        i = parent_of(stars, i, stars[i])
    open_.reverse()
    i = a
    while i < count and (open_ or i < a + touched):
        while open_ and stars[open_[-1]] >= stars[i]:
            after[open_.pop()] = i
        if i < a + touched:
            open_.append(i)
        i += 1
    for i in open_:
        after[i] = count
    return after


def _shifted(values: list[int], by: int) -> list[int]:
    """`values` each plus `by` (an edit that moves nothing copies no list)."""
    return [value + by for value in values] if by else values


def _kid_at(outline: "_Outline", lo: int, hi: int, kids: tuple[Oid, ...], k: int) -> int:
    """The k-th of the sibling subtrees `kids` spanning headlines [lo, hi) (`hi` for k = len(kids)): the
    k-th headline there when each is one headline; else found by its oid (at C speed) when no sibling
    before it shares it, else walked to from the nearer end."""
    count, stars = len(kids), outline.stars
    if count == hi - lo:  # none has children
        return lo + k
    if k < count and kids.index(kids[k]) == k:
        try:
            at = outline.oids.index(kids[k], lo, hi)
        except ValueError:  # not known yet (below the top level)
            at = -1
        if at >= 0 and parent_of(stars, at, stars[at]) == lo - 1:  # not a descendant holding the same text
            return at
    if k <= count - k:
        at = lo
        for _ in range(k):
            at = outline.after[at]
        return at
    at = hi
    for _ in range(count - k):  # back over one sibling: up from the headline before, to the siblings' level
        at -= 1
        while (parent := parent_of(stars, at, stars[at])) >= lo:
            at = parent
    return at


@dataclass
class Splice:
    """An edit of a layout's document into `document`: its headlines [first, last), bytes [start, stop),
    became the subtrees `new` (their bytes `changed`), under the headlines `path` (index, new oid),
    outermost first, making the bytes `data`."""

    document: Document
    first: int
    last: int
    start: int
    stop: int
    changed: bytes
    new: tuple[Oid, ...]
    path: list[tuple[int, Oid]]
    data: bytes


@dataclass
class _Outline:
    """Where a file's headlines start (in bytes), their stars, subtrees and the oids known so far."""

    starts: list[int]
    stars: list[int]
    after: list[int]
    oids: list["Oid | None"]
    newlines: int
    crlfs: int


class Layout:
    """A parsed file's bytes and outline, kept so that an edit of it re-parses only what it touched."""

    def __init__(self, data: bytes, setup: Setup, document: Document, keys: list[bytes],
                 outline: _Outline | None = None, edit: tuple[int, int] = (0, 0),
                 absent: frozenset[bytes] = frozenset()):
        self.data = data
        self.setup = setup
        self.document = document
        self.keys = keys  # every headline's subtree key, in text order
        self._outline = outline
        self._edit = edit  # the span of `data` an edit wrote over bytes that held none of `absent`
        self._absent = absent
        self._found: dict[bytes, bool] = {}

    @classmethod
    def of(cls, data: bytes, parsed: Parsed) -> "Layout":
        """The layout of `data`, whose parse is `parsed`; its outline is scanned when first needed."""
        return cls(data, parsed.setup, parsed.document, parsed.keys)

    @property
    def outline(self) -> _Outline:
        if self._outline is None:
            starts, stars = headline_starts(self.data)
            after = subtree_ends(stars)
            oids: list[Oid | None] = [None] * len(starts)
            for i, oid in zip(kids(after, 0, len(after)), self.document.children):
                oids[i] = oid
            self._outline = _Outline(starts, stars, after, oids,
                                     self.data.count(b"\n"), self.data.count(b"\r\n"))
        return self._outline

    def contains(self, marker: bytes) -> bool:
        """Whether the bytes hold `marker`; after an edit of bytes known not to, only around the edit is searched."""
        found = self._found.get(marker)
        if found is None:
            start, end = self._edit
            if marker in self._absent:
                found = marker in self.data[max(0, start - len(marker) + 1):end + len(marker) - 1]
            else:
                found = marker in self.data
            self._found[marker] = found
        return found

    def edited(self, splice: "Splice") -> "Layout | None":
        """The layout of the bytes a `splice` of this layout's made, known without parsing them: the
        outline and keys outside the changed subtrees are this one's. None when the edit reaches what
        every section depends on (the preamble, a TODO or STARTUP line, the line ends): parse its bytes.
        It reads nothing but the two, so it may run on another thread."""
        outline, data, first, last = self.outline, splice.data, splice.first, splice.last
        start, end = splice.start, splice.start + len(splice.changed)
        old_part = self.data[start:splice.stop]
        newlines = outline.newlines - old_part.count(b"\n") + splice.changed.count(b"\n")
        crlfs = outline.crlfs - old_part.count(b"\r\n") + splice.changed.count(b"\r\n")
        if (OPTION_BYTES.search(old_part) or OPTION_BYTES.search(splice.changed)
                or (0 < crlfs == newlines) != self.setup.crlf):
            return None
        mid_starts, mid_stars = headline_starts(data, start, end)
        touched, moved = len(mid_starts), last - first - len(mid_starts)
        starts = outline.starts[:first] + mid_starts + _shifted(outline.starts[last:], end - splice.stop)
        stars = outline.stars[:first] + mid_stars + outline.stars[last:]
        after = _spliced_ends(outline.after, stars, first, touched, moved)
        tops = list(kids(after, first, first + touched))
        if len(tops) != len(splice.new):  # the new subtrees do not read as siblings: parse
            return None
        oids = outline.oids[:first] + [None] * touched + outline.oids[last:]
        for i, oid in [*zip(tops, splice.new), *splice.path]:
            oids[i] = oid
        keys = self.keys[:first] + [b""] * touched + self.keys[last:]
        bounds, prefix = starts + [len(data)], key_prefix(self.setup)
        for i in [*reversed(range(first, first + touched)), *(i for i, _ in reversed(splice.path))]:
            keys[i] = subtree_key(prefix, memoryview(data)[bounds[i]:bounds[i + 1]], child_keys(keys, after, i))
        absent = frozenset(marker for marker, found in self._found.items() if not found)
        return Layout(data, self.setup, splice.document, keys, _Outline(starts, stars, after, oids, newlines, crlfs),
                      (start, end), absent)

    def splice(self, document: Document, get: Getter) -> "Splice | None":
        """`document`'s bytes, an edit of this layout's, and where they differ from these: the subtrees
        both share before and after what changed are copied from these bytes (walking down into a subtree
        whose own section stayed), so only the changed ones are rendered. None when the preamble changed
        (render the document whole)."""
        if document.preamble != self.document.preamble:
            return None
        outline, data = self.outline, self.data
        starts, after = outline.starts, outline.after
        was, now, lo, hi = self.document, document, 0, len(starts)
        path: list[tuple[int, Oid]] = []

        def at(i: int) -> int:  # where headline i starts (the end, past the last one)
            return starts[i] if i < len(starts) else len(data)

        while True:  # was's k-th child is the subtree of the k-th child of headline lo - 1, in [lo, hi)
            old, new = was.children, now.children
            head, tail = common_children(was, now)
            first = _kid_at(outline, lo, hi, old, head)
            if len(old) == len(new) == head + tail + 1:
                was_child, now_child = get(old[head]), get(new[head])
                if was_child.raw == now_child.raw:
                    path.append((first, new[head]))
                    was, now, lo, hi = was_child, now_child, first + 1, after[first]
                    continue
            last = first
            for _ in range(len(old) - tail - head):  # over the subtrees that changed
                last = after[last]
            changed = "".join(subtree_parts(new[head:len(new) - tail], get)).encode("utf-8")
            view = memoryview(data)
            return Splice(document, first, last, at(first), at(last), changed, new[head:len(new) - tail], path,
                           b"".join((view[:at(first)], changed, view[at(last):])))

    def oid(self, i: int, get: Getter) -> Oid:
        """The oid of headline `i`, read from its ancestors' children when not known yet."""
        outline = self.outline
        ancestors, at = [], i
        while outline.oids[at] is None:  # never for a top-level headline: parses know all of those
            at = parent_of(outline.stars, at, outline.stars[at])
            ancestors.append(at)
        for parent in reversed(ancestors):  # the nearest known one first, down to i's parent
            children = get(outline.oids[parent]).children
            for child, oid in zip(kids(outline.after, parent + 1, outline.after[parent]), children):
                outline.oids[child] = oid
        return outline.oids[i]


def reparse(old: Layout, data: bytes, get: Getter, cached: Cached | None = None) -> "tuple[Parsed, Layout] | None":
    """Parse `data`, an edit of the file `old` lays out, reading only the sections the edit touched.

    None when the edit reaches what every section depends on (the text before the first
    headline, a TODO or STARTUP keyword, the line ends) or breaks the headline it starts in,
    or when the touched text is not UTF-8: then `parse` the whole file.
    """
    outline = old.outline
    starts, stars = outline.starts, outline.stars
    first, old_end, new_end = _edit_span(old.data, data)
    if not starts or first <= starts[0]:
        return None
    # The sections from the one holding the byte before the edit (a changed line start may
    # open or close a headline) to the one holding its end; a headline right after the edit
    # is untouched when the edit ends a line.
    a = bisect_right(starts, first - 1) - 1
    b = (bisect_left if data[new_end - 1:new_end] == b"\n" else bisect_right)(starts, old_end)
    lo, shift = starts[a], len(data) - len(old.data)
    old_hi = starts[b] if b < len(starts) else len(old.data)
    old_part, new_part = old.data[lo:old_hi], data[lo:old_hi + shift]
    newlines = outline.newlines - old_part.count(b"\n") + new_part.count(b"\n")
    crlfs = outline.crlfs - old_part.count(b"\r\n") + new_part.count(b"\r\n")
    if (OPTION_BYTES.search(old_part) or OPTION_BYTES.search(new_part) or b"\0" in new_part
            or (0 < crlfs == newlines) != old.setup.crlf):
        return None
    try:
        new_part.decode("utf-8")
    except UnicodeDecodeError:
        return None
    mid_starts, mid_stars = headline_starts(data, lo, old_hi + shift)
    if not mid_starts or mid_starts[0] != lo:
        return None
    touched = len(mid_starts)
    starts = starts[:a] + mid_starts + _shifted(starts[b:], shift)
    stars = stars[:a] + mid_stars + stars[b:]
    moved = b - a - touched  # a headline after the edit had index i + moved before it
    after = _spliced_ends(outline.after, stars, a, touched, moved)
    old_after, old_oids = outline.after, outline.oids

    def known(i: int) -> Oid | None:
        """A subtree wholly before or after the touched sections has the same bytes, so the same oid."""
        if after[i] <= a and old_after[i] == after[i]:  # it ended at the same headline before
            j = i
        elif i >= a + touched:
            j = i + moved
        else:
            return None
        return old_oids[j] or old.oid(j, get)

    setup = old.setup
    view = memoryview(data)
    bounds = starts + [len(data)]
    # Untouched subtrees keep their keys; the touched ones and their ancestors get theirs in build_subtrees.
    keys = old.keys[:a] + [b""] * touched + old.keys[b:]

    def raw(i: int) -> memoryview:
        return view[bounds[i]:bounds[i + 1]]

    def section(i: int) -> str:
        return data[bounds[i]:bounds[i + 1]].decode("utf-8")

    def build(lo: int = 0, hi: int | None = None):
        return build_subtrees(after, setup, cached, keys, raw, section, known, lo, hi)

    spliced = _splice(old, get, stars, after, keys, raw, a, touched, moved, build)
    if spliced is not None:
        parsed, oids = spliced
    else:
        oids, objects, built = build()
        parsed = finish(old.document.preamble, setup, after, oids, objects, built, keys)
    absent = frozenset(marker for marker, found in old._found.items() if not found)
    return parsed, Layout(data, setup, parsed.document, keys,
                          _Outline(starts, stars, after, oids, newlines, crlfs), (first, new_end), absent)


def _splice(old: Layout, get: Getter, stars: list[int], after: list[int], keys: list[bytes],
            raw: Callable[[int], memoryview], a: int, touched: int, moved: int,
            build: Callable) -> "tuple[Parsed, list[Oid | None]] | None":
    """The parse of an edit that replaced whole subtrees [a, a + touched + moved) of one parent with
    the whole subtrees [a, a + touched) (new stars and ends), and each headline's oid.

    Only the new subtrees are built; their parent and its ancestors are the old objects with
    children spliced, so a section with thousands of children costs no more than a small one.
    None for any other edit, or when an oid to replace occurs twice among its siblings.
    """
    outline = old.outline
    new_tops, old_tops = _tiling(after, a, a + touched), _tiling(outline.after, a, a + touched + moved)
    parent = parent_of(stars, a, stars[a])
    if (new_tops is None or old_tops is None or parent_of(stars, a, outline.stars[a]) != parent
            or parent >= 0 and min(min(stars[t] for t in new_tops), min(outline.stars[t] for t in old_tops))
            <= stars[parent]):
        return None
    oids, objects, built = build(a, a + touched)
    oids[:a] = outline.oids[:a]
    oids[a + touched:] = outline.oids[a + touched + moved:]
    replaced, by = [old.oid(t, get) for t in old_tops], tuple(oids[t] for t in new_tops)
    prefix = key_prefix(old.setup)
    while True:
        holder = old.document if parent < 0 else get(old.oid(parent, get))
        siblings = holder.children
        if siblings.count(replaced[0]) != 1:
            return None
        at = siblings.index(replaced[0])
        new = holder.with_children(siblings[:at] + by + siblings[at + len(replaced):],
                                   (at, len(siblings) - at - len(replaced)))
        objects.append(new)
        if parent < 0:
            return Parsed(new, tuple(objects), built, old.setup, keys), oids
        keys[parent] = subtree_key(prefix, raw(parent), child_keys(keys, after, parent))
        built[keys[parent]] = oids[parent] = new.oid
        replaced, by = [holder.oid], (new.oid,)
        parent = parent_of(stars, parent, stars[parent])


def _tiling(after: list[int], lo: int, hi: int) -> list[int] | None:
    """The headlines whose subtrees, one after another, make up [lo, hi); None if one runs past hi."""
    tops = []
    while lo < hi:
        tops.append(lo)
        lo = after[lo]
    return tops if lo == hi else None


def _edit_span(old: bytes, new: bytes) -> tuple[int, int, int]:
    """(start, old end, new end): `old[start:old end]` became `new[start:new end]`, the rest is equal."""
    view = memoryview(new)
    same_start = _longest(min(len(old), len(new)), lambda lo, hi: old.startswith(view[lo:hi], lo))
    room = min(len(old), len(new)) - same_start
    shift = len(old) - len(new)
    same_end = _longest(room, lambda lo, hi: old.startswith(view[len(new) - hi:len(new) - lo], len(new) - hi + shift))
    start, old_end, new_end = same_start, len(old) - same_end, len(new) - same_end
    # Text inserted (or deleted) next to a copy of its own end can be placed anywhere along that
    # copy: place it as early as it goes within its line, so that whole lines read as whole lines.
    if start in (old_end, new_end):
        longer, end = (new, new_end) if start == old_end else (old, old_end)
        room = start - longer.rfind(b"\n", 0, start) - 1  # back to its line's start, compared in blocks
        back = _longest(room, lambda lo, hi: longer[start - hi:start - lo] == longer[end - hi:end - lo])
        start, old_end, new_end = start - back, old_end - back, new_end - back
    return start, old_end, new_end


def common_ends(x: tuple, y: tuple) -> tuple[int, int]:
    """How many entries two tuples share at the start, and then at the end of what is left."""
    n, lx, ly = min(len(x), len(y)), len(x), len(y)
    start = _longest(n, lambda i, j: x[i:j] == y[i:j], _ENTRIES)
    return start, _longest(n - start, lambda i, j: x[lx - j:lx - i] == y[ly - j:ly - i], _ENTRIES)


_ENTRIES = 512  # compared at once by `common_ends`: a run of thousands of siblings is copied about once


def common_children(x: OrgObject, y: OrgObject) -> tuple[int, int]:
    """`common_ends` of two objects' children; compared in their encodings when both are at hand, a
    byte string each, as a list of thousands compares faster there than oid by oid."""
    found_x, found_y = children_in_encoding(x), children_in_encoding(y)
    if found_x is None or found_y is None:
        return common_ends(x.children, y.children)
    (ex, at_x), (ey, at_y) = found_x, found_y
    view, size_x, size_y = memoryview(ey), CHILD_BYTES * len(x.children), CHILD_BYTES * len(y.children)
    start = _longest(min(size_x, size_y), lambda lo, hi: ex.startswith(view[at_y + lo:at_y + hi], at_x + lo))
    start -= start % CHILD_BYTES
    end_x, end_y = at_x + size_x, at_y + size_y
    end = _longest(min(size_x, size_y) - start,
                   lambda lo, hi: ex.startswith(view[end_y - hi:end_y - lo], end_x - hi))
    return start // CHILD_BYTES, end // CHILD_BYTES


def _longest(limit: int, equal: Callable[[int, int], bool], block: int = 1 << 16) -> int:
    """The largest n <= limit such that `equal(0, n)`, given `equal(lo, hi)` compares a span of it.

    Whole blocks first, so the bytes before the first difference are compared about once.
    """
    n = 0
    while n + block <= limit and equal(n, n + block):
        n += block
    lo, hi = n, min(n + block, limit)
    while lo < hi:  # equal(0, lo) holds; find the first difference in [lo, hi)
        mid = (lo + hi + 1) // 2
        if equal(lo, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
