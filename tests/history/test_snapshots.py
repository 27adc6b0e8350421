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


def test_a_snapshot_counts_from_heads_counts_what_changed_and_agrees_with_a_full_count(tmp_path):
    from cortex.history.snapshots import SUMMARIES

    files = {f"f{n}.org": "".join(f"* H {n}.{h}\n** Child\n" for h in range(n + 1)) for n in range(6)}
    with cx.open(tmp_path / "store", folder=False) as c:
        c.workspace.change_files("start", {p: lambda current, t=t: t.encode() for p, t in files.items()})
        start = c.store.objects[c.snapshot("start").root]
        unchanged = {start.entries[p] for p in ("f0.org", "f4.org", "f5.org")}
        c.store.transact(lambda: [c.store.table(SUMMARIES).pop(oid) for oid in unchanged])  # not counted again
        edits = {"f1.org": "* One\n",  # fewer headlines
                 "f2.org": None,  # removed
                 "new.org": "* A\n** B\n*** C\n",  # added
                 "copy.org": files["f3.org"]}  # a document another path holds too
        c.workspace.change_files("edit", {p: lambda current, t=t: None if t is None else t.encode()
                                          for p, t in edits.items()})
        counted = []
        objects = c.store.objects
        original = type(objects).__getitem__
        type(objects).__getitem__ = lambda self, oid: counted.append(oid) or original(self, oid)
        try:
            snap = c.snapshot("edited")
        finally:
            type(objects).__getitem__ = original
        tree = c.store.objects[snap.root]
        expected = sum(t.count("\n") for p, t in {**files, **edits}.items() if t is not None)
        assert snap.counts == {"files": len(tree.entries), "headlines": expected}
        assert not unchanged & set(counted)  # from HEAD's counts: only the documents the trees do not share are read
        c.store.transact(lambda: c.store.table(SUMMARIES).clear())
        assert c.workspace.snapshot("again").counts == snap.counts  # a full count agrees
