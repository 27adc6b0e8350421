"""The Org parser on hostile input: any file costs work linear in its size, and no walk recurses on depth.

The tests compare times measured in the same run (an input four times as large, a parse of the
same file, a tamer edit) or count the bytes hashed, so they stay fast on any machine.
"""

from __future__ import annotations

import inspect
import sys
import time
from types import SimpleNamespace

import blake3
import pytest

from cortex import org
from cortex.backends import open_store
from cortex.ingest import LAYOUT_MIN_BYTES, ingest, working_tree
from cortex.query import render_file

from tests.conftest import cpu_seconds


def seconds(text: str) -> float:
    """The least CPU time of five parses of `text`."""
    return cpu_seconds(lambda: org.parse(text), tries=5)


def deep(levels: int) -> str:
    """Headlines each one level below the one before."""
    return "".join("*" * level + f" level {level}\n" for level in range(1, levels + 1))


def store_of(parsed: org.Parsed) -> dict:
    return {o.oid: o for o in parsed.objects}


def reparse_seconds(text: str, at: int, insert: bytes) -> float:
    """The fastest of three re-parses of `text` with `insert` inserted at byte `at`, checked against
    a parse of the edited text."""
    parsed, data = org.parse(text), text.encode()
    edited = data[:at] + insert + data[at:]
    get = store_of(parsed).__getitem__
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        again, layout = org.reparse(org.Layout.of(data, parsed), edited, get)
        best = min(best, time.process_time() - start)
    full = org.parse(edited.decode())
    assert again.document == full.document and layout.keys == full.keys
    return best


# --- deep nesting ----------------------------------------------------------------------------

class CountingBlake3:
    """blake3 that counts the bytes it is given."""

    hashed = 0

    def __init__(self, data: bytes = b""):
        self._hash = blake3.blake3()
        self.update(data)

    def update(self, data) -> "CountingBlake3":
        CountingBlake3.hashed += len(data)
        self._hash.update(data)
        return self

    def digest(self) -> bytes:
        return self._hash.digest()


@pytest.fixture
def hashed(monkeypatch):
    """The number of bytes the parser hashes from now on."""
    monkeypatch.setattr(org.parser, "blake3", SimpleNamespace(blake3=CountingBlake3))
    CountingBlake3.hashed = 0
    return lambda: CountingBlake3.hashed


def test_keying_a_deeply_nested_file_hashes_its_text_once(hashed):
    text = deep(400)  # each subtree key once hashed the whole subtree: the sum of 400 nested texts
    org.parse(text)
    assert hashed() < len(text) + 200 * 400


def test_reparsing_a_deep_edit_hashes_the_file_about_once(hashed):
    text = deep(400)
    parsed = org.parse(text)
    layout = org.Layout.of(text.encode(), parsed)
    edited = (text + "deepest text\n").encode()
    CountingBlake3.hashed = 0
    again, _ = org.reparse(layout, edited, store_of(parsed).__getitem__)
    assert hashed() < len(edited) + 200 * 400
    assert again.document == org.parse(edited.decode()).document


@pytest.fixture
def recursion_limit():
    """A recursion limit 200 frames above the test's own, so that a few hundred levels exceed it."""
    default, limit = sys.getrecursionlimit(), len(inspect.stack(0)) + 200
    sys.setrecursionlimit(limit)
    yield limit
    sys.setrecursionlimit(default)


def test_an_edit_deeper_than_the_recursion_limit_reparses_at_the_cost_of_a_parse(recursion_limit):
    text = deep(recursion_limit + 50)
    assert reparse_seconds(text, len(text), b"deepest text\n") < 3 * seconds(text + "deepest text\n")


def test_ingest_keeps_working_on_a_deeply_nested_file(tmp_path, recursion_limit):
    path = tmp_path / "deep.org"
    path.write_text(deep(recursion_limit + 50))
    assert path.stat().st_size >= LAYOUT_MIN_BYTES  # so its layout is kept, and edits re-parse from it
    store = open_store()
    ingest(store, tmp_path)
    for n in range(2):  # the second edit re-parses from the layout the first one kept
        path.write_text(path.read_text() + f"edit {n}\n")
        assert ingest(store, tmp_path).parsed == ["deep.org"]
    assert render_file(store, working_tree(store), "deep.org") == path.read_text()


def parents(stars: list[int]) -> tuple[list[int], float]:
    """Each headline's parent, and the fewest seconds it took to find them (of three tries)."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        found = [org.parser.parent_of(stars, i, stars[i]) for i in range(len(stars))]
        best = min(best, time.process_time() - start)
    return found, best


def test_a_parent_is_found_in_time_that_follows_the_distance_not_the_level():
    deep_parents, deep_seconds = parents(list(range(1, 1001)))
    shallow_parents, shallow_seconds = parents([1, 2] * 500)
    assert deep_parents == list(range(-1, 999)) and shallow_parents == [i - 1 if i % 2 else -1 for i in range(1000)]
    assert deep_seconds < 5 * shallow_seconds


# --- adversarial lines and sections ------------------------------------------------------------

HOSTILE = {  # each one once took time quadratic in its size, n where that took about 0.05 s
    "a long run of spaces in a headline": (3_000, lambda n: "* a" + " " * n + "x\n"),
    "many unterminated planning timestamps": (1_000, lambda n: "* a\n" + "DEADLINE: <" * n + "\n"),
    "many unclosed src blocks in a section with #+TODO": (1_000, lambda n: "* a\n#+TODO: X\n" + "#+begin_src\n" * n),
    "many unclosed blocks of as many names": (
        1_000, lambda n: "* a\n#+TODO: X\n" + "".join(f"#+begin_b{i}\n" for i in range(n))),
    "many unclosed drawers": (1_000, lambda n: "* a\n#+TODO: X\n" + ":drawer:\n" * n),
    "many unclosed dynamic blocks": (1_000, lambda n: "* a\n#+TODO: X\n" + "#+BEGIN: x\n" * n),
    "many unclosed LaTeX environments": (1_000, lambda n: "* a\n#+TODO: X\n" + "\\begin{eq}\n" * n),
    "many #+TODO lines among raw blocks": (1_000, lambda n: "* a\n" + "#+begin_src\nx\n#+end_src\n#+TODO: A\n" * n),
    "many TODO keywords and headlines": (
        8_000, lambda n: "#+TODO: " + " ".join(f"K{i}" for i in range(n)) + "\n" + "* K1 x\n" * n),
}


@pytest.mark.parametrize("n, make", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_input_costs_time_linear_in_its_size(n, make):
    # Linear: four times the input, about four times the time; quadratic: sixteen.
    assert seconds(make(4 * n)) < 8 * seconds(make(n)) + 0.002


@pytest.mark.parametrize("n, make", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_input_still_renders_back_exactly(n, make):
    text = make(n)
    parsed = org.parse(text)
    assert org.render(parsed.document, store_of(parsed).__getitem__) == text


def test_an_edit_that_could_sit_anywhere_along_a_long_run_costs_what_any_edit_does():
    text = "* a\n* b\n" + "x" * 400_000 + "\n* c\n"
    assert reparse_seconds(text, 200_000, b"x") < 3 * reparse_seconds(text, 200_000, b"y")
