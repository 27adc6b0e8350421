"""Patterns outside the Org parser on hostile text: work linear in its size, results as before.

Timing tests compare the same code on an input and on one four times as large (quadratic work
takes 16 times as long, linear work 4 times), so they hold on any machine.  Each input is
small enough that the old quadratic patterns fail in a fraction of a second, and each call
is repeated until the smaller input takes a few milliseconds, so the fixed code is measurable.
"""

from __future__ import annotations

import itertools
import random
import re
from datetime import datetime

from cortex import org
from cortex.memory import items
from cortex.memory.items import item_from_headline
from cortex.memory.validity import parse_timestamp
from cortex.objects import Headline
from cortex.search.items import units

from tests.conftest import cpu_seconds

MIN_SECONDS = 0.003  # the smaller input is timed over enough calls to take this long

# The patterns as they were, to check the linear code finds exactly what they found.
OLD_DRAWER = re.compile(r"^[ \t]*:PROPERTIES:[ \t]*\r?$.*?^[ \t]*:END:[ \t]*\r?$\n?", re.M | re.S | re.I)
OLD_TAG_SUFFIX = re.compile(r"[ \t]+:[^ \t]+:[ \t]*$")
OLD_STARS = re.compile(r"\*+[ \t]+")
OLD_STAMP = re.compile(r"\[(\d{4})-(\d{2})-(\d{2})(?: [^\]\d\s]+)?(?: (\d{1,2}):(\d{2}))?[^\]]*\]")


def seconds(call, arg, reps: int) -> float:
    """The least CPU time of `reps` calls of `call(arg)`, of three tries."""
    return cpu_seconds(lambda: [call(arg) for _ in range(reps)], tries=3)


def assert_linear(call, make, n: int) -> None:
    """`call` on `make(4 * n)` takes less than 8 times as long as on `make(n)`."""
    small, large = make(n), make(4 * n)
    reps = 1
    while (before := seconds(call, small, reps)) < MIN_SECONDS:
        reps *= 2
    after = seconds(call, large, reps)
    assert after < 8 * before, f"size {n}: {before:.4f} s, size {4 * n}: {after:.4f} s ({reps} calls)"


def headline(text: str) -> Headline:
    return next(o for o in org.parse(text).objects if isinstance(o, Headline))


# --- search/items.py: property drawers --------------------------------------------------------

def test_unclosed_property_drawers_index_in_linear_time():
    # Each opening line once made the drawer pattern read on to the end of the text.
    make = lambda n: headline("* note\n" + ":PROPERTIES:\n" * (n // 13))
    assert_linear(lambda h: list(units("notes/a.org", ("note",), (0,), h)), make, 4000)
    [item] = units("notes/a.org", ("note",), (0,), make(100))
    assert item.text.split("\n") == ["note", *[":PROPERTIES:"] * 7]


def test_memory_section_lines_index_in_linear_time():
    # Planning and list-item patterns on lines that nearly match: linear before and after.
    body = "- item\n" + "".join(f"{' ' * 30}\n  {'1' * 30}\n  SCHEDULED: x\n 1{' ' * 30}x\n" for _ in range(40))
    make = lambda n: headline("* Facts\n" + body * (n // len(body) + 1))
    assert_linear(lambda h: list(units("agents/a/memory.org", ("Facts",), (0,), h)), make, 4000)


def test_search_leaves_out_the_planning_line_and_property_drawer_as_emacs_reads_them():
    [item] = units("notes/a.org", ("note",), (0,), headline(
        "* note\nscheduled: <2026-11-20 Fri>\n:properties:\n:ID: x\n:END:\nbody\n"))
    assert (item.text, item.date) == ("note\nbody", "2026-11-20")  # planning is read in any case, as Emacs does
    text = "* note\nbody\n:PROPERTIES:\n:ID: x\n:END:\nSCHEDULED: <2026-11-20 Fri>\n"
    [item] = units("notes/a.org", ("note",), (0,), headline(text))
    assert item.text.split("\n") == ["note", *text.strip().split("\n")[1:]] and not headline(text).properties
    [item] = units("notes/a.org", ("note",), (0,), headline("* note\n:PROPERTIES:\nnot a property\n:END:\n"))
    assert item.text == "note\n:PROPERTIES:\nnot a property\n:END:"


# --- memory/items.py: tags, timestamps, stars ---------------------------------------------------

def test_a_long_run_of_blanks_before_tags_reads_in_linear_time():
    # The tags pattern was tried at each blank of the run and read the rest of the run each time.
    make = lambda n: "** a" + " " * n + "b :tag:\n"
    h = headline(make(10))
    assert h.tags == ("tag",)
    assert item_from_headline(h, make(10)).text == "a" + " " * 10 + "b"
    assert_linear(lambda text: item_from_headline(h, text), make, 2500)


def test_tags_are_removed_as_before():
    for n in range(8):
        for chars in itertools.product(" \t:a\r", repeat=n):
            title = "".join(chars)
            assert items._without_tags(title) == OLD_TAG_SUFFIX.sub("", title), repr(title)


def test_timestamps_without_a_closing_bracket_read_in_linear_time():
    # With no `]` to stop at, each way to split a weekday from the text after it was tried...
    assert_linear(parse_timestamp, lambda n: "[2026-11-18 " + "a" * n, 2500)
    # ...and each `[` read on to the end of the text.
    assert_linear(parse_timestamp, lambda n: "[2026-11-18 " * (n // 12), 8000)
    assert parse_timestamp("[2026-11-18 " * 10 + "]") == datetime(2026, 11, 18)


def test_timestamps_read_as_before():
    tokens = ["[2026-11-18", "[2026-13-01", " Wed", " 09:12", " 9:5", " 123:45", "]", "[", " ", "x", "7", "\n"]
    rng = random.Random(2)
    for _ in range(5000):
        text = "".join(rng.choices(tokens, k=rng.randrange(9)))
        m = OLD_STAMP.search(text)
        try:
            expected = m and datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4] or 0), int(m[5] or 0))
        except ValueError:
            expected = None
        assert parse_timestamp(text) == expected, text


def test_stars_are_removed_as_before():
    for n in range(7):
        for chars in itertools.product("* \ta", repeat=n):
            line = "** " + "".join(chars)
            assert item_from_headline(headline(line), line).text == OLD_STARS.sub("", line, count=1).strip(), repr(line)
