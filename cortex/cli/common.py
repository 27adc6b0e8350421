"""Shared pieces of the CLI: the --store and --org options, consoles, tables."""

from __future__ import annotations

import functools
import sys
import threading
from contextlib import contextmanager

import click
from rich.console import Console

from ..errors import UserError
from ..words import counted, literal, summary
from . import interrupted
from .tables import table

SHOW_AFTER = 0.5  # seconds a step goes on before its progress bar shows
class LiteralConsole(Console):
    """A console that prints text as it is: a title such as `[/] Project` or `[b]` is Org, not markup, and an
    escape sequence in it is shown, not obeyed (a message that styles its own words says markup=True, its
    values escaped)."""

    def print(self, *objects, **options) -> None:
        super().print(*(literal(o) if isinstance(o, str) else o for o in objects), **options)


# Piped output is read by scripts and people alike: don't fold it at 80 columns.
console = LiteralConsole(highlight=False, emoji=False, markup=False, width=None if sys.stdout.isatty() else 160)
err_console = LiteralConsole(stderr=True, highlight=False, emoji=False, markup=False, soft_wrap=True)


class StoreLocation(click.Path):
    """A store folder, or the postgresql:// URL of a shared store (kept as it is: a URL is no path)."""

    name = "store"

    def __init__(self):
        super().__init__(file_okay=False)

    def convert(self, value, param, ctx):
        from ..backends import is_database_url

        return value if is_database_url(value) else super().convert(value, param, ctx)


store_option = click.option(
    "--store", type=StoreLocation(), envvar="CORTEX_STORE", metavar="DIR|URL",
    help="Store folder, or postgresql://user@host/db for a store shared through PostgreSQL "
         "(default: snapshots/ in the repository, else ~/.local/share/cortex/store).")


no_org_option = click.option(
    "--no-org", is_flag=True, envvar="CORTEX_NO_ORG",
    help="No Org folder on this machine: write to the store's working state directly.")


class Interrupted(Exception):
    """Ctrl-C during a command, carried past click (which would print a blank line first)."""


class Commands(click.Group):
    """A group whose list of commands shows each one's first paragraph whole, wrapped to the terminal, never cut
    (click's own short help ends at the first word that ends in a full stop, such as `...`)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        commands = [(name, command) for name in self.list_commands(ctx)
                    if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if commands:
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.short_help or summary(command.help)) for name, command in commands])


org_option = click.option("--org", "org_root", type=click.Path(file_okay=False),
                          help="Org folder the store tracks (default: the one it tracked, else ./org).")


def cortex_options(fn):
    """Add --store, --org and --no-org to a command, for `open_cortex`."""
    return store_option(org_option(no_org_option(fn)))


def open_cortex(store, org_root, no_org, *, create: bool = False):
    """The `Cortex` that --store, --org and --no-org name, to open with `with`; where there is no store, one is
    made only if `create` (a command that writes), else NoStore says how to make one.

    With --no-org this machine has no Org folder: memory writes (and webhook routing) commit to the
    store's working state directly; what needs a folder (ingest, rollback of files) is refused.
    """
    from .. import api

    return api.open(store, org_root, folder=not no_org, create=create)


def with_cortex(fn=None, *, create: bool = False):
    """Add --store, --org and --no-org to a command and pass it an open `Cortex` as its first argument;
    `@with_cortex(create=True)` for a command that writes, which may make the store."""
    if fn is None:
        return functools.partial(with_cortex, create=create)

    @cortex_options
    @functools.wraps(fn)
    def wrapper(store, org_root, no_org, **kwargs):
        with open_cortex(store, org_root, no_org, create=create) as cx:
            return fn(cx, **kwargs)

    return wrapper


@contextmanager
def progress_bar(label: str):
    """A callback `progress(done, total, current=label)` for a long step: on stderr when it is a terminal, a bar
    (a pulse while the total is unknown) shows what is `current` from SHOW_AFTER seconds into the block to its end."""
    if not sys.stderr.isatty():
        yield lambda *told: None
        return
    from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class Count(ProgressColumn):
        """Done of total; nothing while the total is unknown (not a frozen 0/?)."""

        def render(self, task) -> Text:
            return Text("" if task.total is None else f"{task.completed:.0f}/{task.total:.0f}")

    bar = Progress(TextColumn("{task.description}"), BarColumn(), Count(), TimeRemainingColumn(),
                   console=err_console, transient=True)
    task = bar.add_task(label, total=None)
    showing = threading.Timer(SHOW_AFTER, bar.start)
    showing.start()
    try:
        yield lambda done, total, current=label: bar.update(task, completed=done, total=total,
                                                            description=current[-40:])
    finally:
        showing.cancel()
        showing.join()
        bar.stop()


@contextmanager
def stopped_by_ctrl_c():
    """A server's run, which Ctrl-C ends as a person means it to: cleanly, exit status 0, `stopped` said. Whatever
    ends the run after Ctrl-C is its stop: a library may have turned the KeyboardInterrupt into another error."""
    try:
        yield
    except BaseException:
        if not interrupted.is_set():
            raise
    err_console.print("stopped")


def print_nodes(nodes) -> None:
    """Headlines as a table (file:line, outline, TODO, tags, :ID:), then how many ("no results" for none)."""
    if not nodes:
        err_console.print("no results")
        return
    t = table("#", "file:line", "outline", "todo", "tags", "id")
    for n, node in enumerate(nodes):  # numbered from 0, as the REPL shows them and (get nodes N) takes them
        h = node.headline
        t.add_row(str(n), f"{node.path}:{node.line}", " / ".join(node.outline), h.todo or "", ":".join(h.tags),
                  node.id or "")
    console.print(t)
    console.print(counted(len(nodes), "headline"))


def validity_options(fn):
    """Add --valid-at and --all to a command that reads items, which keeps the current ones by default; pass them
    on with `holding`."""
    fn = click.option("--all", "all_", is_flag=True,
                      help="Every item, those that no longer hold too (superseded or retired).")(fn)
    return click.option("--valid-at", metavar="DATE",
                        help="The items that held then: 2026-11-01, -30d, \"2026-11-01 14:00\" (default: the "
                             "current ones, holding now and not replaced).")(fn)


def holding(valid_at: str | None, all_: bool) -> dict:
    """The api's `valid_at` and `all` from --valid-at and --all, which exclude each other."""
    if valid_at is not None and all_:
        raise click.UsageError("--valid-at and --all exclude each other")
    return {"valid_at": valid_at, "all": all_}


def chain_lines(cx, target: str, ref: str | None = None) -> list[str]:
    """What the headline with :ID: `target` replaced and what replaced it (`Cortex.chain`), when its own
    properties name either (`chains.named`); none for a file."""
    from ..orgquery.chains import named

    if target in cx.state(ref).entries:
        return []
    try:
        node = cx.lookup(target, ref)
    except UserError:  # a file's own :ID:, shown as the file
        return []
    return cx.chain(node, as_of=ref).lines() if named(node.headline) else []


def duration(text: str, param: str):
    """A duration option or argument (`30d`, `12h`...) as a timedelta; a usage error names `param`."""
    from ..api import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as exc:
        raise click.BadParameter(str(exc), param_hint=param) from None
