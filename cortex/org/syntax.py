"""Org's line grammar, as Emacs's Org 9.5 (org-element) reads it: headline lines, planning lines,
property drawers, keywords, and the `Section` value that says where each part of a section is.

Line ends follow Emacs: "\\r\\n" ends a line only in a file where every "\\n" follows a "\\r"
(`crlf`); elsewhere "\\r" is text. A UTF-8 byte-order mark is not content.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from functools import lru_cache
from typing import NamedTuple

__all__ = ["BULLET", "COMMENT_LINE", "DRAWER_END", "DRAWER_START", "LONGER_KEY", "NONWS", "OPTION", "OPTION_BYTES",
           "PLANNING_LINE", "PRIORITY_COOKIE", "PROPERTY", "WS", "Entries", "Section", "content_start", "file_drawer",
           "heading", "headline_line", "headline_starts", "headline_tags", "is_crlf", "planning", "split_blank_end"]

BOM, BOM_BYTES = "\ufeff", b"\xef\xbb\xbf"

# Characters with whitespace syntax in an Org buffer (Emacs's `\s-`, not Python's `\s`).
WS = " \t\n\f\r\xa0\u2000-\u200b\u202f\u205f\u3000"
NONWS = f"[^{WS}]"

# A headline is stars then a space at the start of a line (a tab after the stars opens none).
# Searching for the literal "\n*" is several times faster than a `^` pattern; the first line is
# checked on its own.
_HEADLINE = re.compile(r"\n(\*+) ")
_FIRST_HEADLINE = re.compile(r"(\*+) ")
_HEADLINE_BYTES = re.compile(rb"\n(\*+) ")
_FIRST_HEADLINE_BYTES = re.compile(rb"(\*+) ")

# The keywords that set up how every section reads (TODO keywords, odd levels).
OPTION = re.compile(r"#\+(TODO|SEQ_TODO|TYP_TODO|STARTUP):(.*)", re.I)
OPTION_BYTES = re.compile(rb"#\+(?:TODO|SEQ_TODO|TYP_TODO|STARTUP):", re.I)
# After `#+NAME:`, more of the word up to a colon: "#+TODO:x:" is the keyword "TODO:X", as Emacs reads it.
LONGER_KEY = re.compile(f"{NONWS}*:")

_STARS = re.compile(r"\*+")
_BLANKS = re.compile(r"[ \t]*")
_PRIORITY = re.compile(r"\[#(.)\][ \t]*")
_TAG_PUNCT = frozenset("_@#%:")
_ALNUM_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl"})

PLANNING_LINE = re.compile(r"[ \t]*(?:CLOSED|DEADLINE|SCHEDULED):", re.I)
# A planning keyword up to its timestamp's opening bracket; the closing brackets of the line are
# found once, so many unclosed timestamps do not each search the rest of the line.
_PLANNING_ENTRY = re.compile(r"\b(CLOSED|DEADLINE|SCHEDULED): *(?=[<\[](?:\d{4}-\d{2}-\d{2}|%%\())", re.I)
_STAMP_END = re.compile(r"[\]>]")
DRAWER_START = re.compile(r"[ \t]*:PROPERTIES:[ \t]*$", re.I)
DRAWER_END = re.compile(r"[ \t]*:END:[ \t]*$", re.I)
PROPERTY = re.compile(rf"[ \t]*:({NONWS}+):(?: (.*))?[ \t]*$")
COMMENT_LINE = re.compile(r"[ \t]*#(?: |$)")
# A plain list's bullet (`-`, `+`, `1.`, `1)`) and the blanks after it, matched at the item's first line.
BULLET = r"(?:[-+]|\d+[.)])[ \t]+"
# A priority cookie as `org-priority-regexp` finds it (the agenda's and `org-entry-properties`'s reading).
PRIORITY_COOKIE = r"\[#([A-Z0-9]+)\] ?"

Entries = tuple[tuple[str, str], ...]


def content_start(text: str | bytes) -> int:
    """Where the first line starts: after a UTF-8 byte-order mark, which Emacs reads as no text."""
    bom = BOM if isinstance(text, str) else BOM_BYTES
    return len(bom) if text.startswith(bom) else 0


def is_crlf(text: str | bytes) -> bool:
    """Whether Emacs reads `text` with "\\r\\n" line ends: every "\\n" follows a "\\r"."""
    cr, nl, crnl = ("\r", "\n", "\r\n") if isinstance(text, str) else (b"\r", b"\n", b"\r\n")
    return cr in text and 0 < text.count(crnl) == text.count(nl)


def split_blank_end(text: str) -> tuple[str, str]:
    """`text` cut before the blank lines that end it: what Org calls a section's post-blank, the layout between
    it and the next headline rather than its content."""
    cut = text.find("\n", len(text.rstrip(" \t\r\n"))) + 1 or len(text)
    return text[:cut], text[cut:]


def headline_starts(text: str | bytes, lo: int = 0, hi: int | None = None) -> tuple[list[int], list[int]]:
    """Where each headline of `text[lo:hi]` starts, and its number of stars; `lo` is 0, the first
    headline's start or just past a line end. Offsets count characters in a str, bytes in bytes."""
    hi = len(text) if hi is None else hi
    headline, first_headline = ((_HEADLINE, _FIRST_HEADLINE) if isinstance(text, str)
                                else (_HEADLINE_BYTES, _FIRST_HEADLINE_BYTES))
    spans = [m.span() for m in headline.finditer(text, max(lo - 1, 0), hi)]
    starts = [a + 1 for a, _ in spans]
    stars = [b - a - 2 for a, b in spans]
    start = content_start(text)
    first = first_headline.match(text, start, hi) if lo <= start else None
    if first:
        starts.insert(0, start)
        stars.insert(0, first.end() - start - 1)
    return starts, stars


@lru_cache(maxsize=4)
def headline_line(deepest: int) -> re.Pattern:
    """A pattern finding, in a part of a file, a headline line of at most `deepest` stars (its stars and space)."""
    return re.compile(rf"^\*{{1,{deepest}}} ", re.M)


def heading(line: str, keywords: frozenset[str]) -> tuple[int, str | None, str | None, bool, int]:
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


def headline_tags(line: str, title_start: int) -> tuple[int, tuple[str, ...]]:
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


def planning(line: str) -> Entries:
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


class Section(NamedTuple):
    """Where the parts of a headline's section are, by line (counted from its headline line, 0):
    the planning line and the property drawer when they follow the headline right away, as Emacs
    reads them, then the body. A drawer counts only when each of its lines is a property and an
    `:END:` line closes it; an entry's line is `drawer + 1` plus its index in `properties`.
    """

    headline: str  # the headline line, without its line end
    planning_line: int | None  # 1 when a planning line follows the headline
    drawer: int  # where the property drawer starts, or would be written: after the headline and planning
    drawer_end: int | None  # its `:END:` line; None: there is no property drawer
    planning: Entries = ()
    properties: Entries = ()

    @property
    def body(self) -> int:
        """The first line of the body, after the headline, planning line and property drawer."""
        return self.drawer if self.drawer_end is None else self.drawer_end + 1

    @classmethod
    def of(cls, text: str, start: int = 0, crlf: bool | None = None) -> Section:
        """The section whose headline line starts at `start` of `text` (a headline's raw text, or a
        file's); only its first lines are read. `crlf`: the file's line ends (None: as `text`'s)."""
        crlf = is_crlf(text) if crlf is None else crlf
        end, pos = _line(text, start, crlf)
        headline = text[start:end]
        if pos is None:
            return cls(headline, None, 1, None)
        end, after = _line(text, pos, crlf)
        planning_line, entries, line = None, (), 1
        if PLANNING_LINE.match(text, pos, end):
            planning_line, entries, line, pos = 1, planning(text[pos:end]), 2, after
            if pos is None:
                return cls(headline, planning_line, line, None, entries)
            end, after = _line(text, pos, crlf)
        found = _properties(text, after, crlf) if DRAWER_START.match(text, pos, end) else None
        if found is None:
            return cls(headline, planning_line, line, None, entries)
        return cls(headline, planning_line, line, line + 1 + len(found), entries, found)


def _line(text: str, pos: int, crlf: bool) -> tuple[int, int | None]:
    """The end of the line starting at `pos` (before its line end) and the start of the next (None: none follows)."""
    eol = text.find("\n", pos)
    end, after = (len(text), None) if eol < 0 else (eol, eol + 1)
    return (end - 1 if crlf and end > pos and text[end - 1] == "\r" else end), after


def _properties(text: str, at: int | None, crlf: bool) -> Entries | None:
    """The entries of a property drawer whose lines start at `at`, after its `:PROPERTIES:` line; None
    unless each line is a property until an `:END:` line."""
    entries = []
    while at is not None:
        end, after = _line(text, at, crlf)
        if DRAWER_END.match(text, at, end):
            return tuple(entries)
        m = PROPERTY.match(text, at, end)
        if m is None:
            return None
        entries.append((m.group(1), (m.group(2) or "").strip(" \t")))
        at = after
    return None


def file_drawer(preamble: str) -> tuple[int, int, Entries] | None:
    """The file's property drawer, as Emacs reads it: on the first line, or right after the comment
    lines the file opens with (blank lines may come first); its first and `:END:` lines, and its entries."""
    crlf = is_crlf(preamble)
    pos, line, blank = content_start(preamble), 0, False
    while pos is not None:  # org-element starts after the whitespace a file opens with
        end, after = _line(preamble, pos, crlf)
        if preamble[pos:end].strip(" \t\r"):
            break
        blank = "\r" not in preamble[pos:end]  # the line before the drawer: "\r" is no blank in Emacs
        pos, line = after, line + 1
    else:
        return None
    if COMMENT_LINE.match(preamble, pos, end):
        while pos is not None and COMMENT_LINE.match(preamble, pos, _line(preamble, pos, crlf)[0]):
            pos, line = _line(preamble, pos, crlf)[1], line + 1
    elif blank:
        return None  # a drawer after a blank line is not the file's
    if pos is None:
        return None
    end, after = _line(preamble, pos, crlf)
    found = _properties(preamble, after, crlf) if DRAWER_START.match(preamble, pos, end) else None
    return None if found is None else (line, line + 1 + len(found), found)
