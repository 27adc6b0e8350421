"""Org queries: org-ql-style predicates and Org's own match strings, answered by indexes over a tree.

    from cortex.orgquery import Index, parse_query
    index = Index(store); index.follow(tree)
    index.nodes(parse_query('(and (todo "TODO") (tags "security") (deadline :to "+7d"))'))
    index.nodes(parse_query('+security-ops/TODO'))       # an Org match string

`reader` reads the query language into predicates, `matchstrings` Org's match strings; `predicates` owns
what each predicate means, `index` the rows of a tree and their postings; `dates` and `links` read a
headline's dates and links; `agenda` lists them by day.
"""

from __future__ import annotations

from .errors import QueryError
from .index import Index, scan
from .predicates import Predicate
from .reader import parse_query

__all__ = ["Index", "Predicate", "QueryError", "parse_query", "scan"]
