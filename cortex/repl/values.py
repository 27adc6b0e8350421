"""Values the REPL forms return that have no engine type of their own; the printer knows each."""

from __future__ import annotations

from dataclasses import dataclass


class OrgText(str):
    """Org text (a headline, a subtree, a file), printed highlighted."""


class Message(str):
    """A status line, printed as plain text rather than as a quoted string."""


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
