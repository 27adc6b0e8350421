"""Org's line grammar in one place (cortex.org.syntax, cortex.org.blocks): where a section's planning line,
property drawer and body are, the file's drawer, keywords outside raw blocks; and the modules that use it."""

from __future__ import annotations

from datetime import datetime

import pytest

from cortex import org
from cortex.history.conflicts import conflicts_in, marked
from cortex.memory.logs import mark_compacted
from cortex.objects import Headline
from cortex.org.blocks import keyword, keywords
from cortex.org.syntax import Section, file_drawer
from cortex.orgquery.dates import object_lines, section_stamps
from cortex.orgquery.index import FileInfo


def headline(text: str) -> Headline:
    return next(o for o in org.parse(text).objects if isinstance(o, Headline))


@pytest.mark.parametrize("raw, where, planning, properties", [
    ("* a\nbody\n", (None, 1, None, 1), (), ()),
    ("* a", (None, 1, None, 1), (), ()),
    ("* a\nSCHEDULED: <2026-11-20 Fri>\nbody\n", (1, 2, None, 2), (("SCHEDULED", "<2026-11-20 Fri>"),), ()),
    ("* a\n:PROPERTIES:\n:ID: x\n:A: 1\n:END:\nbody\n", (None, 1, 4, 5), (), (("ID", "x"), ("A", "1"))),
    ("* a\nclosed: [2026-11-20 Fri]\n  :properties:\n  :END:\n", (1, 2, 3, 4), (("CLOSED", "[2026-11-20 Fri]"),), ()),
    # Not a property drawer: a line in it is no property, it is never closed, or it does not follow the headline.
    ("* a\n:PROPERTIES:\ntext\n:END:\n", (None, 1, None, 1), (), ()),
    ("* a\n:PROPERTIES:\n:ID: x\n", (None, 1, None, 1), (), ()),
    ("* a\nbody\n:PROPERTIES:\n:ID: x\n:END:\n", (None, 1, None, 1), (), ()),
    ("* a\n:PROPERTIES:\n:ID: x\n:END:\nSCHEDULED: <2026-11-20 Fri>\n", (None, 1, 3, 4), (), (("ID", "x"),)),
])
def test_a_section_says_where_its_planning_line_property_drawer_and_body_are(raw, where, planning, properties):
    section = Section.of(raw)
    assert (section.planning_line, section.drawer, section.drawer_end, section.body) == where
    assert (section.headline, section.planning, section.properties) == ("* a", planning, properties)
    assert (headline(raw).planning, headline(raw).properties) == (planning, properties)  # the parser's reading


def test_line_ends_are_the_files():
    crlf = "* a\r\n:PROPERTIES:\r\n:ID: x\r\n:END:\r\n"
    assert Section.of(crlf).properties == Section.of(crlf, crlf=True).properties == (("ID", "x"),)
    # In a file that also ends lines with "\n" alone, "\r" is text, as in Emacs: `:END:\r` ends nothing.
    assert Section.of(crlf, crlf=False).drawer_end is None
    assert Section.of(crlf, crlf=False).headline == "* a\r"


def test_a_section_read_in_a_file_stops_at_its_own_lines():
    text = "* a\n:PROPERTIES:\n* b\n:PROPERTIES:\n:ID: b\n:END:\n"
    assert Section.of(text, 0).drawer_end is None  # the next headline is no property
    assert Section.of(text, text.index("* b")).properties == (("ID", "b"),)


def test_the_files_drawer_opens_the_file_after_comment_lines():
    assert file_drawer(":PROPERTIES:\n:ID: f\n:END:\n") == (0, 2, (("ID", "f"),))
    assert file_drawer("# a comment\n#\n:PROPERTIES:\n:ID: f\n:END:\n") == (2, 4, (("ID", "f"),))
    assert file_drawer("\n:PROPERTIES:\n:ID: f\n:END:\n") is None  # after a blank line it is not the file's
    assert file_drawer(": fixed width\n:PROPERTIES:\n:ID: f\n:END:\n") is None
    # Its timestamps are then read as those of any text (the drawer's own are not).
    assert [i for i, _ in object_lines(": x\n:PROPERTIES:\n:A: <2026-11-20>\n:END:\nx", heading=False,
                                       properties=False)] == [1, 2, 3, 4]
    assert [i for i, _ in object_lines("# c\n:PROPERTIES:\n:A: <2026-11-20>\n:END:\nx", heading=False,
                                       properties=False)] == [4]


def test_keywords_are_read_at_line_starts_outside_raw_blocks():
    text = ("#+CATEGORY: work\r\n#+begin_src org\r\n#+CATEGORY: quoted\r\n#+end_src\r\n"
            "  #+filetags: :a:b:\r\ntext #+CATEGORY: no\r\n#+CATEGORY:x: longer\r\n")
    assert list(keywords(text, keyword("CATEGORY", "FILETAGS"))) == [("CATEGORY", "work"), ("FILETAGS", ":a:b:")]
    assert list(keywords("\ufeff#+CATEGORY: bom\n", keyword("CATEGORY"))) == [("CATEGORY", "bom")]


def test_marking_a_conflict_adds_to_the_drawer_emacs_reads():
    raw = "* a\n:PROPERTIES:\n:ID: x\n:CONFLICT_OF: old\n:END:\nbody\n"
    text = marked(headline(raw), "id:x", "theirs", "both-changed", stars=None, drop_id=True, crlf=False)
    assert text == "* a :CONFLICT:\n:PROPERTIES:\n:CONFLICT_OF: id:x\n:CONFLICT_FROM: theirs\n" \
                   ":CONFLICT_KIND: both-changed\n:END:\nbody\n"
    # A drawer Emacs does not read as the headline's gets a drawer before it that it does read.
    raw = "* a\n:PROPERTIES:\nnotes\n:END:\n"
    text = marked(headline(raw), "a", "theirs", "both-changed", stars=None, drop_id=False, crlf=False)
    assert [c.kind for c in conflicts_in(text)] == ["both-changed"] and text.endswith(raw.partition("\n")[2])


def test_compaction_marks_only_the_headlines_own_drawer():
    log = "* 09:00 — a\n:PROPERTIES:\n* 10:00 — b\n:PROPERTIES:\n:SESSION: s\n:END:\n"
    text = mark_compacted(log, [1], datetime(2026, 11, 21, 10, 5))
    # The unclosed drawer is no drawer: the mark goes to a drawer of its own, not into the next entry's.
    parsed = org.parse(text)
    get = {o.oid: o for o in parsed.objects}.__getitem__
    assert [get(oid).properties for oid in parsed.document.children] == [
        (("COMPACTED", "[2026-11-21 Sat 10:05]"),), (("SESSION", "s"),)]


def test_a_block_ends_only_at_a_line_that_is_its_end_alone():
    text = "* Note\n#+begin_src sh\n<2026-11-25 Wed>\n#+end_src x\n<2026-11-26 Thu>\n#+end_src\n<2026-11-27 Fri>\n"
    # Emacs 28.2 / Org 9.5.5 reads one timestamp here: `#+end_src x` ends no block.
    assert [stamp.raw for stamp in section_stamps(headline(text))] == ["<2026-11-27 Fri>"]


def test_file_keywords_are_those_emacs_reads():
    text = ("#+CATEGORY: work\r\n#+begin_src org\r\n#+CATEGORY: quoted\r\n#+end_src\r\n"
            "#+FILETAGS::a:b:\r\n#+FILETAGS: :c:\r\n* h\r\n")
    info = FileInfo.of("notes/a.org", org.parse(text).document)
    assert (info.category, info.filetags) == ("work", ("c",))  # Emacs: keys CATEGORY and FILETAGS::A:B, FILETAGS
