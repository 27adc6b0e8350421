"""Shared pieces of the CLI: the --store and --org options, consoles, tables."""

from __future__ import annotations

import functools
import sys
from datetime import datetime

import click
from rich.console import Console
from rich.table import Table

# Piped output is read by scripts and people alike: don't fold it at 80 columns.
console = Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, emoji=False, soft_wrap=True)


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


def with_cortex(fn):
    """Add --store, --org and --no-org to a command and pass it an open `Cortex` as its first argument.

    With --no-org this machine has no Org folder: memory writes (and webhook routing) commit to the
    store's working state directly; what needs a folder (ingest, rollback of files) is refused.
    """

    @store_option
    @click.option("--org", "org_root", type=click.Path(file_okay=False),
                  help="Org folder the store tracks (default: the one it tracked, else ./org).")
    @no_org_option
    @functools.wraps(fn)
    def wrapper(store, org_root, no_org, **kwargs):
        from .. import api

        with api.open(store, org_root, folder=not no_org) as cx:
            return fn(cx, **kwargs)

    return wrapper


def table(*columns: str, title: str | None = None) -> Table:
    """A plain table with the given column headers."""
    t = Table(title=title, show_edge=False, header_style="bold", pad_edge=False)
    for column in columns:
        t.add_column(column, overflow="fold")
    return t


def when(time_ns: int) -> str:
    """A local time a person reads at a glance."""
    return datetime.fromtimestamp(time_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def short(oid) -> str:
    """The 12-character prefix of an oid."""
    return "-" if oid is None else bytes(oid).hex()[:12]


def duration(text: str, param: str):
    """A duration option or argument (`30d`, `12h`...) as a timedelta; a usage error names `param`."""
    from ..api import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as exc:
        raise click.BadParameter(str(exc), param_hint=param) from None
