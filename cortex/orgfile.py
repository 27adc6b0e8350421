"""Org text <-> object trees: parse as Emacs's Org 9.5 (org-element) does, render back exactly.

A fast scan splits a file at its headline lines (stars then a space; a tab after the stars
does not open a headline, and a headline inside a src block still is one).  Each headline
keeps the raw text of its own section, the text before the first headline is the
document's preamble, so rendering is concatenation and reproduces the bytes exactly.

Fields follow Emacs rather than orgparse: the TODO setup comes from `#+TODO:` /
`#+SEQ_TODO:` / `#+TYP_TODO:` keywords anywhere outside raw blocks, `#+STARTUP: odd`
reduces levels, the COMMENT keyword is not part of the title, tags may hold `#` and `%`,
the property drawer counts only right after the headline (or its planning line), its
names may contain `:`, duplicates are kept and values stay text.

Incremental parsing works on subtrees: a subtree's key hashes its own section and its
children's keys under the file's setup (Merkle-style, so keying every subtree hashes the text
once however deep it nests), and a `cached` lookup that knows the key returns the subtree's
oid, so nothing inside it is parsed or built again.  An edit of a file whose `Layout` is known goes
further (`reparse`): the bytes around the edit are compared, and only the sections it touched
are scanned, decoded and parsed; every subtree outside it keeps its oid without being read.

Line ends follow Emacs too: "\\r\\n" ends a line only in a file where every "\\n" follows a
"\\r"; in a file mixing both, "\\r" is text (Emacs shows it as ^M).  Old Mac files, with
"\\r" alone as the line end, are not split at "\\r" (Emacs would).  A UTF-8 byte-order mark is
not content, as when Emacs visits the file: it stays in the preamble, and the first line reads
as if the file started after it.

Any file costs work linear in its size, however deep or odd: walks of the outline are loops,
never recursions, and no pattern searches the same text again for each of many openers.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache

import blake3

from .codec import encode
from .hashing import Oid
from .objects import CHILD_BYTES, Document, Headline, OrgObject, children_in_encoding

# Bumped whenever parsing changes, so subtree keys from an older parser miss.
PARSER_VERSION = 2
DEFINITIONS_MARKER = ":cortex yes"  # the header argument of a source block that holds cortex definitions

_BOM, _BOM_BYTES = "\ufeff", b"\xef\xbb\xbf"

# Characters with whitespace syntax in an Org buffer (Emacs's `\s-`, not Python's `\s`).
_WS = " \t\n\f\r\xa0\u2000-\u200b\u202f\u205f\u3000"
_NONWS = f"[^{_WS}]"

# A headline is stars then a space at the start of a line.  Searching for the literal "\n*"
# is several times faster than a `^` pattern; the first line is checked on its own.
_HEADLINE = re.compile(r"\n(\*+) ")
_FIRST_HEADLINE = re.compile(r"(\*+) ")
_HEADLINE_BYTES = re.compile(rb"\n(\*+) ")
_FIRST_HEADLINE_BYTES = re.compile(rb"(\*+) ")
# An edit touching one of these lines may change how every section reads.
_OPTION_BYTES = re.compile(rb"#\+(?:TODO|SEQ_TODO|TYP_TODO|STARTUP):", re.I)

_OPTION = re.compile(r"#\+(TODO|SEQ_TODO|TYP_TODO|STARTUP):(.*)", re.I)
_LONGER_KEY = re.compile(f"{_NONWS}*:")
_RAW_BLOCKS = frozenset({"COMMENT", "EXAMPLE", "EXPORT", "SRC", "VERSE"})
_SPLIT = re.compile(r"[ \f\t\n\r\v]+")

_STARS = re.compile(r"\*+")
_BLANKS = re.compile(r"[ \t]*")
_PRIORITY = re.compile(r"\[#(.)\][ \t]*")
_TAG_PUNCT = frozenset("_@#%:")
_ALNUM_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl"})
_PLANNING_LINE = re.compile(r"[ \t]*(?:CLOSED|DEADLINE|SCHEDULED):", re.I)
# A planning keyword up to its timestamp's opening bracket; the closing brackets of the line are
# found once, so many unclosed timestamps do not each search the rest of the line.
_PLANNING_ENTRY = re.compile(r"\b(CLOSED|DEADLINE|SCHEDULED): *(?=[<\[](?:\d{4}-\d{2}-\d{2}|%%\())", re.I)
_STAMP_END = re.compile(r"[\]>]")
_DRAWER_START = re.compile(r"[ \t]*:PROPERTIES:[ \t]*$", re.I)
_DRAWER_STOP = re.compile(r"[ \t]*:END:[ \t]*$", re.I)
_PROPERTY = re.compile(rf"[ \t]*:({_NONWS}+):(?: (.*))?[ \t]*$")
_COMMENT_LINE = re.compile(r"[ \t]*#(?: |$)")

Getter = Callable[[Oid], OrgObject]
Cached = Callable[[bytes], "Oid | None"]


@dataclass(frozen=True)
class _Setup:
    """What parsing a section depends on beyond its text: TODO keywords, odd levels, line ends."""

    todo_keywords: tuple[str, ...]
    done_keywords: tuple[str, ...]
    keywords: tuple[str, ...]  # every keyword a headline may start with, done ones included
    odd_levels: bool
    crlf: bool

    @cached_property
    def keyword_set(self) -> frozenset[str]:
        """The keywords, to look a headline's first word up in."""
        return frozenset(self.keywords)


@lru_cache(maxsize=64)
def _key_prefix(setup: _Setup) -> bytes:
    """The digest every subtree key under this setup starts from (a digest: a file may declare
    thousands of TODO keywords, and every key would hash them all again)."""
    return blake3.blake3(encode([PARSER_VERSION, list(setup.keywords), list(setup.done_keywords),
                                 setup.odd_levels, setup.crlf])).digest()


@dataclass(frozen=True)
class Parsed:
    """The result of parsing one file.

    `objects` holds every object built by this parse, children before parents, the document
    last; a subtree found through `cached` is referenced by oid and not rebuilt.
    `subtree_keys` maps the key of every subtree built here to its root headline's oid;
    `keys` holds every headline's subtree key, in text order.
    """

    document: Document
    objects: tuple[OrgObject, ...]
    subtree_keys: dict[bytes, Oid]
    setup: _Setup
    keys: list[bytes]


def parse(text: str, *, cached: Cached | None = None) -> Parsed:
    """Parse Org text into a document and its headlines; `cached(key)` may supply known subtrees."""
    starts, stars = _outline(text)
    setup = _file_setup(text, starts)
    bounds = starts + [len(text)]
    after = _subtree_ends(stars)
    keys = [b""] * len(starts)
    # Keys hash bytes, as `reparse` does: the same headlines, at byte offsets unless all is ASCII.
    view = memoryview(text.encode())
    byte_bounds = bounds if text.isascii() else _outline(view.obj)[0] + [len(view)]

    def raw(i: int) -> memoryview:
        return view[byte_bounds[i]:byte_bounds[i + 1]]

    def section(i: int) -> str:
        return text[bounds[i]:bounds[i + 1]]

    oids, objects, built = _build(after, setup, cached, keys, raw, section)
    return _finish(text[:bounds[0]], setup, after, oids, objects, built, keys)


def _build(after: list[int], setup: _Setup, cached: Cached | None, keys: list[bytes],
           raw: Callable[[int], memoryview], section: Callable[[int], str],
           known: Callable[[int], "Oid | None"] | None = None,
           lo: int = 0, hi: int | None = None) -> tuple[list["Oid | None"], list[OrgObject], dict[bytes, Oid]]:
    """Each headline's oid, building those whose subtree is neither `known` by index nor `cached` by key.

    Headlines are visited in text order and a known subtree is skipped whole, so every headline
    visited has all its ancestors visited too; those below a skipped one stay None. Only the
    subtrees in [lo, hi) are visited when given; they must end within it. `keys` holds the key
    of every subtree not visited; each one visited gets its key here, from its section's `raw` bytes.
    """
    oids: list[Oid | None] = [None] * len(after)
    hi = len(after) if hi is None else hi
    visited = list(range(lo, hi)) if known is None else _unknown(after, known, oids, lo, hi)
    # Descendants follow their ancestors in the text: reverse order keys (and builds) children first.
    prefix = _key_prefix(setup)
    for i in reversed(visited):
        keys[i] = _key(prefix, raw(i), _child_keys(keys, after, i))
    wanted = visited if cached is None else _uncached(after, cached, keys, oids, visited)
    objects: list[OrgObject] = []
    built: dict[bytes, Oid] = {}
    for i in reversed(wanted):
        oid = built.get(keys[i])
        if oid is None:  # the same subtree may occur twice in a file
            headline = _parse_section(section(i), setup, tuple(oids[c] for c in _kids(after, i + 1, after[i])))
            objects.append(headline)
            oid = built[keys[i]] = headline.oid
        oids[i] = oid
    return oids, objects, built


def _unknown(after: list[int], known: Callable[[int], "Oid | None"], oids: list, lo: int, hi: int) -> list[int]:
    """The headlines of [lo, hi) outside every `known` subtree, in text order; those known get their oids."""
    unknown, i = [], lo
    while i < hi:
        oid = known(i)
        if oid is None:
            unknown.append(i)
            i += 1
        else:
            oids[i] = oid
            i = after[i]
    return unknown


def _uncached(after: list[int], cached: Cached, keys: list[bytes], oids: list, visited: list[int]) -> list[int]:
    """The `visited` headlines outside every `cached` subtree (parents first); those cached get their oids."""
    uncached, skip_to = [], 0
    for i in visited:
        if i >= skip_to:
            oid = cached(keys[i])
            if oid is None:
                uncached.append(i)
            else:
                oids[i], skip_to = oid, after[i]
    return uncached


def _key(prefix: bytes, raw: memoryview, children: bytes) -> bytes:
    """A subtree's key: its own section (its length first, so no section reads as another's with
    children) and its children's keys, under the file's setup (Merkle-style)."""
    return blake3.blake3(prefix + len(raw).to_bytes(8, "big") + raw + children).digest()


def _child_keys(keys: list[bytes], after: list[int], i: int) -> bytes:
    """The keys of headline `i`'s children, one after another."""
    return b"".join([keys[c] for c in _kids(after, i + 1, after[i])]) if after[i] > i + 1 else b""


def _finish(preamble: str, setup: _Setup, after: list[int], oids: list, objects: list[OrgObject],
            built: dict[bytes, Oid], keys: list[bytes]) -> Parsed:
    document = Document(
        preamble=preamble,
        todo_keywords=setup.todo_keywords,
        done_keywords=setup.done_keywords,
        children=tuple(oids[i] for i in _kids(after, 0, len(after))),
    )
    objects.append(document)
    return Parsed(document, tuple(objects), built, setup, keys)


def _subtree_ends(stars: list[int]) -> list[int]:
    """For each headline, the index just past its subtree."""
    after = [len(stars)] * len(stars)
    open_: list[int] = []
    for i, n in enumerate(stars):
        while open_ and stars[open_[-1]] >= n:
            after[open_.pop()] = i
        open_.append(i)
    return after


def _spliced_ends(old_after: list[int], stars: list[int], a: int, touched: int, moved: int) -> list[int]:
    """`_subtree_ends(stars)` when headlines [a, a + touched) replaced others and those after moved:
    only the subtrees open across the change are followed again."""
    count = len(stars)
    after = old_after[:a] + [count] * touched + _shifted(old_after[a + touched + moved:], -moved)
    open_ = []  # the headlines open at `a`, outermost first: the last one before it and its ancestors
    i = a - 1
    while i >= 0:
        open_.append(i)
        i = _parent(stars, i, stars[i])
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
        if at >= 0 and _parent(stars, at, stars[at]) == lo - 1:  # not a descendant holding the same text
            return at
    if k <= count - k:
        at = lo
        for _ in range(k):
            at = outline.after[at]
        return at
    at = hi
    for _ in range(count - k):  # back over one sibling: up from the headline before, to the siblings' level
        at -= 1
        while (parent := _parent(stars, at, stars[at])) >= lo:
            at = parent
    return at


def _kids(after: list[int], lo: int, hi: int) -> Iterator[int]:
    """The headlines in [lo, hi) that are children of the headline just before lo."""
    while lo < hi:
        yield lo
        lo = after[lo]


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

    def __init__(self, data: bytes, setup: _Setup, document: Document, keys: list[bytes],
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
            starts, stars = _outline(self.data)
            after = _subtree_ends(stars)
            oids: list[Oid | None] = [None] * len(starts)
            for i, oid in zip(_kids(after, 0, len(after)), self.document.children):
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
        if (_OPTION_BYTES.search(old_part) or _OPTION_BYTES.search(splice.changed)
                or (0 < crlfs == newlines) != self.setup.crlf):
            return None
        mid_starts, mid_stars = _outline(data, start, end)
        touched, moved = len(mid_starts), last - first - len(mid_starts)
        starts = outline.starts[:first] + mid_starts + _shifted(outline.starts[last:], end - splice.stop)
        stars = outline.stars[:first] + mid_stars + outline.stars[last:]
        after = _spliced_ends(outline.after, stars, first, touched, moved)
        tops = list(_kids(after, first, first + touched))
        if len(tops) != len(splice.new):  # the new subtrees do not read as siblings: parse
            return None
        oids = outline.oids[:first] + [None] * touched + outline.oids[last:]
        for i, oid in [*zip(tops, splice.new), *splice.path]:
            oids[i] = oid
        keys = self.keys[:first] + [b""] * touched + self.keys[last:]
        bounds, prefix = starts + [len(data)], _key_prefix(self.setup)
        for i in [*reversed(range(first, first + touched)), *(i for i, _ in reversed(splice.path))]:
            keys[i] = _key(prefix, memoryview(data)[bounds[i]:bounds[i + 1]], _child_keys(keys, after, i))
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
            changed = "".join(_subtree_parts(new[head:len(new) - tail], get)).encode("utf-8")
            view = memoryview(data)
            return Splice(document, first, last, at(first), at(last), changed, new[head:len(new) - tail], path,
                           b"".join((view[:at(first)], changed, view[at(last):])))

    def oid(self, i: int, get: Getter) -> Oid:
        """The oid of headline `i`, read from its ancestors' children when not known yet."""
        outline = self.outline
        ancestors, at = [], i
        while outline.oids[at] is None:  # never for a top-level headline: parses know all of those
            at = _parent(outline.stars, at, outline.stars[at])
            ancestors.append(at)
        for parent in reversed(ancestors):  # the nearest known one first, down to i's parent
            children = get(outline.oids[parent]).children
            for child, oid in zip(_kids(outline.after, parent + 1, outline.after[parent]), children):
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
    if (_OPTION_BYTES.search(old_part) or _OPTION_BYTES.search(new_part) or b"\0" in new_part
            or (0 < crlfs == newlines) != old.setup.crlf):
        return None
    try:
        new_part.decode("utf-8")
    except UnicodeDecodeError:
        return None
    mid_starts, mid_stars = _outline(data, lo, old_hi + shift)
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
    # Untouched subtrees keep their keys; the touched ones and their ancestors get theirs in _build.
    keys = old.keys[:a] + [b""] * touched + old.keys[b:]

    def raw(i: int) -> memoryview:
        return view[bounds[i]:bounds[i + 1]]

    def section(i: int) -> str:
        return data[bounds[i]:bounds[i + 1]].decode("utf-8")

    def build(lo: int = 0, hi: int | None = None):
        return _build(after, setup, cached, keys, raw, section, known, lo, hi)

    spliced = _splice(old, get, stars, after, keys, raw, a, touched, moved, build)
    if spliced is not None:
        parsed, oids = spliced
    else:
        oids, objects, built = build()
        parsed = _finish(old.document.preamble, setup, after, oids, objects, built, keys)
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
    parent = _parent(stars, a, stars[a])
    if (new_tops is None or old_tops is None or _parent(stars, a, outline.stars[a]) != parent
            or parent >= 0 and min(min(stars[t] for t in new_tops), min(outline.stars[t] for t in old_tops))
            <= stars[parent]):
        return None
    oids, objects, built = build(a, a + touched)
    oids[:a] = outline.oids[:a]
    oids[a + touched:] = outline.oids[a + touched + moved:]
    replaced, by = [old.oid(t, get) for t in old_tops], tuple(oids[t] for t in new_tops)
    prefix = _key_prefix(old.setup)
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
        keys[parent] = _key(prefix, raw(parent), _child_keys(keys, after, parent))
        built[keys[parent]] = oids[parent] = new.oid
        replaced, by = [holder.oid], (new.oid,)
        parent = _parent(stars, parent, stars[parent])


def _tiling(after: list[int], lo: int, hi: int) -> list[int] | None:
    """The headlines whose subtrees, one after another, make up [lo, hi); None if one runs past hi."""
    tops = []
    while lo < hi:
        tops.append(lo)
        lo = after[lo]
    return tops if lo == hi else None


def _parent(stars: list[int], i: int, level: int) -> int:
    """The nearest headline before `i` with fewer stars than `level` (-1: the document).

    A parent may have thousands of children and a child thousands of levels: the stars before
    `i` are passed over in blocks of doubling size, each at C speed (min), then the block that
    holds the parent is halved down to it, so the cost follows the distance, not the level.
    """
    hi, size = (i if level > 1 else 0), 16  # nothing has fewer stars than one
    while hi > 0:
        lo = max(0, hi - size)
        if min(stars[lo:hi]) < level:
            while hi - lo > 16:
                mid = (lo + hi) // 2
                if min(stars[mid:hi]) < level:
                    lo = mid
                else:
                    hi = mid
            return next(j for j in range(hi - 1, lo - 1, -1) if stars[j] < level)
        hi, size = lo, size * 2
    return -1


def _parse_section(raw: str, setup: _Setup, children: tuple[Oid, ...]) -> Headline:
    """Parse one section (a headline line and the text up to the next headline)."""
    lines = _lines(raw, setup.crlf)
    line = next(lines)
    stars, todo, priority, commented, head_end = _heading(line, setup.keyword_set)
    title_start = head_end if (todo or priority or commented) else stars
    title_end, tags = _tags(line, title_start)

    planning: tuple[tuple[str, str], ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    following = next(lines, None)
    if following is not None and _PLANNING_LINE.match(following):
        planning = _planning(following)
        following = next(lines, None)
    if following is not None and _DRAWER_START.match(following):
        properties = _property_drawer(lines)

    return Headline(
        level=1 + stars // 2 if setup.odd_levels else stars,
        title=line[title_start:title_end].strip(" \t\n\r"),
        raw=raw,
        todo=todo,
        priority=priority,
        tags=tags,
        properties=properties,
        planning=planning,
        children=children,
    )


def _file_setup(text: str, starts: list[int]) -> _Setup:
    """A file's TODO keywords and `#+STARTUP: odd` (keywords outside raw blocks), and its line ends."""
    # Emacs reads a file as CRLF only when every "\n" follows a "\r"; otherwise "\r" is text.
    crlf = "\r" in text and 0 < text.count("\r\n") == text.count("\n")
    skip = _content_start(text)
    if skip:  # read the file as if it started after its byte-order mark, as Emacs shows it
        text, starts = text[skip:], [start - skip for start in starts]
    sequences: dict[str, list[str]] = {"TYP_TODO": [], "TODO": [], "SEQ_TODO": []}
    startup: list[str] = []
    raw_spans: dict[int, list[tuple[int, int]]] = {}
    for m in _OPTION.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        rest = m.group(2)
        if text[line_start:m.start()].strip(" \t") or _LONGER_KEY.match(rest):
            continue  # not at the start of a line, or "#+TODO:x:" (the keyword "TODO:X")
        section = bisect_right(starts, line_start) - 1
        if section not in raw_spans:
            lo = 0 if section < 0 else text.find("\n", starts[section]) + 1 or len(text)
            hi = starts[section + 1] if section + 1 < len(starts) else len(text)
            raw_spans[section] = _raw_spans(text, lo, hi, crlf)
        if _inside(raw_spans[section], line_start):
            continue
        name = m.group(1).upper()
        (startup if name == "STARTUP" else sequences[name]).append(rest.strip(" \t\n\r"))
    return _setup_from(
        [v for name in ("TYP_TODO", "TODO", "SEQ_TODO") for v in sequences[name]], startup, crlf
    )


def render(document: Document, get: Getter) -> str:
    """The Org text of a document, byte for byte as it was parsed."""
    return document.preamble + "".join(_subtree_parts(document.children, get))


def render_headline(headline: Headline, get: Getter) -> str:
    """The Org text of a headline and its whole subtree."""
    return headline.raw + "".join(_subtree_parts(headline.children, get))


def _subtree_parts(children: tuple[Oid, ...], get: Getter) -> Iterator[str]:
    pending = list(reversed(children))
    while pending:
        headline = get(pending.pop())
        yield headline.raw
        pending.extend(reversed(headline.children))


def _outline(text: str | bytes, lo: int = 0, hi: int | None = None) -> tuple[list[int], list[int]]:
    """Where each headline of `text[lo:hi]` starts, and its number of stars; `lo` is 0, the first
    headline's start or just past a line end. Offsets count characters in a str, bytes in bytes."""
    hi = len(text) if hi is None else hi
    headline, first_headline = ((_HEADLINE, _FIRST_HEADLINE) if isinstance(text, str)
                                else (_HEADLINE_BYTES, _FIRST_HEADLINE_BYTES))
    spans = [m.span() for m in headline.finditer(text, max(lo - 1, 0), hi)]
    starts = [a + 1 for a, _ in spans]
    stars = [b - a - 2 for a, b in spans]
    start = _content_start(text)
    first = first_headline.match(text, start, hi) if lo <= start else None
    if first:
        starts.insert(0, start)
        stars.insert(0, first.end() - start - 1)
    return starts, stars


def _content_start(text: str | bytes) -> int:
    """Where the first line starts: after a UTF-8 byte-order mark, which Emacs reads as no text."""
    bom = _BOM if isinstance(text, str) else _BOM_BYTES
    return len(bom) if text.startswith(bom) else 0


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


def _setup_from(sequences: list[str], startup: list[str], crlf: bool) -> _Setup:
    """Emacs's `org-set-regexps-and-options` for TODO keywords and odd levels."""
    keywords: list[str] = []
    done: list[str] = []
    for value in sequences or ["TODO DONE"]:
        words = [w for w in _SPLIT.split(value) if w]
        names = [_strip_key(w) for w in words if w != "|"]
        if "|" in words:
            done += [_strip_key(w) for w in words[words.index("|") + 1:]]
        else:
            done += names[-1:]
        keywords += names
    if not done:
        done = keywords[-1:]
    done_set = set(done)
    odd = False
    for option in (o.lower() for value in startup for o in _SPLIT.split(value) if o):
        if option in ("odd", "oddeven"):
            odd = option == "odd"
    return _Setup(
        todo_keywords=tuple(k for k in keywords if k not in done_set),
        done_keywords=tuple(done),
        keywords=tuple(keywords),
        odd_levels=odd,
        crlf=crlf,
    )


def _strip_key(word: str) -> str:
    """`TODO(t)` -> `TODO`: the fast-access key and logging spec are not part of the name."""
    cut = word.find("(")
    return word[:cut] if cut >= 0 and word.endswith(")") else word


def _raw_spans(text: str, lo: int, hi: int, crlf: bool) -> list[tuple[int, int]]:
    """Spans of [lo, hi) whose lines are not elements, in text order: raw blocks and LaTeX environments."""
    eol = r"\r?$" if crlf else "$"
    opener, closers = _opener(eol), _closing_lines(text, lo, hi, eol)
    spans = []
    frames = [(lo, hi)]
    while frames:
        pos, end = frames.pop()
        while (m := opener.search(text, pos, end)) is not None:
            next_line = text.find("\n", m.end()) + 1 or end
            close = _close(m, text, next_line, end, crlf, closers)
            if close is None:
                pos = m.end()
                continue
            if m["latex"] or (m["block"] or "").upper() in _RAW_BLOCKS:
                spans.append((m.start(), close[1]))
                pos = close[1]
            else:  # a container: scan its contents first, then go on after its last line
                frames.append((close[1], end))
                pos, end = min(next_line, close[0]), close[0]
    return spans


def _close(m: re.Match, text: str, next_line: int, end: int, crlf: bool,
           closers: dict[tuple, list[tuple[int, int]]]) -> tuple[int, int] | None:
    """Where what `m` opens ends before `end`: the start and end of its closing line; None if it does not."""
    if m["footnote"]:  # at the next definition or two blank lines, inside a block or not
        stop = _footnote_end(crlf).search(text, next_line, end)
        return (stop.start(),) * 2 if stop else (end, end)
    # Drawers and LaTeX environments search their end from their own line, as Emacs does.
    return _first_from(closers.get(_kind(m), []), m.start() if m["drawer"] or m["latex"] else next_line, end)


def _inside(spans: list[tuple[int, int]], at: int) -> bool:
    """Whether `at` lies in one of the sorted, disjoint `spans`."""
    k = bisect_left(spans, (at + 1,)) - 1  # the last one starting at or before `at`
    return k >= 0 and at < spans[k][1]


def _kind(m: re.Match) -> tuple[str, ...]:
    """What an opening or closing line opens or closes: blocks and LaTeX environments by name."""
    name = m.lastgroup
    return (name, m[name].upper()) if name in ("block", "latex") else (name,)


def _closing_lines(text: str, lo: int, hi: int, eol: str) -> dict[tuple, list[tuple[int, int]]]:
    """The spans of every line of [lo, hi) that may close something, by `_kind`, found in one pass:
    searching again from each of many unclosed openers would cost the square of the section."""
    found: dict[tuple, list[tuple[int, int]]] = {}
    for pattern in _closers(eol):
        for m in pattern.finditer(text, lo, hi):
            found.setdefault(_kind(m), []).append(m.span())
    for spans in found.values():
        spans.sort()
    return found


def _first_from(spans: list[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """The first of the sorted `spans` that starts in [start, end)."""
    k = bisect_left(spans, (start,))
    return spans[k] if k < len(spans) and spans[k][0] < end else None


@lru_cache(maxsize=2)
def _opener(eol: str) -> re.Pattern:
    """First lines of blocks, dynamic blocks, drawers, LaTeX environments and footnote definitions."""
    return re.compile(
        r"^(?:[ \t]*(?:"
        rf"#\+BEGIN_(?P<block>{_NONWS}+)"
        r"|(?P<dynamic>#\+BEGIN:? )"
        rf"|:(?P<drawer>[\w-]+):[ \t]*{eol}"
        r"|\\begin\{(?P<latex>[A-Za-z0-9*]+)\}"
        r")|(?P<footnote>\[fn:[-_\w]+\]))",
        re.M | re.I,
    )


@lru_cache(maxsize=2)
def _closers(eol: str) -> tuple[re.Pattern, re.Pattern]:
    """Last lines of blocks, dynamic blocks and drawers (at a line's start), and of LaTeX environments
    (anywhere in a line), with groups named as `_opener`'s."""
    return (re.compile(rf"^[ \t]*(?:#\+END_(?P<block>{_NONWS}+)|(?P<dynamic>#\+END:?)|(?P<drawer>:END:))[ \t]*{eol}",
                       re.M | re.I),
            re.compile(rf"\\end\{{(?P<latex>[A-Za-z0-9*]+)\}}[ \t]*{eol}", re.M | re.I))


@lru_cache(maxsize=2)
def _footnote_end(crlf: bool) -> re.Pattern:
    """Where a footnote definition ends: the next one, or two blank lines (`org-element--footnote-separator`)."""
    blank = r"[ \t]*\r?\n" if crlf else r"[ \t]*\n"
    return re.compile(rf"^(?:\[fn:[-_\w]+\]|(?:{blank}){{2,}})", re.M)


def _heading(line: str, keywords: frozenset[str]) -> tuple[int, str | None, str | None, bool, int]:
    """Stars, TODO keyword (followed by a space), priority cookie and COMMENT, as Emacs reads them,
    and where they end. Keywords hold no blank, so the one word before the first space is looked
    up, not each of thousands of keywords tried in turn."""
    stars = _STARS.match(line).end()
    at = _BLANKS.match(line, stars).end()
    space = line.find(" ", at)
    todo = line[at:space] if space > at and line[at:space] in keywords else None
    if todo:
        at = _BLANKS.match(line, space + 1).end()
    priority = _PRIORITY.match(line, at)
    if priority:
        at = priority.end()
    commented = line.startswith("COMMENT", at)
    return stars, todo, priority and priority[1], commented, at + 7 if commented else at


def _lines(raw: str, crlf: bool) -> Iterator[str]:
    """The lines of a section, without their line ends ("\\r\\n" in a CRLF file)."""
    pos = 0
    while True:
        eol = raw.find("\n", pos)
        line = raw[pos:] if eol < 0 else raw[pos:eol]
        yield line[:-1] if crlf and line.endswith("\r") else line
        if eol < 0:
            return
        pos = eol + 1


def _tags(line: str, title_start: int) -> tuple[int, tuple[str, ...]]:
    """Where the title ends, and the tags: the line's last word when it is `:a:b:`, after a blank
    at or past `title_start` (found from the end of the line, not tried at every blank)."""
    body = line.rstrip(" \t")
    blank = max(body.rfind(" "), body.rfind("\t"))
    word = body[blank + 1:]
    if blank < title_start or len(word) < 3 or word[0] != ":" or word[-1] != ":" or not _valid_tags(word):
        return len(line), ()
    return blank, tuple(word[1:-1].split(":"))


def _valid_tags(tags: str) -> bool:
    """Tag characters are Emacs's [[:alnum:]_@#%:] (letters, marks, decimal and letter numbers)."""
    return all(
        c in _TAG_PUNCT or (c.isalnum() if c.isascii() else unicodedata.category(c) in _ALNUM_CATEGORIES)
        for c in tags
    )


def _planning(line: str) -> tuple[tuple[str, str], ...]:
    """The planning entries of a line: keyword and raw timestamp, up to its first `]` or `>`,
    a `--` range kept whole."""
    ends = [m.start() for m in _STAMP_END.finditer(line)]
    entries = []
    for m in _PLANNING_ENTRY.finditer(line):
        end = _next_at(ends, m.end() + 1)
        if end is None:
            continue
        if line.startswith("--", end + 1) and line[end + 3:end + 4] in ("<", "["):
            end = _next_at(ends, end + 4) or end
        entries.append((m.group(1).upper(), line[m.end():end + 1]))
    return tuple(entries)


def _next_at(positions: list[int], at: int) -> int | None:
    """The first of the sorted `positions` at or after `at`."""
    k = bisect_left(positions, at)
    return positions[k] if k < len(positions) else None


def file_properties(preamble: str) -> tuple[tuple[str, str], ...]:
    """The file-level property drawer, as Emacs reads it: on the first line, or right after the
    comment lines the file opens with (blank lines may come first); none otherwise."""
    preamble = preamble[_content_start(preamble):]
    lines = _lines(preamble, 0 < preamble.count("\r\n") == preamble.count("\n"))
    previous = None
    for line in lines:  # org-element starts after the whitespace a file opens with
        if line.strip(" \t\r"):
            break
        previous = line
    else:
        return ()
    if _COMMENT_LINE.match(line):
        line = next((later for later in lines if not _COMMENT_LINE.match(later)), "")
    elif previous is not None and "\r" not in previous:
        return ()  # a drawer after a blank line is not the file's ("\r" is no blank in Emacs)
    return _property_drawer(lines) if _DRAWER_START.match(line) else ()


def _property_drawer(lines: Iterator[str]) -> tuple[tuple[str, str], ...]:
    """Entries of a property drawer whose `:PROPERTIES:` line was just read; none if malformed."""
    entries = []
    for line in lines:
        if _DRAWER_STOP.match(line):
            return tuple(entries)
        m = _PROPERTY.match(line)
        if m is None:
            return ()
        entries.append((m.group(1), (m.group(2) or "").strip(" \t")))
    return ()
