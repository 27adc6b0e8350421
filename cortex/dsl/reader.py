"""Hy source text to top-level forms, read as data: syntax errors are located and reading goes on.

Reading is linear in the size of the text: a scan finds where each top-level form ends (or what is
wrong with it) and Hy reads that form alone, so a problem never makes anything be read twice.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import hy
from hy.models import Sequence
from hy.reader.exceptions import LexException

from cortex.dsl.diagnostics import Diagnostic, Problems, clip

__all__ = ["MAX_DEPTH", "MAX_SIZE", "SourceFile", "form_span", "read_forms", "too_large"]

# Characters of definitions read from one file: over a thousand definitions, which Hy's reader
# (some 150 KB a second) reads in about two seconds.
MAX_SIZE = 256 * 1024
# Levels of brackets and quote marks a form may nest: definitions need four, and Hy's recursive
# reader (and printer) runs out of stack at a few hundred.
MAX_DEPTH = 32
EXCERPT = 100  # characters of a long line shown around a problem's column

_OPENERS = {"(": ")", "[": "]", "{": "}"}
_BLANK = re.compile(r"(?:[ \t\n\r\f\v]+|;[^\n]*)*")  # Hy's whitespace, and comments
_ATOM = r"""[^ \t\n\r\f\v()\[\]{};"'`~]"""
_TOKEN = re.compile(rf"""
    (?P<string>{_ATOM}*")           # a string, prefixed (f"...") or not
  | (?P<bracket_string>\#\[(?P<delimiter>[^\[\]\s]*)\[)
  | (?P<open>\#?[(\[{{])
  | (?P<close>[)\]}}])
  | (?P<mark>~@|[~'`]|\#_|\#\*\*?|\#\^)  # quote marks and the like: they wrap the next form
  | (?P<atom>{_ATOM}+)
""", re.X)
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_TOKEN_END = set(" \t\r\n()[]{}\";")
_FORM_LINE = re.compile(r"^\(", re.M)


@dataclass(frozen=True)
class SourceFile:
    """A named text, for turning positions into diagnostics and offsets."""

    name: str
    text: str

    @cached_property
    def line_starts(self) -> list[int]:
        """Offset of the first character of each line (lines end at `\\n`, as Hy counts them)."""
        return [0] + [m.end() for m in re.finditer("\n", self.text)]

    def offset(self, line: int, column: int) -> int:
        """The offset of a 1-based line and column."""
        return self.line_starts[line - 1] + column - 1

    def position(self, offset: int) -> tuple[int, int]:
        """The 1-based line and column of an offset."""
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def at(self, line: int, column: int, message: str) -> Diagnostic:
        """A diagnostic at a position of this file, with its line (the part around `column` of a long one)."""
        if not 1 <= line <= len(self.line_starts):
            return Diagnostic(self.name, line, column, message)
        start = self.line_starts[line - 1]
        end = self.line_starts[line] - 1 if line < len(self.line_starts) else len(self.text)
        if end - start <= EXCERPT:
            return Diagnostic(self.name, line, column, message, self.text[start:end])
        first = start + max(0, min(column - 1 - EXCERPT // 2, end - start - EXCERPT))
        head = "..." if first > start else ""
        tail = "..." if first + EXCERPT < end else ""
        shown = head + self.text[first : first + EXCERPT] + tail
        return Diagnostic(self.name, line, column, message, shown, len(head) + start + column - 1 - first)


@dataclass(frozen=True)
class _Problem:
    """A syntax error found by the scan, at an offset of the text."""

    offset: int
    message: str
    resume: int | None  # where reading goes on, if anywhere


def read_forms(source: SourceFile, problems: Problems, text: str | None = None,
               first_line: int = 1) -> Iterator:
    """Read every top-level form of `text` (default: the file's text), never evaluating anything.

    `text` starts at line `first_line` of the file, column 1 (a literate Org block's body), so
    model positions are positions in the file.  After a syntax error reading resumes at the next
    line that opens a form in column 1, so one pass reports the errors of every form.  Forms come
    one at a time, so that the problems their reader finds count before the next is read: reading
    stops once `problems` is full.
    """
    return _Reading(source, problems, source.text if text is None else text, first_line).forms()


def too_large(source: SourceFile, line: int) -> Diagnostic:
    """The problem of a source holding more than MAX_SIZE characters of definitions, from `line` on."""
    return source.at(line, 1, f"more than {MAX_SIZE // 1024} KiB of definitions: "
                              "cortex reads no more than that from one file")


def form_span(source: SourceFile, form) -> tuple[int, int]:
    """The start and end offsets of a top-level form in its file."""
    return source.offset(form.start_line, form.start_column), source.offset(form.end_line, form.end_column) + 1


class _Reading:
    """One text being read, form by form: each is found by a scan, then read by Hy on its own."""

    def __init__(self, source: SourceFile, problems: Problems, text: str, first_line: int):
        self.source, self.problems, self.text = source, problems, text
        # The file's own layout when reading all of it: its line starts are then found once.
        self.layout = source if text is source.text else SourceFile(source.name, text)
        self.lines_above = first_line - 1
        # A fresh reader knows only Hy's built-in reader macros, so reading runs no user code.
        self.reader = hy.HyReader()

    def forms(self) -> Iterator:
        """Every form read, the problems reported on the way."""
        text = self.text
        split = False
        pos = _BLANK.match(text).end()
        while pos < len(text):
            if self.problems.full():
                break
            end = self.scan(pos, split)
            if isinstance(end, _Problem) and not split:
                split = True  # from the first broken form on, a '(' in column 1 starts a new form
                end = self.scan(pos, split)
            if isinstance(end, _Problem):
                self.report(end.offset, end.message)
                if end.resume is None:
                    break
                end = end.resume
            else:
                yield from self.read(pos, end)
            pos = _BLANK.match(text, end).end()

    def place(self, offset: int) -> tuple[int, int]:
        """The line and column in the file of an offset of the text."""
        line, column = self.layout.position(offset)
        return line + self.lines_above, column

    def report(self, offset: int, message: str) -> None:
        """A problem at an offset of the text."""
        self.problems.add(self.source.at(*self.place(offset), message))

    def scan(self, start: int, split: bool) -> int | _Problem:
        """The end of the top-level form at `start`, or what is wrong with it.

        With `split`, a '(' in column 1 inside the form means a closing bracket is missing before it.
        """
        text = self.text
        waiting: list[tuple[str, int]] = []  # open brackets and quote marks, with their offsets
        pos = start
        while True:
            pos = _BLANK.match(text, pos).end()
            token = _TOKEN.match(text, pos)
            if token is None:  # the end of the text
                return _unfinished(waiting)
            kind = token.lastgroup
            at, pos = token.start(), token.end()
            if kind in ("open", "mark"):
                open_before = split and text[at] == "(" and _at_line_start(text, at) and _innermost(waiting)
                if open_before:
                    opener, where = open_before
                    return _Problem(where, f"this {opener!r} is not closed before the next form at line "
                                           f"{self.place(at)[0]}", at)
                waiting.append((token.group()[-1] if kind == "open" else token.group(), at))
                if len(waiting) > MAX_DEPTH:
                    return _Problem(at, f"forms nest more than {MAX_DEPTH} deep here", _next_form(text, at))
                continue
            if kind == "close":
                closer = token.group()
                if not waiting:
                    return _Problem(at, f"unexpected {closer!r}: nothing is open here", _next_form(text, at))
                opener, where = waiting.pop()
                if opener not in _OPENERS:
                    return _Problem(where, f"this {opener} must be followed by a form", _next_form(text, at))
                if _OPENERS[opener] != closer:
                    line, column = self.place(where)
                    return _Problem(at, f"{closer!r} does not close the {opener!r} at {line}:{column}; "
                                        f"expected {_OPENERS[opener]!r}", _next_form(text, at))
            elif kind != "atom":
                pos = _string_end(text, token)
                if pos is None:  # so no later string ends either: reading stops here
                    return _Problem(at, "this string is never closed", None)
            while waiting and waiting[-1][0] not in _OPENERS:
                waiting.pop()  # a form ended: the quote marks before it have theirs
            if not waiting:
                return pos

    def read(self, start: int, end: int) -> list:
        """Hy's reading of the form `text[start:end]`, placed where it stands in the file; or [] and a problem."""
        piece = self.text[start:end]
        try:
            forms = list(hy.read_many(piece, filename=self.source.name, reader=self.reader))
        except LexException as error:
            lines = SourceFile(self.source.name, piece)
            line = min(max(error.lineno, 1), len(lines.line_starts))
            offset = start + min(lines.offset(line, max(error.offset, 1)), len(piece) - 1)
            # Hy reports the position after the bad token; point at its first character instead.
            while offset > start and self.text[offset - 1] not in _TOKEN_END:
                offset -= 1
            self.report(offset, clip(error.msg, 200))
            return []
        line, column = self.place(start)
        if (line, column) != (1, 1):  # a form at the very start is where Hy put it
            _shift(forms, line - 1, column - 1)
        return forms


def _unfinished(waiting: list[tuple[str, int]]) -> _Problem:
    """The problem of a text that ends inside a form."""
    bracket = _innermost(waiting)
    if bracket:
        return _Problem(bracket[1], f"this {bracket[0]!r} is never closed", None)
    mark, at = waiting[-1]
    return _Problem(at, f"this {mark} must be followed by a form", None)


def _innermost(waiting: list[tuple[str, int]]) -> tuple[str, int] | None:
    return next((w for w in reversed(waiting) if w[0] in _OPENERS), None)


def _string_end(text: str, token: re.Match) -> int | None:
    """The offset just after a string literal whose opening `token` was matched, or None if it never ends."""
    if token.lastgroup == "bracket_string":
        delimiter = token["delimiter"]
        close = text.find(f"]{delimiter}]", token.end())
        return None if close < 0 else close + len(delimiter) + 2
    rest = _STRING_REST.match(text, token.end())
    return rest.end() if rest else None


def _shift(models, lines: int, columns: int) -> None:
    """Move models read from a slice by where it starts: `lines` down, and `columns` right on its first line."""
    todo = list(models)
    while todo:
        model = todo.pop()
        if model.start_line == 1:
            model.start_column += columns
        if model.end_line == 1:
            model.end_column += columns
        model.start_line += lines
        model.end_line += lines
        if isinstance(model, Sequence):
            todo.extend(model)


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def _at_line_start(text: str, i: int) -> bool:
    return i == 0 or text[i - 1] == "\n"


def _next_form(text: str, offset: int) -> int | None:
    """The start of the first line after `offset`'s line that opens a form in column 1."""
    match = _FORM_LINE.search(text, _line_end(text, offset))
    return match.start() if match else None
