"""gc follows a tree into its folders: a kept state's folders stay, those only a dropped one held go."""

from cortex.backends import open_store
from cortex.history import apply_retention, gc, snapshot
from cortex.history.fsck import fsck
from cortex.ingest import commit_files, working_tree


def test_gc_keeps_the_folders_kept_states_reach_and_collects_the_others(store_at):
    with open_store(store_at) as store:
        commit_files(store, lambda tree: {"a/one.org": b"* One\n", "b/two.org": b"* Two\n"}, "first")
        first = working_tree(store)
        snapshot(store, "first")
        commit_files(store, lambda tree: {"b/two.org": b"* Two, edited\n"}, "second")
        second = working_tree(store)
        snapshot(store, "second")
        assert first.folders["a"] == second.folders["a"] and first.folders["b"] != second.folders["b"]
        apply_retention(store, keep_last=1)
        store.refs.expire("working", lambda entry: entry.new == second.oid)
        assert gc(store) > 0
        assert first.folders["b"] not in store.objects and first.oid not in store.objects
        assert all(oid in store.objects for oid in second.folders.values())
        assert fsck(store) == []


def test_gc_keeps_everything_a_kept_state_reaches_when_the_object_cache_fills_while_it_marks(store_at, monkeypatch):
    """The object cache clears itself when full: an object cached as a level of the walk began, then cleared by
    the decoding of the others, was taken as missing, and gc collected what it reached (seen at 1M headlines)."""
    from cortex.backends.base import ObjectStore

    files = {f"notes/{n}.org": f"* Note {n}\n** Part {n}\nText {n}.\n".encode() for n in range(40)}
    with open_store(store_at) as store:
        commit_files(store, lambda tree: files, "first")
        snapshot(store, "first")
        before = len(store.objects)
    with open_store(store_at) as store:
        monkeypatch.setattr(ObjectStore, "CACHE_SIZE", 16)
        store.objects.load_many(list(working_tree(store).entries.values())[:8])  # cached as gc begins
        assert gc(store) == 0
        assert len(store.objects) == before and fsck(store) == []
