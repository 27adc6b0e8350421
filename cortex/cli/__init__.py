"""The `cortex` command.

`cortex` alone (or with the REPL's options only), `cortex repl` and `cortex eval` go straight to the
REPL so that its prompt is not kept waiting by the libraries the other commands load (click, rich,
the engine); `cortex lsp` with plain options goes straight to the language server, for the same reason.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

FAST = ("repl", "eval")
REPL_OPTIONS = ("--store", "--no-org")

# Set by Ctrl-C. A library may turn the KeyboardInterrupt into another error (an import cut halfway fails as
# ImportError, then again as "cannot load module more than once"): a command's end asks this, not the exception.
interrupted = threading.Event()


def _on_ctrl_c(signum, frame) -> None:
    interrupted.set()
    signal.default_int_handler(signum, frame)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `cortex` console script: Ctrl-C at any moment ends it with one line, `interrupted`, and
    once the command has unwound after Ctrl-C, the process ends there (`_leave`)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_ctrl_c)
    try:
        _main(argv)
    except SystemExit as exc:
        if not interrupted.is_set():
            raise
        _leave(exc.code)
    except BaseException:
        if not interrupted.is_set():
            raise
        print("interrupted", file=sys.stderr)
        _leave(130)
    if interrupted.is_set():
        _leave(0)


def _leave(code: int | str | None) -> None:
    """End the process at once with `code` (as `sys.exit` takes it), its output flushed. After Ctrl-C the command
    has unwound and closed what it held; Python's own exit would then wait for every pool thread, and one that
    the KeyboardInterrupt cut off from its pool as it started (concurrent.futures records a worker only after
    starting it) waits for work for ever."""
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said
            pass
    os._exit(code or 0)


def _main(argv: list[str] | None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    for n, arg in enumerate(args, 1):
        if (problem := _not_text(arg)) is not None:
            print(f"cortex: argument {n} {problem}", file=sys.stderr)
            sys.exit(2)
    if args and args[0].split("=")[0] in REPL_OPTIONS:
        args = ["repl", *args]
    if not args or (args[0] in FAST and not {"-h", "--help"} & set(args)):
        from ..repl.__main__ import main as repl_main

        sys.exit(repl_main(_repl_args(args)))
    if args and args[0] == "lsp" and (options := _lsp_options(args[1:])) is not None:
        _lsp(args, *options)
        return
    from .app import main as app_main

    app_main(args)


def _lsp_options(args: list[str]) -> tuple[str | None, str | None, bool] | None:
    """`cortex lsp`'s store, Org folder and --no-org when its options are plain (`--stdio`, `--store VALUE`,
    `--org VALUE`, `--no-org`; $CORTEX_STORE), else None: click reads them and says what is wrong."""
    store, org_root, no_org = os.environ.get("CORTEX_STORE"), None, False
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if word == "--no-org":
            no_org = True
        elif word in ("--store", "--org") and rest and rest[0] and not rest[0].startswith("-"):
            store, org_root = (rest.pop(0), org_root) if word == "--store" else (store, rest.pop(0))
        elif word != "--stdio":
            return None
    if "CORTEX_NO_ORG" in os.environ or any(v is not None and os.path.exists(v) and not os.path.isdir(v)
                                             for v in (store, org_root)):
        return None
    return store, org_root, no_org


def _lsp(args: list[str], store: str | None, org_root: str | None, no_org: bool) -> None:
    """Serve the store to an editor without loading click; a store that does not open goes to click's command,
    which says why in one line."""
    from .. import api
    from ..errors import CortexError

    try:
        cx = api.open(store, org_root, folder=not no_org)
    except (CortexError, OSError):
        from .app import main as app_main

        app_main(args)
        return
    from ..lsp import serve

    with cx:
        serve(cx)


def _not_text(arg: str) -> str | None:
    """What makes a command-line argument no text cortex can keep (None: nothing): bytes that are not UTF-8
    (which Python holds as lone surrogates) or a NUL."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not UTF-8 text (byte 0x{ord(arg[exc.start]) & 0xFF:02x} at character {exc.start + 1})"
    return "holds a NUL character" if "\0" in arg else None


def _repl_args(args: list[str]) -> list[str]:
    """`cortex [repl|eval] ...` as `python -m cortex.repl` arguments."""
    if not args:
        return []
    command, rest = args[0], args[1:]
    if command == "repl":
        return rest
    options, forms = [], []
    while rest:
        word = rest.pop(0)
        if word == "--no-org":
            options.append(word)
        elif word in ("--store", "--org") and rest:
            options += ["--store", rest.pop(0)] if word == "--store" else [rest.pop(0)]
        else:
            forms.append(word)
    return options + (["-e", " ".join(forms)] if forms else [])
