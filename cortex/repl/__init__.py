"""The Hy REPL over a cortex store: a terminal-free core (`core`), its forms (`forms.hy`) and the
prompt-toolkit app (`app`).

    cortex.repl.run(store, org_root)            # the interactive REPL; returns an exit status
    cortex.repl.eval_source("(stats)", store)   # evaluate forms and print their values; exit status

Both import only what they use, so `cortex eval '(+ 1 1)'` starts about as fast as `hy -c`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from ..backends import is_database_url
from ..errors import CortexError
from ..location import copy_around, default_store_path
from ..reads import read_text_bounded

TYPE_CHECKING = False  # typing's, without loading typing before the prompt
if TYPE_CHECKING:
    from typing import TextIO

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


def run(store=None, org_root=None, *, checked: bool = False, **options) -> int:
    """Run the interactive REPL until Ctrl-D; see `cortex.repl.app.run` for the options. A store that tracks another
    Org folder is refused first (`check_folder`), unless the caller has `checked`."""
    from .app import run as run_app

    if not checked:
        check_folder(store, org_root, options.get("folder", True))
    return run_app(store, org_root, **options)


def check_folder(store=None, org_root=None, folder: bool = True) -> None:
    """AnotherFolder, before any prompt, when the store folder tracks another Org folder than `org_root` (every
    form would fail); quick when `org_root` is a working copy that names the store."""
    if org_root is None or not folder:
        return
    location = store or default_store_path(org_root)
    if is_database_url(location) or not (path := Path(location).expanduser().resolve() / "data.mdb").is_file():
        return  # a server's store is checked as the session opens it; a new store takes the folder
    around = copy_around(org_root)
    if around is not None and around[0] == Path(os.path.abspath(org_root)) and around[1].location == str(path.parent):
        return
    from .. import api
    from ..workspace import AnotherFolder

    try:
        api.open(location, org_root, read_only=True).close()
    except AnotherFolder:
        raise
    except (CortexError, OSError):  # the session says why it cannot open, and Hy works meanwhile
        return


__all__ = ["check_folder", "eval_source", "piped_forms", "run"]
