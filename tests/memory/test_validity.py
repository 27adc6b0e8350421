"""Valid time read from Org properties: when an item holds, what it replaced and what replaced it."""

from datetime import date, datetime, timedelta

import pytest

from cortex.errors import UserError
from cortex.memory.validity import ALWAYS, Validity, moment_of, org_timestamp, parse_timestamp, shown

ADDED = datetime(2026, 10, 1, 9, 0)


def test_an_item_without_validity_properties_holds_from_when_it_was_added():
    assert Validity.of([]) == ALWAYS and ALWAYS.holds() and ALWAYS.holds(date(1990, 1, 1))
    added = Validity.of([("ADDED", "[2026-10-01 Thu 09:00]")])
    assert added.start == ADDED and not added.stated
    assert added.holds() and added.holds(ADDED) and not added.holds(date(2026, 9, 30))
    assert Validity.of([], added=ADDED) == added


def test_valid_from_and_invalid_at_bound_it_in_any_case_of_the_names():
    v = Validity.of([("added", "[2026-10-05 Mon]"), ("Valid_From", "<2026-10-01 Thu>"),
                     ("INVALID_AT", "[2026-11-03 Tue 14:00]")])
    assert (v.start, v.end, v.stated) == (ADDED.replace(hour=0), datetime(2026, 11, 3, 14), True)
    assert v.holds(date(2026, 10, 1)) and v.holds(datetime(2026, 11, 3, 13, 59))
    assert not v.holds(datetime(2026, 11, 3, 14)) and not v.holds(date(2026, 9, 30)) and not v.holds()


def test_a_replaced_item_is_not_current_and_held_until_its_end():
    v = Validity.of([("ADDED", "[2026-10-01 Thu 09:00]"), ("SUPERSEDED_BY", "mem-b  mem-c"),
                     ("INVALID_AT", "[2026-11-03 Tue]")])
    assert v.replaced_by == ("mem-b", "mem-c") and v.ended and not v.holds()
    assert v.holds(date(2026, 11, 2)) and not v.holds(date(2026, 11, 3))
    # replaced by hand with no end said: not current, and it held from its start for all anyone knows
    by_hand = Validity.of([("ADDED", "[2026-10-01 Thu 09:00]"), ("SUPERSEDED_BY", "mem-b")])
    assert not by_hand.holds() and by_hand.holds(date(2026, 12, 1))
    # replaced from a moment still to come: it holds until then
    later = Validity.of([("SUPERSEDED_BY", "mem-b"), ("INVALID_AT", org_timestamp(datetime.now() + timedelta(days=2)))])
    assert later.holds()


def test_a_value_that_is_not_a_timestamp_is_reported_and_ignored():
    v = Validity.of([("ADDED", "[2026-10-01 Thu 09:00]"), ("INVALID_AT", "next tuesday"), ("VALID_FROM", "")])
    assert v.problems == (("INVALID_AT", "next tuesday"),) and v.end is None and v.holds()
    assert v.start is None  # an empty VALID_FROM says "unknown", not "when it was added"


def test_moments_given_as_text_dates_or_timestamps():
    assert moment_of("2026-11-03", "valid from") == date(2026, 11, 3)
    assert moment_of("2026-11-03 14:05", "valid from") == datetime(2026, 11, 3, 14, 5)
    assert moment_of("2026-11-03T14:05:33", "valid from") == datetime(2026, 11, 3, 14, 5)
    assert moment_of("[2026-11-03 Tue]", "at") == date(2026, 11, 3)
    assert moment_of("<2026-11-03 Tue 08:30>", "at") == datetime(2026, 11, 3, 8, 30)
    assert moment_of(date(2026, 1, 2), "at") == date(2026, 1, 2)
    for bad in ("next tuesday", "", "2026-13-01", "x" * 500, 7):
        with pytest.raises(UserError, match=r"^valid from .*: not a date; write 2026-11-01") as caught:
            moment_of(bad, "valid from")
        assert len(str(caught.value)) < 200


def test_timestamps_written_and_read_back():
    assert org_timestamp(datetime(2026, 11, 3, 14, 0)) == "[2026-11-03 Tue 14:00]"
    assert org_timestamp(date(2026, 11, 3)) == "[2026-11-03 Tue]"
    assert parse_timestamp(org_timestamp(datetime(2026, 11, 3, 14, 0))) == datetime(2026, 11, 3, 14, 0)
    assert parse_timestamp("<2026-11-03 Tue +1w>") == datetime(2026, 11, 3)
    assert parse_timestamp("[2026-02-30 Mon]") is None and parse_timestamp(None) is None
    assert shown(datetime(2026, 11, 3)) == "2026-11-03" and shown(datetime(2026, 11, 3, 9, 5)) == "2026-11-03 09:05"


def test_what_the_repl_says_of_it():
    v = Validity.of([("VALID_FROM", "[2026-10-01 Thu]"), ("INVALID_AT", "[2026-11-03 Tue]"),
                     ("SUPERSEDES", "mem-a"), ("SUPERSEDED_BY", "mem-c")])
    assert v.repl_pairs() == [("valid", "2026-10-01 – 2026-11-03"), ("supersedes", "mem-a"),
                              ("superseded by", "mem-c")]
    assert Validity.of([], added=ADDED).repl_pairs() == []


def test_why_an_item_does_not_hold():
    replaced = Validity(datetime(2026, 10, 1), datetime(2026, 11, 3, 14), replaced_by=("a", "b"), stated=True)
    assert replaced.why_not() == "superseded by a, b on 2026-11-03 14:00"
    assert replaced.why_not(datetime(2026, 9, 1)) == "valid from 2026-10-01"
    assert replaced.why_not(datetime(2026, 12, 1)) == "superseded by a, b on 2026-11-03 14:00"
    assert Validity(None, None, replaced_by=("a",), stated=True).why_not() == "superseded by a"
    assert Validity(None, datetime(2026, 11, 20), stated=True).why_not() == "invalid from 2026-11-20"
