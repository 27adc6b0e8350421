"""`cortex search`: hybrid search over the working state or a snapshot."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.text import Text

from .common import console, err_console, holding, progress_bar, table, validity_options, with_cortex


@click.command()
@click.argument("query")
@click.option("-n", "--limit", type=int, default=10, show_default=True)
@click.option("--agent", help="Only this agent's memory.")
@click.option("--type", "type_", type=click.Choice(["fact", "procedure", "pattern", "log"]),
              help="Only this memory type.")
@click.option("--source", type=click.Choice(["memory", "notes"]), help="Agent memory files or other Org files.")
@click.option("--path", help="Only files whose path starts so (from the Org root): notes/, agents/a/logs/2023-05.")
@click.option("--tag", help="Only headlines with this tag, their own or inherited (from a heading above or "
                             "#+FILETAGS), as `cortex find --tag` and `cortex query` read tags.")
@click.option("--todo", help="Only headlines with this TODO keyword.")
@click.option("--speaker", help="Only the turns this person said in conversations.")
@click.option("--since", help="Only items dated on or after this day: 2023-05-01, today, -7d.")
@click.option("--until", help="Only items dated on or before this day.")
@click.option("--context", type=click.IntRange(0, 50), default=0, help="Show this many turns around each turn found.")
@click.option("--as-of", "as_of", help="Search a snapshot (oid, prefix, HEAD~N, position) instead of now.")
@click.option("--fusion", type=click.Choice(["weighted", "rrf", "keyword"]), help="Default: the DSL's, else weighted.")
@click.option("--explain", is_flag=True, help="Show the raw and normalised scores behind each rank.")
@validity_options
@with_cortex
def search(cx, query, limit, agent, type_, source, path, tag, todo, speaker, since, until, context, as_of, fusion,
           explain, valid_at, all_):
    """Find memory by meaning and by exact words (identifiers, error codes, versions); a period the query names
    ("in May 2023", "last week") raises what is dated within it. Items that no longer hold (superseded or
    retired) are left out unless --all; --valid-at finds what held then, in the state searched (--as-of)."""
    results = searched(cx.search, query=query, limit=limit, agent=agent, type=type_, source=source, path=path,
                       tag=tag, todo=todo, speaker=speaker, since=since, until=until, context=context, as_of=as_of,
                       fusion=fusion, **holding(valid_at, all_))
    if not results:
        err_console.print("no results")
    t = table("#", "score", "file:line", "outline", "id")
    for n, r in enumerate(results):  # numbered from 0, as in the REPL
        for turn in r.before:
            t.add_row("", "", "", Text(turn.outline[-1], style="dim"), "")
        t.add_row(str(n), f"{r.score:.3f}", f"{r.path}:{r.line}", r.heading, r.id or "")
        for turn in r.after:
            t.add_row("", "", "", Text(turn.outline[-1], style="dim"), "")
        if explain:
            t.add_row("", "", "", Text(r.explain(), style="dim"), "")
    if results:
        console.print(t)
    note_status(results)


def searched(search, **options):
    """The results of `search(**options)`, which embeds items within SEARCH_BUDGET, a progress bar on a terminal."""
    from ..api import SEARCH_BUDGET

    with progress_bar("indexing for search") as progress:
        return search(**options, budget=SEARCH_BUDGET,
                      progress=lambda done, total: progress(done, total, "embedding for search"))


def note_status(results) -> None:
    """Say (on stderr) how many items had no vector yet, if any."""
    if not results.status.complete:
        err_console.print(f"[yellow]{escape(str(results.status))}[/]: those without one were found by their words; "
                          "`cortex ingest` embeds the rest", markup=True)


commands = (search,)
