"""What `diff`, `log` and `history` say changed, and the text of each change (`patch`), on a real LMDB store."""

from datetime import datetime

import pytest

import cortex.api as cx
from cortex.memory.agents import MemoryContext

NOW = datetime(2026, 11, 21, 10, 5)
MEMORY = "agents/bot/memory.org"
FACTS = ("#+TITLE: Memory of bot\n\n* Facts\n"
         "** The sky is blue.\n:PROPERTIES:\n:ID:       sky\n:END:\n"
         "** Water is wet.\n:PROPERTIES:\n:ID:       water\n:END:\n\n"
         "* Procedures\n** Check twice.\n:PROPERTIES:\n:ID:       twice\n:END:\n")


@pytest.fixture
def store(tmp_path):
    with cx.open(tmp_path / "store", folder=False) as c:
        yield c


def write(c, path, text):
    c.workspace.change_files(f"write {path}", {path: lambda current: text.encode()})


def said(c):
    """What diff says from HEAD to the working state, then HEAD moved there."""
    found = [(change.kind, change.outline[-1]) for change in c.diff()]
    c.snapshot("step")
    return found


def test_a_memory_writer_never_reports_the_headline_before_its_write_as_changed(store):
    write(store, MEMORY, FACTS)
    store.snapshot("base")
    memory = store.memory
    memory.add_item("bot", "fact", "Fire is hot.", now=NOW)  # after "Water is wet.", whose blank line it takes
    assert said(store) == [("added", "Fire is hot.")]
    memory.add_item("bot", "procedure", "Ask once.", now=NOW)  # at the end of the file, after "Check twice."
    assert said(store) == [("added", "Ask once.")]
    for n in range(2):  # the second entry of a daily log after the first
        memory.save_context("bot", MemoryContext(summary=f"Talked {n}.", title=f"Chat {n}", session=f"s{n}"),
                            now=NOW.replace(minute=n))
        assert said(store) == [("added", f"{NOW:%H}:0{n} — Chat {n}")]
    memory.retire("bot", "water", now=NOW)
    assert said(store) == [("changed", "Water is wet.")]
    memory.forget("bot", "Fire is hot.")  # the last fact: its blank line goes back to the one before (a snapshot)
    assert [(c.kind, c.outline[-1]) for c in store.diff("HEAD~1", "HEAD")] == [("removed", "Fire is hot.")]
    assert [v.change for v in store.history("water")] == ["tags, properties", "added"]  # newest first


def test_log_counts_headlines_as_diff_names_them(store):
    write(store, "a.org", "* One\n* Two\n")
    store.snapshot("base")
    write(store, "a.org", "* One\nchanged\n* Two\n* Three\n** Four\n*** Five\n")
    (changed, added), = [store.diff()]
    assert (changed.kind, added.kind, added.headlines) == ("changed", "added", 3)
    assert str(added) == "added    a.org: Three (3 headlines)"
    store.snapshot("more")
    write(store, "b.org", "* Moved\n:PROPERTIES:\n:ID: m\n:END:\n** Under it\n")
    store.snapshot("moved in")
    write(store, "b.org", "")
    write(store, "a.org", "* One\nchanged\n* Two\n* Three\n** Four\n*** Five\n* Moved\n:PROPERTIES:\n:ID: m\n:END:\n"
                          "** Under it\n")
    store.snapshot("moved")
    assert [entry.changes for entry in store.log()] == [{"moved": 2}, {"added": 2}, {"added": 3, "changed": 1},
                                                       {"added": 2}]


def test_a_patch_shows_a_changed_headlines_own_text_and_an_added_subtree_whole(store):
    write(store, "a.org", "* Plan\n:PROPERTIES:\n:ID: plan\n:END:\nold line\n** Step\nkept\n")
    store.snapshot("base")
    write(store, "a.org", "* Plan\n:PROPERTIES:\n:ID: plan\n:END:\nnew line\n** Step\nkept\n* Later\n** Sub\n")
    assert store.patch(store.diff()).split("\n") == [
        "changed  a.org: Plan [plan] (text)",
        "--- a/a.org: Plan",
        "+++ b/a.org: Plan",
        "@@ -2,4 +2,4 @@",
        " :PROPERTIES:",
        " :ID: plan",
        " :END:",
        "-old line",
        "+new line",
        "added    a.org: Later (2 headlines)",
        "--- /dev/null",
        "+++ b/a.org: Later",
        "@@ -0,0 +1,2 @@",
        "+* Later",
        "+** Sub",
    ]
    store.snapshot("edited")
    entry, _ = store.log()
    assert store.patch([entry]).split("\n")[1:3] == ["changed  a.org: Plan [plan] (text)", "--- a/a.org: Plan"]
    newest, first = store.history("plan")
    assert store.patch([newest]).split("\n")[-4:] == ["-old line", "+new line", " ** Step", " kept"]  # its subtree
    assert store.patch([first]).split("\n")[1:3] == ["--- /dev/null", "+++ b/a.org: Plan"]



def test_a_headline_is_located_in_each_snapshot_from_what_it_changed_as_its_whole_tree_says(store):
    """`history` reads only the files each snapshot changed; where it finds the headline is where `with_id` finds
    it in the snapshot's whole tree: edited, copied into a second file, moved, removed, back again."""
    import random

    from cortex.history import snapshots
    from cortex.history.diff import located
    from cortex.query import with_id

    rng = random.Random(5)
    paths = ["a.org", "b.org", "sub/c.org", "sub/deep/d.org"]
    for step in range(80):
        choice = rng.random()
        if choice < 0.3:
            text = f"* Other {step}\n* Target {rng.randint(0, 3)}\n:PROPERTIES:\n:ID: x\n:END:\nbody {rng.randint(0, 2)}\n"
        else:
            text = "" if choice < 0.45 else f"* Note {step}\n** Under it\n"
        write(store, rng.choice(paths), text)
        store.snapshot(f"step {step}")
    whole = [with_id(store.store, store.store.objects[snap.root], "x") for snap in reversed(snapshots(store.store))]
    assert [None if found is None else (found[0], found[1].oid) for _, found in located(store.store, "x")] == \
        [None if node is None else (node.path, node.headline.oid) for node in whole]
    assert None in whole and len({node.path for node in whole if node}) == 4  # removed, and in every file
    assert len(store.history("x")) > 10
