"""Objects in a line of Org text as org-element's object lexer finds them: where its timestamps stand, and the
bracket links around which it reads no other object.

`timestamps` scans a line as `org-element--object-lex` does: from left to right, each place where an object may
start tried in turn, an object found skipped whole. So a date inside `=verbatim=`, `~code~`, a link (its
description too), a target, an export snippet or a macro is no timestamp, while one inside bold, italic,
underline or strike-through is (their contents are scanned in turn). A timestamp is what
`org-element-timestamp-parser` accepts: `<2026-03-31 Tue>`, `[2026-03-31]`, a range `<a>--<b>`, a repeating
`<2026-03-31 ... +1w>` and a diary sexp `<%%(...)>`; a date glued to more text (`<2026-03-31T10:00>`) is not.
Beyond Emacs: a timestamp is at most MAX_STAMP characters, and objects are read within one line.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator
from typing import NamedTuple

__all__ = ["CONTENTS", "MAX_STAMP", "OPAQUE", "TIMESTAMP", "Span", "bracket_link_at", "enclosing", "link_closes",
           "timestamps"]

MAX_STAMP = 200  # characters of a timestamp, brackets included: Org's own are at most about 50
# Where an object may start (org-element--object-regexp, for the objects read here).
_CANDIDATE = re.compile(r"[*/_+=~]\S|\[\[|\[[0-9]|<[0-9]|<%%|<<|@@|\{\{\{")
# org-element--timestamp-regexp (org-ts-regexp-both, a repeating timestamp, a diary sexp) and the raw value it reads.
_TIMESTAMP = re.compile(r"[\[<][0-9]{4}-[0-9]{2}-[0-9]{2}(?: .*?)?[\]>]"
                        r"|<[0-9]+-[0-9]+-[0-9]+[^>\n]+?\+[0-9]+[dwmy]>"
                        r"|<%%\([^>\n]+\)>")
_RAW = re.compile(r"[<\[](?:%%)?.*?[\]>](?:--[<\[].*?[\]>])?")
# org-emphasis-regexp-components: what may stand before an opening marker and after a closing one.
_PRE = frozenset("-('\"{ \t\n\r\f\v")
_POST = frozenset("-.,:!?;'\")}\\[ \t\n\r\f\v")
_CONTAINERS = "*/_+"  # bold, italic, underline, strike-through: their contents hold objects; = and ~ hide them
_TARGET = re.compile(r"<<<(?:[^<>\n ]|[^<>\n ][^<>\n]*[^<>\n ])>>>|<<(?:[^<>\n ]|[^<>\n ][^<>\n]*[^<>\n ])>>")
_SNIPPET = re.compile(r"@@[-A-Za-z0-9]+:.*?@@")
_MACRO = re.compile(r"\{\{\{[a-zA-Z][-a-zA-Z0-9_]*(?:\(.*?\))?\}\}\}")


TIMESTAMP, OPAQUE, CONTENTS = "timestamp", "opaque", "contents"  # what a scan yields: see `enclosing`
_ENCLOSING_MARK = re.compile(r"[*/_+=~]\S|<<|@@|\{\{\{")  # a line without one encloses nothing


class Span(NamedTuple):
    """Where an object stands in its line: `line[start:end]`."""

    start: int
    end: int


def timestamps(line: str, start: int = 0) -> Iterator[Span]:
    """The timestamps (ranges as one, diary sexps too) org-element finds in `line` from `start`, in order."""
    return (span for kind, span in _Scan(line).objects(start, len(line)) if kind is TIMESTAMP)


def enclosing(line: str) -> list[tuple[str, Span]]:
    """Where `line` holds verbatim, code, a target, an export snippet or a macro (OPAQUE: objects org-element reads
    no other object in, so a link or a date there is text) and the contents of bold, italic, underline and
    strike-through (CONTENTS: an object in them ends where they do), as (kind, span), in order."""
    if not _ENCLOSING_MARK.search(line):
        return []
    return [(kind, span) for kind, span in _Scan(line).objects(0, len(line)) if kind is not TIMESTAMP]


class _Scan:
    """One line scanned for objects, with what the scan looks up more than once."""

    def __init__(self, line: str):
        self.line = line
        self._closers: dict[str, list[int]] = {}
        self._closes: list[int] | None = None

    def objects(self, lo: int, hi: int) -> Iterator[tuple[str, Span]]:
        """The timestamps, opaque objects and containers' contents within `line[lo:hi]`, an object's contents or
        the whole line, as (TIMESTAMP, OPAQUE or CONTENTS, span), in order of their start."""
        line, pos = self.line, lo
        while (m := _CANDIDATE.search(line, pos, hi)) is not None:
            at = m.start()
            c, end, kind = line[at], None, OPAQUE
            if c in "*/_+=~":
                if (close := self._emphasis(at, lo, hi)) is not None:
                    if c in _CONTAINERS:
                        yield CONTENTS, Span(at + 1, close)
                        yield from self.objects(at + 1, close)
                        kind = None
                    end = close + 1
            elif line.startswith("[[", at):
                if self._closes is None:
                    self._closes = link_closes(line)
                found = bracket_link_at(line, at, self._closes)
                end, kind = (found[0] if found is not None and found[0] <= hi else None), None
            elif line.startswith("<<", at):
                end = _end(_TARGET.match(line, at, hi))
            elif c == "@":
                end = _end(_SNIPPET.match(line, at, hi))
            elif c == "{":
                end = _end(_MACRO.match(line, at, hi))
            elif _TIMESTAMP.match(line, at, min(hi, at + MAX_STAMP)):
                end, kind = _RAW.match(line, at, min(hi, at + 2 * MAX_STAMP + 2)).end(), TIMESTAMP
            if end is not None and kind is not None:
                yield kind, Span(at, end)
            pos = at + 1 if end is None else end

    def _emphasis(self, at: int, lo: int, hi: int) -> int | None:
        """Where the emphasis opened at `at` closes (org-emph-re, org-verbatim-re) within `line[lo:hi]`: the first
        marker after a non-blank body that is followed by a closing character or ends `line[lo:hi]`."""
        line, marker = self.line, self.line[at]
        if (at > lo and line[at - 1] not in _PRE) or at + 2 >= hi or line[at + 1].isspace():
            return None
        closers = self._closers.get(marker)
        if closers is None:  # markers after a non-blank, followed by a closing character or the line's end
            closers = self._closers[marker] = [i for i in range(1, len(line)) if line[i] == marker
                                               and not line[i - 1].isspace()
                                               and (i + 1 == len(line) or line[i + 1] in _POST)]
        k = bisect_left(closers, at + 2)
        close = closers[k] if k < len(closers) and closers[k] < hi else None
        if close is None and line[hi - 1] == marker and not line[hi - 2].isspace() and hi - 1 >= at + 2:
            close = hi - 1  # at the end of an object's contents, as at a line's end
        return close


def _end(match: re.Match | None) -> int | None:
    return None if match is None else match.end()


def link_closes(line: str) -> list[int]:
    """For each place in `line`, where the next "]]" starts (-1: nowhere)."""
    closes, start = [-1] * (len(line) + 2), 0
    while (at := line.find("]]", start)) >= 0:
        closes[start:at + 1] = [at] * (at + 1 - start)
        start = at + 1
    return closes


def bracket_link_at(line: str, start: int, closes: list[int]) -> tuple[int, str, str | None] | None:
    """The bracket link at `start` ("[[" there) as org-link-bracket-re matches it, (end, path, description), in
    one pass (`closes`: `link_closes(line)`): the regexp's path is characters but brackets and backslashes, a run
    of backslashes before another character, or an odd run before a bracket; where a run before "]" could also
    end the path, it tries that first for an even run and last for an odd one."""
    n, i, fallback = len(line), start + 2, None

    def closed(at: int):  # the link ended by the "]" at `at`: (end, path, description), or None
        if line.startswith("[", at + 1) and at + 3 <= n and (close := closes[at + 3]) >= 0:
            return close + 2, line[start + 2:at], line[at + 2:close]
        return (at + 2, line[start + 2:at], None) if line.startswith("]", at + 1) else None

    while i < n:
        c = line[i]
        if c == "]":
            return (closed(i) if i > start + 2 else None) or fallback
        if c == "[":
            break
        if c != "\\":
            i += 1
            continue
        run = i
        while i < n and line[i] == "\\":
            i += 1
        if i == n:
            break
        if line[i] not in "[]":
            i += 1
            continue
        odd = (i - run) % 2
        if line[i] == "]" and (odd and i - run >= 3 or not odd) and (ended := closed(i)):
            if not odd:
                return ended
            fallback = ended
        if not odd and i - run < 4:
            break
        i += 1
    return fallback
