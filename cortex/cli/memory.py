"""`cortex memory`: inspect, search, compact, consolidate, purge, forget, list and add to agents' memory, log
conversations."""

from __future__ import annotations

import json
from datetime import datetime

import click

from ..errors import NotFound, UserError, located
from ..memory.validity import shown
from ..words import counted, quoted, short, similar_item
from .common import Commands, console, duration, err_console, holding, table, validity_options, with_cortex
from .search import note_status, searched


TYPES = ("fact", "procedure", "pattern")
MAX_TURNS_FILE = 64 << 20  # characters of turns read from a file (or stdin)


@click.group(name="memory", cls=Commands)
def memory_group() -> None:
    """Agent memory: memory.org and daily logs under agents/<agent-id>/."""


@memory_group.command()
@click.argument("agent")
@validity_options
@with_cortex
def inspect(cx, agent, valid_at, all_):
    """Print AGENT's memory.org with its current items (those superseded or retired left out, unless --all), after
    a line (on stderr) counting its items and daily logs; with --all, a line for each item that no longer holds:
    what replaced it, and when."""
    view = cx.inspect_memory(agent, **holding(valid_at, all_))
    for warning in view.context.warnings:
        err_console.print(warning, style="yellow", markup=False)
    text = view.org
    err_console.print(view.summary + ("; --all shows them" if view.apart and valid_at is None and not all_ else ""),
                      markup=False)
    for note in view.notes() if all_ else ():
        err_console.print(f"  {note}", markup=False)
    click.echo(text, nl=not text.endswith("\n"))


@memory_group.command()
@click.argument("agent")
@click.argument("query")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=10, show_default=True, help="At most N results.")
@validity_options
@with_cortex
def search(cx, agent, query, limit, valid_at, all_):
    """Search AGENT's memory for QUERY (its current items, unless --valid-at or --all): score, then where and what."""
    results = searched(cx.memory.search, agent=agent, query=query, limit=limit, **holding(valid_at, all_))
    for result in results:
        console.print(f"{result.score:.3f}  {result}", markup=False)
    if not results:
        err_console.print("no results")
    note_status(results)


@memory_group.command()
@click.argument("agent")
@click.option("--max-age", help="Delete daily logs older than this (e.g. 90d, 12w); default 90d.")
@with_cortex(create=True)
def compact(cx, agent, max_age):
    """Move items marked in AGENT's daily logs into memory.org and delete old logs.

    An item memory.org holds already, as it is or in other words, is not moved again; one that replaces a
    current item (a likely successor, as `memory consolidate` finds them) supersedes it."""
    from ..api import RetentionPolicy

    policy = RetentionPolicy(duration(max_age, "--max-age")) if max_age is not None else RetentionPolicy()
    report = cx.memory.compact(agent, policy)
    for line in report.lines():
        console.print(line, markup=False)
    console.print(f"compacted {agent}: {len(report.moved)} moved, {report.duplicates} already known, "
                  f"{counted(len(report.deleted_logs), 'log')} deleted; undo with "
                  f"`cortex rollback {short(report.before.oid)}`", markup=False)


@memory_group.command()
@click.argument("agent")
@click.argument("numbers", nargs=-1, type=click.IntRange(min=1))
@click.option("--apply", "apply_", is_flag=True, help="Apply the suggestions: all, or those NUMBERS name.")
@click.option("--base", metavar="VERSION",
              help="Apply only while memory.org is at VERSION, the one the suggestions were listed for.")
@with_cortex(create=True)
def consolidate(cx, agent, numbers, apply_, base):
    """Suggest merging AGENT's duplicate items and superseding items by their likely successors.

    Each suggestion is numbered, with why (the words the two items differ in) and the diff of memory.org
    applying it would make. --apply applies them all, or those NUMBERS name, in one commit after a
    snapshot: `cortex rollback` undoes it. They are found again from memory.org as it is then, so an
    edit made meanwhile is kept; with --base, an apply is refused once memory.org changed."""
    if numbers and not apply_:
        raise click.UsageError("NUMBERS name suggestions to apply: add --apply")
    result = cx.memory.consolidate(agent, apply=list(numbers) or True if apply_ else False, base=base)
    click.echo(result.listing())


@memory_group.command()
@click.argument("agent")
@click.option("--hard", is_flag=True, help="Also remove it from every snapshot and from the store file.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@with_cortex(create=True)
def purge(cx, agent, hard, yes):
    """Remove AGENT's files and its items from the working state (--hard: from history too).

    A hard purge needs the store alone: close other cortex processes first. It is recorded
    (what, when, by whom, never the content): see `cortex log`.
    """
    what = "files and every trace in history (this cannot be undone)" if hard else "files (history keeps them)"
    if not hard and agent not in cx.memory.list_agent_contexts():
        return _nothing_to("purge", f"agent {quoted(agent)} has no memory here")
    if not yes and not click.confirm(f"purge {agent}'s {what}?"):
        err_console.print(f"nothing purged: {agent}'s memory is as it was")
        raise SystemExit(1)
    from ..memory.forgetting import NothingThere

    try:
        report = cx.memory.purge(agent, hard=hard)
    except NothingThere as exc:
        return _nothing_to("purge", str(exc))
    for path in report.files:
        console.print(f"  removed  {path}", markup=False)
    _print_history(report.history)
    console.print(f"purged {agent}", markup=False)


def _nothing_to(doing: str, why: str) -> None:
    """What a purge or forget of what is not there says: not an error (run twice, the second finds it done)."""
    console.print(f"nothing to {doing}: {why}", markup=False)


@memory_group.command()
@click.argument("agent")
@click.argument("item")
@click.option("--hard", is_flag=True, help="Also remove it from every snapshot and from the store file.")
@click.option("--chain", is_flag=True, help="Also the items it replaced and that replaced it, in turn.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@with_cortex(create=True)
def forget(cx, agent, item, hard, chain, yes):
    """Remove ITEM (its :ID:, key or text) from AGENT's memory.org and logs (--hard: from history too).

    Without --hard a snapshot is taken first, so `cortex rollback` brings the item back. A hard
    forget needs the store alone, cannot be undone and is recorded like a hard purge.
    """
    if hard and not yes and not click.confirm(
            f"erase this item of {agent} from the files and every snapshot? This cannot be undone."):
        err_console.print(f"nothing forgotten: {agent}'s memory is as it was")
        raise SystemExit(1)
    from ..memory.forgetting import NothingThere

    try:
        report = cx.memory.forget(agent, item, hard=hard, chain=chain)
    except NothingThere as exc:
        return _nothing_to("forget", str(exc))
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
@click.argument("text", required=False)
@click.option("--session", required=True, help="The conversation the turns belong to (its :SESSION:).")
@click.option("--speaker", help="Who said TEXT, by their own name (with --file: of a line that names nobody).")
@click.option("--at", help="When, as 2026-11-20 14:05 (with --file: of a line that says not); default now.")
@click.option("--title", help="The title of the session's entry, if these turns start one (default Conversation).")
@click.option("--file", "file_", type=click.File("r", encoding="utf-8"),
              help='Turns as JSON lines, {"speaker": ..., "text": ..., "at": ...} each; - reads stdin.')
@with_cortex(create=True)
def turn(cx, agent, text, session, speaker, at, title, file_):
    """Log a turn of a conversation in AGENT's daily log: TEXT said by --speaker, or the turns of --file.

    Each turn is one headline, "** Speaker: first line", in the session's entry of its day's log, the rest of
    the turn its body; a session's later turns join its entry (README.org, Conversations).
    """
    from ..memory.conversation.orglog import utterance_from
    from ..memory.layout import log_path
    from ..reads import read_text_bounded

    if (text is None) == (file_ is None):
        raise click.UsageError("give the turn's TEXT or --file, one of the two")
    if text is not None and speaker is None:
        raise click.UsageError("--speaker: name who said TEXT")
    now = datetime.now()
    if file_ is None:
        said = [utterance_from({"text": text}, "TEXT", speaker, at)]
    else:
        lines = read_text_bounded(file_, MAX_TURNS_FILE, "a turns file", file_.name).splitlines()
        said = [utterance_from(_json_line(file_.name, n, line), f"{file_.name}:{n}", speaker, at)
                for n, line in enumerate(lines, 1) if line.strip()]
        if not said:
            raise UserError(f"{file_.name}: no turn in it (one JSON object a line)")
    cx.memory.record_session(agent, said, title, session=session, now=now)
    days = sorted({(u.at or now).date() for u in said})
    console.print(f"logged {counted(len(said), 'turn')} of session {' '.join(session.split())} in "
                  f"{', '.join(log_path(agent, day) for day in days)}", markup=False)


def _json_line(name: str, n: int, line: str):
    """One line of a turns file, read as JSON; a UserError saying where when it is not."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(located(name, n, f"not JSON ({exc.msg}): {line.strip()[:40]!r}", exc.pos + 1)) from None


@memory_group.command()
@click.argument("agent")
@click.argument("text")
@click.option("--type", "type_", type=click.Choice(TYPES), default="fact", show_default=True, help="Memory type.")
@click.option("--source", default="cli", show_default=True, help="Where the item comes from.")
@click.option("--supersedes", metavar="ITEM", help="The item (:ID:, key or text) this one replaces: it stops holding.")
@click.option("--valid-from", metavar="DATE", help="When it became true (2026-11-01, 2026-11-01 14:00); default: now.")
@with_cortex(create=True)
def add(cx, agent, text, type_, source, supersedes, valid_from):
    """Add TEXT to AGENT's memory as a fact, procedure or pattern (once: the same text is not added again).

    With --supersedes the item it names stops holding when this one starts, and both say so
    (`:SUPERSEDES:`, `:SUPERSEDED_BY:`, `:INVALID_AT:`, the ARCHIVE tag), in one commit. Then one line per
    other current item of that type close in meaning (`similar: ID TITLE (cosine)`): the same fact in other
    words, or one this replaces (`memory consolidate` suggests what to do with them)."""
    known = None if supersedes else cx.memory.known_item(agent, type_, text)
    item = known or cx.memory.add_item(agent, type_, text, source=source, supersedes=supersedes, valid_from=valid_from)
    console.print(f"{'already present' if known else 'added'}  {item.id or item.key(type_)}  {item.title}", markup=False)
    if supersedes:
        console.print(f"  supersedes  {' '.join(item.validity.replaces)}", markup=False)
    for other, score in [] if known else cx.memory.similar(agent, type_, text):
        console.print(similar_item(other.id or other.key(type_), other.title, score), markup=False)


@memory_group.command()
@click.argument("agent")
@click.argument("item")
@click.option("--at", metavar="DATE", help="When it stopped being true (2026-11-01, 2026-11-01 14:00); default: now.")
@with_cortex(create=True)
def retire(cx, agent, item, at):
    """Say that ITEM (its :ID:, key or text) of AGENT stopped being true, with no successor.

    It keeps its text and place in memory.org, with `:INVALID_AT:` and the ARCHIVE tag; searches
    and queries leave it out unless asked for what held then (--valid-at) or for everything (--all)."""
    retired = cx.memory.retire(agent, item, at=at)
    console.print(f"retired  {retired.id}  {retired.title}  (no longer true from {shown(retired.validity.end)})",
                  markup=False)


commands = (memory_group,)
