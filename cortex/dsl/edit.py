"""Adding, replacing and removing one definition in a Hy source, leaving every other byte as it was."""

from __future__ import annotations

from cortex.dsl.definitions import Definition, MemoryDefinition, WebhookDefinition
from cortex.dsl.diagnostics import DslError
from cortex.dsl.interpret import Parsed
from cortex.dsl.loader import collect
from cortex.dsl.reader import SourceFile, form_span
from cortex.dsl.render import render_definition
from cortex.errors import NotFound, UserError
from cortex.words import brief

__all__ = ["add_definition", "remove_definition", "replace_definition"]

Kind = type[MemoryDefinition] | type[WebhookDefinition]


def add_definition(source: str, definition: Definition, filename: str = "<string>") -> str:
    """`source` with `definition` appended as a new form; refuses a name or path already taken."""
    newline = _newline(source)
    head = source
    if head and not head.endswith("\n"):
        head += newline
    if head.strip() and not head.endswith(newline * 2):
        head += newline
    return _checked(head + _rendered(definition, newline) + newline, filename)


def replace_definition(source: str, name: str, definition: Definition, filename: str = "<string>") -> str:
    """`source` with the definition called `name` (of `definition`'s kind) rewritten as `definition`."""
    file = SourceFile(filename, source)
    old = _find(file, name, type(definition))
    start, end = form_span(file, old.form)
    indent = " " * (old.form.start_column - 1)  # keep an indented form's continuation lines under it
    newline = _newline(source)
    text = _rendered(definition, newline).replace(newline, newline + indent)
    return _checked(source[:start] + text + source[end:], filename)


def remove_definition(source: str, name: str, kind: Kind | None = None, filename: str = "<string>") -> str:
    """`source` without the definition called `name`; its lines go too when it stood on lines of its own."""
    file = SourceFile(filename, source)
    old = _find(file, name, kind)
    start, end = form_span(file, old.form)
    line_start = source.rfind("\n", 0, start) + 1
    line_end = _line_after(source, end)
    if not source[line_start:start].strip() and not source[end:line_end].strip():
        start, end = line_start, line_end
        # Keep forms set off by one blank line: drop one of the blank lines that framed this one.
        prev_start = source.rfind("\n", 0, max(start - 1, 0)) + 1
        prev_blank = start > 0 and not source[prev_start:start].strip()
        next_end = _line_after(source, end)
        if end < len(source) and not source[end:next_end].strip() and (prev_blank or start == 0):
            end = next_end
        elif prev_blank and end == len(source):
            start = prev_start
    return _checked(source[:start] + source[end:], filename)


def _find(file: SourceFile, name: str, kind: Kind | None) -> Parsed:
    parsed, problems = collect(file)
    if problems:
        raise DslError(problems)
    matches = [p for p in parsed if p.definition.name == name and (kind is None or isinstance(p.definition, kind))]
    if not matches:
        raise NotFound(f"{file.name}: no definition named {brief(name)}")
    if len(matches) > 1:
        raise UserError(f"{file.name}: both a memory and a webhook are named {name}; say which to change")
    return matches[0]


def _rendered(definition: Definition, newline: str) -> str:
    """The form of `definition`, refused unless it reads back as that one definition and nothing else."""
    text = render_definition(definition, newline)
    parsed, problems = collect(SourceFile("<rendered>", text))
    if problems or [p.definition for p in parsed] != [definition]:
        why = next((d.message for d in problems), "it reads back as something else")
        kind = "memory" if isinstance(definition, MemoryDefinition) else "webhook"
        raise UserError(f"{kind} {definition.name!r} cannot be written as given: {why}")
    return text


def _checked(text: str, filename: str) -> str:
    """The edited text, if it still reads cleanly: an edit never leaves a broken file behind."""
    _, problems = collect(SourceFile(filename, text))
    if problems:
        raise DslError(problems)
    return text


def _line_after(source: str, offset: int) -> int:
    """The offset just past the line break that ends `offset`'s line (or the end of the text)."""
    end = source.find("\n", offset)
    return len(source) if end < 0 else end + 1


def _newline(source: str) -> str:
    return "\r\n" if "\r\n" in source else "\n"
