"""The Hy REPL over a cortex store: a terminal-free core (`core`), its forms (`forms.hy`) and the
prompt-toolkit app (`app`).

    cortex.repl.run(store, org_root)            # the interactive REPL; returns an exit status
    cortex.repl.eval_source("(stats)", store)   # evaluate forms and print their values; exit status

Both import only what they use, so `cortex eval '(+ 1 1)'` starts about as fast as `hy -c`.
"""

from __future__ import annotations

import sys
from typing import TextIO

from ..reads import read_text_bounded

MAX_PIPED = 16 << 20  # characters of forms read from stdin


def eval_source(text: str, store=None, org_root=None, *, filename: str = "<eval>", ingest: bool = True,
                folder: bool = True, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Evaluate the forms of `text` in order, printing each value; stop at the first error.

    Returns the exit status: 0 when every form succeeded, 1 otherwise (the error is on `err`).
    The store opens (and the Org folder is ingested) only when a form needs it; `folder=False`: this
    machine has no Org folder (forms write to the store's working state directly).
    """
    from .core import Session

    session = Session(store, org_root, ingest=ingest, folder=folder, out=out or sys.stdout, err=err or sys.stderr,
                      filename=filename)
    try:
        return 0 if session.execute(text) else 1
    finally:
        session.close()


def piped_forms() -> str:
    """The forms piped on stdin: at most MAX_PIPED characters (TooLarge, naming stdin and the bound, beyond)."""
    return read_text_bounded(sys.stdin, MAX_PIPED, "forms piped in", "stdin")


def run(store=None, org_root=None, **options) -> int:
    """Run the interactive REPL until Ctrl-D; see `cortex.repl.app.run` for the options."""
    from .app import run as run_app

    return run_app(store, org_root, **options)


__all__ = ["eval_source", "piped_forms", "run"]
