"""The session's definitions: where evaluating (defmemory ...) or (defwebhook ...) in Hy puts them."""

from __future__ import annotations

import contextlib
import dataclasses
from contextvars import ContextVar

from cortex.dsl.definitions import Definition, Definitions, MemoryDefinition, SourceLocation, WebhookDefinition
from cortex.dsl.diagnostics import Diagnostic, DslError, clip
from cortex.dsl.interpret import Context, interpret_form
from cortex.dsl.reader import SourceFile

__all__ = ["Registry", "check_form", "current_registry", "define", "reject"]


class Registry:
    """Definitions made in a running session; defining a name again replaces it, as a REPL expects."""

    def __init__(self):
        self.memories: dict[str, MemoryDefinition] = {}
        self.webhooks: dict[str, WebhookDefinition] = {}

    def register(self, definition: Definition) -> Definition:
        """Add or replace a definition; a webhook path served by another webhook is refused."""
        return self._add(definition, self._paths())

    def load(self, definitions: Definitions) -> None:
        """Register everything a file defines, e.g. the definitions a session starts from."""
        paths = self._paths()  # once, not once a webhook: a file may define thousands
        for definition in (*definitions.memories, *definitions.webhooks):
            self._add(definition, paths)

    def _paths(self) -> dict[str, WebhookDefinition]:
        """The webhooks by path, derived afresh: a session may put back the dictionaries it saved."""
        return {webhook.path: webhook for webhook in self.webhooks.values()}

    def _add(self, definition: Definition, paths: dict[str, WebhookDefinition]) -> Definition:
        """Register `definition`, keeping `paths` (the webhooks by path) up to date."""
        if isinstance(definition, MemoryDefinition):
            self.memories[definition.name] = definition
            return definition
        other = paths.get(definition.path)
        if other is not None and other.name != definition.name:
            where = definition.location or SourceLocation("<session>", 1, 1)
            message = (f"path {clip(definition.path)} is already served by webhook {clip(other.name)}"
                       + (f" (defined at {other.location})" if other.location else ""))
            raise DslError([Diagnostic(where.file, where.line, where.column, message)])
        replaced = self.webhooks.get(definition.name)
        if replaced is not None:
            del paths[replaced.path]
        paths[definition.path] = self.webhooks[definition.name] = definition
        return definition

    def definitions(self) -> Definitions:
        """What the session defines now, as one value."""
        return Definitions(tuple(self.memories.values()), tuple(self.webhooks.values()))

    @contextlib.contextmanager
    def active(self):
        """Make this the registry that evaluated definitions go to, for the duration of a block."""
        token = _active.set(self)
        try:
            yield self
        finally:
            _active.reset(token)


_default = Registry()
_active: ContextVar[Registry] = ContextVar("cortex_dsl_registry", default=_default)


def current_registry() -> Registry:
    """The registry definitions go to: the one made active, else the process's own."""
    return _active.get()


def check_form(form, filename: str, source: str | None):
    """Validate a definition form at macro-expansion time: its location, and its problems as data.

    The problems are none, or how many there are and the first ones as tuples.
    """
    ctx = Context(SourceFile(filename, source or ""))
    interpret_form(form, ctx)
    problems = (ctx.problems.count, [dataclasses.astuple(d) for d in ctx.problems]) if ctx.problems else ()
    return (form.start_line, form.start_column), problems


def define(form, filename: str, line: int, column: int) -> Definition:
    """Register the definition of a form already validated where it was written."""
    # Quoted forms lose their positions at run time, so the location travels as literals.
    (parsed,) = interpret_form(form, Context(SourceFile(filename, "")))
    located = dataclasses.replace(parsed.definition, location=SourceLocation(filename, line, column))
    return current_registry().register(located)


def reject(problems: tuple[int, list[tuple]]) -> None:
    """Raise the problems found in a definition form when it was expanded."""
    count, first = problems
    raise DslError([Diagnostic(*problem) for problem in first], count)
