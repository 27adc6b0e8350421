"""A file nested thousands of headlines deep can be ingested, snapshotted, walked, diffed and shown."""

import sys

import pytest

import cortex.api as cx

DEPTH = sys.getrecursionlimit() + 200  # deeper than Python can recurse


def deep(levels: int, leaf: str = "leaf") -> str:
    return "".join(f"{'*' * n} level {n}\n" for n in range(1, levels)) + f"{'*' * levels} {leaf}\n"


@pytest.fixture
def deep_cortex(tmp_path):
    org = tmp_path / "org"
    org.mkdir()
    (org / "deep.org").write_text(deep(DEPTH))
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        yield c, org


def test_a_deep_file_is_snapshotted_walked_and_found(deep_cortex):
    c, org = deep_cortex
    snap = c.snapshot("deep")
    assert snap.counts["headlines"] == DEPTH
    nodes = c.outline("deep.org")
    assert len(nodes) == DEPTH and nodes[-1].line == DEPTH and len(nodes[-1].position) == DEPTH
    assert c.find(text="leaf")[0].outline[-1] == "leaf"


def test_a_change_deep_down_is_diffed_and_rolled_back(deep_cortex):
    c, org = deep_cortex
    c.snapshot("before")
    (org / "deep.org").write_text(deep(DEPTH, "changed leaf"))
    c.ingest()
    changes = c.diff()
    assert len(changes) == 1 and changes[0].outline[-1] == "changed leaf" and changes[0].fields == ("title",)
    (org / "more.org").write_text(deep(DEPTH))
    c.ingest()
    assert len([ch for ch in c.diff() if ch.kind == "added"]) == 1  # the added file's top subtree, once
    c.snapshot("after")
    c.rollback("HEAD~1")
    assert (org / "deep.org").read_text() == deep(DEPTH) and not (org / "more.org").exists()


def test_a_deep_file_is_searched_with_the_line_of_each_hit(deep_cortex):
    c, _ = deep_cortex
    hit = c.search("leaf", limit=1)[0]
    assert hit.outline[-1] == "leaf" and hit.line == DEPTH
