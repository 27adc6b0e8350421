"""How counts, lists, times and oids read in what the CLI and the REPL print: `1 file`, `2 files: a.org, b.org`."""

from __future__ import annotations

import re
import time

__all__ = ["CHANGE_STYLES", "QUOTED", "brief", "counted", "files", "ingest_summary", "listed", "literal",
           "memory_summary", "patch_style", "prose", "quoted", "short", "shown_stats", "similar_item", "size",
           "summary", "unsaved_note", "when"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 file`, `2 files` (`plural` for nouns that do not take an s: `1 memory`, `2 memories`)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def files(paths: list[str]) -> str:
    """`2 files: a.org, b.org`, `1 file: a.org` or `0 files`."""
    return f"{counted(len(paths), 'file')}: {', '.join(paths)}" if paths else counted(0, "file")


def when(time_ns: int) -> str:
    """A local time a person reads at a glance: `2026-11-20 09:30:00`."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time_ns / 1e9))


def short(oid) -> str:
    """The 12-character prefix of an oid (`-` for none)."""
    return "-" if oid is None else bytes(oid).hex()[:12]


def memory_summary(agent: str, context, logs: list) -> str:
    """`assistant: 3 facts, 1 procedure, 2 learned patterns; 4 daily logs, 2026-11-02 to 2026-11-20`, from an
    agent's `MemoryContext` and the days of its daily logs."""
    items = ", ".join([counted(len(context.facts), "fact"), counted(len(context.procedures), "procedure"),
                       counted(len(context.patterns), "learned pattern")])
    days = f", {logs[0]} to {logs[-1]}" if len(logs) > 1 else f", {logs[0]}" if logs else ""
    return f"{agent}: {items}; {counted(len(logs), 'daily log')}{days}"


def similar_item(name: str, title: str, score: float) -> str:
    """`similar: mem-assistant-the-database-1a2b3c The database is Postgres 16. (0.87)`: an item close in meaning
    to one being added, by its :ID: (or key), title and cosine."""
    return f"similar: {name} {title} ({score:.2f})"


def ingest_summary(report, root) -> str:
    """One line on what an ingest did (an `IngestReport` of the Org folder `root`), then one line per file it
    could not read and per conflict."""
    parts = [f"{len(report.parsed)} parsed", f"{report.unchanged} unchanged"]
    if report.removed:
        parts.append(f"{len(report.removed)} removed")
    if report.problems:
        parts.append(f"{len(report.problems)} with problems")
    if report.received:
        parts.append(f"{len(report.received)} received from the store")
    lines = [f"ingested {counted(report.files, 'Org file')} from {root} ({', '.join(parts)}) in {report.seconds:.2f} s"]
    lines += [f"  {problem}" for problem in report.problems]
    lines += [f"  conflict {conflict}" for conflict in report.conflicts]
    return "\n".join(lines)


def size(n: int) -> str:
    """`812 bytes`, `72.0 KiB`, `3.4 MiB`, `1.2 GiB`."""
    if n < 1024:
        return counted(n, "byte")
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"


def listed(names: list[str], shown: int = 5) -> str:
    """`0`, `2: a, b`, `7: a, b, c, d, e and 2 more`."""
    if not names:
        return "0"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{len(names)}: {', '.join(names[:shown])}{more}"


def shown_stats(cx) -> dict[str, int | str]:
    """A store's stats as people read them: where the store and its Org folder are, the counts, the
    duplicated :ID:s by name and the size on disk."""
    counts = cx.stats()
    shown: dict[str, int | str] = {"store": cx.location,
                                   "Org folder": str(cx.root) if cx.root is not None else "none (--no-org)"}
    for key, value in counts.items():
        if key == "bytes":
            shown["size"] = size(value)
        else:
            shown[key] = listed(value) if isinstance(value, list) else value
    return shown


def unsaved_note(paths: list[str], command: str) -> str:
    """What to say of Org files edited since they were last ingested, and how to include their edits."""
    return f"{files(paths)} edited since the last ingest, not in this diff: {command} includes them"


QUOTED = 40  # characters of a value that a message quotes


def quoted(value, limit: int = QUOTED) -> str:
    """A value as a message quotes it: `'abc'`, or its first `limit` characters and its length, so that a
    mistaken value of a megabyte makes a message of a line."""
    text = str(value)
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}… ({len(text):,} characters)"


def brief(value, limit: int = QUOTED) -> str:
    """A value as a message names it, unquoted: whole, or its first `limit` characters and its length; quoted (as
    `quoted`) when it holds a line break or another character that does not print."""
    text = str(value)
    if not text.isprintable():
        return quoted(text, limit)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def literal(text: str) -> str:
    """Text as a terminal shows it letter for letter: control characters (an ANSI escape) written as `\\x1b`."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


CHANGE_STYLES = {"added": "green", "removed": "red", "changed": "yellow", "moved": "cyan"}  # on a terminal


def patch_style(line: str) -> str:
    """The style of a line of a patch on a terminal, as git colours it (file headers bold, hunk headers cyan,
    lines added green, removed red), and of a line naming a change, by its kind."""
    if line.startswith(("--- ", "+++ ")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    if line[:1] in ("+", "-"):
        return CHANGE_STYLES["added" if line[0] == "+" else "removed"]
    return CHANGE_STYLES.get(line.split(" ", 1)[0], "")


def prose(doc: str | None) -> str:
    """A docstring as a reader sees it: its source indentation gone, each paragraph one line (blank lines apart)."""
    import inspect  # here, not above: the REPL draws its prompt before anything needs it

    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs if paragraph.strip())


def summary(doc: str | None) -> str:
    """What a list of commands or forms shows of one: its docstring's first paragraph, whole, on one line."""
    return prose(doc).partition("\n\n")[0]
