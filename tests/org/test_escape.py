"""Text put into Org as data (cortex.org.escape): escaped as Org escapes a block's contents, read back whole,
and never read as structure, by our parser or by the modules that write such text."""

from __future__ import annotations

import random

import pytest

from cortex import org
from cortex.dsl.diagnostics import Problems
from cortex.dsl.literate import cortex_blocks
from cortex.dsl.reader import SourceFile
from cortex.objects import Headline
from cortex.org import escape_block, escape_text, unescape_block, unescape_text
from cortex.org.syntax import Section

# Line starts Org reads as structure, in a block or in a section's body, and near misses.
PIECES = ["* ", "** h", "*bold*", "#+", "#+END_SRC", "#+end_example", "#+TODO: A B", "#+STARTUP: odd", ",", ",,",
          "  ", "\t", ":PROPERTIES:", ":END:", ":ID: x", "SCHEDULED: <2026-11-20 Fri>", "closed:", "# c", "text",
          "\\begin{x}", "[fn:1] ", "-", "\r"]


def top(parsed: org.Parsed) -> list[Headline]:
    """The top-level headlines of a parse, in text order."""
    get = {o.oid: o for o in parsed.objects}.__getitem__
    return [get(oid) for oid in parsed.document.children]


def texts(seed: int, count: int = 400) -> list[str]:
    rng = random.Random(seed)
    return ["\n".join("".join(rng.choices(PIECES, k=rng.randrange(4))) for _ in range(rng.randrange(6)))
            for _ in range(count)]


@pytest.mark.parametrize("text, escaped", [
    ("* a", ",* a"), ("*bold*", ",*bold*"), ("  #+end_src", "  ,#+end_src"), (",* a", ",,* a"),
    (",,#+x", ",,,#+x"), ("# comment", "# comment"), (":END:", ":END:"), ("a\n* b\n", "a\n,* b\n"),
])
def test_a_block_is_escaped_as_org_escapes_it(text, escaped):
    assert escape_block(text) == escaped  # org-escape-code-in-string
    assert unescape_block(escaped) == text  # org-unescape-code-in-string: the last comma before them goes


def test_escaping_reverses():
    for text in texts(1):
        assert unescape_block(escape_block(text)) == text
        assert unescape_text(escape_text(text)) == text


def test_escaped_text_is_a_blocks_contents():
    for text in texts(2, 200):
        for begin, end in (("#+BEGIN_SRC json", "#+END_SRC"), ("#+begin_example", "#+end_example")):
            file = f"#+TODO: NEXT | DONE\n* log\n{begin}\n{escape_block(text)}\n{end}\n* after\n"
            parsed = org.parse(file)
            assert parsed.document.todo_keywords == ("NEXT",), text  # no keyword in the block counts
            first, after = top(parsed)
            assert (first.title, first.children, after.title) == ("log", (), "after"), text
            contents = first.raw.split(f"{begin}\n", 1)[1].rsplit(f"\n{end}\n", 1)[0]
            assert unescape_block(contents) == text


def test_escaped_text_is_a_sections_body():
    for text in texts(3, 200):
        file = f"* entry\n{escape_text(text)}\n* after\n"
        parsed = org.parse(file)
        entry, after = top(parsed)
        assert (entry.title, entry.children, after.title, parsed.document.todo_keywords) == \
            ("entry", (), "after", ("TODO",)), text
        section = Section.of(entry.raw)
        assert (entry.planning, entry.properties, section.body) == ((), (), 1), text
        assert unescape_text(entry.raw.split("\n", 1)[1].removesuffix("\n")) == text


def test_definitions_read_escaped_lines_as_org_does():
    # Org keeps all but one comma of `,,,*`: the code is `,,*`, as it was before it was escaped.
    block = '(defmemory notes :retention "90d")\n* a headline in the code\n,,* two commas\n#+end_src\n'
    text = f"* Defs\n#+begin_src hy :cortex yes\n{escape_block(block)}#+end_src\n"
    assert ",,,* two commas" in text
    assert cortex_blocks(SourceFile("defs.org", text), Problems()) == [(3, block)]
