"""What a search answers: results, best first, each with the numbers that placed it, and how many of the items
had a vector to be ranked by.

Light on purpose (no numpy, no models): the REPL and the CLI know these values without loading the engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..words import counted

if TYPE_CHECKING:
    from ..hashing import Oid
    from .fusion import Hit
    from .items import Item

__all__ = ["Results", "SearchResult", "VectorStatus"]


@dataclass(frozen=True)
class SearchResult:
    """A ranked item and the numbers that placed it (see `explain`)."""

    item: Item
    line: int
    score: float
    vector: float
    keyword: float
    exact: float
    vector_norm: float
    keyword_norm: float
    hit: Hit  # the fusion's record of the rank, which explains it
    pending: bool = False  # ranked by its words among the items with no vector yet (see `SearchIndex.search`)
    before: tuple[Item, ...] = ()  # the turns before it in its session, when asked for (`SearchIndex.context`)
    after: tuple[Item, ...] = ()   # the turns after it

    @property
    def path(self) -> str:
        return self.item.path

    @property
    def outline(self) -> tuple[str, ...]:
        return self.item.outline

    @property
    def id(self) -> str | None:
        return self.item.id

    @property
    def oid(self) -> Oid:
        return self.item.oid

    @property
    def text(self) -> str:
        return self.item.text

    @property
    def list_item(self) -> bool:
        """Whether the item is a list item of its headline's section (in memory.org), not the headline itself."""
        return self.text.split("\n", 1)[0] != self.outline[-1]

    @property
    def heading(self) -> str:
        """What a table of results shows: the outline, then the start of a list item's text."""
        where, first = " / ".join(self.outline), self.text.split("\n", 1)[0]
        return f"{where} — {first[:80]}" if self.list_item else where

    @property
    def has_vector(self) -> bool:
        """Whether the item had a vector when it was ranked (see `SearchIndex.search` for those without)."""
        return not math.isnan(self.vector)

    def explain(self) -> str:
        """Why it ranked where it did: the fusion, its weights and the sum of its parts, as printed."""
        return ("no vector yet, ranked by its words among the items without one: " if self.pending
                else "") + self.hit.explain()

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.heading}"

    def repl_view(self, renderer):
        """The REPL's view of one result: where it is, why it ranked there, and its text."""
        return renderer.group(renderer.text(f"{self.path}:{self.line}  {' / '.join(self.outline)}", "dim"),
                              renderer.text(self.explain(), "dim"), renderer.text(self.text))

    def repl_row(self, renderer, index: int) -> dict[str, str]:
        """The REPL's row of a result in a table: rank, score, file:line, outline, :ID:."""
        return {"#": str(index), "score": f"{self.score:.3f}", "file:line": f"{self.path}:{self.line}",
                "outline": self.heading, "id": self.id or ""}


@dataclass(frozen=True)
class VectorStatus:
    """How many of the indexed items have a vector, and whether a background build is embedding the rest."""

    vectors: int
    items: int
    building: bool = False

    @property
    def complete(self) -> bool:
        return self.vectors >= self.items

    def __str__(self) -> str:
        return f"vectors: {self.vectors:,} of {counted(self.items, 'item')}" + (", building" if self.building else "")


class Results(list):
    """Search results, best first, and the `status` of the vectors they were ranked with."""

    def __init__(self, results: Iterable[SearchResult] = (), status: VectorStatus = VectorStatus(0, 0)):
        super().__init__(results)
        self.status = status
