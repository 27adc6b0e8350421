"""The api reads what holds: query and find keep current headlines unless valid_at or all, in the working state or
a snapshot; show takes as_of; chain follows what replaced what from an :ID:, a node or a search result."""

import pytest

from cortex.errors import NotFound, UserError


@pytest.fixture
def retired(chained, org):
    """The chain snapshotted, then Postgres 17 stopping to hold too, with no successor: retired by hand."""
    chained.snapshot("the chain")
    memory = org / "agents/assistant/memory.org"
    memory.write_text(memory.read_text().replace(":SUPERSEDES:    mem-assistant-db-16\n",
                                                 ":SUPERSEDES:    mem-assistant-db-16\n:INVALID_AT:    [2026-11-25 Wed]\n"))
    chained.ingest()
    return chained


def titles(nodes) -> list[str]:
    return [n.title for n in nodes if "Postgres" in n.title]


def test_query_and_find_keep_what_holds_in_the_state_asked(retired):
    c = retired
    assert titles(c.query('(heading "Postgres")')) == []
    assert titles(c.query('(heading "Postgres")', as_of="HEAD")) == ["The database is Postgres 17."]
    assert titles(c.query('(heading "Postgres")', valid_at="2026-11-24")) == ["The database is Postgres 17."]
    assert titles(c.query('"Postgres"', match=False, valid_at="2026-10-15", as_of="HEAD")) == [
        "The database is Postgres 16."]
    assert len(titles(c.query('(heading "Postgres")', all=True))) == 3
    assert titles(c.query('(valid :at "2026-09-01")', all=True, within="agents/assistant/")) == [
        "The database is Postgres 15."]
    assert titles(c.find(text="Postgres")) == [] and len(titles(c.find(text="Postgres", all=True))) == 3
    assert titles(c.find(prop="SUPERSEDES", ref="HEAD")) == ["The database is Postgres 17."]
    assert titles(c.find(prop="SUPERSEDES", valid_at="2026-10-15")) == ["The database is Postgres 16."]


def test_show_as_of_a_snapshot_and_the_chain_there_or_now(retired):
    c = retired
    assert ":INVALID_AT:    [2026-11-25 Wed]" in c.show("mem-assistant-db-17")
    assert ":INVALID_AT:" not in c.show("mem-assistant-db-17", as_of="HEAD")
    now = c.chain("mem-assistant-db-17")
    assert now.validity.end is not None and [s.id for s in now.earlier] == ["mem-assistant-db-16",
                                                                             "mem-assistant-db-15"]
    assert c.chain("mem-assistant-db-17", as_of="HEAD").validity.end is None
    assert c.chain(c.lookup("mem-assistant-db-15")).later[0].id == "mem-assistant-db-16"
    result = c.search("which database do we run?", agent="assistant", all=True, limit=20)
    found = next(r for r in result if r.id == "mem-assistant-db-16")
    assert [s.id for s in c.chain(found).later] == ["mem-assistant-db-17"]


def test_a_chain_needs_an_id_that_is_there(chained):
    with pytest.raises(UserError, match="a chain is followed from a headline's :ID:"):
        chained.chain(chained.query('(and (heading "Facts") (level 1))')[0])  # a section: no :ID:
    with pytest.raises(NotFound, match="no headline with :ID: mem-none"):
        chained.chain("mem-none")
    with pytest.raises(UserError, match="all and valid_at exclude each other"):
        chained.query("(todo)", valid_at="today", all=True)
