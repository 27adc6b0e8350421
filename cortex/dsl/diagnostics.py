"""Located problems in a definitions file, shown with the offending line and a caret."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from cortex.errors import UserError, located

__all__ = ["CHECKED", "SHOWN", "Diagnostic", "DslError", "Problems", "clip", "did_you_mean", "format_diagnostics"]

SHOWN = 20  # problems a report lists; the others are only counted
CHECKED = 1000  # problems after which reading stops: more would only be counted, at the cost of reading them


@dataclass(frozen=True)
class Diagnostic:
    """One problem: where it is (1-based line and column), what is wrong, and the line itself.

    The line of a problem on a long line is an excerpt around the column, cut marks included:
    `caret` is where the column falls in it (None: at `column`).
    """

    file: str
    line: int
    column: int
    message: str
    source_line: str = ""
    caret: int | None = None

    def __str__(self) -> str:
        return format_diagnostics([self])


class Problems:
    """Where a source's problems go: all are counted, the first SHOWN by position are kept.

    `stopped` says that reading stopped once CHECKED problems were found, so there may be more.
    """

    def __init__(self):
        self.count = 0
        self.stopped = False
        self._kept: list[Diagnostic] = []
        self._last_shown: tuple[int, int] | None = None  # a position past which no problem will be shown

    def add(self, diagnostic: Diagnostic) -> None:
        """Count a problem, keeping it if it is among the first."""
        self.count += 1
        self._kept.append(diagnostic)
        if len(self._kept) == 2 * SHOWN:  # trimming now and then bounds memory and time at any count
            self._kept = _first(self._kept)
            self._last_shown = (self._kept[-1].line, self._kept[-1].column)

    def hidden(self, line: int, column: int) -> bool:
        """Whether a problem at this position is sure not to be shown, so is only counted."""
        return self._last_shown is not None and (line, column) > self._last_shown

    def full(self) -> bool:
        """Whether enough problems are known for reading to stop; if so, note that it `stopped`."""
        if self.count >= CHECKED:
            self.stopped = True
        return self.stopped

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self):
        return iter(_first(self._kept))


class DslError(UserError):
    """A definitions source has problems: `diagnostics` lists the first ones, `more` counts the rest."""

    def __init__(self, diagnostics: Iterable[Diagnostic], count: int | None = None):
        kept = list(diagnostics)
        if count is None:
            count = diagnostics.count if isinstance(diagnostics, Problems) else len(kept)
        stopped = isinstance(diagnostics, Problems) and diagnostics.stopped
        self.diagnostics = _first(kept)
        self.more = count - len(self.diagnostics)
        report = format_diagnostics(self.diagnostics)
        if self.more:
            report += f"\nand {self.more} more problem{'s' if self.more > 1 else ''}"
        if stopped:
            report += f"; checking stopped after {count}, so there may be more"
        super().__init__(report)


def format_diagnostics(diagnostics: Iterable[Diagnostic]) -> str:
    """Render diagnostics as `file:line:column: message`, each followed by its line and a caret."""
    blocks = []
    for d in diagnostics:
        block = located(d.file, d.line, d.message, d.column)
        line = d.source_line.rstrip("\r\n")
        if line:
            caret = d.column - 1 if d.caret is None else d.caret
            # Keep tabs so the caret lands under the right character in any terminal.
            pad = "".join(c if c == "\t" else " " for c in line[:caret])
            block += f"\n{line}\n{pad}^"
        blocks.append(block)
    return "\n".join(blocks)


def clip(text: str, width: int = 40) -> str:
    """`text` cut to `width` characters, marked where it was cut, to quote it in a message."""
    return text if len(text) <= width else text[: width - 3] + "..."


def did_you_mean(word: str, choices: Iterable[str], spell=str) -> str:
    """A `; did you mean X?` suffix naming the closest choice, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {spell(close[0])}?" if close else ""


def _first(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.file, d.line, d.column))[:SHOWN]
