"""Where Org's greater elements open and close (blocks, dynamic blocks, drawers, LaTeX environments,
footnote definitions), so that a line inside a raw one is not read as an element; and the keywords
Emacs reads, outside them.

Any text costs work linear in its size: the closing lines are found in one pass, never searched
again for each of many unclosed openers.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from functools import lru_cache

from .syntax import LONGER_KEY, NONWS, content_start, is_crlf

__all__ = ["BLOCK_BEGIN", "BLOCK_END", "DEFINITIONS_MARKER", "RAW_BLOCKS", "VERBATIM_BLOCKS", "keyword", "keywords",
           "raw_spans_in"]

# Blocks whose lines are not elements (a keyword in one is text).
RAW_BLOCKS = frozenset({"COMMENT", "EXAMPLE", "EXPORT", "SRC", "VERSE"})
# Blocks whose text holds no objects (no timestamps, no links): the raw ones but verse.
VERBATIM_BLOCKS = RAW_BLOCKS - {"VERSE"}

# A block's first line (its name, then the rest: a source block's language, switches and header arguments)
# and last line (its name), matched at a line's start or found in a text.
BLOCK_BEGIN = re.compile(rf"^[ \t]*#\+BEGIN_({NONWS}+)(.*)$", re.I | re.M)
BLOCK_END = re.compile(rf"^[ \t]*#\+END_({NONWS}+)[ \t]*\r?$", re.I | re.M)
# The header argument of a source block that holds cortex definitions.
DEFINITIONS_MARKER = ":cortex yes"


def keyword(*names: str) -> re.Pattern:
    """A pattern finding `#+NAME:` for these names, then the rest of its line (for `keywords`)."""
    return re.compile(rf"#\+({'|'.join(map(re.escape, names))}):(.*)", re.I)


def keywords(text: str, pattern: re.Pattern, starts: list[int] = (),
             crlf: bool | None = None) -> Iterator[tuple[str, str]]:
    """The keywords `pattern` (from `keyword`) finds that Emacs reads as such, in text order: name
    (upper case) and value. At a line's start, not a longer name (`#+TODO:x:` is the keyword `TODO:X`)
    and outside raw blocks; `starts` are where the headlines of `text` start (a section's raw spans
    are found only when a keyword is in it); `crlf`: the file's line ends (None: as `text`'s)."""
    crlf = is_crlf(text) if crlf is None else crlf
    raw_spans: dict[int, list[tuple[int, int]]] = {}
    for m in pattern.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1 or content_start(text)
        rest = m.group(2)
        if text[line_start:m.start()].strip(" \t") or LONGER_KEY.match(rest):
            continue
        section = bisect_right(starts, line_start) - 1
        if section not in raw_spans:
            lo = 0 if section < 0 else text.find("\n", starts[section]) + 1 or len(text)
            hi = starts[section + 1] if section + 1 < len(starts) else len(text)
            raw_spans[section] = raw_spans_in(text, lo, hi, crlf)
        if not _inside(raw_spans[section], line_start):
            yield m.group(1).upper(), rest.strip(" \t\n\r")


def raw_spans_in(text: str, lo: int, hi: int, crlf: bool) -> list[tuple[int, int]]:
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
            if m["latex"] or (m["block"] or "").upper() in RAW_BLOCKS:
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
        rf"#\+BEGIN_(?P<block>{NONWS}+)"
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
    return (re.compile(rf"^[ \t]*(?:#\+END_(?P<block>{NONWS}+)|(?P<dynamic>#\+END:?)|(?P<drawer>:END:))[ \t]*{eol}",
                       re.M | re.I),
            re.compile(rf"\\end\{{(?P<latex>[A-Za-z0-9*]+)\}}[ \t]*{eol}", re.M | re.I))


@lru_cache(maxsize=2)
def _footnote_end(crlf: bool) -> re.Pattern:
    """Where a footnote definition ends: the next one, or two blank lines (`org-element--footnote-separator`)."""
    blank = r"[ \t]*\r?\n" if crlf else r"[ \t]*\n"
    return re.compile(rf"^(?:\[fn:[-_\w]+\]|(?:{blank}){{2,}})", re.M)
