"""`cortex dsl`: check, show and convert definition files."""

from __future__ import annotations

import click

from ..words import counted
from .common import Commands, console, err_console, table


@click.group(name="dsl", cls=Commands)
def dsl_group():
    """Check, show and convert defmemory / defwebhook definition files."""


@dsl_group.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def check(files):
    """Check definition files (Hy, or Org with marked blocks); print every error, exit 1 if any."""
    from ..api import load_definitions
    from ..errors import UserError

    failed = False
    for file in files:
        try:
            defs = load_definitions(file)
        except UserError as exc:  # a DslError lists every problem of the file
            failed = True
            err_console.print(str(exc), markup=False)
            continue
        console.print(f"{file}: ok ({counted(len(defs.memories), 'memory', 'memories')}, "
                      f"{counted(len(defs.webhooks), 'webhook')})")
    if failed:
        raise SystemExit(1)


@dsl_group.command()
@click.argument("file", type=click.Path(dir_okay=False))
def show(file):
    """A table of what FILE defines (secrets stay hidden)."""
    from ..api import ROW_HEADERS, definition_rows, load_definitions

    t = table(*ROW_HEADERS)
    for row in definition_rows(load_definitions(file)):
        t.add_row(*row)
    console.print(t)


@dsl_group.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of printing.")
def convert(file, output):
    """Convert a brace-syntax (memory "x" { ... } / webhook "y" { ... }) file to defmemory / defwebhook forms."""
    from ..api import convert_brace_file

    converted = convert_brace_file(file, output or None)
    if output:
        console.print(f"wrote {output}")
    else:
        click.echo(converted, nl=False)


commands = (dsl_group,)
