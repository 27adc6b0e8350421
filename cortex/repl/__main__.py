"""`python -m cortex.repl [--store DIR|URL] [--no-org] [-e FORMS] [ORG_DIR]`: the REPL, or forms from -e or piped stdin."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import UserError
from . import check_folder, eval_source, piped_forms, run

__all__ = ["main"]

TRUE = ("1", "true", "t", "yes", "y", "on")  # what the CLI's flags read as set in the environment


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the REPL or evaluate forms; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m cortex.repl",
                                     description="The cortex REPL, or forms from -e or piped stdin.")
    parser.add_argument("org_root", nargs="?", metavar="ORG_DIR",
                        help="the Org folder (default: the store's, else ./org)")
    parser.add_argument("--store", help="the store folder or postgresql:// URL (default: $CORTEX_STORE, "
                                        "snapshots/ in the repository, else ~/.local/share/cortex/store)")
    parser.add_argument("--no-org", action="store_true", default=os.environ.get("CORTEX_NO_ORG", "").lower() in TRUE,
                        help="no Org folder on this machine: write to the store's working state directly "
                             "(default: $CORTEX_NO_ORG)")
    parser.add_argument("-e", "--eval", dest="source", metavar="FORMS", help="evaluate FORMS, print their values, exit")
    args = parser.parse_args(argv)
    where = dict(store=args.store, org_root=args.org_root, folder=not args.no_org)
    if args.source is not None:
        return eval_source(args.source, **where)
    if not sys.stdin.isatty():
        try:
            source = piped_forms()
        except UserError as exc:
            print(f"cortex: {exc}", file=sys.stderr)
            return 1
        return eval_source(source, **where, filename="<stdin>")
    try:
        check_folder(**where)  # before the banner: a REPL whose every form would fail never opens
    except UserError as exc:
        print(f"cortex: {exc}", file=sys.stderr)
        return 1
    if not sys.stdout.isatty():
        return run(**where, checked=True)
    from .early import EarlyPrompt

    with EarlyPrompt(sys.stdin.fileno(), sys.stdout.fileno()) as early:
        return run(**where, early=early, checked=True)


if __name__ == "__main__":
    sys.exit(main())
