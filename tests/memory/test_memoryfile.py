"""memory.org rewritten item by item: the model a rewrite derives is the one a read of the new file finds."""

from dataclasses import replace
from datetime import datetime

import pytest

from cortex.memory.items import MemoryItem
from cortex.memory.memoryfile import MemoryConflict, MemoryFile, merge
from cortex.org import parse

PATH = "agents/a/memory.org"
WHEN = datetime(2026, 11, 21, 10, 5)

MEMORY = """\
#+TITLE: Memory of a
#+TODO: TODO | DONE

* Facts
- The staging cluster lives in eu-west-1.
- Deploys need two approvals
  from the release team.
** User prefers dark mode in every app.
:PROPERTIES:
:ID:       dark-mode
:END:
Even in the terminal.

** The API rate limit is 100 requests per minute.
:PROPERTIES:
:ID:       rate-limit
:END:


* Procedures
** Run the tests before committing.
:PROPERTIES:
:ID:       tests-first
:END:
*** A deeper note about the suite
* Learned Patterns
- Café questions come on Mondays ☕

"""
NO_CHILDREN = "* Facts\n- a fact\n\n\n* Procedures\n\n* Learned Patterns\n- last line without an end"


def read(text: str) -> MemoryFile:
    parsed = parse(text)
    objects = {obj.oid: obj for obj in parsed.objects}
    return MemoryFile.read(PATH, parsed.document, objects.__getitem__)


def headline(text: str, id: str) -> MemoryItem:
    return MemoryItem(text, id=id, added=WHEN, source="session")


def plain(text: str) -> MemoryItem:
    return MemoryItem(text, plain=True)


def edited(memory: MemoryFile, key: str, **fields) -> tuple[str, MemoryItem]:
    kind, item = memory.entries[key]
    return kind, replace(item, **fields)


def first_list_item(memory: MemoryFile) -> str:
    return next(key for key, (_, item) in memory.entries.items() if item.plain)


def new(*typed: tuple[str, MemoryItem]) -> dict[str, tuple[str, MemoryItem]]:
    return {item.key(kind): (kind, item) for kind, item in typed}


# What a save changes, as `merge` takes it: key -> new (type, item), None to remove.
CHANGES = {
    "append a headline": lambda m: new(("fact", headline("The on-call rotation changes on Mondays.", "on-call"))),
    "append to a section without items": lambda m: new(("procedure", headline("Tag releases.\nWith the date.",
                                                                              "tag-releases"))),
    "add list items": lambda m: new(("fact", plain("Backups run nightly.")), ("pattern", plain("Fridays."))),
    "edit in place": lambda m: {"dark-mode": edited(m, "dark-mode", text="Dark mode, always.")},
    "remove": lambda m: {"rate-limit": None},
    "move to another section": lambda m: {"tests-first": ("pattern", m.entries["tests-first"][1])},
    "turn a list item into a headline": lambda m: {
        first_list_item(m): ("fact", replace(m.entries[first_list_item(m)][1], plain=False, added=WHEN))},
    "everything at once": lambda m: {
        "dark-mode": None, "tests-first": edited(m, "tests-first", tags=("ci",)),
        **new(("fact", headline("One more fact.", "one-more")), ("procedure", plain("Ask before deleting branches.")),
              ("pattern", headline("A new pattern.", "new-pattern")))},
}
CASES = [(text, change) for text in ("lf", "crlf") for change in CHANGES] + [
    ("no-children", change) for change in ("append a headline", "append to a section without items",
                                           "add list items", "turn a list item into a headline")]
TEXTS = {"lf": MEMORY, "crlf": MEMORY.replace("\n", "\r\n"), "no-children": NO_CHILDREN}


@pytest.mark.parametrize("text, change", CASES)
def test_a_rewrite_derives_the_model_a_read_of_the_new_file_finds(text, change):
    memory = read(TEXTS[text])
    memory.texts  # noqa: B018 - the index of texts, once built, is carried over too
    changed, added = merge(PATH, memory.entries, CHANGES[change](memory), memory, "a")
    data, derived = memory.rewrite(changed, added, "Memory of a")
    fresh = read(data.decode())
    assert derived is not None and fresh.warnings == ()
    assert derived.render() == data
    assert derived.sections == fresh.sections
    assert dict(derived.entries) == dict(fresh.entries)
    assert derived.kinds == fresh.kinds
    assert derived.texts == fresh.texts


def test_only_the_changed_items_are_rewritten_and_blank_lines_stay_where_they_were():
    memory = read(MEMORY)
    new = ("fact", headline("The on-call rotation changes on Mondays.", "on-call"))
    changed, added = merge(PATH, memory.entries, {"on-call": new}, memory, "a")
    data, _ = memory.rewrite(changed, added, "Memory of a")
    assert data.decode() == MEMORY.replace(
        ":ID:       rate-limit\n:END:\n\n\n",
        ":ID:       rate-limit\n:END:\n** The on-call rotation changes on Mondays.\n:PROPERTIES:\n:ID:       on-call\n"
        ":ADDED:    [2026-11-21 Sat 10:05]\n:SOURCE:   session\n:END:\n\n\n")


def test_a_list_item_added_after_a_last_line_without_an_end_starts_a_line_of_its_own():
    memory = read(NO_CHILDREN)
    data, derived = memory.rewrite({}, [("pattern", plain("Fridays are quiet."))], "Memory of a")
    assert data.decode().endswith("* Learned Patterns\n- last line without an end\n- Fridays are quiet.\n")
    assert derived.kinds["pattern"] == (plain("last line without an end"), plain("Fridays are quiet."))


def test_new_sections_and_files_with_warnings_are_left_to_a_read_of_the_whole_file():
    only_facts = read("* Facts\n- one\n")
    data, derived = only_facts.rewrite({}, [("pattern", plain("two"))], "Memory of a")
    assert data == b"* Facts\n- one\n\n* Learned Patterns\n- two\n" and derived is None
    with_notes = read("* Notes\nmine\n* Facts\n- one\n")
    assert with_notes.warnings
    data, derived = with_notes.rewrite({}, [("fact", plain("two"))], "Memory of a")
    assert data == b"* Notes\nmine\n* Facts\n- one\n- two\n" and derived is None
    data, derived = MemoryFile(PATH).rewrite({}, [("fact", plain("first"))], "Memory of a")
    assert data == b"#+TITLE: Memory of a\n\n* Facts\n- first\n" and derived is None


def test_a_conflict_names_the_line_of_the_item_in_the_file():
    memory = read(MEMORY)
    ours = {"rate-limit": ("fact", headline("The API rate limit is 50 requests per minute.", "rate-limit"))}
    base = {"rate-limit": ("fact", headline("The API rate limit is 120 requests per minute.", "rate-limit"))}
    with pytest.raises(MemoryConflict, match=f"{PATH}:14: item rate-limit 'The API rate limit is 100 requests per "
                                             "minute.' was changed in the file, and changed differently here"):
        merge(PATH, base, ours, memory, "a")
