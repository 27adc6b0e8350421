"""The REPL's Org query forms: (query ...) reads its predicate forms as data; (query-select q) takes a value."""

from __future__ import annotations

import hy
from hy.models import Expression, Keyword, Symbol

from .forms import snapshot_ref
from .registry import form, macro


@macro("cortex.repl.query_forms")
def query(session, *forms, as_of=None, valid_at=None, all=False):  # noqa: A002 - what the user writes
    """Headlines matching an Org query; the forms are read as data, not evaluated. Several forms must all hold.
    Only those that hold now and that nothing replaced, unless :valid-at "2026-11-01" (those that held then) or
    :all True.

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
    clocked :min "1:00", links-to ID-URL-PATH-OR-QUERY, linked-from ID-OR-QUERY, valid [:at MOMENT]; and, or,
    not. (query-select q) takes a query held in a value: (query-select '(todo)).
    """


@form
def query_select(session, q, *, as_of=None, valid_at=None, all=False):  # noqa: A002
    """Headlines matching a query held in a value: a quoted form, Python data or a match string.

    (query-select '(tags "security")), (setv q "+ops/TODO") (query-select q :as-of "HEAD~1" :all True)
    """
    return session.cortex.query(q, as_of=snapshot_ref(as_of), valid_at=valid_at, all=all)


_OPTIONS = (Keyword("as-of"), Keyword("valid-at"), Keyword("all"))  # what (query) passes on, evaluated


def _expand(*args):
    """(query FORM... [:as-of REF] [:valid-at DATE] [:all FLAG]) -> (query-select '(and FORM...) :as-of REF ...):
    the forms quoted, the options evaluated."""
    args = list(args)
    options = []
    while len(args) >= 3 and args[-2] in _OPTIONS:
        options = [args[-2], args[-1], *options]
        del args[-2:]
    query_form = args[0] if len(args) == 1 else Expression([Symbol("and"), *args])
    return Expression([Symbol("query-select"), Expression([Symbol("quote"), query_form]), *options])


_hy_macros = {hy.mangle("query"): _expand}
