"""Definitions read as data from Hy files and literate Org files: nothing in them is executed."""

from __future__ import annotations

from pathlib import Path

import hy

from cortex.dsl.definitions import Definitions, MemoryDefinition, WebhookDefinition
from cortex.dsl.diagnostics import Diagnostic, DslError
from cortex.dsl.interpret import Context, Parsed, check_unique, interpret_form
from cortex.dsl.literate import cortex_blocks
from cortex.dsl.reader import SourceFile, read_forms
from cortex.errors import NotFound, UserError

# Lets one file be both loaded as data and run by Hy, which needs the macros required first.
_REQUIRE = hy.read("(require cortex.dsl.macros)")


def parse_definitions(source: str, filename: str = "<string>") -> Definitions:
    """Read every definition of a Hy source; raise `DslError` listing all its problems."""
    return _definitions(*collect(SourceFile(filename, source)))


def extract_memory_definitions(source: str, filename: str = "<string>") -> list[MemoryDefinition]:
    """The memories a Hy source defines; any problem in the source raises `DslError`."""
    return list(parse_definitions(source, filename).memories)


def extract_webhook_definitions(source: str, filename: str = "<string>") -> list[WebhookDefinition]:
    """The webhooks a Hy source defines; any problem in the source raises `DslError`."""
    return list(parse_definitions(source, filename).webhooks)


def extract_from_org(text: str, filename: str = "<string>") -> Definitions:
    """The definitions in an Org file's `#+begin_src hy :cortex yes` blocks, located in the Org file."""
    source = SourceFile(filename, text)
    blocks, problems = cortex_blocks(source)
    parsed, more = collect(source, blocks)
    return _definitions(parsed, problems + more)


def load_definitions(path: str | Path) -> Definitions:
    """Load a definitions file: Org files by their marked blocks, anything else as Hy."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFound(f"{path}: no such file") from None
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text (byte {error.start})") from None
    if path.suffix.lower() == ".org":
        return extract_from_org(text, str(path))
    return parse_definitions(text, str(path))


def collect(source: SourceFile, texts: list[str] | None = None) -> tuple[list[Parsed], list[Diagnostic]]:
    """Interpret every form of a source (or of texts laid out like it) and check them together."""
    ctx = Context(source)
    parsed = []
    for text in [source.text] if texts is None else texts:
        forms, problems = read_forms(source, text)
        ctx.diagnostics.extend(problems)
        for form in forms:
            if _is_require(form):
                continue
            parsed.extend(interpret_form(form, ctx))
    check_unique(parsed, ctx)
    return parsed, ctx.diagnostics


def _definitions(parsed: list[Parsed], problems: list[Diagnostic]) -> Definitions:
    if problems:
        raise DslError(problems)
    kinds = {MemoryDefinition: [], WebhookDefinition: []}
    for p in parsed:
        kinds[type(p.definition)].append(p.definition)
    return Definitions(tuple(kinds[MemoryDefinition]), tuple(kinds[WebhookDefinition]))


def _is_require(form) -> bool:
    return isinstance(form, hy.models.Expression) and len(form) >= 2 and form[:2] == _REQUIRE[:2]
