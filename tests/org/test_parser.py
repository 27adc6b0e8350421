"""The Org parser (cortex.org): exact round trip, Emacs's reading of every headline, incremental parsing.

`tests/data/emacs_oracle.jsonl.gz` is Emacs 28.2 / Org 9.5.5's own parse (org-element) of every
headline of the shared corpus, made once by `tests/data/make_oracle.sh`.  Every case in
`EMACS_CASES` and `FILE_PROPERTIES` was checked against the same Emacs with
`../shared/corpus/oracle/org_oracle.sh`, which decodes a file as Emacs does when it visits
one (a UTF-8 byte-order mark is no text); most are files in `../shared/corpus/oracle/cases/`,
whose README says how to compare cortex's reading of them with Emacs's.
"""

from __future__ import annotations

import gzip
import random
import json
from pathlib import Path

import pytest

from cortex import org
from cortex.objects import Document, Headline

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
ORACLE = Path(__file__).resolve().parents[1] / "data" / "emacs_oracle.jsonl.gz"
FIELDS = ("level", "title", "todo", "priority", "tags", "properties", "id")
AGREEMENT = 0.999


def outline(parsed: org.Parsed) -> list[tuple[int, Headline]]:
    """Every headline in text order with its 1-based line number."""
    get = {o.oid: o for o in parsed.objects}.__getitem__
    line = 1 + parsed.document.preamble.count("\n")
    found = []
    pending = list(reversed(parsed.document.children))
    while pending:
        headline = get(pending.pop())
        found.append((line, headline))
        line += headline.raw.count("\n")
        pending.extend(reversed(headline.children))
    return found


def headlines(text: str) -> list[Headline]:
    return [h for _, h in outline(org.parse(text))]


def render(parsed: org.Parsed) -> str:
    return org.render(parsed.document, {o.oid: o for o in parsed.objects}.__getitem__)


# --- the corpus -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus() -> dict[str, tuple[str, org.Parsed]]:
    if not CORPUS.is_dir():
        pytest.skip(f"no Org corpus at {CORPUS}")
    files = sorted(p for p in CORPUS.rglob("*.org") if "oracle" not in p.parts)
    texts = {p.relative_to(CORPUS).as_posix(): p.read_bytes().decode("utf-8") for p in files}
    return {path: (text, org.parse(text)) for path, text in texts.items()}


def test_every_corpus_file_renders_back_byte_for_byte(corpus):
    assert len(corpus) >= 700
    wrong = [path for path, (text, parsed) in corpus.items() if render(parsed) != text]
    assert wrong == []


def test_headline_fields_agree_with_emacs(corpus):
    with gzip.open(ORACLE, "rt", encoding="utf-8") as fh:
        expected = {(r["file"], r["line"]): r for r in map(json.loads, fh)}
    ours = {}
    for path, (_, parsed) in corpus.items():
        for line, h in outline(parsed):
            ours[path, line] = {
                "level": h.level, "title": h.title, "todo": h.todo, "priority": h.priority,
                "tags": list(h.tags), "properties": [[k.upper(), v] for k, v in h.properties],
                "id": h.id,
            }
    positions = expected.keys() | ours.keys()
    rates = {}
    for name in FIELDS:
        agree = sum(1 for at in positions
                    if at in expected and at in ours and expected[at][name] == ours[at][name])
        rates[name] = agree / len(positions)
        print(f"{name:>10}: {agree}/{len(positions)} headlines agree with Emacs ({rates[name]:.3%})")
    assert len(positions) >= 13_000
    low = {name: f"{rate:.3%}" for name, rate in rates.items() if rate < AGREEMENT}
    examples = [(at, expected.get(at), ours.get(at)) for at in sorted(positions)
                if expected.get(at) != ours.get(at)][:5]
    assert not low, f"below {AGREEMENT:.1%}: {low}; first differences: {examples}"


# --- how Emacs reads headlines: each case checked against Emacs 28.2 / Org 9.5.5 --------------

EMACS_CASES = {
    "tab after the stars opens no headline": (
        "*\tTab\n* Space\n",
        [dict(title="Space")]),
    "a byte-order mark is no text: a headline on the first line is one, with its drawer": (
        "\ufeff* BOM\n:PROPERTIES:\n:ID: b1\n:END:\n* second\n",
        [dict(title="BOM", id="b1"), dict(title="second", id=None)]),
    "a byte-order mark is no text: #+TODO on the first line counts": (
        "\ufeff#+TODO: AAA | BBB\n* AAA x\n* BBB y\n",
        [dict(todo="AAA", title="x"), dict(todo="BBB", title="y")]),
    "a byte-order mark is no text: a src block opened on the first line hides #+TODO": (
        "\ufeff#+begin_src org\n#+TODO: AAA\n#+end_src\n* AAA x\n",
        [dict(todo=None, title="AAA x")]),
    "a byte-order mark is no text: a footnote definition may start the first line": (
        "\ufeff[fn:1] a\n#+begin_src\n#+TODO: AAA\n[fn:2] b\n#+end_src\n* AAA x\n",
        [dict(todo="AAA", title="x")]),
    "a headline inside a src block is still a headline": (
        "* a\n#+begin_src\n* inside src\n#+end_src\n",
        [dict(title="a"), dict(title="inside src")]),
    "COMMENT is not part of the title, even glued to a word (Org 9.5)": (
        "* COMMENTARY on x\n* COMMENT real\n* TODO COMMENT t\n* [#A]COMMENT p\n* COMMENT\n",
        [dict(title="ARY on x"), dict(title="real"), dict(title="t", todo="TODO"),
         dict(title="p", priority="A"), dict(title="")]),
    "a TODO keyword needs a space after it": (
        "* TODO\n* TODO\tfoo\n* TODO  two spaces\n* TODO :tag:\n* todo lower\n",
        [dict(title="TODO", todo=None), dict(title="TODO\tfoo", todo=None),
         dict(title="two spaces", todo="TODO"), dict(title=":tag:", todo="TODO", tags=()),
         dict(title="todo lower", todo=None)]),
    "tags may hold # % @ _ letters and digits; the last group wins": (
        "* a :b#c:%d:\n* x :a: :b:\n* y:glued:\n* z :ta g:\n* w :é_ü@1:\n* v\t:tab:\t\n"
        "* u :a::b:\n* :only:tags:\n",
        [dict(title="a", tags=("b#c", "%d")), dict(title="x :a:", tags=("b",)),
         dict(title="y:glued:", tags=()), dict(title="z :ta g:", tags=()),
         dict(title="w", tags=("é_ü@1",)), dict(title="v", tags=("tab",)),
         dict(title="u", tags=("a", "", "b")), dict(title="", tags=("only", "tags"))]),
    "a priority cookie holds any one character": (
        "* [#a] low\n* [#1]x\n* [#AB] no\n* TODO [#C]  title  \n",
        [dict(priority="a", title="low"), dict(priority="1", title="x"),
         dict(priority=None, title="[#AB] no"), dict(todo="TODO", priority="C", title="title")]),
    "form feeds and line separators stay in titles": (
        "* form\ffeed\n* line\u2028sep\n* trail \f\n* nb\xa0sp :t:\n",
        [dict(title="form\ffeed"), dict(title="line\u2028sep"), dict(title="trail \f"),
         dict(title="nb\xa0sp", tags=("t",))]),
    "property drawer: names with ':' or '+', duplicates, empty values, Effort as text": (
        "* e\n:PROPERTIES:\n:header-args:python: :results output\n:foo+: bar\n:dup: 1\n"
        ":dup: 2\n:empty:\n:sp:   \n:Effort: 1:30\n:END:\n",
        [dict(properties=(("header-args:python", ":results output"), ("foo+", "bar"),
                          ("dup", "1"), ("dup", "2"), ("empty", ""), ("sp", ""),
                          ("Effort", "1:30")))]),
    "property drawer: lower case, indented, after the planning line": (
        "* b\n:properties:\n:x: 1\n:end:\n* f\n  :PROPERTIES:  \n  :ID:   f1  \n  :END:  \n"
        "* c\nSCHEDULED: <2020-01-01 Wed>\n:PROPERTIES:\n:ID: c1\n:END:\n"
        "* l\nscheduled: <2020-01-01>\n:PROPERTIES:\n:ID: l1\n:END:\n",
        [dict(properties=(("x", "1"),)), dict(properties=(("ID", "f1"),)),
         dict(properties=(("ID", "c1"),)), dict(properties=(("ID", "l1"),))]),
    "no property drawer after a blank line, in a block or in fixed-width lines": (
        "* d\n\n:PROPERTIES:\n:ID: d1\n:END:\n"
        "* s\n#+begin_src org\n:PROPERTIES:\n:ID: s1\n:END:\n#+end_src\n"
        "* x\n#+begin_example\n:PROPERTIES:\n:ID: x1\n:END:\n#+end_example\n"
        "* f\n: :PROPERTIES:\n: :ID: f1\n: :END:\n"
        "* t\nSome text.\n:PROPERTIES:\n:ID: t1\n:END:\n",
        [dict(properties=())] * 5),
    "a malformed property drawer has no properties": (
        "* tab\n:PROPERTIES:\n:A:\tb\n:END:\n* nospace\n:PROPERTIES:\n:ID:x\n:END:\n"
        "* blank\n:PROPERTIES:\n:a: 1\n\n:END:\n* open\n:PROPERTIES:\n:a: 1\n",
        [dict(properties=())] * 4),
    "#+TODO inside a src block, example block or LaTeX environment is ignored": (
        "#+begin_src org\n#+TODO: AAA | BBB\n#+end_src\n#+begin_example\n#+TODO: CCC\n"
        "#+end_example\n\\begin{equation}\n#+TODO: DDD\n\\end{equation}\n* AAA x\n* TODO y\n",
        [dict(todo=None, title="AAA x"), dict(todo="TODO", title="y")]),
    "#+TODO inside a quote block, drawer, dynamic block or unclosed block counts": (
        "#+begin_quote\n#+TODO: AAA\n#+end_quote\n:LOGBOOK:\n#+TODO: BBB\n:END:\n"
        "#+BEGIN: clocktable\n#+TODO: CCC\n#+END:\n#+begin_src org\n#+TODO: DDD\n"
        "* AAA a\n* BBB b\n* CCC c\n* DDD d\n* TODO e\n#+end_src\n",
        [dict(todo="AAA"), dict(todo="BBB"), dict(todo="CCC"), dict(todo="DDD"),
         dict(todo=None, title="TODO e")]),
    "a footnote definition ends at the next one, cutting a src block short: its #+TODO lines count": (
        "[fn:1] a\n#+begin_src\n#+TODO: AAA\n[fn:2] b\n#+TODO: BBB\n#+end_src\n* AAA x\n* BBB y\n",
        [dict(todo="AAA", title="x"), dict(todo="BBB", title="y")]),
    "a footnote definition ends at two blank or whitespace lines, also inside a src block": (
        "[fn:1] a\n#+begin_src\n#+TODO: AAA\n \n\t\n#+TODO: BBB\n#+end_src\n* AAA x\n* BBB y\n",
        [dict(todo="AAA", title="x"), dict(todo="BBB", title="y")]),
    "a footnote definition cuts a LaTeX environment short, in a section too": (
        "* h\n[fn:1] a\n\\begin{equation}\n#+TODO: AAA\n[fn:2] b\n\\end{equation}\n* AAA x\n",
        [dict(title="h"), dict(todo="AAA", title="x")]),
    "a footnote definition in a drawer ends with the drawer": (
        ":LOGBOOK:\n[fn:1] a\n#+begin_src\n#+TODO: AAA\n:END:\n#+end_src\n* AAA x\n",
        [dict(todo="AAA", title="x")]),
    "a CRLF file's blank lines end a footnote definition": (
        "[fn:1] a\r\n#+begin_src\r\n#+TODO: AAA\r\n\r\n\r\n#+end_src\r\n* AAA x\r\n",
        [dict(todo="AAA", title="x")]),
    "a src block holding a footnote, or closed inside one, still hides #+TODO": (
        "#+begin_src\n[fn:1] x\n#+TODO: AAA\n#+end_src\n[fn:2] b\n#+begin_src\n#+TODO: BBB\n#+end_src\n"
        "* AAA x\n* BBB y\n",
        [dict(todo=None, title="AAA x"), dict(todo=None, title="BBB y")]),
    "inside a footnote, a src block holding the next definition is cut short": (
        "[fn:1] a\n#+begin_src\n#+TODO: AAA\n\n#+end_src\n[fn:2] b\n#+begin_src\n[fn:3] c\n#+TODO: BBB\n"
        "#+end_src\n* AAA x\n* BBB y\n",
        [dict(todo=None, title="AAA x"), dict(todo="BBB", title="y")]),
    "an indented [fn:1] defines no footnote": (
        " [fn:1] a\n#+begin_src\n#+TODO: AAA\n[fn:2] b\n#+end_src\n* AAA x\n",
        [dict(todo=None, title="AAA x")]),
    "a quote block cut short by a footnote does not close a src block opened in it": (
        "[fn:1] a\n#+begin_quote\n[fn:2] b\n#+begin_src\n#+end_quote\n#+TODO: AAA\n#+end_src\n* AAA x\n",
        [dict(todo=None, title="AAA x")]),
    "a drawer closes before a src block opened inside it": (
        ":LOGBOOK:\n#+begin_src\n:END:\n#+TODO: AAA\n#+end_src\n* AAA x\n",
        [dict(todo="AAA", title="x")]),
    "#+TODO anywhere in the file sets the keywords of the whole file": (
        "* LATE first\n#+todo: LATE | OVER\n* OVER x\n* TODO y\n",
        [dict(todo="LATE", title="first"), dict(todo="OVER"), dict(todo=None, title="TODO y")]),
    "an empty #+TODO: leaves no keyword; #+TODO:x:y is another keyword": (
        "#+TODO:\n#+TODO:AAA:BBB\n* TODO x\n* AAA y\n",
        [dict(todo=None, title="TODO x"), dict(todo=None, title="AAA y")]),
    "#+STARTUP: odd reduces levels": (
        "#+STARTUP: odd\n* 1\n** 2\n*** 3\n**** 4\n***** 5\n****** 6\n",
        [dict(level=n) for n in (1, 2, 2, 3, 3, 4)]),
    "#+STARTUP: the last odd/oddeven wins; inside a block it does not count": (
        "#+begin_example\n#+STARTUP: odd\n#+end_example\n#+startup: odd\n#+STARTUP: oddeven\n"
        "* 1\n*** 3\n",
        [dict(level=1), dict(level=3)]),
    "CRLF file: line ends are not part of titles, tags or properties": (
        "* a :t:\r\n:PROPERTIES:\r\n:ID: x1\r\n:END:\r\n* TODO b\r\n",
        [dict(title="a", tags=("t",), properties=(("ID", "x1"),)), dict(todo="TODO", title="b")]),
    "mixed line ends: Emacs keeps the carriage return as text": (
        "* lf\n* crlf :x:\r\n:PROPERTIES:\r\n:ID: y\r\n:END:\r\n",
        [dict(title="lf"), dict(title="crlf :x:", tags=(), properties=())]),
}


@pytest.mark.parametrize("text,expected", EMACS_CASES.values(), ids=EMACS_CASES.keys())
def test_headlines_read_as_emacs_reads_them(text, expected):
    found = headlines(text)
    assert [{k: getattr(h, k) for k in e} for h, e in zip(found, expected)] == expected
    assert len(found) == len(expected)


def test_todo_setup_follows_emacs():
    # TYP_TODO lines come first, fast-access keys are dropped, no "|" makes the last one done.
    text = "#+TODO: A(a) B | C(c@/!) D(d)\n#+TODO: E F\n#+SEQ_TODO: G\n#+TYP_TODO: H | I\n* I x\n"
    document = org.parse(text).document
    assert document.todo_keywords == ("H", "A", "B", "E")
    assert document.done_keywords == ("I", "C", "D", "F", "G")
    assert headlines(text)[0].todo == "I"
    default = org.parse("* TODO x\n").document
    assert (default.todo_keywords, default.done_keywords) == (("TODO",), ("DONE",))


def test_planning_keeps_raw_timestamps():
    text = ("* a\nDEADLINE: <2020-01-01> SCHEDULED: [2020-02-02 Sun 10:00]--[2020-02-03]\n"
            "* b\nCLOSED: [2021-03-04 Thu 09:10] SCHEDULED: <2021-03-01 Mon +1w>\n"
            "* c\n  SCHEDULED: <%%(diary-float t 4 2)>\n"
            "* d\nSCHEDULED: foo DEADLINE: <2020-01-01 Wed 10:00-11:00>\n"
            "* e\n\nSCHEDULED: <2020-01-01>\n")
    assert [h.planning for h in headlines(text)] == [
        (("DEADLINE", "<2020-01-01>"), ("SCHEDULED", "[2020-02-02 Sun 10:00]--[2020-02-03]")),
        (("CLOSED", "[2021-03-04 Thu 09:10]"), ("SCHEDULED", "<2021-03-01 Mon +1w>")),
        (("SCHEDULED", "<%%(diary-float t 4 2)>"),),
        (("DEADLINE", "<2020-01-01 Wed 10:00-11:00>"),),
        (),
    ]


# --- structure and exact text ----------------------------------------------------------------

ROUND_TRIP = {
    "empty": "",
    "no final newline": "* a\nbody",
    "headline without newline": "intro\n* a",
    "only a preamble": "#+TITLE: x\n\nsome text\n",
    "CRLF": "#+TITLE: x\r\n* a\r\nbody\r\n** b\r\n",
    "mixed line ends": "* a\r\nb\n* c\r",
    "lone carriage returns": "* a\rb\r* c\n",
    "tabs and trailing spaces": "* a \t \n\tbody  \n*  \t\n",
    "form feed and line separators": "* a\f\nx\u2028y\u2029\x85\n* b\f",
    "byte-order mark": "\ufeff* a\n** b\n",
    "byte-order mark alone": "\ufeff",
    "byte-order mark before text": "\ufeff#+TODO: A\n\n* A a\n",
    "blank lines only": "\n\n\n",
    "stars without a space": "*bold*\n**\n*\n* real\n",
}


@pytest.mark.parametrize("text", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_render_reproduces_the_text(text):
    parsed = org.parse(text)
    assert render(parsed) == text


def test_sections_and_subtrees():
    text = "pre\n* a\nA\n*** deep\nD\n** b\n* c :t:\n"
    parsed = org.parse(text)
    get = {o.oid: o for o in parsed.objects}.__getitem__
    a, c = map(get, parsed.document.children)
    assert parsed.document.preamble == "pre\n"
    assert (a.raw, c.raw) == ("* a\nA\n", "* c :t:\n")
    deep, b = map(get, a.children)
    assert (deep.level, deep.raw, b.level, b.raw) == (3, "*** deep\nD\n", 2, "** b\n")
    assert org.render_headline(a, get) == "* a\nA\n*** deep\nD\n** b\n"
    # children come before their parents, the document last
    order = [o.oid for o in parsed.objects]
    assert order.index(deep.oid) < order.index(a.oid) < order.index(parsed.document.oid)
    assert isinstance(parsed.objects[-1], Document) and len(parsed.objects) == 5


def test_a_changed_child_changes_its_ancestors_only():
    text = "* a\n** b\nold\n** c\n* d\n"
    before = {o.oid for o in org.parse(text).objects}
    after = org.parse(text.replace("old", "new")).objects
    changed = {o.raw.split("\n")[0] for o in after if o.oid not in before and isinstance(o, Headline)}
    assert changed == {"* a", "** b"}


# --- incremental parsing ---------------------------------------------------------------------

def test_known_subtrees_are_not_rebuilt():
    text = "* a\n** a1\n** a2\n* b\n** b1\ntext\n* c\n"
    first = org.parse(text)
    assert len(first.subtree_keys) == 6
    again = org.parse(text, cached=first.subtree_keys.get)
    assert again.document == first.document and again.objects == (first.document,)

    edited = org.parse(text.replace("text", "edited"), cached=first.subtree_keys.get)
    cold = org.parse(text.replace("text", "edited"))
    assert edited.document == cold.document
    assert sorted(h.title for h in edited.objects if isinstance(h, Headline)) == ["b", "b1"]


def test_a_changed_todo_setup_misses_the_cache():
    text = "* WAIT x\n"
    first = org.parse(text)
    assert headlines(text)[0].todo is None
    changed = org.parse("#+TODO: WAIT | DONE\n" + text, cached=first.subtree_keys.get)
    (headline,) = [o for o in changed.objects if isinstance(o, Headline)]
    assert (headline.todo, headline.title) == ("WAIT", "x")


DRAWER = ":PROPERTIES:\n:ID: a1\n:END:\n"
FILE_PROPERTIES = {  # checked with Emacs: the drawer is on the first line, or right after the opening comment
    "first line": (DRAWER + "#+title: t\n", (("ID", "a1"),)),
    "indented": ("  " + DRAWER, (("ID", "a1"),)),
    "after blank lines and a comment": ("\n# a comment\n#\n:PROPERTIES:\n:ID: a1\n:CATEGORY: x y\n:END:\n",
                                        (("ID", "a1"), ("CATEGORY", "x y"))),
    "after a whitespace line and a comment": ("\t\n# a\n" + DRAWER, (("ID", "a1"),)),
    "CRLF": (":PROPERTIES:\r\n:ID: a1\r\n:END:\r\n", (("ID", "a1"),)),
    "after a byte-order mark": ("\ufeff" + DRAWER, (("ID", "a1"),)),
    "after a blank line": ("\n" + DRAWER, ()),
    "after a whitespace line": ("  \n" + DRAWER, ()),
    "after a blank CRLF line": ("\r\n" + DRAWER.replace("\n", "\r\n"), ()),
    "after a line of a non-breaking space": ("\xa0\n" + DRAWER, ()),
    "after a line of a space and a carriage return, in a LF file": (" \r\n" + DRAWER, (("ID", "a1"),)),
    "after a comment and a blank line": ("# c\n\n" + DRAWER, ()),
    "after a second comment": ("# a\n\n# b\n" + DRAWER, ()),
    "after '#' and a tab, which is no comment": ("#\tx\n" + DRAWER, ()),
    "after a keyword": ("#+title: t\n" + DRAWER, ()),
    "after text": ("Some text.\n" + DRAWER, ()),
    "never closed": (":PROPERTIES:\n:ID: a1\n", ()),
    "none": ("", ()),
}


@pytest.mark.parametrize("preamble, properties", FILE_PROPERTIES.values(), ids=FILE_PROPERTIES.keys())
def test_file_properties_are_the_drawer_a_file_opens_with(preamble, properties):
    assert org.file_properties(preamble) == properties
    assert org.file_properties(org.parse(preamble + "* h\n").document.preamble) == properties


def test_corpus_files_that_open_with_a_drawer_have_file_properties(corpus):
    opening = [path for path, (text, _) in corpus.items() if text.startswith(":PROPERTIES:\n")]
    assert len(opening) >= 10
    assert all(dict(org.file_properties(parsed.document.preamble)).get("ID")
               for path, (text, parsed) in corpus.items() if path in opening)


def test_repeated_subtrees_are_built_once():
    parsed = org.parse("* Notes\n** x\n* Notes\n** x\n")
    assert len(parsed.objects) == 3
    assert parsed.document.children[0] == parsed.document.children[1]


def test_whole_corpus_with_every_subtree_known_builds_only_documents(corpus):
    for text, parsed in corpus.values():
        again = org.parse(text, cached=parsed.subtree_keys.get)
        assert again.objects == (parsed.document,)


# --- re-parsing an edit from a kept layout -----------------------------------------------------

EDIT_PIECES = ["x", "\n", "* ", "\n* ", "\n** new\n", "*", " ", ":PROPERTIES:\n:ID: k\n:END:\n",
               "#+TODO: WAIT | DONE\n", "\r\n", "é", "TODO ", "\n*** deep :tag:\n", "#+begin_src\n"]


MARKERS = [b"#+begin_src", b"** new\n", b"k\n:END", b"x\nx"]  # what the edits may make or break


def headline_oids(layout: org.Layout, get) -> list:
    return [layout.oid(i, get) for i in range(len(layout.outline.starts))]


def check_layout(layout: org.Layout, fresh: org.Layout, get) -> None:
    """A layout kept from an edit must be the one scanned from its bytes, and find what they hold."""
    kept, scanned = layout.outline, fresh.outline
    assert (kept.starts, kept.stars, kept.after) == (scanned.starts, scanned.stars, scanned.after)
    assert (kept.newlines, kept.crlfs, layout.setup) == (scanned.newlines, scanned.crlfs, fresh.setup)
    assert headline_oids(layout, get) == headline_oids(fresh, get)
    assert layout.keys == fresh.keys and layout.data == fresh.data and layout.document == fresh.document
    assert [layout.contains(m) for m in MARKERS] == [m in fresh.data for m in MARKERS]


def check_reparse_chain(text: str, seed: int, edits: int = 40) -> tuple[int, int]:
    """Apply random edits one after another; every re-parse must equal a full parse, and its layout must
    find what the bytes hold; so must the layout an edited document's rendering gives. Returns how many
re-parses and how many layouts of a rendering were checked."""
    rng = random.Random(seed)
    parsed = org.parse(text)
    store = {o.oid: o for o in parsed.objects}
    layout = org.Layout.of(text.encode(), parsed)
    done = derived = 0
    for _ in range(edits):
        data = bytearray(layout.data)
        at = rng.randrange(len(data) + 1)
        cut = rng.choice([0, 0, 1, 3, 20])
        data[at:at + cut] = rng.choice(EDIT_PIECES).encode()
        data = bytes(data)
        try:
            full = org.parse(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        store.update((o.oid, o) for o in full.objects)
        fresh = org.Layout.of(data, full)
        splice = layout.splice(full.document, store.__getitem__)
        assert splice is None or splice.data == data
        edited = None if splice is None else layout.edited(splice)
        if edited is not None:
            check_layout(edited, fresh, store.__getitem__)
            derived += 1
        result = org.reparse(layout, data, store.__getitem__, cached=None)
        if result is None:
            layout = org.Layout.of(data, full)
            continue
        again, layout = result
        store.update((o.oid, o) for o in again.objects)
        assert again.document == full.document and again.subtree_keys.items() <= full.subtree_keys.items()
        assert again.document.oid == full.document.oid  # its encoding, when written over the last one's
        check_layout(layout, fresh, store.__getitem__)
        done += 1
    return done, derived


def test_reparse_equals_a_full_parse_after_random_edits():
    text = ("#+TITLE: t\n\n* a\nA\n** a1 :x:\nbody\n*** a11\n** a2\n* TODO b\n:PROPERTIES:\n:ID: b\n:END:\n"
            "** b1\ntext é\n* c\n" * 3)
    checked = [check_reparse_chain(text, seed) for seed in range(30)]
    assert sum(done for done, _ in checked) > 600 and sum(derived for _, derived in checked) > 600


def test_reparse_equals_a_full_parse_after_a_byte_order_mark():
    text = "\ufeff* a\nA\n** a1\n* b\n:PROPERTIES:\n:ID: b\n:END:\n** b1\n" * 3
    checked = [check_reparse_chain(text, seed) for seed in range(10)]
    assert sum(done for done, _ in checked) > 200 and sum(derived for _, derived in checked) > 200


def test_reparse_reads_only_the_edited_sections():
    text = "".join(f"* h{n}\n** child {n}\nbody {n}\n" for n in range(200))
    parsed = org.parse(text)
    layout = org.Layout.of(text.encode(), parsed)
    edited = text.replace("body 150\n", "body 150 edited\n").encode()
    again, _ = org.reparse(layout, edited, {o.oid: o for o in parsed.objects}.__getitem__)
    assert [o.title for o in again.objects if isinstance(o, Headline)] == ["child 150", "h150"]


def test_an_item_added_to_a_section_of_thousands_rebuilds_only_its_neighbour_and_ancestors():
    text = "#+TITLE: memory\n* Facts\n" + "".join(f"** fact {n}\n" for n in range(3000)) + "* Procedures\n** p\n"
    parsed = org.parse(text)
    store = {o.oid: o for o in parsed.objects}
    layout = org.Layout.of(text.encode(), parsed)
    edited = text.replace("** fact 2999\n", "** fact 2999\n** fact new\n")
    again, layout = org.reparse(layout, edited.encode(), store.__getitem__)
    assert [o.title for o in again.objects if isinstance(o, Headline)] == ["fact new", "fact 2999", "Facts"]
    assert again.document == org.parse(edited).document
    store.update((o.oid, o) for o in again.objects)
    assert layout.oid(3002, store.__getitem__) == again.document.children[1]  # Procedures, moved one on


def test_reparse_declines_edits_that_change_every_section():
    text = "#+TITLE: t\n* WAIT a\n* b\n"
    parsed = org.parse(text)
    get = {o.oid: o for o in parsed.objects}.__getitem__
    layout = org.Layout.of(text.encode(), parsed)
    for edited in ("#+TITLE: u\n* WAIT a\n* b\n", text + "#+TODO: WAIT | DONE\n", text.replace("\n", "\r\n"),
                   "#+TITLE: t\n* WAIT a\n* b\xff\n"):
        data = edited.encode() if isinstance(edited, str) else edited
        assert org.reparse(layout, data.replace(b"\xc3\xbf", b"\xff"), get) is None


def test_reparse_on_corpus_files(corpus):
    outlined = [text for text, parsed in corpus.values() if parsed.document.children]
    largest = sorted(outlined, key=len)[-5:]
    checked = [check_reparse_chain(text, seed, edits=15) for seed, text in enumerate(largest)]
    assert sum(done for done, _ in checked) > 40 and sum(derived for _, derived in checked) > 40
