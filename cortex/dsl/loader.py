"""Definitions read as data from Hy files and literate Org files: nothing in them is executed."""

from __future__ import annotations

from pathlib import Path

import hy

from cortex.dsl.definitions import Definitions, MemoryDefinition, WebhookDefinition
from cortex.dsl.diagnostics import DslError, Problems
from cortex.dsl.interpret import Context, Parsed, check_unique, interpret_form
from cortex.dsl.literate import cortex_blocks
from cortex.dsl.reader import MAX_SIZE, SourceFile, read_forms, too_large
from cortex.bounded import BoundedDict
from cortex.errors import NotFound, UserError
from cortex.hashing import hash_text
from cortex.reads import ORG_FILE, read_bounded

__all__ = ["collect", "extract_from_org", "extract_memory_definitions", "extract_webhook_definitions",
           "load_definitions", "parse_definitions"]

# Lets one file be both loaded as data and run by Hy, which needs the macros required first.
_REQUIRE = hy.read("(require cortex.dsl.macros)")
READ_KEPT = 32  # sources whose definitions are kept, by name and digest: a search reads them at every call
_read_before: BoundedDict = BoundedDict(READ_KEPT)


def parse_definitions(source: str, filename: str = "<string>") -> Definitions:
    """Read every definition of a Hy source; raise `DslError` listing all its problems."""
    return _read(source, filename, org=False)


def extract_memory_definitions(source: str, filename: str = "<string>") -> list[MemoryDefinition]:
    """The memories a Hy source defines; any problem in the source raises `DslError`."""
    return list(parse_definitions(source, filename).memories)


def extract_webhook_definitions(source: str, filename: str = "<string>") -> list[WebhookDefinition]:
    """The webhooks a Hy source defines; any problem in the source raises `DslError`."""
    return list(parse_definitions(source, filename).webhooks)


def extract_from_org(text: str, filename: str = "<string>") -> Definitions:
    """The definitions in an Org file's `#+begin_src hy :cortex yes` blocks, located in the Org file."""
    return _read(text, filename, org=True)


def _read(text: str, filename: str, org: bool) -> Definitions:
    """The definitions of a source, read once per name and text (they are frozen; a source with problems is
    read again each time, as its error is raised, not kept)."""
    key = (filename, org, hash_text(text))
    if (known := _read_before.get(key)) is not None:
        return known
    source = SourceFile(filename, text)
    if org:
        problems = Problems()
        definitions = _definitions(*collect(source, cortex_blocks(source, problems), problems))
    else:
        definitions = _definitions(*collect(source))
    _read_before[key] = definitions
    return definitions


def load_definitions(path: str | Path) -> Definitions:
    """Load a definitions file: Org files by their marked blocks, anything else as Hy (at most MAX_SIZE bytes)."""
    path = Path(path)
    org = path.suffix.lower() == ".org"
    try:
        text = read_bounded(path, ORG_FILE if org else MAX_SIZE, "an Org file" if org else "a definitions file"
                            ).decode("utf-8")
    except FileNotFoundError:
        raise NotFound(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a folder, not a definitions file") from None
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text (byte {error.start})") from None
    if org:
        return extract_from_org(text, str(path))
    return parse_definitions(text, str(path))


def collect(source: SourceFile, blocks: list[tuple[int, str]] | None = None,
            problems: Problems | None = None) -> tuple[list[Parsed], Problems]:
    """Interpret every form of a source (or of its blocks: first line and text) and check them together.

    Reading stops at MAX_SIZE characters, or once enough problems are known (`Problems.full`),
    so no source costs more than that much to check.
    """
    ctx = Context(source, problems=Problems() if problems is None else problems)
    parsed, size = [], 0
    for first_line, text in [(1, source.text)] if blocks is None else blocks:
        if ctx.problems.full():
            break
        size += len(text)
        if size > MAX_SIZE:
            ctx.problems.add(too_large(source, first_line))
            break
        for form in read_forms(source, ctx.problems, text, first_line):
            if not _is_require(form):
                parsed.extend(interpret_form(form, ctx))
    check_unique(parsed, ctx)
    return parsed, ctx.problems


def _definitions(parsed: list[Parsed], problems: Problems) -> Definitions:
    if problems:
        raise DslError(problems)
    kinds = {MemoryDefinition: [], WebhookDefinition: []}
    for p in parsed:
        kinds[type(p.definition)].append(p.definition)
    return Definitions(tuple(kinds[MemoryDefinition]), tuple(kinds[WebhookDefinition]))


def _is_require(form) -> bool:
    return isinstance(form, hy.models.Expression) and len(form) >= 2 and form[:2] == _REQUIRE[:2]
