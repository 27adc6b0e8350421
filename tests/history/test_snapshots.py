"""Naming snapshots (HEAD, HEAD~N, HEAD@{N}, oids, positions), on a real LMDB store."""

import pytest

import cortex.api as cx
from cortex.errors import NotFound


def test_a_name_past_what_gc_kept_says_so_in_one_line(tmp_path):
    with cx.open(tmp_path / "store", folder=False) as c:
        for n in range(5):
            c.workspace.change_files(f"note {n}", {"a.org": lambda current, n=n: f"* Note {n}\n".encode()})
            c.snapshot(f"s{n}")
        assert c.resolve("HEAD~4").message == "s0"
        c.gc(keep_last=2)
        assert c.resolve("HEAD~1").message == "s3"
        with pytest.raises(NotFound, match=r"^HEAD~3: HEAD has only 1 snapshot kept before it \(`gc` collected"):
            c.resolve("HEAD~3")
        with pytest.raises(NotFound, match=r"^HEAD~3: HEAD has only 1 snapshot kept before it"):
            c.diff("HEAD~3", "HEAD")
        with pytest.raises(NotFound, match=r"^HEAD@\{4\}: HEAD has moved only 1 time"):  # (gc expired its log too)
            c.resolve("HEAD@{4}")
