"""The click application behind `cortex`: thin front ends over `cortex.api`; no logic of their own."""

from __future__ import annotations

import importlib
import os
import re
import sys
import warnings

import click
from rich.markup import escape

from ..errors import CortexError
from ..words import QUOTED, quoted
from . import interrupted
from .common import Commands, Interrupted, err_console, no_org_option, store_option

# The commands of each module of this package, by name. A module is imported when one of its commands runs (or
# `--help` lists them), so a command never waits for what the others stand on (tests/cli/test_app.py keeps this
# true: every module's `commands`, and nothing else, are here).
MODULES = {
    "store": ("ingest", "show", "find", "ls", "stats", "fsck"),
    "history": ("snapshot", "snapshots", "rollback", "diff", "log", "history", "gc", "export", "import", "checkout",
                "sync", "conflicts", "copies"),
    "search": ("search",),
    "query": ("query",),
    "agenda": ("agenda", "links", "backlinks"),
    "memory": ("memory",),
    "review": ("review",),
    "dsl": ("dsl",),
    "webhooks": ("webhook", "serve"),
    "mcp": ("mcp",),
    "hooks": ("brief", "hook"),
    "lsp": ("lsp",),
}
_MODULE_OF = {name: module for module, names in MODULES.items() for name in names}


class TopCommands(Commands):
    """`cortex`'s commands, each module's imported on first use (`MODULES`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *_MODULE_OF})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in _MODULE_OF:
            for command in importlib.import_module(f"{__package__}.{_MODULE_OF[name]}").commands:
                self.add_command(command)
        return self.commands.get(name)


@click.group(cls=TopCommands, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cortex")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """cortex: versioned, searchable agent memory over Org files."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(repl)


@click.command()
@store_option
@no_org_option
@click.argument("org_root", required=False, type=click.Path(file_okay=False))
def repl(store, no_org, org_root):
    """The Hy REPL over a store, after ingesting ORG_ROOT (default: the store's, else ./org)."""
    from ..repl import eval_source, piped_forms, run

    if not sys.stdin.isatty():
        sys.exit(eval_source(piped_forms(), store, org_root, folder=not no_org, filename="<stdin>"))
    sys.exit(run(store, org_root, folder=not no_org))


@click.command(name="eval")
@store_option
@click.option("--org", "org_root", type=click.Path(file_okay=False), help="Org folder.")
@no_org_option
@click.argument("forms", nargs=-1)
def eval_(store, org_root, no_org, forms):
    """Evaluate Hy FORMS (or forms piped on stdin) as the REPL would; exit 1 on the first error."""
    from ..repl import eval_source, piped_forms

    source = " ".join(forms) if forms else piped_forms()
    sys.exit(eval_source(source, store, org_root, folder=not no_org, filename="<eval>" if forms else "<stdin>"))


cli.add_command(repl)
cli.add_command(eval_)


def _warn(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line, without the source location Python adds for programmers."""
    err_console.print(f"[yellow]warning:[/] {escape(str(message))}", markup=True)


_QUOTED_VALUE = re.compile(r"'([^'\n]{%d,})'|\"([^\"\n]{%d,})\"" % (QUOTED + 1, QUOTED + 1))


def _shortened(message: str) -> str:
    """click's message on one line (a value's line breaks escaped), each long value it quotes cut to a short
    prefix (`quoted`)."""
    message = message.replace("\r", "\\r").replace("\n", "\\n")
    return _QUOTED_VALUE.sub(lambda m: quoted(m[1] if m[1] is not None else m[2]), message)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning cortex errors into one clear line and exit status 1."""
    warnings.showwarning = _warn
    try:
        cli.main(args=argv, prog_name="cortex", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "cortex"
        err_console.print(f"[bold red]{escape(where)}:[/] {escape(_shortened(exc.format_message()))} "
                          f"(see {escape(where)} --help)", markup=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt, Interrupted):
        err_console.print("interrupted" if interrupted.is_set() else "aborted")
        sys.exit(130)
    except CortexError as exc:
        err_console.print(f"[bold red]cortex:[/] {escape(str(exc))}", markup=True)
        sys.exit(1)
    except OSError as exc:  # a path the system refuses: no such file, not a folder, a name too long...
        where = f"{quoted(os.fsdecode(exc.filename))}: " if exc.filename is not None else ""
        err_console.print(f"[bold red]cortex:[/] {escape(where + (exc.strerror or str(exc)))}", markup=True)
        sys.exit(1)


