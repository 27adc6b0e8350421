"""The read-eval-print core, without a terminal: is an entry complete, evaluate it in a persistent
Hy module that has the cortex forms in scope, print values and errors.

The store opens on first use (the app opens it before its first prompt), so evaluating
`(+ 1 1)` never pays for it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import hy

from ..errors import CortexError, located
from ..words import brief, counted, quoted
from .printer import Printer
from .registry import closest, macro_words, namespace
from .watch import Watcher

__all__ = ["Session", "describe_error", "is_complete"]

RESULT_NAMES = ("*1", "*2", "*3")  # the last three results, as in Hy's own REPL
ERROR_NAME = "*e"


def is_complete(text: str) -> bool:
    """True when `text` holds whole forms (or a reader error worth showing), False while a form is open."""
    try:
        for _ in hy.read_many(text):
            pass
    except hy.PrematureEndOfInput:
        return False
    except Exception:  # any other reader error is complete input: evaluating it shows the error
        return True
    return True


class Session:
    """One REPL session: a Hy module with the forms bound to this session, and a lazily opened store."""

    def __init__(self, store=None, org_root=None, *, ingest: bool = True, folder: bool = True,
                 build_search: bool = False, out: TextIO | None = None, err: TextIO | None = None,
                 filename: str = "<input>"):
        self.store_path = store
        self.org_root = org_root
        self.folder = folder  # False: no Org folder on this machine (--no-org); nothing is ingested
        self.ingest_on_open = ingest and folder
        self.build_search = build_search  # embed for search in a background thread once the store is open
        self.filename = filename
        self.printer = Printer(self, out or sys.stdout, err or out or sys.stderr)
        self.notify = self.printer.notice  # the app redirects notices above its prompt
        self.on_ingest: Callable[[object], None] | None = None  # the app says what opening the store ingested
        self.lock = threading.RLock()  # one evaluation or background ingest at a time
        self._open_lock = threading.Lock()
        self._cortex = None
        self._closed = False
        self.watcher = None
        # Asks the person at the prompt a yes/no question; None where nobody can answer (eval, a pipe).
        self.ask: Callable[[str], bool] | None = None
        self.module = types.ModuleType("cortex_repl", "The namespace REPL entries are evaluated in.")
        vars(self.module).update(namespace(self))
        self._macro_words = macro_words()
        self._defining = False  # whether entries have used defmemory / defwebhook yet

    # --- the store ----------------------------------------------------------------------

    def open(self) -> None:
        """Open the store and ingest the Org folder (once), and give the ingest's report to `on_ingest`;
        with `build_search`, start embedding for search in the background (notices say how it goes).

        Whichever thread opens the store (the app's start-up, a form, the history), the report reaches
        `on_ingest` once.
        """
        with self._open_lock:
            if self._cortex is not None:
                return
            if self._closed:
                raise CortexError("this REPL session is closed")
            from .. import api

            cortex = api.open(self.store_path, self.org_root, folder=self.folder)
            missing = cortex.root is not None and not cortex.root.exists()
            try:
                report = cortex.ingest() if self.ingest_on_open and not missing else None
                waiting = len(cortex.proposals())
                if self.build_search:
                    cortex.build_search_in_background(lambda line: self.notify(line))
            except BaseException:
                cortex.close()
                raise
            self._cortex = cortex
        if missing:
            self.notify(f"no Org folder at {cortex.root}: (ingest \"DIR\") ingests one and makes it this store's, "
                        "or start the REPL as `cortex repl DIR`")
        if report is not None and self.on_ingest is not None:
            self.on_ingest(report)
        if waiting:
            self.notify(f"{counted(waiting, 'proposal')} pending review: (review) lists them")

    @property
    def cortex(self):
        """The open `cortex.api.Cortex`, opened on first use."""
        if self._cortex is None:
            self.open()
        return self._cortex

    @property
    def is_open(self) -> bool:
        """Whether the store has been opened."""
        return self._cortex is not None

    def org_path(self, path) -> Path:
        """A path as the forms take it: relative paths are relative to the Org folder."""
        path = Path(path)
        return path if path.is_absolute() else self.cortex.root / path

    def watch(self, on: bool = True, interval: float = 1.0) -> str:
        """Start or stop re-ingesting the Org folder when its files change; say what happened."""
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        if not on:
            return "stopped watching"
        self.watcher = Watcher(self, interval)
        self.watcher.start()
        return f"watching {self.cortex.root} every {interval:g} s; (watch False) stops"

    def close(self) -> None:
        """Stop watching and close the store."""
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        with self.lock, self._open_lock:
            self._closed = True
            if self._cortex is not None:
                self._cortex.close()
                self._cortex = None

    # --- read, eval, print ------------------------------------------------------------------

    def read(self, text: str) -> list:
        """The forms of an entry; a reader error raises before anything is evaluated."""
        forms = list(hy.read_many(text, filename=self.filename))
        for form in forms:
            # Compile errors then name the entry and the line, not "<string>".
            form.filename, form.source = self.filename, text
        return forms

    def eval_form(self, form):
        """Evaluate one form in the session's module and remember its value as `*1`.

        Definitions it makes with defmemory or defwebhook go to the session's registry.
        """
        with self.lock, self._registry_for(form):
            if self._defining and mentions(form, self._macro_words):
                value = self._define(form)
            else:
                value = hy.eval(form, module=self.module)
        if value is not None:
            self._remember(value)
        return value

    def evaluate(self, text: str) -> list:
        """Read every form of `text`, then evaluate them in order; return their values."""
        return [self.eval_form(form) for form in self.read(text)]

    def execute(self, text: str) -> bool:
        """Evaluate an entry form by form, printing each value; stop at the first error and report it.

        Returns whether every form succeeded.
        """
        try:
            for form in self.read(text):
                self.printer.show(self.eval_form(form))
        except (Exception, KeyboardInterrupt) as exc:
            setattr(self.module, hy.mangle(ERROR_NAME), exc)
            self.printer.error(describe_error(exc, text, self.filename, self.names()))
            return False
        return True

    def _define(self, form):
        """Evaluate a form that defines, keeping its definitions only if they agree with those in force.

        A webhook whose path another definition (the file's, an Org block's) already serves is refused
        here, where it was written, rather than later by whatever reads the definitions.
        """
        registry = self.cortex.registry
        before = dict(registry.memories), dict(registry.webhooks)
        value = hy.eval(form, module=self.module)
        try:
            self.cortex.definitions()
        except Exception:
            registry.memories, registry.webhooks = before
            raise
        return value

    def _registry_for(self, form):
        """Make the session's registry the one definitions go to, once an entry uses defmemory or defwebhook.

        The registry belongs to the store and must be active before the form runs, so the first form that
        mentions a definition macro opens the store first; until then no entry pays for the store or the DSL.
        """
        if not self._defining and mentions(form, self._macro_words):
            self.open()
            self._defining = True
        return self.cortex.registry.active() if self._defining else contextlib.nullcontext()

    def _remember(self, value) -> None:
        names = [hy.mangle(n) for n in RESULT_NAMES]
        earlier = [getattr(self.module, name, None) for name in names[:-1]]
        for name, kept in zip(names, [value, *earlier], strict=True):
            setattr(self.module, name, kept)

    def names(self) -> list[str]:
        """Names a user can type: the forms and whatever the session defined, in Hy spelling."""
        return sorted({hy.unmangle(name) for name in vars(self.module) if not name.startswith("_")})


def mentions(model, symbols: frozenset[str]) -> bool:
    """Whether a read form holds one of these symbols anywhere."""
    if isinstance(model, hy.models.Symbol):
        return str(model) in symbols
    return isinstance(model, hy.models.Sequence) and any(mentions(part, symbols) for part in model)


def _pointed(line: str, column: int, width: int = 80) -> str:
    """The line an error is on, at most `width` characters of it around `column`, with a caret under it."""
    start = max(0, min(column - width // 2, len(line) - width))
    shown = ("…" if start else "") + line[start:start + width] + ("…" if len(line) > start + width else "")
    return f"\n  {shown}\n  {' ' * (column - start + bool(start))}^"


def describe_error(exc: BaseException, source: str, filename: str = "<input>", names: list[str] = ()) -> str:
    """An error as one located message: `file:line:column: what`, with the line and a caret when known; a name
    that is not defined gets the closest of `names` (the forms and the session's own) as a suggestion."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, CortexError):
        return f"error: {exc}"
    if isinstance(exc, hy.errors.HyLanguageError):
        message = located(exc.filename or filename, exc.lineno, exc.msg, exc.offset)
        lines = source.splitlines()
        if exc.lineno and 0 < exc.lineno <= len(lines):
            message += _pointed(lines[exc.lineno - 1], max((exc.offset or 1) - 1, 0))
        return message
    what = f"{type(exc).__name__}: {brief(exc, 200)}"  # Python's own message may quote a whole value
    if isinstance(exc, NameError) and exc.name:
        name = hy.unmangle(exc.name)
        close = closest(name, names)
        what = f"NameError: {quoted(name)} is not defined" + (f"; did you mean {close}?" if close else "")
    here = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == filename]
    if not here:
        return what
    return located(filename, here[-1].lineno, what, here[-1].colno)  # Hy columns count from 1
