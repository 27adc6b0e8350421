"""orgquery predicates: every predicate on hand-checked Org files, index == scan == test, errors, the API,
the CLI and the REPL.

The files are tests/data/orgquery/ (tasks.org, notes/people.org, odd.org); dates count from Monday
2026-11-23. Each expected list was worked out by reading the files, in file and document order.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

import cortex.api as cx
from cortex import org
from cortex.backends import open_store
from cortex.objects import Tree
from cortex.orgquery import Index, QueryError, parse_query, scan

DATA = Path(__file__).resolve().parents[1] / "data" / "orgquery"
TODAY = date(2026, 11, 23)


def tree_of(store, files: dict[str, str]) -> Tree:
    """A tree of Org texts by path, its objects added to `store`."""
    entries = {}
    for path, text in files.items():
        parsed = org.parse(text)
        store.objects.add_many(parsed.objects)
        entries[path] = parsed.document.oid
    tree = Tree(entries)
    store.objects.add(tree)
    return tree


def data_files() -> dict[str, str]:
    return {p.relative_to(DATA).as_posix(): p.read_text() for p in sorted(DATA.rglob("*.org"))}


@pytest.fixture(scope="module")
def index():
    store = open_store(None)
    found = Index(store)
    found.follow(tree_of(store, data_files()))
    return found


def titles(index: Index, query) -> list[str]:
    return [node.title for node in index.nodes(parse_query(query, today=TODAY))]


PEOPLE = ["Dana", "Ask Dana about keys", "Eli", "Lunch with Eli", "Reading list", "Archive", "Forgotten task"]
ODD = ["Top level", "Second level, three stars", "Third level", "Another second, no keyword",
       "Priority without keyword", "Finished thing"]

CASES = [
    # TODO keywords: none = not done (each file's own setup), done = after `|`
    ('(todo)', ["Ask Dana about keys", "Forgotten task", "Second level, three stars", "Third level",
                "Rotate the deploy keys", "Audit the webhook secrets", "Pen test report", "Draft the query chapter",
                "Examples for match strings", "Hidden under a comment"]),
    ('(todo "NEXT" "WAITING")', ["Audit the webhook secrets", "Pen test report"]),
    ('(done)', ["Lunch with Eli", "Finished thing", "Remove the old tokens", "Old outline"]),
    # tags: inherited from ancestors and #+FILETAGS, own only, inherited only, all of them, regexps
    ('(tags "security")', ["Ask Dana about keys", "Security review", "Rotate the deploy keys",
                           "Audit the webhook secrets", "Remove the old tokens", "Pen test report",
                           "Hidden under a comment"]),
    ('(tags "dana")', ["Dana", "Ask Dana about keys"]),
    ('(tags-all "security" "ops")', ["Rotate the deploy keys", "Remove the old tokens"]),
    ('(tags-local "ops")', ["Rotate the deploy keys", "Remove the old tokens"]),
    ('(tags-inherited "writing")', ["Draft the query chapter", "Old outline", "Examples for match strings", "Ideas"]),
    ('(not (tags "proj"))', PEOPLE + ODD),
    ('(tags-regexp "^ex")', ["Pen test report", "Examples for match strings"]),
    ('(tags-regexp "^ARCH")', ["Archive", "Forgotten task", "Old outline"]),
    ('(tags-local)', ["Dana", "Ask Dana about keys", "Eli", "Archive", "Top level", "Second level, three stars",
                      "Third level", "Security review", "Rotate the deploy keys", "Remove the old tokens",
                      "Pen test report", "Writing", "Old outline", "Examples for match strings",
                      "Hidden under a comment"]),
    # properties: present, equal, inherited, compared as Org compares (strings, numbers, times), regexps
    ('(property "OWNER")', ["Security review", "Audit the webhook secrets"]),
    ('(property "owner" "dana")', ["Security review"]),
    ('(property "OWNER" "dana" :inherit t)', ["Security review", "Rotate the deploy keys", "Remove the old tokens",
                                             "Pen test report"]),
    ('(property "Effort" > "0:45")', ["Security review", "Audit the webhook secrets", "Draft the query chapter"]),
    ('(property "SIZE" >= 3.5)', ["Second level, three stars", "Third level"]),
    ('(property "SIZE" < 0)', ["Another second, no keyword"]),
    ('(property "WHEN" > "<2026-11-24>")', ["Third level"]),
    ('(property "ROLE" :regexp "^L")', ["Dana"]),
    ('(property "CATEGORY" "prose")', ["Writing", "Draft the query chapter", "Old outline",
                                       "Examples for match strings", "Ideas"]),
    # priority cookies (A is the highest), levels (reduced under #+STARTUP: odd)
    ('(priority)', ["Priority without keyword", "Finished thing", "Rotate the deploy keys",
                    "Audit the webhook secrets", "Pen test report", "Examples for match strings"]),
    ('(priority "A")', ["Rotate the deploy keys", "Examples for match strings"]),
    ('(priority >= "B")', ["Priority without keyword", "Rotate the deploy keys", "Audit the webhook secrets",
                           "Examples for match strings"]),
    ('(priority < "B")', ["Finished thing", "Pen test report"]),
    ('(level 1)', ["Dana", "Eli", "Archive", "Top level", "Priority without keyword", "Finished thing",
                   "Security review", "Writing", "Scratch"]),
    ('(level > 2)', ["Third level", "Old outline", "Examples for match strings"]),
    ('(level 3 9)', ["Third level", "Old outline", "Examples for match strings"]),
    # heading text, regexps of the title or the whole entry (a bare string is a regexp), path, category
    ('(heading "dana")', ["Dana", "Ask Dana about keys"]),
    ('(heading "the" "KEYS")', ["Rotate the deploy keys"]),
    ('(heading-regexp "^(audit|rotate) ")', ["Rotate the deploy keys", "Audit the webhook secrets"]),
    ('(regexp "example\\\\.com/audit")', ["Audit the webhook secrets"]),
    ('(and "deploy keys" (todo))', ["Rotate the deploy keys"]),
    ('(path "notes")', PEOPLE),
    ('(path "notes/*.org" "odd.org")', PEOPLE + ODD),
    ('(category "people")', PEOPLE),
    # relatives
    ('(parent (tags "writing"))', ["Draft the query chapter", "Old outline", "Examples for match strings", "Ideas"]),
    ('(ancestors (todo "TODO"))', ["Old outline", "Examples for match strings"]),
    ('(children (done))', ["Eli", "Security review", "Draft the query chapter"]),
    ('(descendants (tags "deep"))', ["Top level", "Second level, three stars"]),
    ('(children)', ["Dana", "Eli", "Archive", "Top level", "Second level, three stars", "Security review",
                    "Writing", "Draft the query chapter", "Scratch"]),
    # dates, from Monday 2026-11-23
    ('(scheduled :on "today")', []),
    ('(scheduled :to "today")', ["Forgotten task", "Rotate the deploy keys"]),
    ('(scheduled :from "today" :to "+7d")', ["Examples for match strings"]),
    ('(scheduled 7)', ["Forgotten task", "Rotate the deploy keys", "Examples for match strings"]),
    ('(deadline :to "+7d")', ["Rotate the deploy keys", "Pen test report"]),
    ('(deadline :from today)', ["Rotate the deploy keys"]),
    ('(deadline auto)', ["Rotate the deploy keys", "Pen test report"]),
    ('(closed :from "2026-11-19")', ["Lunch with Eli"]),
    ('(closed -7)', ["Lunch with Eli", "Remove the old tokens"]),
    ('(ts :on "2026-11-23")', ["Second level, three stars", "Pen test report"]),
    ('(ts-active :from "2027-03-03" :to "2027-03-04")', ["Ideas"]),
    ('(ts-inactive :to "2026-11-12")', ["Pen test report"]),
    ('(ts-inactive :on "2026-11-18")', ["Remove the old tokens"]),
    ('(planning :on "2026-11-21")', ["Pen test report"]),
    ('(clocked)', ["Remove the old tokens", "Draft the query chapter"]),
    ('(clocked :on "2026-11-17")', ["Draft the query chapter"]),
    ('(clocked :min "2:00")', ["Remove the old tokens", "Draft the query chapter"]),
    ('(clocked :from "2026-11-17" :min "2:00")', ["Remove the old tokens"]),
    # links, both ways
    ('(links-to "sec-review")', ["Dana", "Ask Dana about keys"]),
    ('(links-to "id:team-dana")', ["Rotate the deploy keys"]),
    ('(links-to "https://example.com/audit")', ["Audit the webhook secrets"]),
    ('(links-to "notes/people.org")', ["Audit the webhook secrets"]),
    ('(links-to (heading "Writing"))', ["Reading list"]),
    ('(links-to (property "CUSTOM_ID" "eli"))', ["Audit the webhook secrets"]),
    ('(linked-from "team-dana")', ["Security review"]),
    ('(linked-from (heading "Reading"))', ["Writing"]),
    # and, or, not
    ('(and (todo "TODO") (tags "security") (deadline :to "+7d"))', ["Rotate the deploy keys"]),
    ('(or (todo "NEXT") (tags "dana"))', ["Dana", "Ask Dana about keys", "Audit the webhook secrets"]),
    ('(todo "TODO") (not (tags "security"))', ["Forgotten task", "Third level", "Draft the query chapter",
                                              "Examples for match strings"]),
]


@pytest.mark.parametrize("query, expected", CASES, ids=[q for q, _ in CASES])
def test_each_predicate_on_hand_checked_files(index, query, expected):
    assert titles(index, query) == expected


@pytest.mark.parametrize("query", [q for q, _ in CASES])
def test_the_index_the_scan_and_the_tests_agree(index, query):
    predicate = parse_query(query, today=TODAY)
    by_index = index.select(predicate)
    index._memo = {}
    assert set(by_index) == {row for row in index.rows if predicate.test(row, index)}
    assert [n.oid for n in index.nodes(predicate)] == [n.oid for n in scan(index.store, Tree(
        {path: state.document.oid for path, state in index.files.items()}), predicate)]


def test_nodes_say_where_they_are(index):
    [node] = index.nodes(parse_query('(heading "Examples for")'))
    assert (node.path, node.line, node.position) == ("tasks.org", 46, (1, 0, 1))
    assert node.outline == ("Writing", "Draft the query chapter", "Examples for match strings")
    assert node.headline.todo == "TODO" and node.headline.priority == "A"


def test_a_query_is_data_in_hy_text_and_python_lists_alike():
    text = '(and (todo "TODO") (tags "security") (deadline :to "+7d") (level > 1))'
    data = ["and", ["todo", "TODO"], ["tags", "security"], ["deadline", ":to", "+7d"], ["level", ">", 1]]
    assert parse_query(text, today=TODAY) == parse_query(data, today=TODAY)
    assert parse_query('(h "x") (tags& "a" "b") (ts-a :on "today")', today=TODAY) == parse_query(
        '(and (heading "x") (tags-all "a" "b") (ts-active :on "2026-11-23"))', today=TODAY)


@pytest.mark.parametrize("query, message", [
    ('(tagz "security")', 'query:1:1: unknown predicate (tagz "security"); known: ancestors, and, category,'),
    ('(and (todo)\n     (tagz 1))', "query:2:6: unknown predicate (tagz 1)"),
    ('(deadline :to "+7q")', "query:1:1: '+7q' is not a date; write today, tomorrow"),
    ('(scheduled :on "2026-02-30")', "'2026-02-30' is not a date"),
    ('(regexp "(")', "bad regexp '('"),
    ('(level "x")', "level takes N, LOW HIGH, or a comparator and N"),
    ('(and (todo "TODO"', "incomplete form"),
    ("", "empty query"),
    ('(property)', "property takes a name"),
    ('(property "X" like "y")', "like is not a comparator"),
    ('(property "WHEN" > "<someday>")', "'<someday>' is not a time"),
    ('(property "X" :inherit maybe)', ":inherit takes t or nil, not maybe"),
    ('(clocked :min "abc")', ':min takes minutes or H:MM, not "abc"'),
    ('(scheduled :min 5)', "scheduled takes no :min"),
    ('(deadline :to)', ":to has no value"),
    ('(links-to)', "links-to takes an :ID: or a query"),
    ('(not (todo) (done))', "not takes one query"),
    ('(priority "AB")', "priority takes letters"),
    ('42', "expected a predicate form such as (todo \"TODO\"), got 42"),
])
def test_a_mistake_says_what_and_where_in_one_line(query, message):
    with pytest.raises(QueryError) as caught:
        parse_query(query, match=False, today=TODAY)
    assert message in str(caught.value) and "\n" not in str(caught.value)


# --- the API, the CLI and the REPL ------------------------------------------------------------------


@pytest.fixture
def org_cortex(tmp_path):
    shutil.copytree(DATA, tmp_path / "org")
    with cx.open(tmp_path / "store", tmp_path / "org") as c:
        c.ingest()
        yield c


def test_any_query_runs_as_of_a_snapshot(org_cortex):
    c = org_cortex
    c.snapshot("before")
    path = c.root / "tasks.org"
    path.write_text(path.read_text().replace("** NEXT [#B] Audit", "** DONE [#B] Audit"))
    c.ingest()
    assert [n.title for n in c.query('(todo "NEXT")')] == []
    assert [n.title for n in c.query('(todo "NEXT")', as_of="HEAD")] == ["Audit the webhook secrets"]
    assert [n.title for n in c.query("/NEXT", as_of="HEAD")] == ["Audit the webhook secrets"]
    assert "Audit the webhook secrets" in [n.title for n in c.query("(done)")]
    node = c.query('(heading "Audit")', as_of="HEAD")[0]
    assert "** NEXT [#B] Audit" in c.show(node)  # nodes are what every other form takes
    assert c.query('(tags "security")', match=False) == c.query("security")


def test_the_cli_prints_a_table_and_a_mistake_in_one_line(tmp_path):
    from cortex.cli.query import query

    shutil.copytree(DATA, tmp_path / "org")
    where = ["--store", str(tmp_path / "store"), "--org", str(tmp_path / "org")]
    with cx.open(tmp_path / "store", tmp_path / "org") as c:
        c.ingest()
    runner = CliRunner()
    shown = runner.invoke(query, ['(and (todo "TODO") (tags "security"))', *where])
    assert shown.exit_code == 0, shown.output
    assert "tasks.org:11" in shown.output and "3 headlines" in shown.output
    shown = runner.invoke(query, ["+security-ops/TODO|NEXT", *where])
    assert "tasks.org:17" in shown.output and "3 headlines" in shown.output
    shown = runner.invoke(query, ["security", "--match", *where])
    assert "7 headlines" in shown.output
    failed = runner.invoke(query, ['(tagz "x")', *where])
    assert isinstance(failed.exception, QueryError) and "unknown predicate (tagz" in str(failed.exception)


def test_the_repl_reads_query_forms_as_data(tmp_path):
    import cortex.repl.query_forms  # noqa: F401 - registers (query) and (query-select)
    from tests.repl.test_core import Transcript

    shutil.copytree(DATA, tmp_path / "org")
    repl = Transcript(tmp_path / "store", tmp_path / "org")
    try:
        shown = repl('(query (todo "TODO") (tags "security") (deadline :to "+700d"))')
        assert "Rotate the deploy keys" in shown and "Hidden" not in shown
        assert "Audit the webhook secrets" in repl('(query "+security-ops/TODO|NEXT")')
        assert "Audit the webhook secrets" in repl("(setv q '(todo \"NEXT\")) (query-select q)")
        assert repl('(len (query (todo "NEXT") :as-of None))').strip() == "1"
        shown = repl('(query (tagz 1))')
        assert not repl.ok and "unknown predicate (tagz 1)" in shown
        assert "deadline :to" in repl("(help query)")
    finally:
        repl.session.close()


# --- validity: (valid) and (valid :at MOMENT) -------------------------------------------------------

VALIDITY = """\
* Facts
** Postgres 16                                                       :ARCHIVE:
:PROPERTIES:
:ID:            db-16
:VALID_FROM:    [2026-10-01 Thu]
:INVALID_AT:    [2026-11-03 Tue 14:00]
:SUPERSEDED_BY: db-17
:END:
** Postgres 17
:PROPERTIES:
:ID:            db-17
:VALID_FROM:    [2026-11-03 Tue 14:00]
:SUPERSEDES:    db-16
:END:
** Replaced by hand, when unknown
:PROPERTIES:
:superseded_by: db-17
:END:
** Not yet
:PROPERTIES:
:VALID_FROM:    [2099-01-01 Thu]
:END:
** Added in October
:PROPERTIES:
:ADDED:         [2026-10-10 Sat 10:00]
:END:
** Plain note
** A stamp that is none
:PROPERTIES:
:INVALID_AT:    someday
:END:
"""
VALID_CASES = [
    ("(valid)", ["Facts", "Postgres 17", "Added in October", "Plain note", "A stamp that is none"]),
    ('(valid :at "2026-10-15")', ["Facts", "Postgres 16", "Replaced by hand, when unknown", "Added in October",
                                  "Plain note", "A stamp that is none"]),
    ('(valid :at "2026-11-03 13:59")', ["Facts", "Postgres 16", "Replaced by hand, when unknown", "Added in October",
                                        "Plain note", "A stamp that is none"]),
    ('(valid :at "2026-11-03 14:00")', ["Facts", "Postgres 17", "Replaced by hand, when unknown", "Added in October",
                                        "Plain note", "A stamp that is none"]),
    ('(valid :at "2026-10-05")', ["Facts", "Postgres 16", "Replaced by hand, when unknown", "Plain note",
                                  "A stamp that is none"]),
    ("(not (valid))", ["Postgres 16", "Replaced by hand, when unknown", "Not yet"]),
    ('(and (heading "Postgres") (valid))', ["Postgres 17"]),
    ('(or (valid :at "2026-10-15") (heading "Not"))', ["Facts", "Postgres 16", "Replaced by hand, when unknown",
                                                        "Not yet", "Added in October", "Plain note",
                                                        "A stamp that is none"]),
    ('(not (valid :at "2026-10-15")) (level 2)', ["Postgres 17", "Not yet"]),
]


@pytest.fixture(scope="module")
def valid_index():
    store = open_store(None)
    found = Index(store)
    found.follow(tree_of(store, {"memory.org": VALIDITY}))
    return found


@pytest.mark.parametrize("query, expected", VALID_CASES, ids=[q for q, _ in VALID_CASES])
def test_valid_keeps_what_holds_now_or_then(valid_index, query, expected):
    assert titles(valid_index, query) == expected
    predicate = parse_query(query, today=TODAY)
    valid_index._memo = {}
    assert set(valid_index.select(predicate)) == {row for row in valid_index.rows if predicate.test(row, valid_index)}


def test_valid_follows_edits_as_a_rebuild_reads_them():
    store = open_store(None)
    index = Index(store)
    index.follow(tree_of(store, {"memory.org": VALIDITY}))
    assert titles(index, '(heading "Postgres") (valid)') == ["Postgres 17"]
    edited = VALIDITY.replace(":SUPERSEDES:    db-16\n", ":SUPERSEDES:    db-16\n:INVALID_AT:    [2026-11-20 Fri]\n")
    index.follow(tree_of(store, {"memory.org": edited}))
    assert titles(index, '(heading "Postgres") (valid)') == []
    assert titles(index, '(heading "Postgres") (valid :at "2026-11-10")') == ["Postgres 17"]
    fresh = Index(store)
    fresh.follow(tree_of(store, {"memory.org": edited}))
    for query, _ in VALID_CASES:
        assert titles(index, query) == titles(fresh, query)


@pytest.mark.parametrize("query, message", [
    ('(valid :at "next week")', "query:1:1: 'next week' is not a moment; write a day (today"),
    ('(valid "2026-11-01")', "valid takes no arguments"),
    ('(valid :on "2026-11-01")', "valid takes no :on"),
    ('(valid :at (todo))', "(todo) is not a moment"),
])
def test_a_bad_valid_says_what_and_where(query, message):
    with pytest.raises(QueryError) as caught:
        parse_query(query, today=TODAY)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_valid_at_reads_days_moments_and_numbers_of_days():
    from datetime import datetime

    from cortex.orgquery.predicates import Valid

    assert parse_query('(valid :at "2026-11-01 14:30")') == Valid(datetime(2026, 11, 1, 14, 30))
    assert parse_query("(valid :at -3)", today=TODAY) == Valid(date(2026, 11, 20))
    assert parse_query(["valid", ":at", "yesterday"], today=TODAY) == Valid(date(2026, 11, 22))
    assert parse_query("(valid)") == Valid()


def test_an_item_replaced_from_a_later_day_holds_until_then():
    store = open_store(None)
    index = Index(store)
    index.follow(tree_of(store, {"m.org": "* Old\n:PROPERTIES:\n:SUPERSEDED_BY: new\n:INVALID_AT: [2099-01-01 Thu]\n"
                                         ":END:\n* New\n:PROPERTIES:\n:ID: new\n:VALID_FROM: [2099-01-01 Thu]\n:END:\n"}))
    assert titles(index, "(valid)") == ["Old"]
    assert titles(index, '(valid :at "2099-01-02")') == ["New"]


def test_a_day_asked_about_is_the_whole_day(valid_index):
    # Postgres 16 stopped at 14:00 on 2026-11-03 and 17 started then: on that day both held
    assert titles(valid_index, '(heading "Postgres") (valid :at "2026-11-03")') == ["Postgres 16", "Postgres 17"]
    assert titles(valid_index, '(heading "Postgres") (valid :at "2026-11-03 09:00")') == ["Postgres 16"]
