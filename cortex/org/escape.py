"""Text put into Org as data, never structure: a line Org would read as structure gets a leading comma.

Org's own escape (`org-escape-code-in-string`, org-src.el) is for the contents of a block: a line
starting (after blanks) with `*` or `#+` gets a comma, and so does one already starting with commas
before them, so that unescaping (`org-unescape-code-in-string`: the last of those commas goes) gives
the text back. Text in a section's body needs more: there a drawer line (`:NAME:`) or a planning line
(`SCHEDULED:`) is structure too, and stars are only a headline when a blank or the line end follows.
"""

from __future__ import annotations

import re

__all__ = ["escape_block", "escape_text", "unescape_block", "unescape_text"]

_IN_BLOCK = r"\*|#\+"
_IN_TEXT = r"\*+(?:[ \t]|$)|#\+|:[\w-]*:(?:[ \t]|$)|(?i:SCHEDULED|DEADLINE|CLOSED):"


class _Escape:
    """A comma before each line that starts (after blanks and commas) with what `structure` matches."""

    def __init__(self, structure: str):
        self._escapable = re.compile(rf"^([ \t]*)(,*(?:{structure}))", re.M)
        self._escaped = re.compile(rf"^([ \t]*),(,*(?:{structure}))", re.M)

    def escape(self, text: str) -> str:
        return self._escapable.sub(r"\1,\2", text)

    def unescape(self, text: str) -> str:
        return self._escaped.sub(r"\1\2", text)


_block, _text = _Escape(_IN_BLOCK), _Escape(_IN_TEXT)


def escape_block(text: str) -> str:
    """`text` as the contents of an Org block (src, example, ...), escaped as Org escapes it."""
    return _block.escape(text)


def unescape_block(text: str) -> str:
    """The text an Org block's contents hold: `escape_block` undone, as Org reads a block."""
    return _block.unescape(text)


def escape_text(text: str) -> str:
    """`text` as lines of a section's body: each line Org would read as a headline, keyword, block,
    drawer or planning line escaped with a comma."""
    return _text.escape(text)


def unescape_text(text: str) -> str:
    """`escape_text` undone."""
    return _text.unescape(text)
