"""Org text nobody checked (a webhook's payload routed into a daily log, a file someone sent) costs time linear in
its length to query, however it is made: no regexp of the queries, the agenda or the links backtracks over it."""

import pytest

import cortex.api as cx
from tests.linear import finishes

HOSTILE = "\n".join([
    "#+FILETAGS: a" + " " * 100_000 + "b",
    "* Links [[" + "\\" * 100_000,
    "* Dates [2026-11-20 Fri 10:00" + " +1d" * 25_000,  # an unclosed timestamp: no timestamp
    "* Tags x" + " " * 100_000 + "y :t:",
    "*" * 30_000 + " Deep [#A] " + "[#" * 30_000,
    "* Far <9999-12-31 Fri +99999999999d> <0001-01-01 Mon .+99999999999y> <0000-00-00 Mon> <9999-13-45 Fri>",
    "DEADLINE: <9999-12-31 Fri -99999999999d> SCHEDULED: <0001-01-01 Mon -99999999999w>",
    ":PROPERTIES:\n:DUE: <9999-12-99>\n:WHEN: <0000-01-01>\n:END:",
    "* TODO [#A] Fine <2026-11-20 Fri> [[id:x][a link]] :ok:",
    "",
])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "org").mkdir()
    (folder / "org" / "hostile.org").write_text(HOSTILE)
    with cx.open(folder / "store", folder / "org") as c:
        c.ingest()
        yield c


@pytest.mark.parametrize("query", ['(ts :from "2026-11-01")', '(links-to "x")', '(priority "A")', "+ok/TODO",
                                   '(tags "a")', '(heading "Fine")', '(regexp "Fine")', 'DUE<"<today>"|WHEN>"<today>"|ok',
                                   '(or (deadline auto) (scheduled :to "+10000d") (closed) (ts-active) (tags "ok"))'])
def test_queries_over_hostile_text_end(store, query):
    assert any(n.title.startswith("Fine") for n in finishes(store.query, query))


def test_the_agenda_links_and_backlinks_over_hostile_text_end(store):
    assert "Fine" in str(finishes(store.agenda, 7, "2026-11-18"))
    assert "Fine" not in str(finishes(store.agenda, 3, "9999-12-29"))
    assert [b.link.target for b in finishes(store.broken_links)] == ["x"]
