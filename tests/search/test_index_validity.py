"""Search keeps what holds: current items by default, those valid at a moment, or all; filtered before the limit,
in the state searched (a snapshot's properties for as_of), composed with the other filters, kept across saves."""

from datetime import date, datetime

import pytest

import cortex.api as cx
from cortex.errors import UserError
from cortex.search.index import Filters
from cortex.search.items import Item, span_of
from tests.conftest import with_chain

DB = {"mem-assistant-db-15", "mem-assistant-db-16", "mem-assistant-db-17"}


def ids(results, among=DB) -> list[str]:
    return [r.id for r in results if r.id in among]


def test_items_know_when_they_hold(chained):
    index = chained._search_index
    index.follow(chained.working())
    found = {i.id: i for i in index.items.values() if i.id in DB}
    assert (found["mem-assistant-db-16"].valid_from, found["mem-assistant-db-16"].invalid_at,
            found["mem-assistant-db-16"].replaced) == ("2026-10-01T00:00", "2026-11-03T14:00", True)
    assert (found["mem-assistant-db-17"].invalid_at, found["mem-assistant-db-17"].replaced) == (None, False)
    assert span_of(datetime(2026, 11, 3, 14, 0, 30)) == ("2026-11-03T14:00", "2026-11-03T14:01")
    assert span_of(date(2026, 11, 3)) == ("2026-11-03T00:00", "2026-11-04T00:00")
    assert found["mem-assistant-db-17"].holds(span_of(datetime(2026, 11, 3, 14)), current=True)
    assert not found["mem-assistant-db-16"].holds(span_of(datetime(2026, 11, 3, 14)))
    assert found["mem-assistant-db-16"].holds(span_of(date(2026, 11, 3)))  # at some time of that day
    assert found["mem-assistant-db-16"].turns_after("2026-10-15T00:00") == "2026-11-03T14:00"
    replaced_later = Item(1, "m.org", ("x",), (0,), found["mem-assistant-db-17"].oid, None, "x",
                          invalid_at="2099-01-01T00:00", replaced=True)
    assert replaced_later.holds(span_of(datetime(2026, 11, 27)), current=True)  # until its end, said to be later
    assert not Item(1, "m.org", ("x",), (0,), replaced_later.oid, None, "x", replaced=True).holds(
        span_of(datetime(2026, 11, 27)), current=True)


def test_current_items_by_default_then_what_held_then_or_everything(chained):
    assert ids(chained.search("which database do we run?", limit=20)) == ["mem-assistant-db-17"]
    assert ids(chained.search("which database do we run?", limit=20, valid_at="2026-10-15")) == [
        "mem-assistant-db-16"]
    assert ids(chained.search("which database do we run?", limit=20, valid_at="2026-11-03 14:00")) == [
        "mem-assistant-db-17"]
    assert set(ids(chained.search("which database do we run?", limit=20, all=True))) == DB
    vpn = {"mem-assistant-vpn"}
    assert ids(chained.search("office VPN", limit=20), vpn) == []
    assert ids(chained.search("office VPN", limit=20, valid_at="2026-11-19"), vpn) == ["mem-assistant-vpn"]
    # notes and items that say nothing of when they hold always hold
    assert chained.search("dark mode", limit=1)[0].id == "mem-assistant-dark-mode"


def test_the_limit_is_filled_with_current_items_when_replaced_ones_rank_higher(tmp_path, org):
    memory = with_chain(org)
    old = "".join(f"** The database is Postgres 1{n}.\n:PROPERTIES:\n:ID: old-{n}\n:SUPERSEDED_BY: mem-assistant-db-17\n"
                  ":END:\n" for n in range(30))
    memory.write_text(memory.read_text().replace("\n* Procedures\n", "\n" + old + "\n* Procedures\n"))
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        everything = c.search("The database is Postgres", limit=5, all=True)
        assert all(r.id.startswith("old-") or r.id in DB for r in everything)  # the replaced ones rank first
        current = c.search("The database is Postgres", limit=5)
        assert len(current) == 5 and current[0].id == "mem-assistant-db-17"
        assert not any(r.id and (r.id.startswith("old-") or r.id in DB - {"mem-assistant-db-17"}) for r in current)
        words = c.search("The database is Postgres", limit=5, fusion="keyword")  # only what holds a word
        assert words[0].id == "mem-assistant-db-17" and not any((r.id or "").startswith("old-") for r in words)


def test_valid_time_and_the_state_searched_combine(tmp_path, org):
    memory = org / "agents/assistant/memory.org"
    with cx.open(tmp_path / "store", org) as c:
        with_chain(org)  # first as it was before Postgres 17: 16 held, nothing replaced it yet
        text = memory.read_text()
        before = text.replace(":INVALID_AT:    [2026-11-03 Tue 14:00]\n", "").replace(
            ":SUPERSEDED_BY: mem-assistant-db-17\n", "")
        memory.write_text(before.replace(text[text.index("** The database is Postgres 17."):
                                              text.index("** The office VPN")], ""))
        c.ingest()
        c.snapshot("before Postgres 17")
        memory.write_text(text)
        c.ingest()
        query = "which database do we run?"
        assert ids(c.search(query, limit=20)) == ["mem-assistant-db-17"]
        assert ids(c.search(query, limit=20, as_of="HEAD")) == ["mem-assistant-db-16"]
        assert ids(c.search(query, limit=20, valid_at="2026-11-10")) == ["mem-assistant-db-17"]
        assert ids(c.search(query, limit=20, valid_at="2026-11-10", as_of="HEAD")) == ["mem-assistant-db-16"]
        assert ids(c.search(query, limit=20, valid_at="2026-11-10", within="agents/assistant/")) == [
            "mem-assistant-db-17"]
        assert ids(c.search(query, limit=20, agent="assistant", type="fact")) == ["mem-assistant-db-17"]
        assert ids(c.memory.search("assistant", query, 20, valid_at="2026-10-15")) == ["mem-assistant-db-16"]
        assert set(ids(c.memory.search("assistant", query, 20, all=True))) == DB


def reopened(tmp_path, org):
    """A session on a store whose search index an earlier session saved."""
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.search("database")
    return cx.open(tmp_path / "store", org)


def add_fact_holding_from(org, key: str, day: str) -> None:
    """A fact of the assistant's memory, :ID: `key`, that holds from `day` ("2026-11-25 Wed") on."""
    memory = org / "agents/assistant/memory.org"
    memory.write_text(memory.read_text().replace("\n* Procedures\n", "\n** The office VPN is wg.example.com.\n"
                                                 f":PROPERTIES:\n:ID: {key}\n:VALID_FROM: [{day}]\n:END:\n\n"
                                                 "* Procedures\n"))


def test_a_saved_index_keeps_when_items_hold(tmp_path, org):
    with_chain(org)
    with reopened(tmp_path, org) as c:
        assert c._search_index.root == c.working().oid  # loaded, not rebuilt
        assert ids(c.search("which database do we run?", limit=20)) == ["mem-assistant-db-17"]


def test_a_filter_of_current_items_is_redone_once_an_item_stops_holding(chained):
    index = chained._search_index
    index.follow(chained.working())
    current = Filters(agent="assistant", current=True)
    found = lambda now: {r.id for r in index.search("office VPN", limit=50, filters=current, now=now)}  # noqa: E731
    assert "mem-assistant-vpn" in found(datetime(2026, 11, 19, 23, 59))
    assert "mem-assistant-vpn" not in found(datetime(2026, 11, 20))  # the mask of the 19th ran out at midnight
    assert "mem-assistant-vpn" in found(datetime(2026, 11, 19))
    every = index._filter_mask(Filters(current=True), datetime(2026, 9, 2))
    assert every is not None and len(every) < len(index.items)


def test_an_item_added_to_hold_later_joins_a_kept_filter_of_current_items_when_it_starts(chained, org):
    index = chained._search_index
    current = Filters(agent="assistant", current=True)
    found = lambda now: {r.id for r in index.search("office VPN", limit=50, filters=current, now=now)}  # noqa: E731
    index.follow(chained.working())
    assert "mem-assistant-wireguard" not in found(datetime(2026, 11, 21))
    add_fact_holding_from(org, "mem-assistant-wireguard", "2026-11-25 Wed")
    chained.ingest()
    index.follow(chained.working())
    assert "mem-assistant-wireguard" not in found(datetime(2026, 11, 24, 23, 59))
    assert "mem-assistant-wireguard" in found(datetime(2026, 11, 25))


def test_mistakes_in_what_holds_are_said_in_one_line(chained):
    with pytest.raises(UserError, match="all and valid_at exclude each other"):
        chained.search("x", valid_at="2026-11-01", all=True)
    with pytest.raises(UserError, match="'someday' is not a moment; write a day"):
        chained.search("x", valid_at="someday")
    with pytest.raises(UserError, match="all is true or false, not 'yes'"):
        chained.search("x", all="yes")
    with pytest.raises(UserError, match="current now or those valid at a moment, not both"):
        Filters(current=True, valid_at=datetime(2026, 1, 1))


def test_a_filter_of_what_holds_in_every_file_gathers_no_keys_while_every_item_holds(tmp_path, org):
    """A first search on a loaded index leaves its files' keys packed (at a million items, gathering every key
    for a filter that admits them all was most of it); an item that does not hold yet is left out once it comes."""
    every = Filters(current=True)
    with reopened(tmp_path, org) as c:
        index = c._search_index
        assert index.root == c.working().oid  # loaded, not rebuilt
        c.search("which database do we run?")
        assert index.by_path and all(type(keys) is bytes for keys in dict.values(index.by_path))
        assert index._filter_mask(every, datetime(2026, 11, 21)) is None
        add_fact_holding_from(org, "mem-assistant-later", "2099-01-01 Thu")
        c.ingest()
        index.follow(c.working())
        later = next(k for k, i in index.items.items() if i.id == "mem-assistant-later")
        admitted = index._filter_mask(every, datetime(2026, 11, 21))
        assert admitted == set(index.items.keys()) - {later}
