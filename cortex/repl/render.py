"""Rich renderables for the values that are not plain data: headlines as highlighted Org, lists as tables,
dicts and records as key/value tables.

The store's own values (nodes, headlines, snapshots, changes, reports) are known here by type. A feature's
values show themselves, so that the REPL needs no table of their types and imports none of their modules
(a search result cannot exist unless search was loaded). A value may define either or both of:

    repl_view(renderer)          the value shown alone
    repl_row(renderer, index)    the value as row `index` of a table of values like it: a dict of cells by column

built with the renderer's `text`, `group`, `records` and `key_values`, and `place` for a file's path.
"""

from __future__ import annotations

import dataclasses

import hy
from rich.console import Group
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from .. import api
from ..cli.tables import table
from ..words import CHANGE_STYLES, files, ingest_summary, literal, patch_style, short, when
from .orglexer import DEFAULT_DONE, DEFAULT_TODO, OrgLexer
from .values import FileEntry, Help, OrgText, Outline, Patch, SearchResults

__all__ = ["Renderer"]


class Renderer:
    """Builds rich renderables for the values of one session (all it reads of it is its `cortex`, so the CLI
    draws what it shows as the REPL does with a stand-in holding its own)."""

    def __init__(self, session):
        self.session = session

    def render(self, value):
        """A renderable for any value."""
        single = {
            api.Node: self.node,
            api.Headline: lambda h: self.org(self.session.cortex.show(h)),
            api.Snapshot: self.snapshot,
            OrgText: lambda text: self.org(text, text.path),
            Patch: self.patch,
            Outline: self.outline,
            Help: self.help,
            SearchResults: self.search_results,
            api.RollbackReport: self.rollback,
            api.IngestReport: lambda r: Text(ingest_summary(r, self.session.cortex.root)),
        }
        for kind, render in single.items():
            if isinstance(value, kind):
                return render(value)
        if hasattr(value, "repl_view"):
            return value.repl_view(self)
        if isinstance(value, dict):
            return self.key_values(value.items())
        if isinstance(value, (list, tuple)) and value and len({type(v) for v in value}) == 1:
            return self.table(list(value))
        if dataclasses.is_dataclass(value):
            return self.key_values(self.fields(value).items())
        return Text(hy.repr(value))

    # --- the parts values are built of ------------------------------------------------

    @staticmethod
    def text(text: str, style: str | None = None):
        """Plain text, as it is (an escape sequence shown, not obeyed), in a style (`dim`, `red`, ...) if given."""
        return Text(literal(text), style=style or "")

    @staticmethod
    def group(*parts):
        """Renderables one under the other."""
        return Group(*parts)

    def place(self, path: str) -> str:
        """A file's path as the REPL names it: relative to the Org folder when it is in it."""
        return path.removeprefix(f"{self.session.cortex.root}/")

    def records(self, rows: list[dict]):
        """A table of rows that share their column names (cells are text, or rich text), as the CLI's: names,
        ids and paths whole, no word broken."""
        shown = table(*rows[0], box=None)
        for row in rows:
            shown.add_row(*row.values())
        return shown

    def key_values(self, pairs):
        """A two-column table: keys in bold, values as cells."""
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for key, value in pairs:
            table.add_row(str(key), cell(value))
        return table

    # --- Org --------------------------------------------------------------------------

    def org(self, text: str, path: str | None = None):
        """Org text, highlighted with the TODO keywords of the file it comes from."""
        todo, done = self.keywords(path)
        lexer = OrgLexer(todo_keywords=todo, done_keywords=done, stripnl=False)
        return Syntax(literal(text.rstrip("\n")), lexer, theme="ansi_dark", background_color="default", word_wrap=True)

    def keywords(self, path: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The TODO and DONE keywords of a file in the working state (Org's defaults otherwise)."""
        return (self.session.cortex.todo_keywords(path) if path else None) or (DEFAULT_TODO, DEFAULT_DONE)

    def node(self, node):
        """A headline with its place (file:line, ancestors) and when it held if it says so, then its subtree as Org."""
        from ..orgquery.chains import validity_text

        where = Text(f"{node.path}:{node.line}  {' / '.join(node.outline[:-1])}".rstrip(" /"), style="dim")
        held = [Text(text, style="dim")] if (text := validity_text(node.headline)) else []
        return Group(where, *held, self.org(self.session.cortex.show(node), node.path))

    @staticmethod
    def patch(text: str):
        """Changes and their patches, line by line as they are, coloured as git colours them."""
        return Text("\n").join(Text(literal(line), style=patch_style(line)) for line in text.split("\n"))

    def outline(self, nodes):
        """One highlighted headline line per node, after its file:line."""
        grid = Table.grid(padding=(0, 2))
        grid.add_column(justify="right", style="dim")
        grid.add_column()
        for node in nodes:
            first_line = node.headline.raw.split("\n", 1)[0]
            grid.add_row(f"{node.path}:{node.line}", self.org(first_line, node.path))
        return grid

    # --- tables -----------------------------------------------------------------------

    def table(self, items: list):
        """A table with one row per item, columns chosen by the items' type."""
        return self.records([self.row(index, item) for index, item in enumerate(items)])

    def row(self, index: int, item) -> dict:
        """The cells of one table row."""
        if isinstance(item, api.Node):  # the columns of `cortex find`, numbered from 0 as (get nodes N) takes them
            return {"#": str(index), "file:line": f"{item.path}:{item.line}", "outline": " / ".join(item.outline),
                    "todo": self.todo(item), "tags": ":".join(item.headline.tags), "id": item.id or ""}
        if isinstance(item, api.Snapshot):
            return {"#": str(index), "snapshot": self.snapshot_name(item), "time": when(item.time_ns),
                    "message": item.message, "files": str(item.counts.get("files", "")),
                    "headlines": str(item.counts.get("headlines", ""))}
        if isinstance(item, api.Change):
            detail = item.detail
            if item.kind == "moved":
                detail = f"from {item.old_path}: {' / '.join(item.old_outline)}" + (f" ({detail})" if detail else "")
            return {"change": Text(item.kind, style=CHANGE_STYLES.get(item.kind, "")), "file": item.path,
                    "headline": " / ".join(item.outline), "id": item.id or "", "detail": detail}
        if isinstance(item, api.LogEntry):
            changes = ", ".join(f"{n} {kind}" for kind, n in sorted(item.changes.items())) or "no change"
            return {"#": str(index), "snapshot": self.snapshot_name(item.snapshot),
                    "time": when(item.snapshot.time_ns), "message": item.snapshot.message, "changes": changes}
        if isinstance(item, api.Version):
            from ..orgquery.chains import validity_text

            return {"time": when(item.snapshot.time_ns), "snapshot": short(item.snapshot.oid),
                    "file": item.path, "change": item.change, "headline": item.headline.title,
                    "validity": validity_text(item.headline)}
        if isinstance(item, FileEntry):
            return {"file": item.path, "headlines": str(item.headlines), "ids": str(item.ids)}
        if hasattr(item, "repl_row"):
            return item.repl_row(self, index)
        if dataclasses.is_dataclass(item):
            return {name: cell(value) for name, value in self.fields(item).items()}
        return {"#": str(index), "value": cell(item)}

    def todo(self, node):
        """The TODO keyword, red while open and green when done."""
        keyword = node.headline.todo or ""
        done = keyword in self.keywords(node.path)[1]
        return Text(keyword, style="green" if done else "red")

    def search_results(self, results: SearchResults):
        """The table of results (or "no results"; explained, each followed by its score breakdown), then the
        status of the vectors while some are missing."""
        rows = []
        for n, result in enumerate(results):
            rows.append(result.repl_row(self, n))
            if results.explain:
                rows.append({"#": "", "score": "", "file:line": "", "outline": Text(result.explain(), style="dim"),
                             "id": ""})
        shown = self.records(rows) if rows else Text("no results")
        if results.status is None or results.status.complete:
            return shown
        return Group(shown, Text(f"{results.status}: those without one were found by their words", style="yellow"))

    def snapshot(self, snap):
        """A snapshot as key/value rows."""
        return self.key_values([("snapshot", snap.oid.hex() + (" (HEAD)" if self.is_head(snap) else "")),
                                ("parent", snap.parent.hex() if snap.parent else "none"),
                                ("time", when(snap.time_ns)), ("message", snap.message),
                                *((name, str(count)) for name, count in snap.counts.items())])

    def is_head(self, snap) -> bool:
        """Whether HEAD points at this snapshot."""
        return self.session.cortex.head_oid == snap.oid

    def snapshot_name(self, snap) -> str:
        """The short oid, marked when it is HEAD."""
        return short(snap.oid) + (" HEAD" if self.is_head(snap) else "")

    @staticmethod
    def fields(item) -> dict:
        """A dataclass's fields by name."""
        return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}

    # --- reports ----------------------------------------------------------------------

    def rollback(self, report):
        """Where HEAD is now and which files a rollback wrote, removed or kept."""
        target = report.target
        lines = [f"HEAD and the {'Org files' if report.folder else 'working state'} are now at {short(target.oid)} "
                 f"({target.message or 'no message'}, {when(target.time_ns)})"]
        if report.kept:
            lines.append(f"your edits were kept in snapshot {short(report.kept.oid)}")
        if report.folder:
            lines.append(f"wrote {files(report.written)} into {report.folder}{' (a new folder)' if report.created else ''}")
        if report.removed:
            lines.append(f"removed {files(report.removed)}")
        return Text("\n".join(lines))

    def help(self, entries):
        """One form in full, or a table of every form's summary."""
        if len(entries) == 1:
            entry = entries[0]
            return Group(Text(entry.usage or entry.name, style="bold"), Text(entry.doc))
        shown = table("form", "what it does", box=None)
        shown.columns[0].style = "bold"
        for entry in entries:
            shown.add_row(entry.name, entry.doc)
        return shown


def cell(value) -> str:
    """A table cell: strings as they are (an escape sequence shown), oids short, everything else as Hy."""
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, bytes) and len(value) == 32:
        return short(value)
    if dataclasses.is_dataclass(value):
        return str(value)
    return hy.repr(value)
