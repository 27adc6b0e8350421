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
