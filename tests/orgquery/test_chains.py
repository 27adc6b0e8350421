"""Chains: what a headline replaced and what replaced it, followed both ways through a tree's postings."""

import pytest

from cortex.backends import open_store
from cortex.errors import NotFound
from cortex.objects import Headline
from cortex.org import parse
from cortex.orgquery import Index
from cortex.orgquery.chains import MAX_STEPS, chain, named, validity_text
from tests.orgquery.test_predicates import tree_of

MEMORY = """\
* Facts
** Postgres 15
:PROPERTIES:
:ID:            db-15
:VALID_FROM:    [2025-01-01 Wed]
:INVALID_AT:    [2026-10-01 Thu]
:SUPERSEDED_BY: db-16
:END:
** Postgres 16
:PROPERTIES:
:ID:            db-16
:VALID_FROM:    [2026-10-01 Thu]
:INVALID_AT:    [2026-11-03 Tue 14:00]
:SUPERSEDES:    db-15
:SUPERSEDED_BY: db-17
:END:
** Postgres 17
:PROPERTIES:
:ID:            db-17
:VALID_FROM:    [2026-11-03 Tue 14:00]
:END:
"""
# in another file: a hand edit that names only one end (db-17 does not say what replaced it)
NOTES = """\
* Postgres 18 is planned
:PROPERTIES:
:ID:            db-18
:SUPERSEDES:    db-17 db-gone
:END:
* Unrelated
"""


def index_of(files: dict[str, str]) -> Index:
    store = open_store(None)
    index = Index(store)
    index.follow(tree_of(store, files))
    return index


def test_a_chain_goes_both_ways_across_files_and_says_when_each_held():
    found = chain(index_of({"memory.org": MEMORY, "notes.org": NOTES}), "db-16")
    assert found.node.title == "Postgres 16" and found.validity.end is not None
    assert [(s.id, s.via, s.node and s.node.path) for s in found.earlier] == [("db-15", None, "memory.org")]
    assert [(s.id, s.via) for s in found.later] == [("db-17", None), ("db-18", "db-17")]
    assert found.lines() == [
        "supersedes db-15: Postgres 15 (valid 2025-01-01 – 2026-10-01)",
        "superseded by db-17: Postgres 17 (valid 2026-11-03 14:00 – now)",
        "  db-17 was superseded by db-18: Postgres 18 is planned",
    ]


def test_either_end_of_a_replacement_is_enough_and_a_missing_id_is_said():
    index = index_of({"memory.org": MEMORY, "notes.org": NOTES})
    newest = chain(index, "db-18")
    assert [s.id for s in newest.earlier] == ["db-17", "db-gone", "db-16", "db-15"]
    assert newest.earlier[1].node is None and newest.later == ()
    assert "supersedes db-gone (no headline of this state has that :ID:)" in newest.lines()
    assert "  db-17 superseded db-16: Postgres 16 (valid 2026-10-01 – 2026-11-03 14:00)" in newest.lines()


def test_an_item_in_no_chain_has_nothing_to_tell_and_an_unknown_id_is_not_found():
    index = index_of({"notes.org": NOTES})
    assert chain(index, "db-18").later == () and str(chain(index, "db-18")).startswith("supersedes db-17 (no ")
    with pytest.raises(NotFound, match="no headline with :ID: nowhere"):
        chain(index, "nowhere")


def test_a_cycle_ends_and_a_long_chain_stops_at_max_steps():
    loop = "* A\n:PROPERTIES:\n:ID: a\n:SUPERSEDES: b\n:END:\n* B\n:PROPERTIES:\n:ID: b\n:SUPERSEDES: a\n:END:\n"
    found = chain(index_of({"loop.org": loop}), "a")
    assert [s.id for s in found.earlier] == ["b"] and [s.id for s in found.later] == ["b"]
    long = "".join(f"* Item {n}\n:PROPERTIES:\n:ID: i{n}\n:SUPERSEDES: i{n + 1}\n:END:\n" for n in range(MAX_STEPS + 20))
    assert len(chain(index_of({"long.org": long}), "i0").earlier) == MAX_STEPS


def test_what_a_headline_says_of_itself():
    headlines = {o.title: o for o in parse(MEMORY + NOTES).objects if isinstance(o, Headline)}
    assert named(headlines["Postgres 16"]) and named(headlines["Postgres 18 is planned"])
    assert not named(headlines["Postgres 17"]) and not named(headlines["Unrelated"])
    assert validity_text(headlines["Postgres 16"]) == ("valid 2026-10-01 – 2026-11-03 14:00; supersedes db-15; "
                                                        "superseded by db-17")
    assert validity_text(headlines["Unrelated"]) == ""
