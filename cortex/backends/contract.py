"""The contract every store backend passes, as a pytest mixin.

Subclass `StoreContract` in a test module and give it a `store` fixture that yields a
fresh, empty `Store`; pytest then runs every test below against that backend.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from ..errors import ChecksumMismatch, NotFound, RefConflict
from ..objects import Document, Headline, Tree
from .base import OBJECTS


def _headline(n: int) -> Headline:
    return Headline(level=1, title=f"item {n}", raw=f"* item {n}\n")


class StoreContract:
    """Behaviour shared by every backend: objects, refs, reflog, tables, transactions."""

    def test_object_round_trip(self, store):
        h = _headline(1)
        oid = store.objects.add(h)
        assert oid == h.oid and oid in store.objects
        assert store.objects[oid] == h

    def test_add_many_counts_only_new_objects(self, store):
        objs = [_headline(n) for n in range(10)]
        assert store.objects.add_many(objs) == 10
        assert store.objects.add_many(objs + [_headline(10)]) == 1
        assert len(store.objects) == 11 and set(store.objects) == {o.oid for o in objs} | {_headline(10).oid}

    def test_equal_content_is_stored_once(self, store):
        doc = Document(preamble="#+TITLE: x\n", children=(_headline(1).oid,))
        store.objects.add_many([doc, Document(preamble="#+TITLE: x\n", children=(_headline(1).oid,))])
        assert len(store.objects) == 1

    def test_missing_object_is_not_found(self, store):
        with pytest.raises(NotFound):
            store.objects[_headline(1).oid]
        assert store.objects.get(_headline(1).oid) is None

    def test_damaged_object_is_detected(self, store):
        h = _headline(1)
        store.transact(lambda: store.engine.put(OBJECTS, h.oid, _headline(2).encoded))
        with pytest.raises(ChecksumMismatch) as err:
            store.objects[h.oid]
        assert err.value.expected == h.oid.hex() and err.value.got == _headline(2).oid.hex()

    def test_refs_move_by_compare_and_swap(self, store):
        a, b = _headline(1).oid, _headline(2).oid
        assert store.refs.get("HEAD") is None
        store.refs.set_if_equals("HEAD", a, None, "first")
        store.refs.set_if_equals("HEAD", b, a, "second")
        assert store.refs.get("HEAD") == b
        with pytest.raises(RefConflict) as err:
            store.refs.set_if_equals("HEAD", a, a, "stale")
        assert err.value.actual == b and store.refs.get("HEAD") == b
        assert [(e.old, e.new, e.message) for e in store.refs.reflog("HEAD")] == [
            (None, a, "first"), (a, b, "second")]

    def test_ref_deletion_is_logged(self, store):
        a = _headline(1).oid
        store.refs.set_if_equals("tmp", a, None)
        store.refs.set_if_equals("tmp", None, a, "drop")
        assert store.refs.get("tmp") is None and store.refs.names() == []
        assert store.refs.reflog("tmp")[-1].new is None
        assert set(store.refs.reflog_oids()) == {a}

    def test_reflog_rewritten_in_place(self, store):
        a, b, c = (_headline(n).oid for n in (1, 2, 3))
        store.refs.set_if_equals("HEAD", a, None, "first")
        store.refs.set_if_equals("HEAD", b, a, "second")
        store.refs.set_if_equals("HEAD", c, b, "quiet", logged=False)
        assert store.refs.rewrite_log("HEAD", lambda e: replace(e, new=c) if e.new == b else e) == 1
        store.refs.set_if_equals("HEAD", a, c, "third")
        assert [(e.old, e.new, e.message) for e in store.refs.reflog("HEAD")] == [
            (None, a, "first"), (a, c, "second"), (c, a, "third")]

    def test_racing_writers_one_wins(self, store):
        start = _headline(0).oid
        store.refs.set_if_equals("HEAD", start, None)
        outcomes = []

        def race(n):
            try:
                store.refs.set_if_equals("HEAD", _headline(n).oid, start, f"writer {n}")
                outcomes.append(n)
            except RefConflict:
                outcomes.append(None)

        threads = [threading.Thread(target=race, args=(n,)) for n in range(1, 9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [n for n in outcomes if n is not None]
        assert len(winners) == 1 and store.refs.get("HEAD") == _headline(winners[0]).oid
        assert len(store.refs.reflog("HEAD")) == 2

    def test_failed_transaction_writes_nothing(self, store):
        tree = Tree({"a.org": _headline(1).oid})

        def half_done():
            store.objects.add(tree)
            store.refs.set_if_equals("HEAD", tree.oid, None)
            store.table("state")[b"k"] = b"v"
            raise RuntimeError("killed")

        with pytest.raises(RuntimeError):
            store.transact(half_done)
        assert tree.oid not in store.objects and store.refs.get("HEAD") is None
        assert store.refs.reflog("HEAD") == [] and b"k" not in store.table("state")

    def test_tables_are_separate_namespaces(self, store):
        a, b = store.table("a"), store.table("ab")
        a[b"x1"], a[b"x2"], a[b"y"] = b"1", b"2", b"3"
        b[b"x1"] = b"other"
        assert a[b"x1"] == b"1" and len(a) == 3 and len(b) == 1
        assert a.items(b"x") == [(b"x1", b"1"), (b"x2", b"2")]
        assert list(a.keys_in_order()) == [b"x1", b"x2", b"y"] and list(b.keys_in_order()) == [b"x1"]
        del a[b"x1"]
        assert b"x1" not in a and b[b"x1"] == b"other"
        with pytest.raises(KeyError):
            del a[b"missing"]
        a[b"x1"], b[b"x2"] = b"1", b"other"
        assert a.delete_many([b"x1", b"x2", b"missing", b"x1"]) == 2 and list(a) == [b"y"]
        assert list(b) == [b"x1", b"x2"] and store.transact(lambda: a.delete_many([b"y"])) == 1 and len(a) == 0
        assert b.delete_many([b"x2"]) == 1 and a.delete_many([]) == 0
        a[b"y"] = b"3"
        a.clear()
        assert len(a) == 0 and len(b) == 1

    def test_batches_read_write_and_insert_only_new_keys(self, store):
        table = store.table("t")
        table[b"a"] = b"old"
        table.update({b"a": b"new", b"b": b"2"})
        assert table.get_many([b"b", b"missing", b"a"]) == [b"2", None, b"new"]
        assert table.put_new([(b"a", b"ignored"), (b"c", b"3")]) == 1
        assert table.items() == [(b"a", b"new"), (b"b", b"2"), (b"c", b"3")]

    def test_reading_block_sees_one_state(self, store):
        table = store.table("t")
        table[b"k"] = b"old"
        writer = threading.Thread(target=lambda: table.__setitem__(b"k", b"new"))
        with store.reading():
            first = table[b"k"]
            writer.start()
            writer.join(timeout=0.3)
            assert table[b"k"] == first == b"old"
        writer.join()
        assert table[b"k"] == b"new"

    def test_exclusive_block_nests_and_compacts(self, store):
        objs = [_headline(n) for n in range(60)]
        store.objects.add_many(objs)
        store.refs.set_if_equals("HEAD", objs[0].oid, None)
        store.objects.delete_many(o.oid for o in objs[30:])
        with store.engine.exclusively():
            with store.engine.exclusively():
                store.engine.compact()
            store.objects.add(_headline(99))
        store.engine.compact()
        assert len(store.objects) == 31 and store.objects[objs[1].oid] == objs[1]
        assert store.refs.get("HEAD") == objs[0].oid and store.engine.verify() == []
