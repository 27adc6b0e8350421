"""`cortex memory`: inspect, search, compact, purge, forget, list and add to agents' memory."""

from __future__ import annotations

import click

from ..errors import NotFound
from ..words import counted, memory_summary, quoted
from .common import Commands, console, duration, err_console, short, table, with_cortex
from .search import note_status, searched


TYPES = ("fact", "procedure", "pattern")


@click.group(name="memory", cls=Commands)
def memory_group() -> None:
    """Agent memory: memory.org and daily logs under agents/<agent-id>/."""


@memory_group.command()
@click.argument("agent")
@with_cortex
def inspect(cx, agent):
    """Print AGENT's memory.org, after a line (on stderr) counting its items and daily logs."""
    context = cx.memory.load_context(agent)
    for warning in context.warnings:
        err_console.print(warning, style="yellow", markup=False)
    text = cx.memory.show(agent)
    err_console.print(memory_summary(agent, context, cx.memory.daily_logs(agent)), markup=False)
    click.echo(text, nl=not text.endswith("\n"))


@memory_group.command()
@click.argument("agent")
@click.argument("query")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=10, show_default=True, help="At most N results.")
@with_cortex
def search(cx, agent, query, limit):
    """Search AGENT's memory for QUERY: score, then where and what."""
    results = searched(cx.memory.search, agent=agent, query=query, limit=limit)
    for result in results:
        console.print(f"{result.score:.3f}  {result}", markup=False)
    if not results:
        err_console.print("no results")
    note_status(results)


@memory_group.command()
@click.argument("agent")
@click.option("--max-age", help="Delete daily logs older than this (e.g. 90d, 12w); default 90d.")
@with_cortex
def compact(cx, agent, max_age):
    """Move items marked in AGENT's daily logs into memory.org and delete old logs."""
    from ..api import RetentionPolicy

    policy = RetentionPolicy(duration(max_age, "--max-age")) if max_age is not None else RetentionPolicy()
    report = cx.memory.compact(agent, policy)
    for kind, item in report.moved:
        console.print(f"  moved    {kind:9} {item.title}", markup=False)
    for path in report.deleted_logs:
        console.print(f"  deleted  {path}", markup=False)
    console.print(f"compacted {agent}: {len(report.moved)} moved, {report.duplicates} already known, "
                  f"{counted(len(report.deleted_logs), 'log')} deleted; undo with "
                  f"`cortex rollback {short(report.before.oid)}`", markup=False)


@memory_group.command()
@click.argument("agent")
@click.option("--hard", is_flag=True, help="Also remove it from every snapshot and from the store file.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@with_cortex
def purge(cx, agent, hard, yes):
    """Remove AGENT's files and its items from the working state (--hard: from history too).

    A hard purge needs the store alone: close other cortex processes first. It is recorded
    (what, when, by whom, never the content): see `cortex log`.
    """
    what = "files and every trace in history (this cannot be undone)" if hard else "files (history keeps them)"
    if not hard and agent not in cx.memory.list_agent_contexts():
        raise NotFound(f"agent {quoted(agent)} has no memory here; `cortex memory list` lists the agents")
    if not yes and not click.confirm(f"purge {agent}'s {what}?"):
        err_console.print(f"nothing purged: {agent}'s memory is as it was")
        raise SystemExit(1)
    report = cx.memory.purge(agent, hard=hard)
    for path in report.files:
        console.print(f"  removed  {path}", markup=False)
    _print_history(report.history)
    console.print(f"purged {agent}", markup=False)


@memory_group.command()
@click.argument("agent")
@click.argument("item")
@click.option("--hard", is_flag=True, help="Also remove it from every snapshot and from the store file.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@with_cortex
def forget(cx, agent, item, hard, yes):
    """Remove ITEM (its :ID:, key or text) from AGENT's memory.org and logs (--hard: from history too).

    Without --hard a snapshot is taken first, so `cortex rollback` brings the item back. A hard
    forget needs the store alone, cannot be undone and is recorded like a hard purge.
    """
    if hard and not yes and not click.confirm(
            f"erase this item of {agent} from the files and every snapshot? This cannot be undone."):
        err_console.print(f"nothing forgotten: {agent}'s memory is as it was")
        raise SystemExit(1)
    report = cx.memory.forget(agent, item, hard=hard)
    for path in report.files:
        console.print(f"  rewrote  {path}", markup=False)
    _print_history(report.history)
    if report.before is not None:
        console.print(f"forgot {agent}'s item; undo with `cortex rollback {short(report.before.oid)}`", markup=False)
    else:
        console.print(f"forgot {agent}'s item", markup=False)


def _print_history(forgotten) -> None:
    if forgotten is not None:
        console.print(f"  rewrote {counted(forgotten.snapshots, 'snapshot')}, "
                      f"collected {counted(forgotten.objects, 'object')}", markup=False)


@memory_group.command(name="list")
@with_cortex
def list_(cx):
    """Agents with memory: files, bytes, items and daily logs."""
    t = table("agent", "files", "bytes", "items", "logs")
    for agent, stats in cx.memory.get_storage_stats().items():
        t.add_row(agent, str(stats.files), str(stats.bytes), str(stats.items), str(stats.logs))
    console.print(t)


@memory_group.command()
@click.argument("agent")
@click.argument("text")
@click.option("--type", "type_", type=click.Choice(TYPES), default="fact", show_default=True, help="Memory type.")
@click.option("--source", default="cli", show_default=True, help="Where the item comes from.")
@with_cortex
def add(cx, agent, text, type_, source):
    """Add TEXT to AGENT's memory as a fact, procedure or pattern (once: the same text is not added again)."""
    known = cx.memory.known_item(agent, type_, text)
    item = known or cx.memory.add_item(agent, type_, text, source=source)
    console.print(f"{'already present' if known else 'added'}  {item.id or item.key(type_)}  {item.title}", markup=False)
