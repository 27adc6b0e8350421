"""Definitions kept in Org files: `#+begin_src hy :cortex yes` blocks, found with their positions.

A source block holds cortex definitions when its header carries the argument `:cortex yes`:

    #+begin_src hy :cortex yes
    (defwebhook github-events :path "/hooks/github" :provider github :secret "secret://env/GH")
    #+end_src

Other Hy blocks are ordinary code and are left alone.
"""

from __future__ import annotations

import re

from cortex.orgfile import DEFINITIONS_MARKER as MARKER
from cortex.dsl.diagnostics import Problems
from cortex.dsl.reader import SourceFile

__all__ = ["cortex_blocks"]

_BEGIN = re.compile(r"^[ \t]*#\+begin_src[ \t]+(\S+)(.*)$", re.I | re.M)
_END = re.compile(r"^[ \t]*#\+end_src[ \t\r]*$", re.I | re.M)
_MARKED = re.compile(r"(?:^|\s):cortex\s+yes(?:\s|$)", re.I)
# Org escapes lines starting with `*` or `#+` inside blocks with a comma; the comma is not code.
# Dropping it shifts later columns of that one line by one, a price for exact string values.
_ESCAPE = re.compile(r"^([ \t]*),(?=\*|#\+)", re.M)


def cortex_blocks(source: SourceFile, problems: Problems) -> list[tuple[int, str]]:
    """The Hy text of each marked block, with the line of the Org file where it starts.

    Marked blocks that cannot be read (not Hy, never closed) are reported instead.
    """
    blocks = []
    for begin in _BEGIN.finditer(source.text):
        if not _MARKED.search(begin.group(2)):
            continue
        line = source.position(begin.start())[0]
        if begin.group(1).lower() != "hy":
            problems.add(source.at(line, 1, f"cortex definitions are Hy: write #+begin_src hy {MARKER}"))
            continue
        end = _END.search(source.text, begin.end())
        if not end:  # nor is any block after it: looking for their ends would read the rest again each time
            problems.add(source.at(line, 1, "this block is never closed with #+end_src"))
            break
        blocks.append((line + 1, _ESCAPE.sub(r"\1", source.text[begin.end() + 1 : end.start()])))
    return blocks
