"""Dates as Emacs reads them: planning, timestamps, ranges, repeaters, delays, clocks, and the days users write."""

from datetime import date, datetime, timedelta

import pytest
from orgparse.date import OrgDate, OrgDateClock, OrgDateClosed, OrgDateDeadline, OrgDateScheduled

from cortex import org
from cortex.objects import Headline
from cortex.orgquery.dates import (
    Cookie, day_of, headline_dates, parse_moment, parse_when, planning_date, repeater, section_stamps, timestamps_in,
    warning,
)
from cortex.orgquery.errors import QueryError

TODAY = date(2026, 11, 25)


def headlines(text: str) -> dict[str, Headline]:
    """The headlines of Org text, by title."""
    return {o.title: o for o in org.parse(text).objects if isinstance(o, Headline)}


def one(text: str) -> Headline:
    (headline,) = headlines(text).values()
    return headline


def test_planning_dates_are_orgparse_kinds_with_their_cookies():
    h = one("* TODO Task\n"
            "  CLOSED: [2026-11-24 Tue 10:00] SCHEDULED: <2026-11-22 Sun 9:05 .+2d --1d>"
            " DEADLINE: <2026-11-30 Mon -3d ++1m>\n"
            "body\n")
    dates = headline_dates(h)
    assert isinstance(dates.scheduled, OrgDateScheduled) and dates.scheduled.start == datetime(2026, 11, 22, 9, 5)
    assert repeater(dates.scheduled) == Cookie(".+", 2, "d") and warning(dates.scheduled) == Cookie("--", 1, "d")
    # The warning period written before the repeater, which orgparse alone misses.
    assert isinstance(dates.deadline, OrgDateDeadline) and dates.deadline.start == date(2026, 11, 30)
    assert repeater(dates.deadline) == Cookie("++", 1, "m") and warning(dates.deadline) == Cookie("-", 3, "d")
    assert isinstance(dates.closed, OrgDateClosed) and not dates.closed.is_active()
    assert dates.closed.start == datetime(2026, 11, 24, 10, 0) and repeater(dates.closed) is None
    assert dates.timestamps == ()  # the planning line is no timestamp of the section


@pytest.mark.parametrize("raw, cookies", [
    ("<2026-11-23 Mon +1w>", (Cookie("+", 1, "w"), None)),
    ("<2026-11-23 Mon .+2d>", (Cookie(".+", 2, "d"), None)),
    ("<2026-11-23 Mon ++1m -3d>", (Cookie("++", 1, "m"), Cookie("-", 3, "d"))),
    ("<2026-11-23 Mon 10:00 +1y>", (Cookie("+", 1, "y"), None)),
    ("<2026-11-23 Mon 10:00-11:30 +12h>", (Cookie("+", 12, "h"), None)),
    ("<2026-11-23 Mon -1w>", (None, Cookie("-", 1, "w"))),
    ("<2026-11-23 Mon>", (None, None)),
])
def test_repeaters_and_warning_delays(raw, cookies):
    stamp = planning_date("DEADLINE", raw)
    assert (repeater(stamp), warning(stamp)) == cookies
    assert day_of(stamp.start) == date(2026, 11, 23)


def test_a_diary_sexp_is_no_date():
    assert planning_date("SCHEDULED", "<%%(diary-float t 4 2)>") is None
    assert headline_dates(one("* Thanksgiving\n  SCHEDULED: <%%(diary-float t 4 2)>\n")).scheduled is None


def test_timestamps_of_the_section_active_or_not_ranges_kept():
    h = one("* Trip <2026-11-28 Sat 13:00-17:00>\n"
            "  SCHEDULED: <2026-11-20 Fri>\n"
            "  :PROPERTIES:\n  :WHEN: <2026-11-27 Fri>\n  :END:\n"
            "  Stay <2026-11-24 Tue>--<2026-11-27 Fri>, noted [2026-11-01 Sun]--[2026-11-03 Tue].\n"
            "  Call at <2026-11-25 Wed 9:30>, then [2026-11-25 Wed 18:00] and <2026-11-26 Thu>--[2026-11-27 Fri].\n"
            "  :LOGBOOK:\n  CLOCK: [2026-11-25 Wed 09:00]--[2026-11-25 Wed 10:00] =>  1:00\n  :END:\n"
            "  #+begin_src sh\n  date <2026-11-25 Wed>\n  #+end_src\n"
            "  # <2026-11-25 Wed> in a comment\n"
            "  : <2026-11-25 Wed> fixed width\n")
    assert headline_dates(h).timestamps == (
        (OrgDate(datetime(2026, 11, 28, 13), datetime(2026, 11, 28, 17)), True),
        (OrgDate(date(2026, 11, 27)), True),
        (OrgDate(date(2026, 11, 24), date(2026, 11, 27)), True),
        (OrgDate(date(2026, 11, 1), date(2026, 11, 3), False), False),
        (OrgDate(datetime(2026, 11, 25, 9, 30)), True),
        (OrgDate(datetime(2026, 11, 25, 18, 0), active=False), False),
        (OrgDate(date(2026, 11, 26), date(2026, 11, 27)), True),  # one range to org-element, brackets of two kinds
    )
    assert [stamp.line for stamp in section_stamps(h)] == [0, 3, 5, 5, 6, 6, 6]


def test_an_unclosed_block_hides_nothing():
    h = one("* Note\n  #+begin_src sh\n  <2026-11-25 Wed>\n")
    assert headline_dates(h).timestamps == ((OrgDate(date(2026, 11, 25)), True),)


def test_clock_lines_and_their_durations():
    h = one("* Work\n  :LOGBOOK:\n"
            "  CLOCK: [2026-11-25 Wed 9:00]--[2026-11-25 Wed 10:30] =>  1:30\n"
            "  CLOCK: [2026-11-24 Tue 22:00]--[2026-11-25 Wed 01:15] =>  3:15\n"
            "  CLOCK: [2026-11-26 Thu 08:00]\n"
            "  :END:\n")
    dates = headline_dates(h)
    assert all(isinstance(clock, OrgDateClock) for clock in dates.clocks)
    assert [clock.duration for clock in dates.clocks if clock.has_end()] == [timedelta(hours=1, minutes=30),
                                                                             timedelta(hours=3, minutes=15)]
    assert not dates.clocks[2].has_end()  # still running
    assert dates.clocked == timedelta(hours=4, minutes=45)
    assert dates.timestamps == ()


def test_crlf_sections_read_the_same():
    text = "* Task\r\n  SCHEDULED: <2026-11-23 Mon 9:00>\r\n  <2026-11-24 Tue>\r\n"
    dates = headline_dates(one(text))
    assert dates.scheduled.start == datetime(2026, 11, 23, 9, 0)
    assert dates.timestamps == ((OrgDate(date(2026, 11, 24)), True),)


def test_timestamps_in_a_line():
    (stamp,) = timestamps_in("from <2026-11-24 Tue 10:00>--<2026-11-26 Thu 12:00> on", 4)
    assert stamp.raw == "<2026-11-24 Tue 10:00>--<2026-11-26 Thu 12:00>" and stamp.line == 4
    assert stamp.date == OrgDate(datetime(2026, 11, 24, 10), datetime(2026, 11, 26, 12))
    assert list(timestamps_in("no <date> here, nor <2026-13>")) == []


@pytest.mark.parametrize("text, expected", [
    ("today", TODAY),
    ("Tomorrow", date(2026, 11, 26)),
    ("yesterday", date(2026, 11, 24)),
    ("+7d", date(2026, 12, 2)),
    ("-2w", date(2026, 11, 11)),
    ("+1m", date(2026, 12, 25)),
    ("-1y", date(2025, 11, 25)),
    ("2026-11-23", date(2026, 11, 23)),
    (" 2026-02-28 ", date(2026, 2, 28)),
    (date(2026, 1, 2), date(2026, 1, 2)),
])
def test_parse_when(text, expected):
    assert parse_when(text, TODAY) == expected


def test_months_run_past_a_short_months_end_as_in_emacs():
    assert parse_when("+1m", date(2026, 1, 31)) == date(2026, 3, 3)


@pytest.mark.parametrize("text", ["next week", "+7", "7d", "2026-02-30", "26-11-23", ""])
def test_a_bad_day_names_itself_and_the_forms_accepted(text):
    with pytest.raises(QueryError) as error:
        parse_when(text, TODAY)
    message = str(error.value)
    assert repr(text) in message and "today, tomorrow, yesterday, +7d, -2w, +1m, +1y or YYYY-MM-DD" in message
    assert "\n" not in message


@pytest.mark.parametrize("text, expected", [  # a day is the whole day: a date; a moment a datetime
    ("now", datetime(2026, 11, 25, 9, 30)),
    ("today", date(2026, 11, 25)),
    ("-30d", date(2026, 10, 26)),
    ("2026-11-01", date(2026, 11, 1)),
    ("2026-11-01 14:05", datetime(2026, 11, 1, 14, 5)),
    ("2026-11-01T9:05", datetime(2026, 11, 1, 9, 5)),
    ("[2026-11-01 Sun 14:05]", datetime(2026, 11, 1, 14, 5)),
    ("<2026-11-01 Sun>", date(2026, 11, 1)),
    (date(2026, 1, 2), date(2026, 1, 2)),
    (datetime(2026, 1, 2, 3, 4), datetime(2026, 1, 2, 3, 4)),
])
def test_parse_moment(text, expected):
    found = parse_moment(text, datetime(2026, 11, 25, 9, 30))
    assert found == expected and type(found) is type(expected)


@pytest.mark.parametrize("text, said", [
    ("next week", "write a day (today,"), ("2026-11-01 25:00", "hour must be in 0..23"),
    ("2026-02-30", "day is out of range"), ("x" * 5000, "characters)"),
])
def test_a_bad_moment_says_what_in_one_line(text, said):
    with pytest.raises(QueryError) as error:
        parse_moment(text, datetime(2026, 11, 25))
    assert said in str(error.value) and "\n" not in str(error.value) and len(str(error.value)) < 200


@pytest.mark.parametrize("line, found", [  # as Emacs 28.2's org-element-map 'timestamp finds them
    ("* Call =<2026-03-31 Tue>= and ~<2026-03-31 Tue>~", []),
    ("see [[https://orgmode.org][due <2026-03-31 Tue>]] and [[<2026-04-01 Wed>]]", []),
    ("glued <2026-03-31T10:00> and [2020-07-27T15:57:45.000Z log]", []),
    ("a target <<2026-03-31 Tue>>, @@html:<2026-03-31 Tue>@@ and {{{m(<2026-03-31 Tue>)}}}", []),
    ("*bold <2026-03-31 Tue>* and /it [2026-03-31 Tue]/", ["<2026-03-31 Tue>", "[2026-03-31 Tue]"]),
    ("=not closed <2026-03-31 Tue>, x=y <2026-04-01 Wed>", ["<2026-03-31 Tue>", "<2026-04-01 Wed>"]),
    ("* =v= <2026-03-31T10:00 +1w> repeats", ["<2026-03-31T10:00 +1w>"]),
    ("<2026-11-26 Thu>--[2026-11-27 Fri] <%%(diary-float t 4 2)>", ["<2026-11-26 Thu>--[2026-11-27 Fri]"]),
])
def test_timestamps_are_those_org_element_sees(line, found):
    assert [stamp.raw for stamp in timestamps_in(line)] == found


def test_a_glued_repeating_timestamp_reads_its_day_and_repeater():
    (stamp,) = timestamps_in("<2026-03-31T10:00 +1w>")
    assert stamp.date == OrgDate(date(2026, 3, 31)) and repeater(stamp.date) == Cookie("+", 1, "w")
