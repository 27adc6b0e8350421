"""Values the REPL forms return that have no engine type of their own; the printer knows each."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FileEntry", "Help", "HelpEntry", "Message", "OrgText", "Outline", "Patch", "SearchResults"]


class OrgText(str):
    """Org text (a headline, a subtree, a file), printed highlighted with the TODO keywords of its file."""

    path: str | None = None

    def __new__(cls, text: str, path: str | None = None):
        org = super().__new__(cls, text)
        org.path = path
        return org


class Message(str):
    """A status line, printed as plain text rather than as a quoted string."""


class Patch(str):
    """Changes with their text as unified diffs (`Cortex.patch`), printed as they are, coloured as git colours them."""


class SearchResults(list):
    """Search results, best first, printed as a table; with `explain`, each with its score breakdown; and the
    `status` of the vectors they were ranked with (`cortex.search.results.VectorStatus`), when known."""

    def __init__(self, results=(), explain: bool = False):
        super().__init__(results)
        self.explain = explain
        self.status = getattr(results, "status", None)


class Outline(list):
    """The headlines of one file or of the store in document order, printed as an indented outline."""


@dataclass(frozen=True)
class FileEntry:
    """One Org file of a state and how many headlines and :ID:s it holds."""

    path: str
    headlines: int
    ids: int


@dataclass(frozen=True)
class HelpEntry:
    """How to call one form and what it does."""

    name: str
    usage: str
    doc: str


class Help(list):
    """Help for the forms: one entry prints in full, several print as a table of summaries."""
