"""What replaced what: the `:SUPERSEDES:` and `:SUPERSEDED_BY:` :ID:s of a headline followed through a tree,
both ways, by the postings of an `Index`.

Either side of a replacement may say it (a hand edit may write one and not the other): a headline replaced
X when it says `:SUPERSEDES: X`, or when X says `:SUPERSEDED_BY:` it. A headline with no :ID: is in no chain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import NotFound
from ..memory.validity import Validity
from ..query import Node
from ..words import brief
from .index import Index, Row, headline_validity

__all__ = ["MAX_STEPS", "Chain", "Step", "chain", "named", "validity_text"]

MAX_STEPS = 100  # items of a chain followed on each side


@dataclass(frozen=True)
class Step:
    """One item of a chain: its :ID:, its headline in the state (None: no headline holds that :ID:), when it
    held, and the item it was reached through (None: the item the chain is of)."""

    id: str
    node: Node | None
    validity: Validity
    via: str | None = None

    def describe(self) -> str:
        """`mem-a: The database is Postgres 16. (valid 2026-10-01 – 2026-11-03)`."""
        if self.node is None:
            return f"{self.id} (no headline of this state has that :ID:)"
        held = dict(self.validity.repl_pairs()).get("valid")
        return f"{self.id}: {self.node.title}" + (f" (valid {held})" if held else "")


@dataclass(frozen=True)
class Chain:
    """A headline, what it replaced and what that replaced (`earlier`), what replaced it and what replaced that
    (`later`), nearest first, as the state's properties say."""

    node: Node
    validity: Validity
    earlier: tuple[Step, ...] = ()
    later: tuple[Step, ...] = ()

    def lines(self) -> list[str]:
        """The chain told a line a step: `supersedes mem-a: ...`, `superseded by mem-c: ...`; empty for none."""
        lines = [f"supersedes {s.describe()}" if s.via is None else f"  {s.via} superseded {s.describe()}"
                 for s in self.earlier]
        lines += [f"superseded by {s.describe()}" if s.via is None else f"  {s.via} was superseded by {s.describe()}"
                  for s in self.later]
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def repl_view(self, renderer):
        """The REPL's view: the headline, when it holds, then the chain."""
        pairs = [("id", self.node.id or ""), ("title", self.node.title), *self.validity.repl_pairs()]
        return renderer.group(renderer.key_values(pairs), renderer.text(str(self) or "in no chain", "dim"))


def validity_text(headline) -> str:
    """What a headline's properties say of when it held and of what replaced what, as tables show it:
    `valid 2026-10-01 – 2026-11-03; supersedes mem-a; superseded by mem-c` (empty: nothing)."""
    return "; ".join(f"{name} {value}" for name, value in headline_validity(headline).repl_pairs())


def named(headline) -> bool:
    """Whether a headline's own properties name what it replaced or what replaced it (the writing side names both
    ends): a chain worth following, which reads every headline of the state."""
    validity = headline_validity(headline)
    return bool(validity.replaces or validity.replaced_by)


def chain(index: Index, org_id: str) -> Chain:
    """The chain of the headline with :ID: `org_id` in the tree `index` follows."""
    rows = index.posting("id", org_id)
    if not rows:
        raise NotFound(f"no headline with :ID: {brief(org_id)}")
    row = _first(index, rows)
    return Chain(index.node(row), row.validity, _walk(index, row, lambda v: v.replaces, "superseded-by"),
                 _walk(index, row, lambda v: v.replaced_by, "supersedes"))


def _walk(index: Index, start: Row, named: Callable[[Validity], tuple[str, ...]], back: str) -> tuple[Step, ...]:
    """The items reached from `start` one way, nearest first: those its validity names (`named`), and those whose
    property `back` names it."""
    steps: list[Step] = []
    seen = {start.headline.id}
    frontier = [start]
    while frontier and len(steps) < MAX_STEPS:
        row = frontier.pop(0)
        own = row.headline.id
        ids = [*named(row.validity), *sorted(r.headline.id for r in index.posting(back, own) if r.headline.id)]
        for org_id in dict.fromkeys(ids):
            if org_id in seen or len(steps) >= MAX_STEPS:
                continue
            seen.add(org_id)
            rows = index.posting("id", org_id)
            found = _first(index, rows) if rows else None
            steps.append(Step(org_id, found and index.node(found), found.validity if found else Validity(),
                              None if row is start else own))
            if found is not None:
                frontier.append(found)
    return tuple(steps)


def _first(index: Index, rows) -> Row:
    """The first of several headlines with one :ID:, in file and document order."""
    return min(rows, key=lambda r: (index.node(r).path, index.node(r).line))
