"""Trees kept by folder: a change makes and stores only its folders, a comparison opens only the folders that
differ, and a flat tree stored by an earlier version reads as before; with real LMDB and PostgreSQL stores."""

import pytest

from cortex import objects
from cortex.backends import open_store
from cortex.codec import encode_object
from cortex.hashing import hash_bytes
from cortex.history.gc import reach
from cortex.objects import Folder, Tree
from cortex.org import parse

FOLDERS = 30


def _doc(text: str, store=None):
    """The document of one headline, stored with its headline in `store` if given."""
    parsed = parse(f"* {text}\n")
    if store is not None:
        store.objects.add_many(parsed.objects)
    return parsed.document


def _tree(store) -> Tree:
    """A stored tree of FOLDERS folders (one nested) of three files each, and a file at the top."""
    docs = {f"notes/p{n:02}/f{i}.org": _doc(f"note {n} {i}") for n in range(FOLDERS) for i in range(3)}
    docs["top.org"] = _doc("top")
    store.objects.add_many(docs.values())
    tree = Tree({path: doc.oid for path, doc in docs.items()})
    store.objects.add(tree)
    return tree


def stored(store_at, make):
    """What `make(store)` returns, made in the store at `store_at`, then closed: a later open reads it cold."""
    with open_store(store_at) as store:
        return make(store)


@pytest.fixture
def counted(monkeypatch):
    """How many folders were encoded and decoded since the test asked (counted where objects do both)."""
    seen = {"encoded": 0, "decoded": 0}
    encode, decode = objects.encode_object, Folder.from_fields.__func__

    def encoding(kind, fields):
        seen["encoded"] += kind == "folder"
        return encode(kind, fields)

    def decoding(cls, data):
        seen["decoded"] += 1
        return decode(cls, data)

    monkeypatch.setattr(objects, "encode_object", encoding)
    monkeypatch.setattr(Folder, "from_fields", classmethod(decoding))
    return seen


def test_a_change_to_one_file_makes_and_stores_only_its_folder(store_at, counted):
    oid = stored(store_at, _tree).oid
    with open_store(store_at) as fresh:  # nothing cached: the tree as a later process reads it
        tree = fresh.objects[oid]
        counted.update(encoded=0, decoded=0)
        doc = _doc("changed")
        changed = tree.with_changes({"notes/p07/f1.org": doc.oid, "notes/p07/new.org": doc.oid})
        assert counted == {"encoded": 1, "decoded": 1}  # the folder notes/p07, read and made again
        assert [part.oid for part in changed.parts()] == [changed.folders["notes/p07"]]
        fresh.objects.add(doc)
        assert fresh.objects.add_many([changed]) == 2  # the tree and that folder: nothing else is new
        removed = changed.with_changes({f"notes/p07/{name}": None for name in ("f0.org", "f1.org", "f2.org", "new.org")})
        assert "notes/p07" not in removed.folders and len(removed.entries) == 3 * FOLDERS - 2
    with open_store(store_at) as again:
        reread = again.objects[changed.oid]
        assert reread.entries["notes/p07/f1.org"] == doc.oid and reread.entries["notes/p03/f2.org"] == \
            tree.entries["notes/p03/f2.org"] and len(reread.entries) == 3 * FOLDERS + 2


def test_two_trees_are_compared_opening_only_the_folders_that_differ(store_at, counted):
    def make(store):
        tree, doc = _tree(store), _doc("other")
        store.objects.add(doc)
        store.objects.add(other := tree.with_changes({"notes/p11/f0.org": doc.oid, "top.org": None}))
        return tree, other

    tree, other = stored(store_at, make)
    with open_store(store_at) as fresh:
        a, b = fresh.objects[tree.oid], fresh.objects[other.oid]
        counted.update(decoded=0)
        assert a.differing(b) == {"notes/p11/f0.org", "top.org"}
        assert counted["decoded"] == 3  # notes/p11 of each tree, the top folder of the first; the 29 others never
        assert a.differing(b) == {p for p, _ in tree.flat().items() ^ other.flat().items()}


def test_a_flat_tree_stored_by_an_earlier_version_reads_as_before_and_keeps_its_oid(store_at):
    docs = {"a.org": _doc("a"), "x/b.org": _doc("b")}
    flat = encode_object("tree", {"entries": {path: doc.oid for path, doc in docs.items()}})  # as it was written
    oid = hash_bytes(flat)
    stored(store_at, lambda store: ([_doc(text, store) for text in "ab"], store.objects.add_raw([(oid, flat)])))
    with open_store(store_at) as fresh:
        old = fresh.objects[oid]
        assert old.stored_flat and old.oid == oid and old.encoded == flat
        assert dict(old.entries) == {path: doc.oid for path, doc in docs.items()}
        assert set(old.references) == {doc.oid for doc in docs.values()}
        assert reach(fresh, [oid]) == {oid, *(doc.oid for doc in docs.values()), *(
            h for doc in docs.values() for h in doc.children)}
        new = old.with_changes({"x/c.org": docs["a.org"].oid})
        assert not new.stored_flat and set(new.folders) == {"", "x"}
        fresh.objects.add(new)  # its folders, none stored yet, go with it
        assert reach(fresh, [new.oid]) >= {new.oid, *new.folders.values()}
        assert new.differing(old) == {"x/c.org"}


def test_trees_of_equal_files_are_one_object_however_made():
    a, b = _doc("a"), _doc("b")
    made = Tree({"x/a.org": a.oid, "b.org": b.oid})
    changed = Tree({"b.org": b.oid}).with_changes({"x/a.org": a.oid})
    assert made.oid == changed.oid and made == changed and made.entries == changed.entries
    assert list(made.entries) == ["b.org", "x/a.org"] and made.entries.get("x/none.org") is None
    assert "x/a.org" in made.entries and "x" not in made.entries and Tree().entries == {}
