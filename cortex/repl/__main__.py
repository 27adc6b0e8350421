"""`python -m cortex.repl [--store DIR|URL] [-e FORMS] [ORG_DIR]`: the REPL, or forms from -e or piped stdin."""

from __future__ import annotations

import argparse
import sys

from . import eval_source, run


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the REPL or evaluate forms; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m cortex.repl",
                                     description="The cortex REPL, or forms from -e or piped stdin.")
    parser.add_argument("org_root", nargs="?", metavar="ORG_DIR",
                        help="the Org folder (default: the store's, else ./org)")
    parser.add_argument("--store", help="the store folder or postgresql:// URL (default: $CORTEX_STORE, "
                                        "snapshots/ in the repository, else ~/.local/share/cortex/store)")
    parser.add_argument("-e", "--eval", dest="source", metavar="FORMS", help="evaluate FORMS, print their values, exit")
    args = parser.parse_args(argv)
    if args.source is not None:
        return eval_source(args.source, args.store, args.org_root)
    if not sys.stdin.isatty():
        return eval_source(sys.stdin.read(), args.store, args.org_root, filename="<stdin>")
    if not sys.stdout.isatty():
        return run(args.store, args.org_root)
    from .early import EarlyPrompt

    with EarlyPrompt(sys.stdin.fileno(), sys.stdout.fileno()) as early:
        return run(args.store, args.org_root, early=early)


if __name__ == "__main__":
    sys.exit(main())
