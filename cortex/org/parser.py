"""Org text -> object trees, as Emacs's Org 9.5 (org-element) reads it.

A fast scan splits a file at its headline lines. Each headline keeps the raw text of its own
section, the text before the first headline is the document's preamble, so rendering is
concatenation and reproduces the bytes exactly.

Fields follow Emacs rather than orgparse: the TODO setup comes from `#+TODO:` / `#+SEQ_TODO:` /
`#+TYP_TODO:` keywords anywhere outside raw blocks, `#+STARTUP: odd` reduces levels, the COMMENT
keyword is not part of the title, tags may hold `#` and `%`, the property drawer counts only right
after the headline (or its planning line), its names may contain `:`, duplicates are kept and
values stay text.

Parsing is incremental by subtree: a subtree's key hashes its own section and its children's keys
under the file's setup (Merkle-style, so keying every subtree hashes the text once however deep it
nests), and a `cached` lookup that knows the key returns the subtree's oid, so nothing inside it is
parsed or built again. Any file costs work linear in its size: walks of the outline are loops,
never recursions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache

import blake3

from ..codec import encode
from ..hashing import Oid
from ..objects import Document, Headline, OrgObject
from .blocks import keyword, keywords
from .syntax import OPTION, Section, content_start, file_drawer, headline_tags, heading, is_crlf, headline_starts

__all__ = ["PARSER_VERSION", "Cached", "Getter", "Parsed", "Setup", "build_subtrees", "child_keys", "file_properties",
           "finish", "key_prefix", "kids", "parent_of", "parse", "subtree_ends", "subtree_key"]

# Bumped whenever parsing changes, so subtree keys from an older parser miss.
PARSER_VERSION = 2

_SPLIT = re.compile(r"[ \f\t\n\r\v]+")

Getter = Callable[[Oid], OrgObject]
Cached = Callable[[bytes], "Oid | None"]

@dataclass(frozen=True)
class Setup:
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
def key_prefix(setup: Setup) -> bytes:
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
    setup: Setup
    keys: list[bytes]


def parse(text: str, *, cached: Cached | None = None) -> Parsed:
    """Parse Org text into a document and its headlines; `cached(key)` may supply known subtrees."""
    starts, stars = headline_starts(text)
    setup = _file_setup(text, starts)
    bounds = starts + [len(text)]
    after = subtree_ends(stars)
    keys = [b""] * len(starts)
    # Keys hash bytes, as `reparse` does: the same headlines, at byte offsets unless all is ASCII.
    view = memoryview(text.encode())
    byte_bounds = bounds if text.isascii() else headline_starts(view.obj)[0] + [len(view)]

    def raw(i: int) -> memoryview:
        return view[byte_bounds[i]:byte_bounds[i + 1]]

    def section(i: int) -> str:
        return text[bounds[i]:bounds[i + 1]]

    oids, objects, built = build_subtrees(after, setup, cached, keys, raw, section)
    return finish(text[:bounds[0]], setup, after, oids, objects, built, keys)


def build_subtrees(after: list[int], setup: Setup, cached: Cached | None, keys: list[bytes],
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
    prefix = key_prefix(setup)
    for i in reversed(visited):
        keys[i] = subtree_key(prefix, raw(i), child_keys(keys, after, i))
    wanted = visited if cached is None else _uncached(after, cached, keys, oids, visited)
    objects: list[OrgObject] = []
    built: dict[bytes, Oid] = {}
    for i in reversed(wanted):
        oid = built.get(keys[i])
        if oid is None:  # the same subtree may occur twice in a file
            headline = _parse_section(section(i), setup, tuple(oids[c] for c in kids(after, i + 1, after[i])))
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


def subtree_key(prefix: bytes, raw: memoryview, children: bytes) -> bytes:
    """A subtree's key: its own section (its length first, so no section reads as another's with
    children) and its children's keys, under the file's setup (Merkle-style)."""
    return blake3.blake3(prefix + len(raw).to_bytes(8, "big") + raw + children).digest()


def child_keys(keys: list[bytes], after: list[int], i: int) -> bytes:
    """The keys of headline `i`'s children, one after another."""
    return b"".join([keys[c] for c in kids(after, i + 1, after[i])]) if after[i] > i + 1 else b""


def finish(preamble: str, setup: Setup, after: list[int], oids: list, objects: list[OrgObject],
            built: dict[bytes, Oid], keys: list[bytes]) -> Parsed:
    document = Document(
        preamble=preamble,
        todo_keywords=setup.todo_keywords,
        done_keywords=setup.done_keywords,
        children=tuple(oids[i] for i in kids(after, 0, len(after))),
    )
    objects.append(document)
    return Parsed(document, tuple(objects), built, setup, keys)


def subtree_ends(stars: list[int]) -> list[int]:
    """For each headline, the index just past its subtree."""
    after = [len(stars)] * len(stars)
    open_: list[int] = []
    for i, n in enumerate(stars):
        while open_ and stars[open_[-1]] >= n:
            after[open_.pop()] = i
        open_.append(i)
    return after


def kids(after: list[int], lo: int, hi: int) -> Iterator[int]:
    """The headlines in [lo, hi) that are children of the headline just before lo."""
    while lo < hi:
        yield lo
        lo = after[lo]


def parent_of(stars: list[int], i: int, level: int) -> int:
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


def _parse_section(raw: str, setup: Setup, children: tuple[Oid, ...]) -> Headline:
    """Parse one section (a headline line and the text up to the next headline)."""
    section = Section.of(raw, crlf=setup.crlf)
    line = section.headline
    stars, todo, priority, commented, head_end = heading(line, setup.keyword_set)
    title_start = head_end if (todo or priority or commented) else stars
    title_end, tags = headline_tags(line, title_start)
    return Headline(
        level=1 + stars // 2 if setup.odd_levels else stars,
        title=line[title_start:title_end].strip(" \t\n\r"),
        raw=raw,
        todo=todo,
        priority=priority,
        tags=tags,
        properties=section.properties,
        planning=section.planning,
        children=children,
    )


def _file_setup(text: str, starts: list[int]) -> Setup:
    """A file's TODO keywords and `#+STARTUP: odd` (keywords outside raw blocks), and its line ends."""
    crlf = is_crlf(text)
    skip = content_start(text)
    if skip:  # read the file as if it started after its byte-order mark, as Emacs shows it
        text, starts = text[skip:], [start - skip for start in starts]
    sequences: dict[str, list[str]] = {"TYP_TODO": [], "TODO": [], "SEQ_TODO": []}
    startup: list[str] = []
    for name, value in keywords(text, OPTION, starts, crlf):
        (startup if name == "STARTUP" else sequences[name]).append(value)
    return _setup_from(
        [v for name in ("TYP_TODO", "TODO", "SEQ_TODO") for v in sequences[name]], startup, crlf
    )


def _setup_from(sequences: list[str], startup: list[str], crlf: bool) -> Setup:
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
    return Setup(
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


_FILETAGS = keyword("FILETAGS")


def file_tags(preamble: str) -> tuple[str, ...]:
    """The tags `#+FILETAGS:` gives every headline of a file (its text before the first headline), once each."""
    found = (tag for _, value in keywords(preamble, _FILETAGS) for word in value.split() for tag in word.split(":"))
    return tuple(dict.fromkeys(tag for tag in found if tag))


def file_properties(preamble: str) -> tuple[tuple[str, str], ...]:
    """The file-level property drawer's entries (`syntax.file_drawer`); none without one."""
    found = file_drawer(preamble)
    return () if found is None else found[2]
