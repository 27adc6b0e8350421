"""The registry of REPL forms: one decorated definition adds a form, its help and its completion.

A form is a function whose first parameter is the `Session`; the session binds it under its
kebab-case name in the REPL's module, so `(find :todo "TODO")` calls `find(session, todo="TODO")`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import hy

# Modules whose import registers forms; a new group of forms is one more entry here.
FORM_MODULES = ("cortex.repl.forms",)


@dataclass(frozen=True)
class Form:
    """A REPL form: its kebab-case name, the function implementing it and its docstring."""

    name: str
    fn: Callable

    @property
    def doc(self) -> str:
        """The full docstring."""
        return inspect.getdoc(self.fn) or ""

    @property
    def summary(self) -> str:
        """The first line of the docstring."""
        return self.doc.partition("\n")[0]

    @property
    def usage(self) -> str:
        """How to call it, in Hy: `(rollback ref :keep False :force False)`."""
        parts = [self.name]
        for param in list(inspect.signature(self.fn).parameters.values())[1:]:
            name = hy.unmangle(param.name)
            if param.kind is param.KEYWORD_ONLY:
                parts.append(f"[:{name} {hy.repr(param.default)}]")
            elif param.kind is param.VAR_POSITIONAL:
                parts.append(f"#* {name}")
            elif param.default is param.empty:
                parts.append(name)
            else:
                parts.append(f"[{name} {hy.repr(param.default)}]")
        return f"({' '.join(parts)})"


FORMS: dict[str, Form] = {}
PRELUDE: dict[str, Callable] = {}


def form(fn: Callable) -> Callable:
    """Register `fn` as a REPL form named after it (`memory_search` -> `memory-search`)."""
    name = hy.unmangle(fn.__name__)
    FORMS[name] = Form(name, fn)
    return fn


def prelude(fn: Callable) -> Callable:
    """Register `fn`, which needs no session, as a helper every REPL namespace starts with."""
    PRELUDE[hy.unmangle(fn.__name__)] = fn
    return fn


def load_forms() -> dict[str, Form]:
    """Import every form module once and return the registry."""
    import importlib

    for module in FORM_MODULES:
        importlib.import_module(module)
    return FORMS


def namespace(session) -> dict[str, Callable]:
    """What a session's module starts with: the prelude and every form bound to `session`, by mangled name."""
    forms = load_forms()
    names = {hy.mangle(name): fn for name, fn in PRELUDE.items()}
    names.update((hy.mangle(name), bind(entry, session)) for name, entry in forms.items())
    return names


def bind(entry: Form, session) -> Callable:
    """The form as the REPL sees it: a function with the session filled in."""

    def call(*args, **kwargs):
        return entry.fn(session, *args, **kwargs)

    call.__name__ = call.__qualname__ = hy.mangle(entry.name)
    call.__doc__ = entry.fn.__doc__
    call.form = entry
    return call
