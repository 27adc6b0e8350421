"""Definitions kept in Org files: `#+begin_src hy :cortex yes` blocks, found with their positions.

A source block holds cortex definitions when its header carries the argument `:cortex yes`:

    #+begin_src hy :cortex yes
    (defwebhook github-events :path "/hooks/github" :provider github :secret "secret://env/GH")
    #+end_src

Other Hy blocks are ordinary code and are left alone.
"""

from __future__ import annotations

import re

from cortex.dsl.diagnostics import Problems
from cortex.dsl.reader import SourceFile
from cortex.org import unescape_block
from cortex.org.blocks import BLOCK_BEGIN, BLOCK_END, DEFINITIONS_MARKER as MARKER

__all__ = ["cortex_blocks"]

_MARKED = re.compile(r"(?:^|\s):cortex\s+yes(?:\s|$)", re.I)


def cortex_blocks(source: SourceFile, problems: Problems) -> list[tuple[int, str]]:
    """The Hy text of each marked block, with the line of the Org file where it starts.

    Marked blocks that cannot be read (not Hy, never closed) are reported instead.
    """
    blocks = []
    for begin in BLOCK_BEGIN.finditer(source.text):
        language, arguments = (begin.group(2).split(None, 1) + ["", ""])[:2]
        if begin.group(1).upper() != "SRC" or not _MARKED.search(arguments):
            continue
        line = source.position(begin.start())[0]
        if language.lower() != "hy":
            problems.add(source.at(line, 1, f"cortex definitions are Hy: write #+begin_src hy {MARKER}"))
            continue
        end = next((end for end in BLOCK_END.finditer(source.text, begin.end()) if end.group(1).upper() == "SRC"), None)
        if not end:  # nor is any block after it: looking for their ends would read the rest again each time
            problems.add(source.at(line, 1, "this block is never closed with #+end_src"))
            break
        # The commas Org escapes block lines with are not code: dropping one shifts that line's later columns.
        blocks.append((line + 1, unescape_block(source.text[begin.end() + 1 : end.start()])))
    return blocks
