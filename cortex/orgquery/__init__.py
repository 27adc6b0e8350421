"""Org queries: org-ql-style predicates and Org's own match strings, answered by indexes over a tree.

    from cortex.orgquery import Index, parse_query
    index = Index(store); index.follow(tree)
    index.nodes(parse_query('(and (todo "TODO") (tags "security") (deadline :to "+7d"))'))
    index.nodes(parse_query('+security-ops/TODO'))       # an Org match string

`predicates` owns the query language, `matchstrings` Org's match strings, `index` the rows of a tree and
their postings; `dates` and `links` read a headline's dates and links; `agenda` lists them by day.
"""

from __future__ import annotations

from datetime import date

from ..words import quoted
from .errors import QueryError
from .index import Index, scan
from .matchstrings import compile_match
from .predicates import Predicate, parse

__all__ = ["Index", "Predicate", "QueryError", "parse_query", "scan"]


def parse_query(query, *, match: bool | None = None, today: date | None = None) -> Predicate:
    """The predicate of a query: a predicate form (Hy text, a Hy form, Python data) or, with `match` (by
    default: text not starting with "("), an Org match string. Relative dates count from `today`."""
    if isinstance(query, str) and match is None:
        match = not query.lstrip().startswith("(")
    if match:
        if not isinstance(query, str):
            raise QueryError(f"a match string is text, not {quoted(query)}")
        return compile_match(query)
    return parse(query, today)
