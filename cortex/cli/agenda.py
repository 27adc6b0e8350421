"""Commands over dates and links: agenda, links (and broken links), backlinks."""

from __future__ import annotations

import click

from .common import with_cortex

as_of_option = click.option("--as-of", "ref", help="Read a snapshot instead of the working state.")


@click.command()
@click.option("--span", default=7, show_default=True, type=click.IntRange(min=1), help="How many days to list.")
@click.option("--start", help="The first day: today, tomorrow, +7d, -2w, YYYY-MM-DD (default: today).")
@click.option("--today", help="The day the labels count from, as --start (default: the real today).")
@as_of_option
@with_cortex
def agenda(cx, span, start, today, ref):
    """What is scheduled, due and timestamped, day by day, as Emacs's org-agenda lists it."""
    click.echo(str(cx.agenda(span, start, as_of=ref, today=today)))


@click.command()
@click.argument("node", required=False)
@click.option("--broken", is_flag=True, help="Every id link whose :ID: no headline or file holds (exit 1 if any).")
@as_of_option
@with_cortex
def links(cx, node, broken, ref):
    """The links of a headline (NODE: its :ID:) or of a file's text before its first headline (NODE: its path)."""
    if broken:
        found = cx.broken_links(as_of=ref)
        for backlink in found:
            click.echo(str(backlink))
        click.echo(f"{len(found)} broken link{'s' * (len(found) != 1)}", err=bool(found))
        if found:
            raise SystemExit(1)
        return
    if node is None:
        raise click.UsageError("name a headline (its :ID:) or a file (its path), or give --broken")
    first = _first_line(cx, node, ref)
    for link in cx.links(node, as_of=ref):
        search = f"::{link.search}" if link.search is not None else ""
        description = f"  [{link.description}]" if link.description else ""
        click.echo(f"{first + link.line}: {link.kind} {link.target}{search}{description}")


def _first_line(cx, node: str, ref) -> int:
    """The file line NODE's text starts on: its headline's, or 1 for a file (by path or by its own :ID:)."""
    from ..query import FileIdNotHeadline

    if node in cx.state(ref).entries:
        return 1
    try:
        return cx.lookup(node, ref=ref).line
    except FileIdNotHeadline:
        return 1


@click.command()
@click.argument("node")
@as_of_option
@with_cortex
def backlinks(cx, node, ref):
    """The links that lead to a headline (NODE: its :ID:) or to a file (NODE: its path), as org-roam lists them."""
    found = cx.backlinks(node, as_of=ref)
    for backlink in found:
        click.echo(str(backlink))
    click.echo(f"{len(found)} backlink{'s' * (len(found) != 1)}")


commands = (agenda, links, backlinks)
