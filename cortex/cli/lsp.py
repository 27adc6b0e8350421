"""`cortex lsp`: serve the store to editors over the Language Server Protocol."""

from __future__ import annotations

import click

from .common import no_org_option, org_option, store_option


@click.command(name="lsp")
@click.option("--stdio", is_flag=True, help="Speak over stdin and stdout (the default, and the only transport; "
                                            "accepted because many editors pass it).")
@store_option
@org_option
@no_org_option
def lsp_command(store, org_root, no_org, stdio):
    """Serve this store to editors over the Language Server Protocol (stdio), for the Org files of its folder.

    Workspace symbols search as `cortex search` does; go to definition follows id and file links, references
    are backlinks; hover on a headline tells its :ID:, last change and validity; diagnostics show broken links,
    duplicate :ID:s, sync conflicts and definition mistakes; `[[id:` completes by title; commands snapshot, show
    the log, history and diffs, roll one headline back (as an edit of the buffer) and review proposals.
    """
    from .. import api
    from ..lsp import serve

    with api.open(store, org_root, folder=not no_org) as cx:
        serve(cx)


commands = (lsp_command,)
