"""Hy source text to top-level forms, read as data: syntax errors are located and reading goes on."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import cached_property

import hy
from hy.reader.exceptions import LexException

from cortex.dsl.diagnostics import Diagnostic

_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}
_BLANK = re.compile(r"(?:\s+|;[^\n]*)*")
_BRACKET_STRING = re.compile(r"#\[([^\[\]\s]*)\[")
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

    def line(self, number: int) -> str:
        """The text of a 1-based line, without its line break."""
        if not 1 <= number <= len(self.line_starts):
            return ""
        start = self.line_starts[number - 1]
        end = self.text.find("\n", start)
        return self.text[start : len(self.text) if end < 0 else end]

    def offset(self, line: int, column: int) -> int:
        """The offset of a 1-based line and column."""
        return self.line_starts[line - 1] + column - 1

    def position(self, offset: int) -> tuple[int, int]:
        """The 1-based line and column of an offset."""
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def at(self, line: int, column: int, message: str) -> Diagnostic:
        """A diagnostic at a position of this file."""
        return Diagnostic(self.name, line, column, message, self.line(line))


def read_forms(source: SourceFile, text: str | None = None) -> tuple[list, list[Diagnostic]]:
    """Read every top-level form of `text` (default: the file's text), never evaluating anything.

    `text` must have the same line and column layout as the file (a literate Org block comes
    preceded by one newline per line above it), so model positions are positions in the file.  After a
    syntax error reading resumes at the next line that opens a form in column 1, so one pass
    reports the errors of every form.
    """
    text = source.text if text is None else text
    layout = SourceFile(source.name, text)
    forms, problems = [], []
    resume = 0
    while resume is not None:
        padded = "\n" * text.count("\n", 0, resume) + text[resume:]
        after = resume
        try:
            # A fresh reader knows only Hy's built-in reader macros, so reading runs no user code.
            for form in hy.read_many(padded, filename=source.name, reader=hy.HyReader()):
                forms.append(form)
                after = layout.offset(form.end_line, form.end_column) + 1
            resume = None
        except LexException as error:
            offset, message, resume = _diagnose(text, after, error, layout)
            problems.append(source.at(*layout.position(offset), message))
    return forms, problems


def form_span(source: SourceFile, form) -> tuple[int, int]:
    """The start and end offsets of a top-level form in its file."""
    return source.offset(form.start_line, form.start_column), source.offset(form.end_line, form.end_column) + 1


def _diagnose(text: str, after: int, error: LexException, layout: SourceFile):
    """Explain a read error as (offset, message, offset to resume reading at or None)."""
    start = _BLANK.match(text, after).end()
    found = _scan_brackets(text, start, layout)
    if found:
        return found
    # Hy reports the position after the bad token; point at its first character instead.
    line = min(error.lineno, len(layout.line_starts))
    offset = min(layout.offset(line, max(error.offset, 1)), len(text))
    while offset > start and text[offset - 1] not in _TOKEN_END:
        offset -= 1
    return offset, error.msg, _next_form(text, offset)


def _scan_brackets(text: str, start: int, layout: SourceFile):
    """Find a bracket or string problem in the form starting at `start`, as `_diagnose` returns it."""
    stack: list[tuple[str, int]] = []
    i = start
    while i < len(text):
        c = text[i]
        if not stack and i > start and (c.isspace() or c == ";"):
            return None  # an atom ended: its problem is not a bracket
        if c == ";":
            i = _line_end(text, i)
            continue
        if c == '"' or _BRACKET_STRING.match(text, i):
            end = _string_end(text, i)
            if end is None:
                return i, "this string is never closed", _next_form(text, i)
            i = end
            if not stack:
                return None
            continue
        if c in _OPENERS:
            if c == "(" and stack and _at_line_start(text, i):
                opener, at = stack[-1]
                line = layout.position(i)[0]
                return at, f"this {opener!r} is not closed before the next form at line {line}", i
            stack.append((c, i))
        elif c in _CLOSERS:
            if not stack:
                return i, f"unexpected {c!r}: nothing is open here", _next_form(text, i)
            opener, at = stack.pop()
            if _OPENERS[opener] != c:
                line, column = layout.position(at)
                message = f"{c!r} does not close the {opener!r} at {line}:{column}; expected {_OPENERS[opener]!r}"
                return i, message, _next_form(text, i)
            if not stack:
                return None
        i += 1
    if stack:
        opener, at = stack[-1]
        return at, f"this {opener!r} is never closed", None
    return None


def _string_end(text: str, start: int) -> int | None:
    """The offset just after the string literal starting at `start`, or None if it never ends."""
    bracket = _BRACKET_STRING.match(text, start)
    if bracket:
        close = text.find(f"]{bracket.group(1)}]", bracket.end())
        return None if close < 0 else close + len(bracket.group(1)) + 2
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return None


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def _at_line_start(text: str, i: int) -> bool:
    return i == 0 or text[i - 1] == "\n"


def _next_form(text: str, offset: int) -> int | None:
    """The start of the first line after `offset`'s line that opens a form in column 1."""
    match = _FORM_LINE.search(text, _line_end(text, offset))
    return match.start() if match else None
