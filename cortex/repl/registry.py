"""The registry of REPL forms: one decorated definition adds a form, its help and its completion.

A form is a function whose first parameter is the `Session`; the session binds it under its
kebab-case name in the REPL's module, so `(find :todo "TODO")` calls `find(session, todo="TODO")`.
A macro form is a Hy macro of another module, documented by a Python function of the same name.
A call that does not fit a form's parameters is refused before it runs, in the form's Hy words
(`lookup needs org-id; usage: (lookup org-id [:as-of None])`), not Python's.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import hy

from ..errors import UserError
from ..words import summary

__all__ = ["FORMS", "PRELUDE", "closest", "described", "form", "macro", "macro_words", "namespace", "prelude", "usage"]

# Modules whose import registers forms; a new group of forms is one more entry here.
FORM_MODULES = ("cortex.repl.forms", "cortex.repl.memory_forms", "cortex.repl.dsl_forms", "cortex.repl.query_forms",
                "cortex.repl.agenda_forms", "cortex.repl.review_forms")


@dataclass(frozen=True)
class Form:
    """A REPL form: its kebab-case name, the function implementing (or documenting) it, and its docstring.

    `macro` names the Hy module whose macro of this name the form is; None for a function.
    """

    name: str
    fn: Callable
    macro: str | None = None

    @property
    def doc(self) -> str:
        """The full docstring."""
        return inspect.getdoc(self.fn) or ""

    @property
    def summary(self) -> str:
        """The docstring's first paragraph, on one line (its first line may end mid-sentence)."""
        return summary(self.doc)

    @property
    def usage(self) -> str:
        """How to call it, in Hy: `(rollback ref :keep False :force False)`."""
        return usage(self.name, self.parameters)

    @cached_property
    def parameters(self) -> list[inspect.Parameter]:
        """Its parameters after the session."""
        return list(inspect.signature(self.fn).parameters.values())[1:]

    def check(self, args: tuple, kwargs: dict) -> None:
        """Refuse a call that does not fit the form's parameters, in Hy words (UserError)."""
        wrong = misfit(self.parameters, args, kwargs)
        if wrong:
            raise UserError(f"{self.name} {wrong}; usage: {self.usage}")


def usage(name: str, parameters: list[inspect.Parameter]) -> str:
    """A call in Hy with these parameters: `(lookup org-id [:as-of None])`."""
    parts = [name]
    for param in parameters:
        word = hy.unmangle(param.name)
        if param.kind is param.KEYWORD_ONLY:
            parts.append(f"[:{word} {hy.repr(param.default)}]")
        elif param.kind is param.VAR_POSITIONAL:
            parts.append(f"#* {word}")
        elif param.kind is param.VAR_KEYWORD:
            parts.append(f"#** {word}")
        elif param.default is param.empty:
            parts.append(word)
        else:
            parts.append(f"[{word} {hy.repr(param.default)}]")
    return f"({' '.join(parts)})"


def misfit(parameters: list[inspect.Parameter], args: tuple, kwargs: dict) -> str | None:
    """What is wrong with a call to these parameters, in Hy words (None: nothing)."""
    P = inspect.Parameter
    by_place = [p for p in parameters if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    if len(args) > len(by_place) and not any(p.kind is P.VAR_POSITIONAL for p in parameters):
        if not by_place:
            return f"takes keywords only, {_arguments(len(args))} given before them"
        named = " ".join(hy.unmangle(p.name) for p in by_place)
        return f"takes {_arguments(len(by_place))} before its keywords ({named}), {len(args)} given"
    given = {p.name for p in by_place[:len(args)]}
    keywords = [p.name for p in parameters if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)]
    for name in kwargs:
        if name in given:
            return f"got {hy.unmangle(name)} twice"
        if name not in keywords and not any(p.kind is P.VAR_KEYWORD for p in parameters):
            close = closest(hy.unmangle(name), [hy.unmangle(k) for k in keywords])
            return f"has no :{hy.unmangle(name)}" + (f" (did you mean :{close}?)" if close else "")
    missing = [hy.unmangle(p.name) for p in parameters if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD,
               P.KEYWORD_ONLY) and p.default is P.empty and p.name not in given and p.name not in kwargs]
    return f"needs {' and '.join(missing)}" if missing else None


def closest(word: str, words: list[str]) -> str | None:
    """The one of `words` a person most likely meant when they typed `word`: the only one it begins, else one
    close enough in spelling (None: none is)."""
    begun = [w for w in words if w.startswith(word)]
    return begun[0] if len(begun) == 1 else next(iter(difflib.get_close_matches(word, words, n=1, cutoff=0.75)), None)


def _arguments(n: int) -> str:
    return "no argument" if n == 0 else "1 argument" if n == 1 else f"{n} arguments"


def described(value) -> str | None:
    """A function as a person wants to see it when they name it without calling it: how to call it, then the
    first line of its docstring; None for anything else."""
    entry = getattr(value, "form", None)
    if entry is not None:
        return f"{entry.usage}\n{entry.summary}"
    if not (inspect.isfunction(value) or inspect.isbuiltin(value)):
        return None
    try:
        parameters = list(inspect.signature(value).parameters.values())
    except ValueError:  # a builtin that does not say
        return None
    return f"{usage(hy.unmangle(value.__name__), parameters)}\n{summary(inspect.getdoc(value))}".rstrip("\n")


FORMS: dict[str, Form] = {}
PRELUDE: dict[str, Callable] = {}


def form(fn: Callable) -> Callable:
    """Register `fn` as a REPL form named after it (`memory_search` -> `memory-search`)."""
    name = hy.unmangle(fn.__name__)
    FORMS[name] = Form(name, fn)
    return fn


def macro(module: str) -> Callable[[Callable], Callable]:
    """Register the Hy macro of this name in `module` as a REPL form; the decorated function documents it."""

    def register(fn: Callable) -> Callable:
        name = hy.unmangle(fn.__name__)
        FORMS[name] = Form(name, fn, macro=module)
        return fn

    return register


def prelude(fn: Callable) -> Callable:
    """Register `fn`, which needs no session, as a helper every REPL namespace starts with."""
    PRELUDE[hy.unmangle(fn.__name__)] = fn
    return fn


def load_forms() -> dict[str, Form]:
    """Import every form module once and return the registry."""
    for module in FORM_MODULES:
        importlib.import_module(module)
    return FORMS


def namespace(session) -> dict[str, object]:
    """What a session's module starts with: the prelude, every form bound to `session` by mangled name,
    and the macro forms as macros."""
    forms = load_forms()
    names: dict[str, object] = {hy.mangle(name): fn for name, fn in PRELUDE.items()}
    names.update((hy.mangle(name), bind(entry, session)) for name, entry in forms.items())
    names["_hy_macros"] = {hy.mangle(name): lazy_macro(entry) for name, entry in forms.items() if entry.macro}
    return names


def macro_words() -> frozenset[str]:
    """The symbols that show a form uses a macro form: the macros' names and their modules' names."""
    macros = [entry for entry in load_forms().values() if entry.macro]
    return frozenset(entry.name for entry in macros) | {entry.macro for entry in macros}


def lazy_macro(entry: Form) -> Callable:
    """A macro that requires the real one on its first expansion, then lets it expand the same form.

    Requiring it at start-up would load its module, which costs more than the whole prompt.
    """

    def expand(_hy_compiler, *_):
        hy.macros.require(entry.macro, _hy_compiler.module, [(entry.name, entry.name)])
        return _hy_compiler.this  # expanded again, now by the real macro

    expand.__doc__ = entry.fn.__doc__
    return expand


def bind(entry: Form, session) -> Callable:
    """The form as the REPL sees it: a function with the session filled in.

    A macro form used as a value (`(help defwebhook)`) is its documenting function; calling that says how
    to write the form instead.
    """

    def call(*args, **kwargs):
        if entry.macro:
            raise UserError(f"{entry.name} is a macro: write it as a form, {entry.usage}")
        entry.check(args, kwargs)
        return entry.fn(session, *args, **kwargs)

    call.__name__ = call.__qualname__ = hy.mangle(entry.name)
    call.__doc__ = entry.fn.__doc__
    call.form = entry
    return call
