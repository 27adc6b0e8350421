"""Conflicts a merge leaves in Org: what they are, how a conflicting version is marked, and finding them.

A conflict headline carries the tag `:CONFLICT:` (so an agenda tag search lists them all) and properties
naming what it conflicts with (`:CONFLICT_OF:` `id:<ID>` or the outline path), where the version came
from (`:CONFLICT_FROM:`, a label the merge's caller gives) and the kind (`:CONFLICT_KIND:`, one of
`KINDS`). A conflict is resolved by deleting its copy (or, for a kept subtree, its `CONFLICT_*`
properties); `conflicts_in` lists those left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .. import org
from ..org import Section, escape_block
from ..hashing import Oid
from ..ingest import decode_org
from ..objects import Document, Headline, OrgObject

Getter = Callable[[Oid], OrgObject]

CONFLICT_TAG = "CONFLICT"
CONFLICT_OF, CONFLICT_FROM, CONFLICT_KIND = "CONFLICT_OF", "CONFLICT_FROM", "CONFLICT_KIND"
# both-changed: sections changed differently; both-added: added on both sides with one name;
# ours-deleted / theirs-deleted: that side deleted what the other changed or moved (the change is kept);
# both-moved: both moved a headline to different parents (it stays where ours put it);
# preamble: the text before the first headline changed differently;
# erased: a hard forget or purge erased from theirs what ours changed (the change is kept).
KINDS = ("both-changed", "both-added", "ours-deleted", "theirs-deleted", "both-moved", "preamble", "erased")

_MARKS = frozenset({CONFLICT_OF, CONFLICT_FROM, CONFLICT_KIND})


@dataclass(frozen=True)
class Conflict:
    """One place both sides changed differently: its kind, its marked headline and where it is."""

    kind: str
    outline: tuple[str, ...] = ()  # titles down to the marked headline, in the merged file
    id: str | None = None  # the :ID: of the headline in conflict
    line: int | None = None  # 1-based line of the marked headline in the merged text
    path: str | None = None  # the file, in a tree merge

    def __str__(self) -> str:
        where = " / ".join(self.outline) or "(whole file)"
        at = f"{self.path}:{self.line or 1}: " if self.path else f"line {self.line}: " if self.line else ""
        ident = f" [{self.id}]" if self.id else ""
        return f"{at}{self.kind}: {where}{ident}"


def conflicts_in(document: Document | org.Parsed | str | bytes, get: Getter | None = None) -> list[Conflict]:
    """The conflict headlines left in a document (those with a :CONFLICT_OF: property), in text order."""
    if isinstance(document, (str, bytes)):
        document = org.parse(document if isinstance(document, str) else decode_org(document))
    if isinstance(document, org.Parsed):
        if get is None:
            objects = {obj.oid: obj for obj in document.objects}
            get = objects.__getitem__
        document = document.document
    found = []
    for line, within, headline in walk(document, get):
        origin = headline.get(CONFLICT_OF)
        if origin is not None:
            ident = origin[3:] if origin.startswith("id:") else None
            found.append(Conflict(headline.get(CONFLICT_KIND) or KINDS[0], within.outline(), ident, line))
    return found


@dataclass(frozen=True)
class Within:
    """A headline's place in the merged outline: its title and its parent's place (shared, not copied)."""

    parent: Within | None
    title: str

    def outline(self) -> tuple[str, ...]:
        """The titles from the top-level ancestor down to this headline."""
        titles, at = [], self
        while at is not None:
            titles.append(at.title)
            at = at.parent
        return tuple(reversed(titles))


def walk(document: Document, get: Getter) -> Iterator[tuple[int, Within, Headline]]:
    """Every headline in text order, with the line it starts on and its place."""
    line = 1 + document.preamble.count("\n")
    stack: list[tuple[Oid, Within | None]] = [(oid, None) for oid in reversed(document.children)]
    while stack:
        oid, above = stack.pop()
        headline = get(oid)
        here = Within(above, headline.title)
        yield line, here, headline
        line += headline.raw.count("\n")
        stack.extend((child, here) for child in reversed(headline.children))


def origin(headline: Headline, within: Within | None) -> str:
    """What a conflict headline is a version of: `id:<ID>`, or the outline path."""
    return f"id:{headline.id}" if headline.id else "/".join(Within(within, headline.title).outline())


def marked(headline: Headline, origin: str, label: str, kind: str, *, stars: int | None, drop_id: bool,
           crlf: bool) -> str:
    """A section's text with the conflict tag and properties (and `stars`, and without its :ID:)."""
    lines = headline.raw.split("\n")
    cr = "\r" if crlf else ""
    head = lines[0]
    end = "\r" if head.endswith("\r") else ""
    head = head[:len(head) - len(end)]
    if stars is not None:
        head = "*" * stars + head.lstrip("*")
    if CONFLICT_TAG not in headline.tags:
        head = head.rstrip(" \t") + (f"{CONFLICT_TAG}:" if headline.tags else f" :{CONFLICT_TAG}:")
    lines[0] = head + end
    section = Section.of(headline.raw, crlf=crlf)
    at, stop = section.drawer, section.drawer_end
    entries = [f":{CONFLICT_OF}: {origin}", f":{CONFLICT_FROM}: {label}", f":{CONFLICT_KIND}: {kind}"]
    if stop is None:
        lines[at:at] = [line + cr for line in (":PROPERTIES:", *entries, ":END:")]
    else:
        indent = lines[at][:len(lines[at]) - len(lines[at].lstrip(" \t"))]
        dropped = _MARKS | {"ID"} if drop_id else _MARKS
        kept = [line for line, (name, _) in zip(lines[at + 1:stop], section.properties) if name.upper() not in dropped]
        lines[at + 1:stop] = kept + [indent + entry + cr for entry in entries]
    return "\n".join(lines)


def preamble_conflict(text: str, label: str, eol: str) -> str:
    """A preamble (`label`'s) as a conflict headline: its text in an example block, escaped as Org escapes it;
    a headline because that is what a person and `conflicts_in` look for."""
    text = text.removeprefix("\ufeff")  # a byte-order mark is not content
    if text and not text.endswith("\n"):
        text += eol
    entries = "".join(f":{name}: {value}{eol}" for name, value in (
        (CONFLICT_OF, "preamble"), (CONFLICT_FROM, label), (CONFLICT_KIND, "preamble")))
    escaped = escape_block(text)
    return (f"* Preamble from {label} :{CONFLICT_TAG}:{eol}:PROPERTIES:{eol}{entries}:END:{eol}"
            f"#+BEGIN_EXAMPLE{eol}{escaped}#+END_EXAMPLE{eol}")
