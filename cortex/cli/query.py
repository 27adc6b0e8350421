"""`cortex query`: headlines by an Org query, a predicate form or an Org match string."""

from __future__ import annotations

import click

from .common import holding, print_nodes, validity_options, with_cortex


@click.command(name="query", context_settings={"ignore_unknown_options": True})  # '-noexport+LEVEL=1' is a query
@click.argument("text", metavar="QUERY")
@click.option("--as-of", "ref", help="Query a snapshot instead of the working state.")
@click.option("--match", is_flag=True,
              help="Read QUERY as an Org match string (the default for one not starting with \"(\").")
@validity_options
@with_cortex
def query(cx, text, ref, match, valid_at, all_):
    """Find headlines by an Org query: a predicate form read as data, or an Org match string. Headlines that no
    longer hold (superseded or retired) are left out unless --all.

    \b
    cortex query '(and (todo "TODO") (tags "security") (deadline :to "+7d"))'
    cortex query '+security-ops/TODO|NEXT'
    cortex query 'PRIORITY="A"+Effort<"1:00"' --as-of HEAD~1
    cortex query '-noexport+LEVEL=1'
    cortex query '(path "agents/assistant")' --valid-at 2026-11-01
    """
    print_nodes(cx.query(text, as_of=ref, match=True if match else None, **holding(valid_at, all_)))


commands = (query,)
