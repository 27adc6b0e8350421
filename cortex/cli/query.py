"""`cortex query`: headlines by an Org query, a predicate form or an Org match string."""

from __future__ import annotations

import click

from .common import print_nodes, with_cortex


@click.command(name="query")
@click.argument("text", metavar="QUERY")
@click.option("--as-of", "ref", help="Query a snapshot instead of the working state.")
@click.option("--match", is_flag=True,
              help="Read QUERY as an Org match string (the default for one not starting with \"(\").")
@with_cortex
def query(cx, text, ref, match):
    """Find headlines by an Org query: a predicate form read as data, or an Org match string.

    \b
    cortex query '(and (todo "TODO") (tags "security") (deadline :to "+7d"))'
    cortex query '+security-ops/TODO|NEXT'
    cortex query 'PRIORITY="A"+Effort<"1:00"' --as-of HEAD~1
    """
    print_nodes(cx.query(text, as_of=ref, match=True if match else None))
