"""Commands over history: snapshot, snapshots, rollback, diff, log, history, gc, export, import, and working
copies: checkout, sync, conflicts."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.text import Text

from ..location import RECORD
from ..words import CHANGE_STYLES, counted, literal, patch_style, short, unsaved_note, when
from .common import chain_lines, console, duration, err_console, table, with_cortex

patch_option = click.option("-p", "--patch", is_flag=True,
                            help="Show the text of each change too, as a unified diff (as git's --patch).")


@click.command()
@click.option("-m", "--message", default="", help="What this state is.")
@with_cortex(create=True)
def snapshot(cx, message):
    """Record the working state as a snapshot (O(1)), the Org folder's edits first, and move HEAD to it (nothing
    when nothing changed since HEAD)."""
    before = cx.head_oid
    snap = cx.snapshot(message, empty=False)
    if snap.oid == before:
        console.print(f"nothing changed since HEAD ({short(snap.oid)}): no snapshot taken")
        return
    console.print(f"snapshot {short(snap.oid)}  {counted(snap.counts.get('files', 0), 'file')}, "
                  f"{counted(snap.counts.get('headlines', 0), 'headline')}  {message}")


@click.command()
@with_cortex
def snapshots(cx):
    """List kept snapshots, most recent first (position 0 = newest)."""
    head = cx.head_oid
    t = table("#", "snapshot", "time", "files", "headlines", "message")
    for n, snap in enumerate(cx.snapshots()):
        mark = Text(" HEAD", style="bold green") if snap.oid == head else ""
        t.add_row(str(n), Text(short(snap.oid)) + mark, when(snap.time_ns), str(snap.counts.get("files", "")),
                  str(snap.counts.get("headlines", "")), snap.message)
    console.print(t)


@click.command()
@click.argument("ref")
@click.option("--keep", is_flag=True, help="Snapshot unsnapshotted edits first.")
@click.option("--force", is_flag=True, help="Discard unsnapshotted edits.")
@with_cortex
def rollback(cx, ref, keep, force):
    """Return the working state, HEAD and the Org files to snapshot REF."""
    if keep and force:
        raise click.UsageError("--keep and --force exclude each other")
    report = cx.rollback(ref, keep=keep, force=force)
    if report.kept:
        console.print(f"kept your edits as snapshot {short(report.kept.oid)}")
    for path in report.written:
        console.print(f"  restored {path}")
    for path in report.removed:
        console.print(f"  removed  {path}")
    console.print(f"rolled back to {short(report.target.oid)} {report.target.message}", markup=False)
    if report.folder:
        console.print(f"Org files in {report.folder}{' (a new folder)' if report.created else ''}", markup=False)


@click.command()
@click.argument("a", required=False, default="HEAD")
@click.argument("b", required=False)
@patch_option
@with_cortex
def diff(cx, a, b, patch):
    """Headline changes from A (default HEAD) to B (default: the working state); with --patch, each with its text."""
    changes = cx.diff(a, b)
    _print_lines(_patch_lines(cx, changes) if patch else map(str, changes))
    if not changes:
        err_console.print("no changes")
    if b is None and (unsaved := cx.unsaved()):
        err_console.print(unsaved_note(unsaved, "`cortex ingest`"), markup=False)


@click.command()
@click.option("-n", "--limit", type=click.IntRange(min=0), help="Show only the newest N.")
@patch_option
@with_cortex
def log(cx, limit, patch):
    """Snapshots with how many headlines each added, changed, moved or removed, and the purges that rewrote
    history, newest first; with --patch, each snapshot's changes with their text."""
    rows = [(entry.snapshot.time_ns, entry) for entry in cx.log(limit)]
    rows += [(purge.time_ns, purge) for purge in cx.purges()]
    rows = [item for _, item in sorted(rows, key=lambda row: row[0], reverse=True)[:limit]]
    if patch:
        for item in rows:
            _print_lines(_patch_lines(cx, [item]) if hasattr(item, "snapshot") else [_purge_line(item)])
        return
    t = table("snapshot", "time", "headlines", "changes", "message")
    for item in rows:
        t.add_row(*(_snapshot_row(item) if hasattr(item, "snapshot") else _purge_row(item)))
    console.print(t)


def _patch_lines(cx, items) -> list[str]:
    """The lines of changes, log entries or versions with their text (`Cortex.patch`)."""
    text = cx.patch(items)
    return text.split("\n") if text else []


def _print_lines(lines) -> None:
    """Lines of changes and patches, each as it is, coloured on a terminal as git colours them."""
    for line in lines:
        console.print(Text(literal(line), style=patch_style(line)), soft_wrap=True)


def _snapshot_row(entry) -> tuple:
    counts = Text(" ").join(Text(f"{v} {k}", style=CHANGE_STYLES[k]) for k, v in sorted(entry.changes.items())) or "-"
    return (short(entry.snapshot.oid), when(entry.snapshot.time_ns), str(entry.snapshot.counts.get("headlines", "")),
            counts, entry.snapshot.message)


def _purge_row(purge) -> tuple:
    """A purge as a log row: it rewrote history rather than adding to it, so it names no snapshot."""
    return (Text("purge", style="red"), when(purge.time_ns), "",
            f"rewrote {counted(purge.snapshots, 'snapshot')}, removed {counted(purge.objects, 'object')}",
            Text(f"purged {purge.what} ({', '.join(purge.paths)}) by {purge.by}"))


def _purge_line(purge) -> str:
    return (f"purge {when(purge.time_ns)} purged {purge.what} ({', '.join(purge.paths)}) by {purge.by}: rewrote "
            f"{counted(purge.snapshots, 'snapshot')}, removed {counted(purge.objects, 'object')}")


@click.command(name="history")
@click.argument("org_id")
@patch_option
@with_cortex
def history_(cx, org_id, patch):
    """Versions of the headline with :ID: ORG_ID across snapshots, newest first (as `log`), and when each said it
    held (VALID_FROM, INVALID_AT) and what it replaced or was replaced by; then what it replaced and what
    replaced it, as the working state says. With --patch, each version with its text against the one before."""
    from ..orgquery.chains import validity_text

    versions = cx.history(org_id)
    if patch:
        _print_lines(_patch_lines(cx, versions))
    else:
        held = [validity_text(version.headline) for version in versions]
        t = table("snapshot", "time", "file", "title", "change", *(["validity"] if any(held) else []))
        for version, validity in zip(versions, held):
            t.add_row(short(version.snapshot.oid), when(version.snapshot.time_ns), version.path,
                      version.headline.title, version.change, *([validity] if any(held) else []))
        console.print(t)
    for line in chain_lines(cx, org_id):
        console.print(line, markup=False)


@click.command()
@click.option("--keep-last", type=click.IntRange(min=0), default=20, show_default=True,
              help="Keep the newest N snapshots.")
@click.option("--keep", "kept_before", type=click.IntRange(min=0), hidden=True)  # --keep-last's old name, for a release
@click.option("--max-age", help="Also keep snapshots younger than this (e.g. 30d, 2w).")
@click.option("--compact", is_flag=True, help="Then rewrite the data file without the freed pages "
                                              "(needs the store alone: close other cortex processes).")
@with_cortex
def gc(cx, keep_last, kept_before, max_age, compact):
    """Drop snapshots beyond retention and delete objects nothing reaches (the REPL's (gc :keep-last N)).

    Kept: the snapshots retention keeps (the newest --keep-last, those younger than --max-age, and
    HEAD), what refs point at (HEAD, the working state), and what the reflog entries within
    that retention name: HEAD's entries that name a kept snapshot, and the working state's
    entries no older than the oldest kept snapshot. Everything else is deleted, but its bytes
    stay in the data file's free pages until --compact (or a hard purge) rewrites the file.
    """
    age = duration(max_age, "--max-age") if max_age is not None else None
    dropped, deleted = cx.gc(keep_last if kept_before is None else kept_before, age, compact=compact)
    console.print(f"dropped {counted(dropped, 'snapshot')}, deleted {counted(deleted, 'object')}"
                  + (", compacted" if compact else ""))


@click.command()
@click.argument("ref", default="HEAD")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@with_cortex
def export(cx, ref, file):
    """Write snapshot REF and everything it reaches to one portable FILE."""
    path, count = cx.export(ref, file)
    console.print(f"exported {counted(count, 'object')} to {path}")


@click.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@with_cortex(create=True)
def import_(cx, file):
    """Verify and add a snapshot exported by `cortex export` (HEAD does not move)."""
    snap = cx.import_(file)
    console.print(f"imported snapshot {short(snap.oid)} {snap.message}; roll back to it to use it")


@click.command()
@click.argument("folder", type=click.Path(file_okay=False))
@with_cortex(create=True)
def checkout(cx, folder):
    """Write the working state into a new (or empty) FOLDER, a working copy that `cortex sync` keeps in step."""
    again = (Path(folder) / RECORD).exists()
    report = cx.checkout(folder)
    if again:
        console.print(f"a working copy already, synced: {report}")
    else:
        console.print(f"checked out {counted(len(report.received), 'file')} into {report.folder}")


@click.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@with_cortex
def sync(cx, folder):
    """Merge a working copy's edits and the store's changes both ways, headline by headline (default FOLDER:
    the Org folder, whose sync is an ingest). Exit 1 while conflicts are left."""
    report = cx.sync(folder)
    console.print(str(report), markup=False, highlight=False)
    if getattr(report, "conflicts", None):
        err_console.print("conflicts: both versions are in the files, the other tagged :CONFLICT:; keep one, "
                          "delete the other, and sync again (`cortex conflicts` lists them)")
        raise SystemExit(1)


@click.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@with_cortex
def conflicts(cx, folder):
    """List the conflicts syncs left in a working copy's FOLDER (default: in the store's working state); exit 1 when
    there are some, as a script checking for them wants."""
    found = cx.conflicts(folder)
    for conflict in found:
        console.print(str(conflict), markup=False, highlight=False)
    if not found:
        console.print("no conflicts")
    else:
        sys.exit(1)


@click.command(name="copies")
@click.option("--forget", "forget", metavar="ID", help="Forget the working copy ID (or a unique prefix of it).")
@with_cortex
def copies_(cx, forget):
    """List the working copies of the store (or forget one whose folder is gone)."""
    if forget:
        gone = cx.forget_copy(forget)
        console.print(f"forgot the working copy {gone.id[:12]} in {gone.folder} on {gone.host}")
        return
    t = table("id", "folder", "machine", "made")
    for copy in cx.copies():
        t.add_row(copy.id[:12], copy.folder, copy.host, when(copy.time_ns))
    console.print(t)


commands = (snapshot, snapshots, rollback, diff, log, history_, gc, export, import_, checkout, sync, conflicts,
                    copies_)
