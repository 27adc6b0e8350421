"""Object trees -> Org text, byte for byte as it was parsed: a headline keeps its section's raw text."""

from __future__ import annotations

from collections.abc import Iterator

from ..hashing import Oid
from ..objects import Document, Headline
from .parser import Getter

__all__ = ["render", "render_headline", "subtree_parts"]


def render(document: Document, get: Getter) -> str:
    """The Org text of a document, byte for byte as it was parsed."""
    return document.preamble + "".join(subtree_parts(document.children, get))


def render_headline(headline: Headline, get: Getter) -> str:
    """The Org text of a headline and its whole subtree."""
    return headline.raw + "".join(subtree_parts(headline.children, get))


def subtree_parts(children: tuple[Oid, ...], get: Getter) -> Iterator[str]:
    """The raw text of each headline of these subtrees, in text order."""
    pending = list(reversed(children))
    while pending:
        headline = get(pending.pop())
        yield headline.raw
        pending.extend(reversed(headline.children))
