"""The `cortex` command: thin front ends over `cortex.api`; no logic of their own."""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from ..errors import CortexError
from .common import console, err_console
from .dsl import dsl_group
from .memory import memory_group
from .search import search
from .webhooks import serve_command, webhook_group
from .history import history_commands
from .store import store_commands


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cortex")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """cortex: versioned, searchable agent memory over Org files."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


for command in (*store_commands, *history_commands, search, memory_group, dsl_group, webhook_group,
                serve_command):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning cortex errors into one clear line and exit status 1."""
    try:
        cli.main(args=argv, prog_name="cortex", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except CortexError as exc:
        err_console.print(f"[bold red]cortex:[/] {escape(str(exc))}")
        sys.exit(1)


__all__ = ["cli", "main", "console"]
