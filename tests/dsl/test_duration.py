"""Durations in the humantime grammar."""

from datetime import timedelta

import pytest

from cortex.dsl import DurationError, format_duration, parse_duration

MONTH = timedelta(days=30.44)
YEAR = timedelta(days=365.25)


@pytest.mark.parametrize("text, expected", [
    ("90d", timedelta(days=90)),
    ("6months", 6 * MONTH),
    ("1y", YEAR),
    ("1year", YEAR),
    ("2w", timedelta(weeks=2)),
    ("36h", timedelta(hours=36)),
    ("1h 30m", timedelta(minutes=90)),
    ("1h30m", timedelta(minutes=90)),
    ("15min", timedelta(minutes=15)),
    ("2 days", timedelta(days=2)),
    ("1M", MONTH),  # capital M is months, small m minutes, as in humantime
    ("1m", timedelta(minutes=1)),
    ("  1d 2h 3m 4s 5ms 6us ", timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=5, microseconds=6)),
    ("1000ns", timedelta(microseconds=1)),
    ("0s", timedelta(0)),
])
def test_parses_humantime_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text, offset, message", [
    ("", 0, "empty duration: write a number and a unit, like 90d"),
    ("90", 2, "90 needs a unit, like 90d or 90h"),
    ("d90", 0, "expected a number at 'd', like 90d or 1h 30m"),
    ("90x", 2, "unknown unit 'x' (units: ns us ms s m h d w M y, or their names like days, months)"),
    ("3 mnths", 2, "unknown unit 'mnths'; did you mean 'months'? "
                   "(units: ns us ms s m h d w M y, or their names like days, months)"),
    ("1.5h", 1, "only whole numbers: write 1h 30m, not 1.5h"),
    ("1d, 2h", 2, "expected a number at ',', like 90d or 1h 30m"),
    ("1ns", 0, "durations are kept to the microsecond; drop the nanoseconds"),
])
def test_bad_durations_say_what_is_wrong_and_where(text, offset, message):
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert (caught.value.offset, str(caught.value)) == (offset, message)


@pytest.mark.parametrize("duration, text", [
    (timedelta(days=90), "90d"),
    (6 * MONTH, "6months"),
    (YEAR, "1y"),
    (timedelta(weeks=2), "2w"),
    (timedelta(hours=36), "36h"),
    (timedelta(minutes=90), "90min"),
    (timedelta(days=1, seconds=1), "1d 1s"),
    (timedelta(days=1, hours=2, milliseconds=5), "1d 2h 5ms"),
])
def test_formats_the_shortest_exact_spelling_and_parses_back(duration, text):
    assert format_duration(duration) == text
    assert parse_duration(text) == duration
