"""Links as Org reads them, where they lead, backlinks as org-roam lists them, broken id links;
through the api, the CLI and the REPL."""

import random
import re

import pytest
from click.testing import CliRunner

import cortex.api as cx
import cortex.repl.agenda_forms  # noqa: F401 - registers the forms
from cortex import org
from cortex.cli.agenda import backlinks as backlinks_command, links as links_command
from cortex.errors import NotFound
from cortex.objects import Headline
from cortex.org.inline import enclosing
from cortex.orgquery.links import LINK_TYPES, Link, headline_links, link_key, links_in, resolve, target_index
from tests.linear import finishes
from tests.repl.test_core import Transcript

# What Emacs 28.2's org-element reads in this line (type, path, search option, description), checked by hand
# with `org-element-map ... 'link` and org-id, ol-doi loaded.
EMACS_LINE = ("see [[id:abc-1][the plan]] and [[file:notes/x.org::*Big plans][x]] https://orgmode.org/manual. "
              "<https://a.b/c d> [[*Heading]] [[#cid]] [[(ref)]] [[./a.org]] [[~/b.org::12]] [[file+sys:/tmp/x.pdf]] "
              "mailto:me@x.org doi:10.1000/x [[https://w.org/a_(b)][desc [x]]] [[a\\[b\\]c]] id:plain-id, "
              "wikipedia:foo http://x.org/(paren) file:notes.org")
EMACS_LINKS = [
    ("id", "abc-1", None, "the plan"), ("file", "notes/x.org", "*Big plans", "x"),
    ("https", "//orgmode.org/manual", None, None), ("https", "//a.b/c d", None, None),
    ("fuzzy", "*Heading", None, None), ("custom-id", "cid", None, None), ("coderef", "ref", None, None),
    ("file", "./a.org", None, None), ("file", "~/b.org", "12", None), ("file", "/tmp/x.pdf", None, None),
    ("mailto", "me@x.org", None, None), ("doi", "10.1000/x", None, None),
    ("https", "//w.org/a_(b)", None, "desc [x"), ("fuzzy", "a[b]c", None, None), ("id", "plain-id", None, None),
    ("http", "//x.org/(paren)", None, None), ("file", "notes.org", None, None),
]

PROJECTS = """\
:PROPERTIES:
:ID: file-projects
:END:
#+title: Projects
Before the first headline: [[id:task-b][B]] and [[id:missing-in-preamble]].

* Plans
:PROPERTIES:
:ID: plans
:CUSTOM_ID: the-plans
:END:
** TODO [1/2] Task A
See [[id:task-b][task B]], [[*Plans]] and [[#the-plans]].
#+begin_src org
[[id:in-a-block]]
#+end_src
** Task B
:PROPERTIES:
:ID: task-b
:SEE: [[id:in-a-drawer]]
:END:
Back to [[file:projects.org::*Task A]] and https://orgmode.org.
Broken: [[id:nowhere]]
"""
DEEP = """\
* Deep
Up: [[file:../projects.org::*Plans][plans]], [[file:../projects.org]], [[file:../projects.org::#the-plans]],
[[id:file-projects]], [[file:../projects.org::Task B]], [[id:plans]], [[file:../elsewhere.org::*Plans]]
[[file:{root}/notes/projects.org::*Plans]] [[file:/far/away/notes/projects.org::*Plans]]
"""


def test_links_are_read_as_emacs_reads_them():
    assert [(l.kind, l.target, l.search, l.description) for l in links_in(EMACS_LINE)] == EMACS_LINKS


def test_a_headlines_links_skip_blocks_drawers_and_comments_and_count_lines():
    (h,) = [o for o in org.parse("* Title with [[id:t]]\n  SCHEDULED: <2026-11-23 Mon>\n"
                                     "  :PROPERTIES:\n  :SEE: [[id:p]]\n  :END:\n"
                                     "  # [[id:c]] a comment\n  #+begin_example\n  [[id:e]]\n  #+end_example\n"
                                     "  text [[id:x][X]]\n").objects if isinstance(o, Headline)]
    assert headline_links(h) == (Link("id", "t", None, None, 0, "[[id:t]]"),
                                 Link("id", "x", None, "X", 9, "[[id:x][X]]"))


@pytest.mark.parametrize("link, source, key", [
    ("[[id:x]]", "a.org", ("id", "x")),
    ("[[file:b.org]]", "notes/a.org", ("file", "notes/b.org")),
    ("[[file:../b.org::*Big  plans \\[2/3\\]]]", "notes/a.org", ("heading", "b.org", ("Big", "plans"))),
    ("[[./b.org::#cid]]", "notes/a.org", ("custom-id", "notes/b.org", "cid")),
    ("[[file:b.org::42]]", "a.org", ("file", "b.org")),
    ("[[file:b.org::/re/]]", "a.org", ("file", "b.org")),
    ("[[*Some heading]]", "n/a.org", ("heading", "n/a.org", ("Some", "heading"))),
    ("[[#cid]]", "a.org", ("custom-id", "a.org", "cid")),
    ("[[file:/org/n/b.org]]", "a.org", ("file", "n/b.org")),
    ("[[file:/elsewhere/b.org]]", "a.org", None),
    ("[[file:../../b.org]]", "n/a.org", None),
    ("https://orgmode.org", "a.org", None),
])
def test_where_a_link_leads(link, source, key):
    (found,) = links_in(link)
    assert link_key(found, source, "/org") == key


@pytest.fixture
def notes(tmp_path):
    org = tmp_path / "org"
    (org / "notes" / "sub").mkdir(parents=True)
    (org / "notes" / "projects.org").write_text(PROJECTS)
    (org / "notes" / "sub" / "deep.org").write_text(DEEP.format(root=org))
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        yield c


def where(found) -> list[tuple[str, int, str]]:
    return [(b.path, b.link_line, b.link.raw) for b in found]


def test_backlinks_of_a_headline_by_id_heading_and_custom_id(notes):
    found = notes.backlinks("plans")
    assert where(found) == [
        ("notes/projects.org", 13, "[[*Plans]]"),
        ("notes/projects.org", 13, "[[#the-plans]]"),
        ("notes/sub/deep.org", 2, "[[file:../projects.org::*Plans][plans]]"),
        ("notes/sub/deep.org", 2, "[[file:../projects.org::#the-plans]]"),
        ("notes/sub/deep.org", 3, "[[id:plans]]"),
        ("notes/sub/deep.org", 4, f"[[file:{notes.root}/notes/projects.org::*Plans]]"),
    ]
    assert [b.title for b in found] == ["[1/2] Task A", "[1/2] Task A", "Deep", "Deep", "Deep", "Deep"]
    assert notes.show(found[2]).startswith("* Deep\n")  # a backlink is a node: every form takes it
    assert where(notes.backlinks(notes.lookup("task-b"))) == [
        ("notes/projects.org", 5, "[[id:task-b][B]]"),  # held by the file, before its first headline
        ("notes/projects.org", 13, "[[id:task-b][task B]]"),
        ("notes/sub/deep.org", 3, "[[file:../projects.org::Task B]]"),
    ]
    task_a = notes.find(text="Task A")[0]
    assert where(notes.backlinks(task_a.oid)) == [("notes/projects.org", 22, "[[file:projects.org::*Task A]]")]


def test_backlinks_of_a_file_by_path_or_by_its_id(notes):
    expected = [("notes/sub/deep.org", 2, "[[file:../projects.org]]"),
                ("notes/sub/deep.org", 3, "[[id:file-projects]]")]
    assert where(notes.backlinks("notes/projects.org")) == expected
    assert where(notes.backlinks("file-projects")) == expected


def test_backlinks_follow_each_edit_of_a_session(notes):
    """Read from the query index the session keeps, brought in line with each edit: a link added in a new file,
    an absolute one among them, and the links before a file's first headline removed."""
    assert len(notes.backlinks("task-b")) == 3
    new = notes.root / "notes" / "new.org"
    new.write_text(f"* New\n[[id:task-b]] [[file:{notes.root}/notes/projects.org::*Task B]]\n")
    notes.ingest()
    assert where(notes.backlinks("task-b"))[:2] == [
        ("notes/new.org", 2, "[[id:task-b]]"), ("notes/new.org", 2, f"[[file:{notes.root}/notes/projects.org::*Task B]]")]
    projects = notes.root / "notes" / "projects.org"
    projects.write_text(PROJECTS.replace("Before the first headline: [[id:task-b][B]] and", "Before:"))
    notes.ingest()
    assert [b.path for b in notes.backlinks("task-b")] == ["notes/new.org", "notes/new.org", "notes/projects.org",
                                                          "notes/sub/deep.org"]


def test_links_of_a_headline_and_of_a_file(notes):
    assert [l.raw for l in notes.links("task-b")] == ["[[file:projects.org::*Task A]]", "https://orgmode.org",
                                                       "[[id:nowhere]]"]
    assert [(l.kind, l.line) for l in notes.links("notes/projects.org")] == [("id", 4), ("id", 4)]
    with pytest.raises(NotFound, match="no headline with :ID: nobody"):
        notes.links("nobody")


def test_broken_id_links_with_file_and_line(notes):
    assert [str(b) for b in notes.broken_links()] == [
        "notes/projects.org:5: (file)  [[id:missing-in-preamble]]",
        "notes/projects.org:23: Plans / Task B  [[id:nowhere]]",
    ]


def test_resolving_a_link_to_its_targets(notes):
    files = list(notes._org_files(None))
    index = target_index(files)
    deep = files[1]
    up, file_, custom, file_id, text, plans, elsewhere = headline_links(deep.nodes[0].headline)[:7]
    assert [n.title for n in resolve(up, deep.path, index)] == ["Plans"]
    assert resolve(file_, deep.path, index) == resolve(file_id, deep.path, index) == ["notes/projects.org"]
    assert [n.title for n in resolve(custom, deep.path, index)] == ["Plans"]
    assert [n.title for n in resolve(text, deep.path, index)] == ["Task B"]
    assert resolve(elsewhere, deep.path, index) == []


def test_links_of_a_snapshot(notes):
    notes.snapshot("before")
    path = notes.root / "notes" / "projects.org"
    path.write_text(PROJECTS.replace("Broken: [[id:nowhere]]\n", ""))
    notes.ingest()
    assert len(notes.broken_links()) == 1 and len(notes.broken_links(as_of="HEAD")) == 2


def invoke(command, notes, *args):
    return CliRunner().invoke(command, [*args, "--store", notes.location])


def test_the_commands(notes):
    notes.close()  # a store is opened once per process
    shown = invoke(links_command, notes, "task-b")
    assert shown.exit_code == 0 and shown.output.splitlines() == [
        "22: file projects.org::*Task A", "22: https //orgmode.org", "23: id nowhere"]
    assert invoke(links_command, notes, "notes/projects.org").output.splitlines()[0] == "5: id task-b  [B]"
    back = invoke(backlinks_command, notes, "notes/projects.org")
    assert back.exit_code == 0 and back.output.splitlines() == [
        "notes/sub/deep.org:2: Deep  [[file:../projects.org]]", "notes/sub/deep.org:3: Deep  [[id:file-projects]]",
        "2 backlinks"]
    broken = invoke(links_command, notes, "--broken")
    assert broken.exit_code == 1 and "notes/projects.org:23: Plans / Task B  [[id:nowhere]]" in broken.output
    assert invoke(links_command, notes).exit_code == 2  # neither a node nor --broken


def test_the_forms(notes):
    notes.close()
    repl = Transcript(notes.location, notes.root)
    try:
        assert "nowhere" in repl('(links "task-b")')
        assert "Deep" in repl('(backlinks "plans")') and repl.ok
        assert "** TODO [1/2] Task A" in repl('(show (first (backlinks "plans")))')
        assert "Plans / Task B  [[id:nowhere]]" in repl('(str (last (broken-links)))')
        assert "(backlinks node [:as-of None])" in repl("(help backlinks)")
    finally:
        repl.session.close()


# org-link-bracket-re, org-link-angle-re and org-link-plain-re as one backtracking regexp, as links were read
# before: kept only to compare with on short text, as a run of backslashes after "[[" makes it take exponential time.
_TYPES = "|".join(re.escape(t) for t in sorted(LINK_TYPES, key=len, reverse=True))
_NSB = r"[^\]\[ \t\n()<>]"
_PARENS = rf"\((?:{_NSB}|\({_NSB}*\))*\)"
_PUNCT = re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
ORG_LINK = re.compile(
    r"\[\[(?P<path>(?:[^\]\[\\]|\\(?:\\\\)*[\]\[]|\\+[^\]\[])+)\](?:\[(?P<description>.+?)\])?\]"
    rf"|<(?P<angle_type>{_TYPES}):(?P<angle_path>[^>\n]*)>"
    rf"|\b(?P<plain_type>{_TYPES}):(?P<plain_path>(?:{_NSB}|{_PARENS})+"
    rf"(?:[^{_PUNCT}\s]|/|{_PARENS}))")


def test_links_are_found_where_orgs_regexps_find_them():
    rng = random.Random(37)
    pieces = ["[", "]", "\\", "a", "<", ">", ":", " ", "http:", "[[", "]]", "\\\\", "(", ")", "é", "/", "id:"]
    for _ in range(30_000):
        line = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        if not enclosing(line):  # the regexps know no italics (the next test)
            assert [link.raw for link in links_in(line)] == [m[0] for m in ORG_LINK.finditer(line)], line


# What Emacs 28.2's org-element reads (org-id loaded): no link inside verbatim, code, a macro, an export snippet
# or a target; one inside bold or italic ends where they do.
HIDDEN = [
    ("see =[[id:in-verbatim]]= and ~https://in.code/x~ then *[[id:in-bold][b]]* and {{{m([[id:in-macro]])}}} "
     "@@html:[[id:in-snippet]]@@ <<[[id:in-target]]>> /https://in.italic/ [[id:out][=verb= desc]] =a= "
     "[[id:after]] ~x~https://glued.org",
     ["[[id:in-bold][b]]", "https://in.italic", "[[id:out][=verb= desc]]", "[[id:after]]", "https://glued.org"]),
    ("/id:id: ]id::http:/", ["id:id", "id::http"]),
    ("/see https://a.org/b/ and https://c.org/", ["https://a.org/b", "https://c.org/"]),
    ("*x https://d.org/e*", ["https://d.org/e"]),
]


@pytest.mark.parametrize("line, raw", HIDDEN)
def test_no_link_where_emacs_reads_none(line, raw):
    assert [link.raw for link in links_in(line)] == raw


@pytest.mark.parametrize("line", [
    "[[" + "\\" * 100_000,
    "[[" + "\\\\\\]" * 30_000,
    "[[a][" + "[[" * 50_000,
    "x " + "\\" * 100_000 + " [[a]]",
    "[[" + "a\\]" * 50_000 + "]",
])
def test_a_long_line_of_brackets_and_backslashes_reads_in_linear_time(line):
    finishes(links_in, line)
