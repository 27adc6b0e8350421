"""cortex for editors over the Language Server Protocol: `cortex lsp` (stdio).

    documents.py    an open buffer's text parsed: headlines, :ID:s and links by line and column
    index.py        the :ID:s known, file by file, open buffers over their files
    session.py      the store (writes one at a time, hover without waiting), the open buffers (never written by
                    the server's syncs), positions in the client's units
    features.py     workspace symbols (search), definition, references (backlinks), hover, `[[id:` completion
    diagnostics.py  broken id links, duplicate :ID:s, sync conflicts, definition mistakes, located
    commands.py     snapshot, history, diff, rollback of one headline (a WorkspaceEdit), proposals
    server.py       pygls's LanguageServer around them: `serve`
"""

from .server import serve

__all__ = ["serve"]
