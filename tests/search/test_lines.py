"""The lines of an index's items: counted as files are read, kept packed as a saved index loads them."""

import cortex.api as cx
from cortex.search.lines import Lines

NOTES = "* One\ntext\n* Two\n** Two and a half\n* Three\n"


def test_saved_lines_answer_until_their_items_leave_and_save_again_with_those_counted_since(tmp_path):
    org = tmp_path / "org"
    org.mkdir()
    (org / "notes.org").write_text(NOTES)
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.search("two")  # the index follows the working state
        index = c._search_index
        tree = index.tree
        items = sorted(index.items.values(), key=lambda i: i.position)
        assert [index.lines.of(i, tree) for i in items] == [1, 3, 4, 5]
        loaded = Lines(c.store)
        loaded.load(*index.lines.packed())
        assert loaded.line_of == {} and [loaded.of(i, tree) for i in items] == [1, 3, 4, 5]
        loaded.removed(items[0].key)
        loaded.line_of[items[1].key] = 30  # counted again since it was saved
        keys, lines, lined = loaded.packed()
        again = Lines(c.store)
        again.load(keys, lines, lined)
        assert [again._saved_at(i.key) for i in items] == [None, 30, 4, 5] and lined == ["notes.org"]
        again.clear()
        assert again._saved_at(items[2].key) is None and again.lined == set()
