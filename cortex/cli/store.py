"""Commands over the store itself: ingest, show, find, ls, stats, fsck."""

from __future__ import annotations

import click
from rich.markup import escape

from ..words import counted, shown_stats
from .common import (chain_lines, console, err_console, holding, print_nodes, progress_bar, table, validity_options,
                     with_cortex)


@click.command()
@click.argument("path", required=False, type=click.Path(exists=True))
@with_cortex(create=True)
def ingest(cx, path):
    """Ingest an Org file or folder (default: the Org root) into the working state, then embed its items for
    search (Ctrl-C keeps what is embedded; the next ingest, or search, goes on from there)."""
    with progress_bar("ingesting") as progress:
        report = cx.ingest(path, progress=progress)
    for problem in report.problems:
        err_console.print(f"[yellow]skipped[/] {escape(str(problem))}", markup=True)
    console.print(str(report), markup=False, highlight=False)
    if report.conflicts:
        err_console.print("conflicts: both versions are in the files, the other tagged :CONFLICT:; keep one, "
                          "delete the other, and ingest again (`cortex conflicts` lists them)")
    try:
        with progress_bar("indexing for search") as progress:
            cx.build_search(lambda done, total: progress(done, total, "embedding for search"))
    except KeyboardInterrupt:
        err_console.print(f"interrupted: {cx.search_status()} kept; "
                          "the next `cortex ingest` embeds the rest (searches meanwhile find them by their words)")
        raise SystemExit(130) from None


@click.command()
@click.argument("target")
@click.option("--as-of", "ref", help="Show it as a snapshot recorded it.")
@with_cortex
def show(cx, target, ref):
    """Show a headline (by :ID:) or a file (by path) as Org text; on stderr, what the headline replaced and what
    replaced it, when its properties say it is in such a chain (SUPERSEDES, SUPERSEDED_BY)."""
    click.echo(cx.show(target, as_of=ref), nl=False)
    for line in chain_lines(cx, target, ref):
        err_console.print(line, markup=False)


@click.command()
@click.option("--todo", help="TODO keyword, e.g. TODO or DONE.")
@click.option("--tag", help="A tag the headline carries or inherits (from a heading above it or #+FILETAGS), as "
                             "Org's match strings read tags; `cortex query '(tags-local ...)'` for own tags only.")
@click.option("--prop", help="A property: NAME or NAME=VALUE.")
@click.option("--as-of", "ref", help="Search a snapshot instead of the working state.")
@click.argument("text", required=False)
@validity_options
@with_cortex
def find(cx, todo, tag, prop, ref, text, valid_at, all_):
    """Find headlines by TODO keyword, tag, property or title text: the current ones (not superseded or retired),
    unless --valid-at or --all."""
    print_nodes(cx.find(todo=todo, tag=tag, prop=prop, text=text, ref=ref, **holding(valid_at, all_)))


@click.command(name="ls")
@click.argument("path", required=False)
@with_cortex
def ls(cx, path):
    """The files of the working state with their counts, or the outline of one file: each headline's file:line and
    first line as the file has it (TODO keyword, priority, cookies, tags), as the REPL's (ls) shows them."""
    if path is None:
        t = table("file", "headlines", "ids")
        for file, (headlines, ids) in cx.files().items():
            t.add_row(file, str(headlines), str(ids))
        console.print(t)
        return
    from types import SimpleNamespace

    from ..repl.render import Renderer  # the REPL's outline, so that both show one file alike

    console.print(Renderer(SimpleNamespace(cortex=cx)).outline(cx.outline(path)))


@click.command()
@with_cortex
def stats(cx):
    """Where the store and the Org folder are, and the store's files, headlines, objects, snapshots and size."""
    t = table("what", "count")
    for key, value in shown_stats(cx).items():
        t.add_row(key, f"{value:,}" if isinstance(value, int) else str(value))
    console.print(t)


@click.command()
@click.option("--repair", is_flag=True,
              help="Drop damaged derived tables (cortex rebuilds them) and remove entries nothing can read.")
@with_cortex
def fsck(cx, repair):
    """Check every object, ref, reflog entry and table entry; exit 1 if damage remains."""
    problems = cx.fsck(repair=repair)
    remaining = [p for p in problems if not p.repaired]
    for problem in problems:
        if problem.repaired:
            console.print(f"[green]repaired[/] {escape(str(problem))}", soft_wrap=True, markup=True)
        else:
            err_console.print(f"[red]damaged[/] {escape(str(problem))}", markup=True)
    if remaining:
        fixable = sum(p.repairable for p in remaining)
        told = "1 problem remains" if len(remaining) == 1 else f"{len(remaining)} problems remain"
        hint = f"; `cortex fsck --repair` fixes {fixable} of them" if fixable and not repair else ""
        err_console.print(told + hint)
        raise SystemExit(1)
    console.print(f"ok: {counted(cx.object_count, 'object')}, {counted(cx.table_entry_count, 'table entry', 'table entries')} "
                  "verified")


commands = (ingest, show, find, ls, stats, fsck)
