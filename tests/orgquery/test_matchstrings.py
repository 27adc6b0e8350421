"""Org match strings: each form compiled by hand, mistakes said in one line, read in linear time (the same
headlines as Emacs on every file: tests/oracle/test_emacs_match_strings.py)."""

from __future__ import annotations

import random
import re

import pytest

from cortex.backends import open_store
from cortex.orgquery import Index, QueryError, parse_query
from cortex.orgquery.matchstrings import _read_term, compile_match, emacs_regexp
from tests.linear import finishes
from cortex.orgquery.predicates import And, Level, Not, Or, Property, Tags, TagsRegexp, Todo
from tests.orgquery.test_predicates import data_files, tree_of


@pytest.mark.parametrize("text, predicate", [
    ("work", Tags(("work",))),
    ("+work-home", And((Tags(("work",)), Not(Tags(("home",)))))),
    (":work&-home", And((Tags(("work",)), Not(Tags(("home",)))))),
    ("work|home", Or((Tags(("work",)), Tags(("home",))))),
    ("-ARCHIVE", Not(Tags(("ARCHIVE",)))),
    ("{^wo}", TagsRegexp(("^wo",))),
    ("LEVEL>1", Level(1, op=">")),
    ("LEVEL=<2", Level(2, op="<=")),
    ("+work-home/TODO", And((And((Tags(("work",)), Not(Tags(("home",))))), Todo(("TODO",))))),
    ("/TODO|NEXT", Or((Todo(("TODO",)), Todo(("NEXT",))))),
    ("/-DONE", Not(Todo(("DONE",)))),
    ("/!", Todo()),
    ("work/!NEXT", And((Todo(), Tags(("work",)), Todo(("NEXT",))))),
    ("/{^W}", Property("TODO", "~", "^W", "regexp")),
    ('PRIORITY="A"', Property("PRIORITY", "=", "A")),
    ('Effort<"1:00"', Property("Effort", "<", "1:00")),
    ("SIZE>=3.5", Property("SIZE", ">=", 3.5, "number")),
    ("SIZE<1e1", Property("SIZE", "<", 10.0, "number")),
    ("TODO={NEXT\\|WAITING}", Property("TODO", "~", "NEXT|WAITING", "regexp")),
    ("ROLE<>{^l}", Property("ROLE", "!~", "^l", "regexp")),
    ('PRIORITY="A"+Effort<"1:00"', And((Property("PRIORITY", "=", "A"), Property("Effort", "<", "1:00")))),
    ('DUE<"<2026-11-23 Mon 10:00>"', Property("DUE", "<", __import__("datetime").datetime(2026, 11, 23, 10), "time")),
    ("", And(())),
    ("a/b/TODO", And((Tags(("a",)), Todo(("b",)), Todo(("TODO",))))),
])
def test_each_form_compiles_to_the_predicates_it_means(text, predicate):
    if text == "a/b/TODO":  # the TODO part starts after the last slash: `a/b` is a tag and an unreadable `/b`
        with pytest.raises(QueryError, match="cannot read '/b' at column 2"):
            compile_match(text)
        return
    assert compile_match(text) == predicate


def test_a_match_string_and_a_predicate_form_find_the_same():
    store = open_store(None)
    index = Index(store)
    index.follow(tree_of(store, data_files()))

    def titles(query, match):
        return [n.title for n in index.nodes(parse_query(query, match=match))]

    assert titles("+security-ops/TODO|NEXT", True) == titles(
        '(and (tags "security") (not (tags "ops")) (todo "TODO" "NEXT"))', False) == [
        "Ask Dana about keys", "Audit the webhook secrets", "Hidden under a comment"]
    assert titles('CATEGORY="prose"+LEVEL=2', True) == ["Draft the query chapter", "Ideas"]
    assert titles("TIMESTAMP_IA<\"<2026-11-15>\"", True) == ["Pen test report"]


@pytest.mark.parametrize("text, message", [
    ("SIZE!=12", "match string 'SIZE!=12': cannot read '!=12' at column 5"),
    ("work home", "cannot read ' home' at column 5"),
    ("LEVEL<<2", "'<<' is no comparator"),
    ('DUE<"<someday>"', "'<someday>' is not a time"),
    ("{\\(a\\)\\1}", "back-references"),
    ("{[a}", "a bracket is not closed"),
])
def test_a_bad_match_string_says_what_and_where(text, message):
    with pytest.raises(QueryError) as caught:
        compile_match(text)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("emacs, re2", [
    ("\\(a\\|b\\)", "(a|b)"),
    ("\\(?:a\\|b\\)c", "(?:a|b)c"),
    ("(a|b){2}", "\\(a\\|b\\)\\{2\\}"),
    ("a\\{2,3\\}", "a{2,3}"),
    ("\\<Org\\>", "\\bOrg\\b"),
    ("\\_<x\\_>", "\\bx\\b"),
    ("\\`a\\'", "\\Aa\\z"),
    ("a\\s-b\\Sw", "a\\sb\\W"),
    ("[]a\\]", "[\\]a\\\\]"),
    ("[[:digit:]x]", "[[:digit:]x]"),
    ("a^b$c", "a\\^b\\$c"),
    ("^a$", "^a$"),
    ("\\.\\*", "\\.\\*"),
])
def test_emacs_regexps_read_as_emacs_reads_them(emacs, re2):
    assert emacs_regexp(emacs) == re2


# The term regexp of org-make-tags-matcher (Org 9.5), which the tokenizer reads as: it backtracks over every split
# of a word into `\w+` runs (a 32-letter tag took minutes), so it is kept here only to compare with, on short text.
ORG_TERM = re.compile(
    r"&?(?P<sign>[-+:])?"
    r"(?P<token>\{[^}]+\}"
    r"|LEVEL(?P<level_op>[<=>]{1,2})(?P<level>[0-9]+)"
    r"|(?P<name>(?:\w+(?:\\-)*)+)(?P<op>[<>=]{1,2})"
    r"(?P<value>\{[^}]+\}|\"[^\"]*\"|-?[.0-9]+(?:[eE][-+]?[0-9]+)?)"
    r"|[\w@#%]+)"
)


def test_the_tokenizer_reads_each_term_as_orgs_regexp():
    rng = random.Random(37)
    pieces = ["a", "B", "_", "é", "1", ".", "e", "-", "+", ":", "&", "{", "}", '"', "<", ">", "=", "\\-", "\\",
              "LEVEL", "@", "#", "%", " ", "x9"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 10)))
        for pos in range(len(text)):
            theirs, ours = ORG_TERM.match(text, pos), _read_term(text, pos)
            assert (ours and (ours.sign, ours.token, ours.end, ours.level_op, ours.level, ours.name, ours.op,
                              ours.value)) == (theirs and (theirs["sign"], theirs["token"], theirs.end(),
                                                           theirs["level_op"], theirs["level"], theirs["name"],
                                                           theirs["op"], theirs["value"])), (text, pos)


@pytest.mark.parametrize("text", [
    "security+project_infrastructure_migration" + "x" * 100_000,
    "+".join(["w" * 40] * 5_000) + "/TODO|NEXT",
    "A" + "\\-" * 50_000 + '="x"',
    "{" + "a\\|" * 50_000 + "}",
    "-" * 100_000,
])
def test_a_long_match_string_reads_in_linear_time(text):
    try:
        finishes(compile_match, text)
    except QueryError as exc:
        assert len(str(exc)) < 400


def test_timestamp_is_the_first_one_org_element_sees():
    store = open_store(None)
    index = Index(store)
    index.follow(tree_of(store, {"a.org": "* Verbatim =<2026-03-31 Tue>=\n* Glued <2026-03-31T10:00>\n"
                                          "* Link [[x][<2026-03-31 Tue>]]\n* Code ~[2026-03-31 Tue]~\n"
                                          "* Plain\n  ~<2026-01-01 Thu>~ then <2026-03-31 Tue> [2026-03-30 Mon]\n"}))
    assert [n.title for n in index.nodes(parse_query('TIMESTAMP="<2026-03-31 Tue>"', match=True))] == ["Plain"]
    assert [n.title for n in index.nodes(parse_query('TIMESTAMP_IA<>""', match=True))] == ["Plain"]
