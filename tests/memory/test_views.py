"""What `memory inspect` shows: memory.org with the items that hold (every other byte as written), the items apart
and why, through the api on real files and LMDB."""

import pytest

from cortex.errors import NotFound
from tests.conftest import CHAIN

MEMORY = "agents/assistant/memory.org"


def test_current_items_are_shown_and_the_rest_of_the_file_is_as_written(chained, org):
    c, path = chained, org / MEMORY
    view = c.inspect_memory("assistant")
    text = path.read_text()
    left_out = [CHAIN[CHAIN.index(f"** The {what}"):] for what in ("database is Postgres 15", "database is Postgres 16",
                                                                   "office VPN")]
    expected = text
    for block in left_out:
        block = block[:block.index(":END:\n") + 6]
        expected = expected.replace(block, "")
    assert view.text == expected and "** The database is Postgres 17." in view.text
    assert [item.id for _, item in view.apart] == ["mem-assistant-db-15", "mem-assistant-db-16", "mem-assistant-vpn"]
    assert view.summary == ("assistant: 7 facts, 1 procedure, 1 learned pattern; 1 daily log, 2026-11-20; "
                            "3 items no longer current, left out")
    assert view.notes() == [
        "The database is Postgres 15. [mem-assistant-db-15]: superseded by mem-assistant-db-16 on 2026-10-01",
        "The database is Postgres 16. [mem-assistant-db-16]: superseded by mem-assistant-db-17 on 2026-11-03 14:00",
        "The office VPN is vpn.example.com. [mem-assistant-vpn]: invalid from 2026-11-20"]


def test_every_item_or_those_that_held_then(chained, org):
    c, path = chained, org / MEMORY
    every = c.inspect_memory("assistant", all=True)
    assert every.text == path.read_text() and len(every.apart) == 3
    assert every.summary.endswith("; 3 items no longer current")
    then = c.inspect_memory("assistant", valid_at="2026-10-15")
    assert "Postgres 16." in then.text and "Postgres 17." not in then.text and "vpn.example.com" in then.text
    assert "dark mode" not in then.text  # added on 2026-11-18: it did not hold yet
    assert "; 6 items not valid on 2026-10-15, left out" in then.summary
    assert "User prefers dark mode in every app. [mem-assistant-dark-mode]: valid from 2026-11-18 09:12" in then.notes()


def test_a_memory_whose_items_all_hold_is_shown_whole_and_a_missing_one_is_not_found(cortex, org):
    view = cortex.inspect_memory("reviewer")
    assert view.text == (org / "agents/reviewer/memory.org").read_text() and view.apart == ()
    assert "no longer" not in view.summary
    nobody = cortex.inspect_memory("nobody")
    assert nobody.text is None
    with pytest.raises(NotFound, match="agents/nobody/memory.org: agent 'nobody' has no memory.org"):
        nobody.org
