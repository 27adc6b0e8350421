"""Values and errors as a person reads them: plain data as Hy, headlines as highlighted Org,
lists of records as tables, dicts as key/value tables.

Plain data prints without loading rich; tables and highlighting load it on first use.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TextIO

import hy

from ..words import counted, files  # noqa: F401 - the views take them from here
from .values import FileEntry, Help, Message, OrgText, Outline, SearchResults

PIPE_WIDTH = 160
CHANGE_STYLES = {"added": "green", "removed": "red", "changed": "yellow", "moved": "cyan"}


class Printer:
    """Prints values to `out` and errors to `err` for one session."""

    def __init__(self, session, out: TextIO, err: TextIO):
        self.session = session
        self.out = out
        self.err = err
        self._consoles: dict[int, object] = {}

    def show(self, value) -> None:
        """Print a value the way the REPL shows results; None prints nothing."""
        if value is None:
            return
        if isinstance(value, Message):
            self.out.write(f"{value}\n")
        elif isinstance(value, list) and not value:  # a form found nothing: said as the CLI says it
            self.out.write("no results\n")
        elif is_plain(value):
            self.out.write(f"{hy.repr(value)}\n")
        else:
            self.console(self.out).print(Renderer(self.session).render(value))
        self.out.flush()

    def notice(self, message: str) -> None:
        """Print a line about something that happened in the background."""
        self.err.write(f"{message}\n")
        self.err.flush()

    def error(self, message: str) -> None:
        """Print an error message, in red where the terminal has colour."""
        from rich.text import Text

        self.console(self.err).print(Text(message, style="red"), soft_wrap=True)

    def console(self, stream: TextIO):
        """A rich console writing to `stream` (made once per stream)."""
        console = self._consoles.get(id(stream))
        if console is None:
            from rich.console import Console

            # A terminal gets its own width; a pipe or file gets wide lines rather than wrapped ones.
            width = None if stream.isatty() else PIPE_WIDTH
            console = self._consoles[id(stream)] = Console(file=stream, width=width, highlight=False,
                                                           markup=False, emoji=False)
        return console


def is_plain(value) -> bool:
    """True for data that `hy.repr` shows well: scalars, models, and collections of them."""
    if isinstance(value, (OrgText, Outline, Help, SearchResults, dict)) or dataclasses.is_dataclass(value):
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(is_plain(item) for item in value)
    return not type(value).__module__.startswith("cortex.")


def when(time_ns: int) -> str:
    """A local time read at a glance."""
    return datetime.fromtimestamp(time_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def short(oid) -> str:
    """The 12-character prefix of an oid."""
    return "" if oid is None else bytes(oid).hex()[:12]


def ingest_summary(report, root) -> str:
    """One line on what an ingest did, then one line per file it could not read."""
    parts = [f"{len(report.parsed)} parsed", f"{report.unchanged} unchanged"]
    if report.removed:
        parts.append(f"{len(report.removed)} removed")
    if report.problems:
        parts.append(f"{len(report.problems)} with problems")
    if report.received:
        parts.append(f"{len(report.received)} received from the store")
    lines = [f"ingested {counted(report.files, 'Org file')} from {root} ({', '.join(parts)}) in {report.seconds:.2f} s"]
    lines += [f"  {problem}" for problem in report.problems]
    lines += [f"  conflict {conflict}" for conflict in report.conflicts]
    return "\n".join(lines)


class Renderer:
    """Builds rich renderables for the values that are not plain data."""

    def __init__(self, session):
        self.session = session

    def render(self, value):
        """A renderable for any value."""
        from rich.text import Text

        from .. import api
        from . import views

        single = {
            api.Node: self.node,
            api.Headline: lambda h: self.org(self.session.cortex.show(h)),
            api.Snapshot: self.snapshot,
            OrgText: lambda text: self.org(text, text.path),
            Outline: self.outline,
            Help: self.help,
            api.RollbackReport: self.rollback,
            api.IngestReport: lambda r: Text(ingest_summary(r, self.session.cortex.root)),
        }
        for kind, render in single.items():
            if isinstance(value, kind):
                return render(value)
        view = views.render(self, value)
        if view is not None:
            return view
        if isinstance(value, dict):
            return self.key_values(value.items())
        if isinstance(value, (list, tuple)) and value and len({type(v) for v in value}) == 1:
            return self.table(list(value))
        if dataclasses.is_dataclass(value):
            return self.key_values(self.fields(value).items())
        return Text(hy.repr(value))

    # --- Org --------------------------------------------------------------------------

    def org(self, text: str, path: str | None = None):
        """Org text, highlighted with the TODO keywords of the file it comes from."""
        from rich.syntax import Syntax

        from .orglexer import OrgLexer

        todo, done = self.keywords(path)
        lexer = OrgLexer(todo_keywords=todo, done_keywords=done, stripnl=False)
        return Syntax(text.rstrip("\n"), lexer, theme="ansi_dark", background_color="default", word_wrap=True)

    def keywords(self, path: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The TODO and DONE keywords of a file in the working state (Org's defaults otherwise)."""
        from .orglexer import DEFAULT_DONE, DEFAULT_TODO

        return (self.session.cortex.todo_keywords(path) if path else None) or (DEFAULT_TODO, DEFAULT_DONE)

    def node(self, node):
        """A headline with its place (file:line, ancestors), then its subtree as Org."""
        from rich.console import Group
        from rich.text import Text

        where = Text(f"{node.path}:{node.line}  {' / '.join(node.outline[:-1])}".rstrip(" /"), style="dim")
        return Group(where, self.org(self.session.cortex.show(node), node.path))

    def outline(self, nodes):
        """One highlighted headline line per node, after its file:line."""
        from rich.table import Table

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

    def records(self, rows: list[dict]):
        """A table of rows that share their column names (cells are text, or rich text)."""
        from rich.table import Table

        table = Table(show_edge=False, header_style="bold", pad_edge=False, box=None)
        for column in rows[0]:
            table.add_column(column, overflow="fold", justify="right" if column == "#" else "left")
        for row in rows:
            table.add_row(*row.values())
        return table

    def row(self, index: int, item) -> dict:
        """The cells of one table row."""
        from rich.text import Text

        from .. import api
        from . import views

        if isinstance(item, api.Node):  # the columns of `cortex find`, numbered from 0 as (get nodes N) takes them
            return {"#": str(index), "file:line": f"{item.path}:{item.line}", "outline": " / ".join(item.outline),
                    "todo": self.todo(item), "tags": ":".join(item.headline.tags), "id": item.id or ""}
        if isinstance(item, api.Snapshot):
            return {"#": str(index), "snapshot": self.snapshot_name(item), "time": when(item.time_ns),
                    "message": item.message, "files": str(item.counts.get("files", "")),
                    "headlines": str(item.counts.get("headlines", ""))}
        if isinstance(item, api.Change):
            detail = ", ".join(item.fields)
            if item.kind == "moved":
                detail = f"from {item.old_path}: {' / '.join(item.old_outline)}"
            return {"change": Text(item.kind, style=CHANGE_STYLES.get(item.kind, "")), "file": item.path,
                    "headline": " / ".join(item.outline), "id": item.id or "", "detail": detail}
        if isinstance(item, api.LogEntry):
            changes = ", ".join(f"{n} {kind}" for kind, n in sorted(item.changes.items())) or "no change"
            return {"#": str(index), "snapshot": self.snapshot_name(item.snapshot),
                    "time": when(item.snapshot.time_ns), "message": item.snapshot.message, "changes": changes}
        if isinstance(item, api.Version):
            return {"time": when(item.snapshot.time_ns), "snapshot": short(item.snapshot.oid),
                    "file": item.path, "change": item.change, "headline": item.headline.title}
        if isinstance(item, FileEntry):
            return {"file": item.path, "headlines": str(item.headlines), "ids": str(item.ids)}
        row = views.row(self, index, item)
        if row is not None:
            return row
        if dataclasses.is_dataclass(item):
            return {name: cell(value) for name, value in self.fields(item).items()}
        return {"#": str(index), "value": cell(item)}

    def todo(self, node):
        """The TODO keyword, red while open and green when done."""
        from rich.text import Text

        keyword = node.headline.todo or ""
        done = keyword in self.keywords(node.path)[1]
        return Text(keyword, style="green" if done else "red")

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

    def key_values(self, pairs):
        """A two-column table: keys in bold, values as cells."""
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for key, value in pairs:
            table.add_row(str(key), cell(value))
        return table

    @staticmethod
    def fields(item) -> dict:
        """A dataclass's fields by name."""
        return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}

    # --- reports ----------------------------------------------------------------------

    def rollback(self, report):
        """Where HEAD is now and which files a rollback wrote, removed or kept."""
        from rich.text import Text

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
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        if len(entries) == 1:
            entry = entries[0]
            return Group(Text(entry.usage or entry.name, style="bold"), Text(entry.doc))
        table = Table(show_edge=False, header_style="bold", pad_edge=False, box=None)
        table.add_column("form", style="bold", no_wrap=True)
        table.add_column("what it does", overflow="fold")
        for entry in entries:
            table.add_row(entry.name, entry.doc)
        return table


def cell(value) -> str:
    """A table cell: strings as they are, oids short, everything else as Hy."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes) and len(value) == 32:
        return short(value)
    if dataclasses.is_dataclass(value):
        return str(value)
    return hy.repr(value)
