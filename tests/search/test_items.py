"""Search over conversations and dated memory: each turn is an item that knows its day and speaker, identical
turns stay distinct, sessions do not crowd turns, neighbouring turns count and come along, periods filter and
raise."""

import re
from datetime import date
from decimal import Decimal

import pytest

import cortex.api as cx
from cortex.errors import UserError
from cortex.search.dates import named_period
from cortex.search.items import item_date

LOG = "agents/pal/logs/2023-05-08.org"
LATER = "agents/pal/logs/2023-07-02.org"

MAY = """* 13:56 — Session 1
:PROPERTIES:
:SESSION:  pal-1
:PEOPLE:   Caroline, Melanie
:END:
** Caroline: Hey Mel! How have you been?
** Melanie: Swamped with the kids. What did you do this week?
** Caroline: I went to an LGBTQ support group yesterday, it was so powerful.
** Melanie: ok
** Caroline: I am researching adoption agencies now.
** Melanie: ok
"""
JULY = """* 10:02 — Session 2
:PROPERTIES:
:SESSION:  pal-2
:END:
** Melanie: We went camping at the beach with the kids.
** Caroline: Did you see the pottery workshop flyer?
"""
NOTES = """* Planning
** 2023-06-14 Wednesday
*** Reviewed the quarterly budget with finance
* Release of the mobile app <2023-09-01 Fri>
* Undated idea about the garden
"""


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    root = tmp_path_factory.mktemp("conversations")
    org = root / "org"
    for path, text in ((LOG, MAY), (LATER, JULY), ("notes/plans.org", NOTES)):
        (org / path).parent.mkdir(parents=True, exist_ok=True)
        (org / path).write_text(text)
    with cx.open(root / "store", org) as c:
        c.ingest()
        yield c


def items(c):
    index = c._search_index
    index.follow(c.working())
    return list(index.items.values())


def test_identical_turns_of_one_session_stay_distinct_items(searched):
    oks = [i for i in items(searched) if i.text == "Melanie: ok"]
    assert len(oks) == 2 and len({i.key for i in oks}) == 2
    assert sorted(i.position for i in oks) == [(0, 3), (0, 5)]
    found = searched.search("ok", agent="pal", speaker="Melanie", fusion="keyword")
    assert sorted(r.line for r in found if r.text == "Melanie: ok") == [9, 11]


def test_items_know_their_day_and_speaker(searched):
    by_text = {i.text.split("\n")[0]: i for i in items(searched)}
    turn = by_text["Caroline: I am researching adoption agencies now."]
    assert (turn.date, turn.speaker) == ("2023-05-08", "Caroline")
    assert by_text["Melanie: We went camping at the beach with the kids."].date == "2023-07-02"
    assert by_text["Reviewed the quarterly budget with finance"].date == "2023-06-14"  # under a dated heading
    assert by_text["Release of the mobile app <2023-09-01 Fri>"].date == "2023-09-01"  # an active timestamp
    assert by_text["Undated idea about the garden"].date is None
    assert by_text["13:56 — Session 1"].container and by_text["13:56 — Session 1"].speaker is None


def test_session_entries_do_not_crowd_the_turns(searched):
    found = searched.search("the first session with Caroline", agent="pal", limit=20)
    assert len(found) == 8 and all(not r.item.container for r in found)  # the eight turns, no session
    titled = searched.search("13:56 — Session 1", agent="pal", limit=3)
    assert titled[0].item.container  # its title holds every word of the query


def test_speaker_filter_keeps_one_persons_turns(searched):
    found = searched.search("what did they do", agent="pal", speaker="caroline", limit=10)
    assert found and {r.item.speaker for r in found} == {"Caroline"}
    assert searched.search("kids", speaker="Nobody") == []


def test_a_hit_brings_its_neighbouring_turns(searched):
    hit = searched.search("adoption agencies", agent="pal", limit=1, context=1)[0]
    assert hit.text == "Caroline: I am researching adoption agencies now."
    assert [t.text for t in hit.before] == ["Melanie: ok"] and [t.text for t in hit.after] == ["Melanie: ok"]
    wide = searched.search("adoption agencies", agent="pal", limit=1, context=2)[0]
    assert len(wide.before) == 2 and len(wide.after) == 1  # the session ends there
    with pytest.raises(UserError, match="context"):
        searched.search("x", context=-1)


def test_a_period_filters_and_a_named_period_raises(searched):
    may = searched.search("kids", since="2023-05-01", until="2023-05-31", limit=10)
    assert may and {r.item.date for r in may} == {"2023-05-08"}
    assert all(r.item.date for r in searched.search("budget", since="2023-01-01", limit=10))
    named = searched.search("what happened with the kids in July 2023?", agent="pal", limit=1)[0]
    assert named.item.date == "2023-07-02" and "date (within July 2023)" in named.explain()
    total, *parts = re.findall(r"(?:^fused |= |\) \+ )(\d+\.\d+)", named.explain())
    assert len(parts) == 3 and sum(map(Decimal, parts)) == Decimal(total)  # the printed terms add up
    with pytest.raises(UserError, match="not a date"):
        searched.search("x", since="last tuesday")


def test_path_filters_match_by_prefix(searched):
    found = searched.search("kids", path="agents/pal/logs/2023-05", limit=10)
    assert found and {r.path for r in found} == {LOG}


@pytest.mark.parametrize("query, period", [
    ("What did Nate do for Joanna on 25 May, 2022?", (date(2022, 5, 25), date(2022, 5, 25))),
    ("What painting did Melanie show on October 13, 2023?", (date(2023, 10, 13), date(2023, 10, 13))),
    ("deploys on 2026-11-20", (date(2026, 11, 20), date(2026, 11, 20))),
    ("What setback did Melanie face in October 2023?", (date(2023, 10, 1), date(2023, 10, 31))),
    ("How many times in 2023?", (date(2023, 1, 1), date(2023, 12, 31))),
    ("what did I fix yesterday", (date(2026, 11, 26), date(2026, 11, 26))),
    ("notes from last week", (date(2026, 11, 16), date(2026, 11, 22))),
    ("last month's incidents", (date(2026, 10, 1), date(2026, 10, 31))),
])
def test_periods_named_in_a_query(query, period):
    found = named_period(query, today=date(2026, 11, 27))
    assert (found.start, found.end) == period


def test_what_names_no_period():
    assert named_period("May I ask about the 2.3.1 release of E2023?", today=date(2026, 11, 27)) is None
    june = named_period("When did Melanie go camping in June?")
    assert june.month == 6 and date(2023, 6, 9) in june and date(2023, 7, 9) not in june
    assert named_period("on 31 February") is None and named_period("the 2023 budget") is None


def test_an_identical_turn_added_later_is_a_new_item(tmp_path):
    log = tmp_path / "org" / LOG
    log.parent.mkdir(parents=True)
    log.write_text(MAY)
    with cx.open(tmp_path / "store", tmp_path / "org") as c:
        c.ingest()
        count = lambda: sum(i.text == "Melanie: ok" for i in items(c))  # noqa: E731
        assert count() == 2
        log.write_text(MAY + "** Melanie: ok\n")
        c.ingest()
        assert count() == 3
        log.write_text(MAY.replace("** Melanie: ok\n", "", 1))
        c.ingest()
        assert count() == 1


TAGGED = """#+FILETAGS: :home:
* Deploy pipeline  :ops:
** Staging database migration  :db:
*** Copy the tables
* Garden beds
"""


def test_items_carry_inherited_tags_and_follow_the_edits_of_a_heading_or_the_file(tmp_path):
    from cortex.search.items import changed_units

    notes = tmp_path / "org" / "notes.org"
    notes.parent.mkdir()
    notes.write_text(TAGGED)
    with cx.open(tmp_path / "store", tmp_path / "org") as c:
        c.ingest()
        tags = lambda: {i.outline[-1]: set(i.tags) for i in items(c)}  # noqa: E731
        found = lambda tag: sorted(r.outline[-1] for r in c.search(  # noqa: E731
            "pipeline migration tables garden", tag=tag, fusion="keyword", budget=0))
        assert tags() == {"Deploy pipeline": {"home", "ops"}, "Staging database migration": {"home", "ops", "db"},
                          "Copy the tables": {"home", "ops", "db"}, "Garden beds": {"home"}}
        assert found("ops") == ["Copy the tables", "Deploy pipeline", "Staging database migration"]
        assert [n.title for n in c.find(tag="db")] == ["Staging database migration", "Copy the tables"]  # find alike
        for edit in (lambda t: t.replace("  :ops:", ""), lambda t: t.replace(":home:", ":away:")):
            notes.write_text(edit(notes.read_text()))  # only the heading's (then the file's) tags change
            c.ingest()
            doc = c.store.objects[c.working().entries["notes.org"]]
            fresh = changed_units(c.store.objects.__getitem__, "notes.org", None, doc)[1]
            assert {i.key for i in items(c)} == fresh.keys()  # followed as a fresh build reads it
        assert found("ops") == [] and found("home") == [] and len(found("away")) == 4
        assert tags()["Copy the tables"] == {"away", "db"}


def test_an_items_day_is_that_of_the_first_timestamp_org_sees():
    assert item_date("notes/a.org", ("Idea",), "* Idea =<2023-09-01 Fri>= <2023-09-02T10:00>\n"
                                               "  [[x][<2023-09-03 Sun>]] then <2023-09-04 Mon>") == "2023-09-04"


def sample_items(count: int, start: int = 0) -> dict:
    from cortex.hashing import Oid
    from cortex.search.items import Item

    return {k: Item(k, f"notes/{k % 3}.org", ("Top", f"Item {k}"), (0, k), Oid(k.to_bytes(32, "little")), None,
                    f"text {k}", tags=("t",) if k % 2 else ()) for k in range(start * 7919 + 1, (start + count) * 7919, 7919)}


def test_packed_items_behave_as_a_dict_through_removals_and_replacements():
    from cortex.search.items import Items

    made = Items()
    made.update(sample_items(50))
    loaded, expected = Items(), dict(sample_items(50))
    loaded.load(*made.packed())
    assert len(loaded) == 50 and loaded._above == {}  # nothing made into an Item until looked up
    keys = sorted(expected)
    for key in keys[:10]:  # removed: some looked up first, some not
        if key % 2:
            assert loaded[key] == expected[key]
        del loaded[key], expected[key]
    replaced = sample_items(5, start=60)
    for old, (key, item) in zip(keys[10:15], replaced.items()):
        loaded[old] = expected[old] = item  # replaced in place
        loaded[key] = expected[key] = item  # and new
    assert len(loaded) == len(expected) and set(loaded) == set(expected) and dict(loaded.items()) == expected
    assert keys[0] not in loaded and keys[20] in loaded and 2**64 + 5 not in loaded and "x" not in loaded
    with pytest.raises(KeyError):
        loaded[keys[0]]
    with pytest.raises(KeyError):
        del loaded[keys[0]]
    again = Items()
    again.load(*loaded.packed())
    assert sorted(key for key in again if again[key]) == sorted(expected)  # each met once, though looked up as met
    assert dict(again.items()) == expected
    again.clear()
    assert len(again) == 0 and list(again) == [] and keys[20] not in again
    packed_keys, ends, records = loaded.packed()
    for damaged in ((packed_keys[8:16] + packed_keys[:8] + packed_keys[16:], ends, records),  # keys out of order
                    (packed_keys, ends, records[:-1])):  # records cut short
        with pytest.raises(ValueError, match="do not match"):
            again.load(*damaged)
        assert len(again) == 0


def test_packed_keys_by_path_open_one_file_at_a_time():
    from cortex.search.items import KeysByPath

    made = KeysByPath()
    made["a.org"].update({1, 2, 3})
    made["b.org"].add(9)
    made["empty.org"] = set()
    loaded = KeysByPath()
    loaded.load(made.packed())
    assert set(loaded) == {"a.org", "b.org"} and all(type(v) is bytes for v in dict.values(loaded))
    assert loaded["a.org"] == {1, 2, 3} and type(dict.__getitem__(loaded, "b.org")) is bytes
    assert loaded.get("b.org") == {9} and loaded.get("c.org") is None and loaded["c.org"] == set()
    loaded["a.org"].discard(2)
    assert dict(loaded.items()) == {"a.org": {1, 3}, "b.org": {9}, "c.org": set()}
    assert KeysByPath.packed(loaded).keys() == {"a.org", "b.org"}
