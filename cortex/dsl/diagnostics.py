"""Located problems in a definitions file, shown with the offending line and a caret."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from cortex.errors import UserError, located


@dataclass(frozen=True)
class Diagnostic:
    """One problem: where it is (1-based line and column), what is wrong, and the line itself."""

    file: str
    line: int
    column: int
    message: str
    source_line: str = ""

    def __str__(self) -> str:
        return format_diagnostics([self])


class DslError(UserError):
    """A definitions source has problems; `diagnostics` lists every one of them."""

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics = sorted(diagnostics, key=lambda d: (d.file, d.line, d.column))
        super().__init__(format_diagnostics(self.diagnostics))


def format_diagnostics(diagnostics: Iterable[Diagnostic]) -> str:
    """Render diagnostics as `file:line:column: message`, each followed by its line and a caret."""
    blocks = []
    for d in diagnostics:
        block = located(d.file, d.line, d.message, d.column)
        line = d.source_line.rstrip("\r\n")
        if line:
            # Keep tabs so the caret lands under the right character in any terminal.
            pad = "".join(c if c == "\t" else " " for c in line[: d.column - 1])
            block += f"\n{line}\n{pad}^"
        blocks.append(block)
    return "\n".join(blocks)


def did_you_mean(word: str, choices: Iterable[str], spell=str) -> str:
    """A `; did you mean X?` suffix naming the closest choice, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {spell(close[0])}?" if close else ""
