"""Tables that never break a word, for the CLI and the REPL: names, ids, paths and numbers kept whole, other text
wrapped between words, and a table too wide for that shown a record per row."""

from __future__ import annotations

import bisect
import copy
import dataclasses

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table

from ..words import literal

__all__ = ["WHOLE_COLUMNS", "LiteralTable", "table"]

# Columns of names, ids, paths and numbers, which a person copies or compares: each cell kept whole on one line.
# The others (outlines, titles, messages, reasons) wrap between words when the terminal is narrow.
WHOLE_COLUMNS = {"#", "id", "ids", "name", "snapshot", "delivery", "webhook", "agent", "todo", "score", "time",
                 "made", "machine", "provider", "event", "answer", "trigger", "ms", "files", "headlines", "items",
                 "logs", "bytes", "what", "kind", "path", "file", "file:line", "defined at", "folder", "secret",
                 "count", "change", "form", "tags"}
WRAPPED_MIN_WIDTH = 12  # a wrapped column is not made narrower than this (unless its cells are)


def table(*columns: str, title: str | None = None, **style) -> LiteralTable:
    """A plain table with the given column headers (see WHOLE_COLUMNS for what never wraps); `style` as Rich's
    Table takes it (box=None: no rules)."""
    t = LiteralTable(title=title, show_edge=False, header_style="bold", pad_edge=False, **style)
    for column in columns:
        t.add_column(column, no_wrap=column in WHOLE_COLUMNS, overflow="fold",
                     justify="right" if column == "#" else "left")
    return t


class LiteralTable(Table):
    """A table whose text cells are shown as they are (an escape sequence shown, not obeyed), and which never
    breaks a word.

    Its no_wrap columns (names, ids, paths, numbers: see `table`) keep each cell whole on one line; the others
    wrap between words, never narrower than their longest one. A table too wide for both is shown a record per
    row, each cell beside its column's name, where only a word wider than the terminal itself is folded.
    """

    def add_row(self, *cells, **options) -> None:
        super().add_row(*(literal(c) if isinstance(c, str) else c for c in cells), **options)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self.fitted(console, options)
        if widths is None:
            yield self.records()
            return
        fitted = copy.copy(self)
        fitted.columns = [dataclasses.replace(column, width=width) for column, width in zip(self.columns, widths)]
        yield from Table.__rich_console__(fitted, console, options)

    def fitted(self, console: Console, options: ConsoleOptions) -> list[int] | None:
        """Each column's width in `options.max_width` with no word broken, the widest wrapping columns narrowed
        first (None: the table does not fit so)."""
        least, most = [], []
        for column in self.columns:
            sizes = [Measurement.get(console, options, cell) for cell in (column.header, *column.cells)]
            most.append(max(size.maximum for size in sizes))
            least.append(most[-1] if column.no_wrap else
                         max(min(WRAPPED_MIN_WIDTH, most[-1]), *(size.minimum for size in sizes)))
        # what Rich adds around the cells: padding and rules between columns
        room = options.max_width - self._extra_width - sum(map(self._get_padding_width, range(len(self.columns))))
        if sum(least) > room:
            return None

        def total(cap: int) -> int:
            return sum(min(high, max(low, cap)) for low, high in zip(least, most))

        cap = bisect.bisect_right(range(max(most, default=0) + 1), room, key=total) - 1
        return [min(high, max(low, cap)) for low, high in zip(least, most)]

    def records(self) -> Group:
        """The rows one under the other, each cell beside its column's name (blank cells left out)."""
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style=self.header_style, no_wrap=True)
        grid.add_column(overflow="fold")
        for n, row in enumerate(zip(*(column.cells for column in self.columns))):
            if n:
                grid.add_row("", "")
            for column, cell in zip(self.columns, row):
                if cell != "":
                    grid.add_row(column.header, cell)
        return Group(*([self.title] if self.title else []), grid)
