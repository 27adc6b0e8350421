"""The interactive REPL: prompt-toolkit around the terminal-free core.

Hy highlighting, multi-line entry until the forms are complete, history in the store's local folder,
completion from the session; Ctrl-C cancels the entry, Ctrl-D leaves. Nothing but prompt-toolkit
loads before its prompt is up: Hy, the forms and Pygments take longer to load than prompt-toolkit
itself, so they load in the background once the prompt is drawn, and then the store opens. (On a
terminal, `early` has drawn the banner and prompt before even prompt-toolkit loads.)
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.completion import Completer, DynamicCompleter
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, History, ThreadedHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.lexers import DynamicLexer, Lexer, PygmentsLexer
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import StdoutProxy

from ..errors import CortexError
from ..words import ingest_summary
from .early import BANNER, PROMPT, EarlyPrompt

__all__ = ["HISTORY_ENTRY_CHARS", "Startup", "StoreHistory", "run"]

if TYPE_CHECKING:
    from .core import Session

HISTORY_FILE = "repl_history"
HISTORY_ENTRY_CHARS = 8192  # longer entries (a pasted document) are recalled in this session only
CLOSE_NOTICE = 0.5  # seconds the REPL may take to close before it says why it is still there
CLOSING = "closing: finishing the batch being embedded for search and saving the index (what is embedded is kept)"


def run(store=None, org_root=None, *, ingest: bool = True, folder: bool = True,
        input: Input | None = None,  # noqa: A002
        output: Output | None = None, out: TextIO | None = None, early: EarlyPrompt | None = None) -> int:
    """Read-eval-print over a store until Ctrl-D; return the exit status (0).

    The prompt comes up first; the session is then made, the store opens and the Org folder is
    ingested in the background, and the line saying what was ingested (or why the store could not
    be opened) appears above the prompt. An entry waits for the session, a form that needs the
    store for the store.
    `input`/`output` are prompt-toolkit's (tests pass a pipe input and a dummy output);
    `out` receives the printed values (default: stdout); `early`, the banner and prompt already drawn;
    `folder=False`: no Org folder on this machine (see `eval_source`).
    """
    out = out or sys.stdout
    if early is None:
        out.write(f"{BANNER}\n")
        out.flush()
    # Background notices are drawn above the prompt instead of through it. The proxy finds
    # the running prompt through the default app session, so no other session is made.
    with StdoutProxy(raw=True) as above_prompt:

        def make_session() -> Session:
            from .core import Session

            session = Session(store, org_root, ingest=ingest, folder=folder, build_search=True, out=out)
            session.ask = lambda question: confirm(question, input, output)
            session.notify = lambda message: print(message, file=above_prompt, flush=True)
            session.on_ingest = lambda report: session.notify(ingest_summary(report, session.cortex.root))
            return session

        startup = Startup(make_session)
        prompt = prompt_session(startup, input, output)
        prompt.app.after_render += startup.start
        if early is not None:  # right before prompt-toolkit's terminal mode
            prompt.app.pre_run_callables.append(lambda: type_ahead(prompt.app.input, early.hand_over()))
        try:
            return loop(startup, prompt)
        finally:
            said = threading.Timer(CLOSE_NOTICE, lambda: print(CLOSING, file=out, flush=True))
            said.daemon = True  # a notice never keeps the process from ending
            said.start()
            try:
                startup.close()
            finally:
                said.cancel()


class Startup:
    """The session, its completer and the Hy lexer, made in a thread once the prompt is drawn.

    Until they are, the entry shows unhighlighted; Enter, Tab and the entry itself wait for them.
    The same thread then opens the store and ingests the Org folder.
    """

    def __init__(self, make_session: Callable[[], Session]):
        self.make_session = make_session
        self.made: Future[Session] = Future()
        self.completer: Completer | None = None
        self.lexer: Lexer | None = None
        self.loading: threading.Thread | None = None

    def start(self, app) -> None:
        """Start loading after the first render of `app`, which is redrawn highlighted once it is done."""
        app.after_render -= self.start
        if self.loading is None:
            self.loading = threading.Thread(target=self._load, args=(app,), name="cortex-start", daemon=True)
            self.loading.start()

    @property
    def session(self) -> Session:
        """The session, once it is made."""
        return self.made.result()

    def complete(self) -> Completer:
        """The session's completer, once it is made."""
        self._wait()
        return self.completer

    def is_complete(self, text: str) -> bool:
        """Whether `text` holds whole forms, by Hy's reader (which loads with the session)."""
        self._wait()
        from .core import is_complete

        return is_complete(text)

    def close(self) -> None:
        """Close the session, if one was made (waiting for it if it is being made)."""
        if self.loading is not None and self.made.exception() is None:
            self.session.close()

    def _wait(self) -> None:
        """Wait for the session; a key typed ahead, acted on before the first render, starts loading it."""
        self.start(get_app())
        self.made.result()

    def _load(self, app) -> None:
        try:
            from pygments.lexers.lisp import HyLexer

            from .completion import SessionCompleter

            session = self.make_session()
            self.completer = SessionCompleter(session)
            self.lexer = PygmentsLexer(HyLexer)
        except Exception as exc:  # raised again where the session is wanted
            self.made.set_exception(exc)
            return
        self.made.set_result(session)
        app.invalidate()
        _open(session)


def type_ahead(input: Input, keys: bytes) -> None:  # noqa: A002
    """Have prompt-toolkit act on `keys`, read from the terminal before it came up, before any it reads."""
    from prompt_toolkit.input.typeahead import store_typeahead
    from prompt_toolkit.input.vt100_parser import Vt100Parser

    presses = []
    parser = Vt100Parser(presses.append)
    parser.feed(keys.decode(errors="surrogateescape"))
    parser.flush()
    store_typeahead(input, presses)


def _open(session: Session) -> None:
    """Open the store and ingest the Org folder, or say why the store could not be opened."""
    from .core import describe_error

    try:
        session.open()
    except (CortexError, OSError) as exc:  # a form that needs the store tries again and says why
        session.notify(describe_error(exc, ""))


def loop(startup: Startup, prompt: PromptSession) -> int:
    """Read entries and evaluate them until Ctrl-D."""
    while True:
        try:
            text = prompt.prompt(PROMPT)
        except KeyboardInterrupt:
            continue
        except EOFError:
            return 0
        if not text.strip():
            continue
        session = startup.session
        try:
            session.execute(text)
        except KeyboardInterrupt:  # while printing a long result
            session.printer.error("interrupted")


def confirm(question: str, input: Input | None = None, output: Output | None = None) -> bool:  # noqa: A002
    """Ask a yes/no question at the terminal: only y or yes is yes; Ctrl-D is no, Ctrl-C cancels the entry."""
    try:
        answer = PromptSession(input=input, output=output).prompt(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def prompt_session(startup: Startup, input: Input | None = None,  # noqa: A002
                   output: Output | None = None) -> PromptSession:
    """The prompt: Hy highlighting, smart Enter, history in the store's local folder, session completion."""
    return PromptSession(
        lexer=DynamicLexer(lambda: startup.lexer),  # plain text until Pygments is loaded
        completer=DynamicCompleter(startup.complete),
        complete_while_typing=False,
        history=ThreadedHistory(StoreHistory(startup)),
        key_bindings=key_bindings(startup),
        multiline=True,
        prompt_continuation=lambda width, line, soft_wrap: " " * (width - 3) + ".. ",
        enable_history_search=False,
        input=input,
        output=output,
    )


def key_bindings(startup: Startup) -> KeyBindings:
    """Enter submits complete forms and opens a new line inside an unfinished one; Esc Enter always opens one.

    A new line takes the indentation of the one before, unless more keys are already waiting: text pasted
    where the terminal does not mark pastes brings its own indentation, which would otherwise pile up."""
    bindings = KeyBindings()
    completing = Condition(_completion_selected)

    @bindings.add("enter", filter=completing)
    def _(event) -> None:
        event.current_buffer.complete_state = None  # take the selected completion, keep editing

    @bindings.add("enter", filter=~completing)
    def _(event) -> None:
        buffer = event.current_buffer
        if startup.is_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.newline(copy_margin=not event.app.key_processor.input_queue)

    @bindings.add("escape", "enter")
    def _(event) -> None:
        event.current_buffer.newline(copy_margin=not event.app.key_processor.input_queue)

    return bindings


def _completion_selected() -> bool:
    state = get_app().current_buffer.complete_state
    return bool(state and state.current_completion)


class StoreHistory(FileHistory):
    """Entries kept in the store's local folder (`Cortex.store_folder`: the store folder, or a cache folder for
    a store on a server), located once the store is open (ThreadedHistory reads it in a thread)."""

    def __init__(self, startup: Startup):
        History.__init__(self)  # not FileHistory's: the file is not known yet
        self.startup = startup

    @property
    def filename(self) -> Path:  # type: ignore[override]
        """The history file in the store's local folder (waits for the store to open)."""
        return self.startup.session.cortex.store_folder() / HISTORY_FILE

    def load_history_strings(self):
        """Earlier entries, newest first; none when the store could not be opened."""
        try:
            return super().load_history_strings()
        except (CortexError, OSError):  # no store, no history; the prompt says why elsewhere
            return []

    def store_string(self, string: str) -> None:
        """Append an entry, unless it is longer than HISTORY_ENTRY_CHARS or the store could not be opened."""
        if len(string) > HISTORY_ENTRY_CHARS:
            return
        with contextlib.suppress(CortexError, OSError):
            super().store_string(string)
