"""The REPL's Org query forms: (query ...) reads its predicate forms as data; (query-select q) takes a value."""

from __future__ import annotations

import hy
from hy.models import Expression, Keyword, Symbol

from .forms import snapshot_ref
from .registry import form, macro


@macro("cortex.repl.query_forms")
def query(session, *forms, as_of=None):
    """Headlines matching an Org query; the forms are read as data, not evaluated. Several forms must all hold.

    (query (and (todo "TODO") (tags "security") (deadline :to "+7d")))
    (query (todo "NEXT" "WAITING") (not (tags "ARCHIVE")))
    (query (or (scheduled :on "today") (deadline :from "today" :to "+7d")))
    (query (and (tags "ops") (ancestors (heading "Security"))) :as-of "HEAD~1")
    (query (links-to "sec-review")), (query (linked-from (property "ID" "team-dana")))
    (query "+security-ops/TODO|NEXT")          an Org match string, as the agenda's tags view reads it
    (query "PRIORITY=\\"A\\"+Effort<\\"1:00\\"")      properties compared as Org compares them
    Predicates, as org-ql names them: todo [KEYWORDS] (none: not done), done, tags / tags-all / tags-local /
    tags-inherited / tags-regexp (inheritance and #+FILETAGS count), property NAME [VALUE | OP VALUE]
    [:inherit t] [:regexp RE], priority [LETTERS | OP LETTER], level N | LOW HIGH | OP N, heading STRINGS,
    heading-regexp / regexp RES (RE2 syntax, any case), path GLOBS-OR-FOLDERS, category NAMES,
    ancestors / parent / children / descendants [QUERY], scheduled / deadline / closed / planning / ts /
    ts-active / ts-inactive / clocked with :from :to :on ("today", "+7d", "-2w", "2026-11-23", or days),
    clocked :min "1:00", links-to ID-URL-PATH-OR-QUERY, linked-from ID-OR-QUERY; and, or, not.
    (query-select q) takes a query held in a value: (query-select '(todo)).
    """


@form
def query_select(session, q, *, as_of=None):
    """Headlines matching a query held in a value: a quoted form, Python data or a match string.

    (query-select '(tags "security")), (setv q "+ops/TODO") (query-select q :as-of "HEAD~1")
    """
    return session.cortex.query(q, as_of=snapshot_ref(as_of))


def _expand(*args):
    """(query FORM... [:as-of REF]) -> (query-select '(and FORM...) :as-of REF): the forms quoted, REF evaluated."""
    args = list(args)
    ref = None
    if len(args) >= 2 and args[-2] == Keyword("as-of"):
        ref = args.pop()
        args.pop()
    query_form = args[0] if len(args) == 1 else Expression([Symbol("and"), *args])
    return Expression([Symbol("query-select"), Expression([Symbol("quote"), query_form]), Keyword("as-of"),
                       ref if ref is not None else Symbol("None")])


_hy_macros = {hy.mangle("query"): _expand}
