"""The interactive REPL: prompt-toolkit around the terminal-free core.

Hy highlighting, multi-line entry until the forms are complete, history in the store folder,
completion from the session; Ctrl-C cancels the entry, Ctrl-D leaves. The prompt comes up before
the store is opened, so start-up costs little more than Hy and prompt-toolkit themselves.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, History, ThreadedHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import StdoutProxy
from pygments.lexers.lisp import HyLexer

from ..errors import CortexError
from .completion import SessionCompleter
from .core import Session, describe_error, is_complete
from .printer import ingest_summary
from .values import Message

PROMPT = "cortex=> "
HISTORY_FILE = "repl_history"
BANNER = "cortex REPL: (help) lists the forms, Tab completes, Ctrl-C cancels an entry, Ctrl-D leaves"


def run(store=None, org_root=None, *, ingest: bool = True, input: Input | None = None,  # noqa: A002
        output: Output | None = None, out: TextIO | None = None) -> int:
    """Read-eval-print over a store until Ctrl-D; return the exit status (0).

    The prompt comes up first; the store then opens and the Org folder is ingested in the
    background, and the line saying what was ingested (or why the store could not be opened)
    appears above the prompt. A form that needs the store waits for it.
    `input`/`output` are prompt-toolkit's (tests pass a pipe input and a dummy output);
    `out` receives the printed values (default: stdout).
    """
    session = Session(store, org_root, ingest=ingest, out=out or sys.stdout)
    try:
        session.printer.show(Message(BANNER))
        prompt = prompt_session(session, input, output)
        session.ask = lambda question: confirm(question, input, output)
        opener = threading.Thread(target=_open, args=(session,), name="cortex-open", daemon=True)

        def open_after_first_render(app) -> None:
            prompt.app.after_render -= open_after_first_render
            opener.start()

        prompt.app.after_render += open_after_first_render
        # Background notices are drawn above the prompt instead of through it. The proxy finds
        # the running prompt through the default app session, so no other session is made.
        with StdoutProxy(raw=True) as above_prompt:
            session.notify = lambda message: print(message, file=above_prompt, flush=True)
            return loop(session, prompt)
    finally:
        session.close()


def _open(session: Session) -> None:
    """Open the store and ingest the Org folder, then say what was ingested or what went wrong."""
    try:
        report = session.open()
    except (CortexError, OSError) as exc:  # a form that needs the store tries again and says why
        session.notify(describe_error(exc, ""))
        return
    if report is not None:
        session.notify(ingest_summary(report, session.cortex.root))


def loop(session: Session, prompt: PromptSession) -> int:
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


def prompt_session(session: Session, input: Input | None = None,  # noqa: A002
                   output: Output | None = None) -> PromptSession:
    """The prompt: Hy highlighting, smart Enter, history in the store folder, session completion."""
    return PromptSession(
        lexer=PygmentsLexer(HyLexer),
        completer=SessionCompleter(session),
        complete_while_typing=False,
        history=ThreadedHistory(StoreHistory(session)),
        key_bindings=key_bindings(),
        multiline=True,
        prompt_continuation=lambda width, line, soft_wrap: " " * (width - 3) + ".. ",
        enable_history_search=False,
        input=input,
        output=output,
    )


def key_bindings() -> KeyBindings:
    """Enter submits complete forms and opens a new line inside an unfinished one; Esc Enter always opens one."""
    bindings = KeyBindings()
    completing = Condition(_completion_selected)

    @bindings.add("enter", filter=completing)
    def _(event) -> None:
        event.current_buffer.complete_state = None  # take the selected completion, keep editing

    @bindings.add("enter", filter=~completing)
    def _(event) -> None:
        buffer = event.current_buffer
        if is_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.newline(copy_margin=True)

    @bindings.add("escape", "enter")
    def _(event) -> None:
        event.current_buffer.newline(copy_margin=True)

    return bindings


def _completion_selected() -> bool:
    state = get_app().current_buffer.complete_state
    return bool(state and state.current_completion)


class StoreHistory(FileHistory):
    """Entries kept in the store folder, located once the store is open (ThreadedHistory reads it in a thread)."""

    def __init__(self, session: Session):
        History.__init__(self)  # not FileHistory's: the file is not known yet
        self.session = session

    @property
    def filename(self) -> Path:  # type: ignore[override]
        """The history file in the store folder (waits for the store to open)."""
        return self.session.cortex.store_folder() / HISTORY_FILE

    def load_history_strings(self):
        """Earlier entries, newest first; none when the store could not be opened."""
        try:
            return super().load_history_strings()
        except (CortexError, OSError):  # no store, no history; the prompt says why elsewhere
            return []

    def store_string(self, string: str) -> None:
        """Append an entry, unless the store could not be opened."""
        with contextlib.suppress(CortexError, OSError):
            super().store_string(string)
