"""The conversation layout: one entry per session and day, one headline per turn under the speaker's own name, the
whole turn kept and read back as it was, conversation text never becoming Org structure."""

import re
from datetime import UTC, datetime

import orgparse
import pytest

from cortex.memory.conversation import (
    ExtractiveSummarizer,
    InvalidTurn,
    TrajectoryDigest,
    Turn,
    Utterance,
    escape_org_text,
    read_session,
    turns_to_org_log,
    unescape_org_text,
)
from cortex.memory.conversation.orglog import session_entry, session_turns

T0 = 1_700_000_000 * 10**9  # 2023-11-14 22:13:20 UTC
AT = datetime(2026, 11, 20, 14, 5)
DAY = AT.date()
HOSTILE = """Please check these lines:
* Fake headline :tag:
#+TODO: A B
:PROPERTIES:
:ID: x
:END:
SCHEDULED: <2024-01-01>
deadline: <2024-01-02>
,* already escaped
  #+begin_src python
*bold* stays"""
LONG = "So what I was wondering, after all that talk about the migration last week, is " * 3


def at(minute: int) -> datetime:
    return AT.replace(minute=minute)


def log_of(*calls) -> bytes:
    """A day's log after each call's turns were logged in turn (each call: session_turns arguments)."""
    data = None
    for turns, options in calls:
        for day in session_turns(turns, **options):
            data = day.applied(data, "bot — 2026-11-20")
    return data


def test_entry_shape():
    turns = [Turn("What is due?", "The report, by Friday.\nThen the slides.", TrajectoryDigest(("calendar",)),
                  ("report.org",), timestamp_ns=T0),
             Turn("Thanks", "You are welcome.", timestamp_ns=T0 + 60 * 10**9)]
    text = turns_to_org_log(turns, "Deadlines", session="s-42", user="Dana", assistant="bot",
                            summary="The report is due Friday.", tz=UTC)
    assert text == """\
* 22:13 — Deadlines
:PROPERTIES:
:SESSION:  s-42
:PEOPLE:   Dana, bot
:END:
The report is due Friday.
** Dana: What is due?
** bot: The report, by Friday.
:PROPERTIES:
:TOOLS:    calendar
:ARTIFACTS: report.org
:END:
Then the slides.
** Dana: Thanks
:PROPERTIES:
:TIME:     22:14
:END:
** bot: You are welcome.
"""


def test_a_turn_is_whole_in_its_headline_and_never_repeated():
    text = turns_to_org_log([Utterance("Caroline", LONG.strip() + "\nAnd one more line.", AT)], "Chat", session="s")
    assert f"** Caroline: {LONG.strip()}\nAnd one more line.\n" in text
    assert text.count("migration last week") == 3  # once per repeat in the turn, none in a summary or a body


def test_no_summary_unless_one_is_given_or_a_summarizer():
    turns = [Turn("Where is the LMDB map size set? I forgot.", "The LMDB map size is set at open.", timestamp_ns=T0)]
    assert turns_to_org_log(turns, "Config", session="s", tz=UTC).split("\n")[5] == "** User: Where is the LMDB " \
                                                                                      "map size set? I forgot."
    summarized = turns_to_org_log(turns, "Config", session="s", summarizer=ExtractiveSummarizer(), tz=UTC)
    assert summarized.split("\n")[5] == ExtractiveSummarizer().summarize("", turns)


@pytest.mark.parametrize("text", [
    HOSTILE, LONG, "ends in what reads as tags :work:urgent:", "  indented first\n\n  and a gap", "a\r\nb\rc  \n\n",
    "** fake turn: inside", ":)", "Dana: quoted speaker", "ünïcödé ✓ and\ttabs", "x" * 5000,
])
def test_every_turn_reads_back_as_it_was_logged(text):
    said = [Utterance("Melanie", text, at(5)), Utterance("Caroline", text, at(7), ("search", "a tool"),
                                                         ("notes/a b.org", "100%"))]
    kept = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    assert said[0].text == kept.strip("\n")
    log = log_of((said, {"session": "s-1", "title": "Hostile :x:"})).decode()
    assert read_session(log, "s-1", DAY) == said


def test_conversation_text_never_becomes_structure():
    log = log_of(([Utterance("Dana", HOSTILE, at(5)), Utterance("bot", "Done.\n** also fake", at(5))],
                  {"session": "s-1", "summary": "* not a headline"})).decode()
    root = orgparse.loads(log)
    assert [(n.level, n.heading) for n in root[1:]] == [
        (1, "14:05 — Conversation"), (2, "Dana: Please check these lines:"), (2, "bot: Done.")]
    assert root[1].properties == {"SESSION": "s-1", "PEOPLE": "Dana, bot"} and all(not n.tags for n in root[1:])
    ours = {0, 1, 2, 3, 4, 5, 6}  # title, blank, entry heading, drawer
    lines = log.split("\n")
    ours |= {i for i, line in enumerate(lines) if re.match(r"\*\* (Dana|bot): ", line)}
    assert all(not re.match(r"(?i)\s*(\*+ |#\+|:\w+:|scheduled:|deadline:)", line)
               for i, line in enumerate(lines) if i not in ours)


def test_a_first_line_ending_in_tags_goes_to_the_body_under_the_speaker():
    log = log_of(([Utterance("Dana", "call me :phone:\nplease", at(5))], {"session": "s"})).decode()
    assert "** Dana:\ncall me :phone:\nplease\n" in log
    assert orgparse.loads(log)[2].tags == set()


def test_later_turns_go_to_the_end_of_their_session_entry_and_its_people():
    log = log_of(([Utterance("Dana", "First?", at(5)), Utterance("bot", "Yes.", at(5))], {"session": "s-42"}),
                 ([Utterance("Eve", "Other session.", at(20))], {"session": "s-43"}),
                 ([Utterance("Dana", "Still there?", at(5)), Utterance("Ann", "Joining.", at(31))],
                  {"session": "s-42", "title": "ignored: the entry has one"})).decode()
    entry = session_entry(log, "s-42")
    assert entry == """\
* 14:05 — Conversation
:PROPERTIES:
:SESSION:  s-42
:PEOPLE:   Dana, bot, Ann
:END:
** Dana: First?
** bot: Yes.
** Dana: Still there?
** Ann: Joining.
:PROPERTIES:
:TIME:     14:31
:END:

"""
    assert log.endswith("* 14:20 — Conversation\n:PROPERTIES:\n:SESSION:  s-43\n:PEOPLE:   Eve\n:END:\n"
                        "** Eve: Other session.\n")
    assert [(u.speaker, u.at.minute) for u in read_session(log, "s-42", DAY)] == [
        ("Dana", 5), ("bot", 5), ("Dana", 5), ("Ann", 31)]
    last = session_turns([Utterance("Eve", "Later.", at(20))], session="s-43")[0]
    assert last.applied(log.encode(), "t") == log.encode() + b"** Eve: Later.\n"  # the last entry: appended


def test_a_session_entry_written_by_hand_takes_the_turns_of_its_session():
    log = (b"#+TITLE: notes\n\n* 09:00 Standup\n:PROPERTIES:\n:session: s-7\n:END:\nWho was there.\n"
           b"** Dana: Hi\n\n* 10:00 Review\n:PROPERTIES:\n:SESSION: s-8\n:END:\n** Not a turn\n")
    more = session_turns([Utterance("Eve", "Morning.", at(6))], session="s-7")[0].applied(log, "t")
    assert more == log.replace(b"** Dana: Hi\n", b"** Dana: Hi\n** Eve: Morning.\n:PROPERTIES:\n:TIME:     14:06\n"
                                                  b":END:\n").replace(b":session: s-7\n", b":session: s-7\n"
                                                                                        b":PEOPLE:   Eve\n")
    assert [(u.speaker, u.text, u.at) for u in read_session(more.decode(), "s-7", DAY)] == [
        ("Dana", "Hi", datetime(2026, 11, 20, 9, 0)), ("Eve", "Morning.", at(6))]
    assert read_session(more.decode(), "s-8", DAY) == []  # a headline without a speaker is no turn


def test_turns_added_to_a_crlf_log_keep_its_line_ends():
    crlf = session_turns([Utterance("Dana", "One.", at(5))], session="s")[0].applied(None, "t").replace(b"\n", b"\r\n")
    more = session_turns([Utterance("Eve", "Two\nlines.", at(6))], session="s")[0].applied(crlf, "t")
    assert more == crlf.replace(b":PEOPLE:   Dana\r\n", b":PEOPLE:   Dana, Eve\r\n") + \
        b"** Eve: Two\r\n:PROPERTIES:\r\n:TIME:     14:06\r\n:END:\r\nlines.\r\n"


def test_a_session_past_midnight_continues_in_the_next_days_log():
    days = session_turns([Utterance("Dana", "Late?", datetime(2026, 11, 20, 23, 58)),
                          Utterance("bot", "Very.", datetime(2026, 11, 21, 0, 1))], session="s-9", title="Night",
                         summary="A late chat.")
    assert [(d.day.isoformat(), d.title, d.summary, [u.text for u in d.turns]) for d in days] == [
        ("2026-11-20", "Night", "A late chat.", ["Late?"]), ("2026-11-21", "Night", "", ["Very."])]
    assert days[1].entry().startswith("* 00:01 — Night\n:PROPERTIES:\n:SESSION:  s-9\n:PEOPLE:   bot\n")


def test_exchanges_name_their_sides_and_leave_out_an_empty_one():
    days = session_turns([Turn("Hello?", "", timestamp_ns=T0), Turn("", "Hi.", timestamp_ns=T0)], session="s",
                         user="Dana", assistant="bot", tz=UTC)
    assert [(u.speaker, u.text) for u in days[0].turns] == [("Dana", "Hello?"), ("bot", "Hi.")]
    with pytest.raises(InvalidTurn, match="every turn given is empty"):
        session_turns([Turn(" ", "", timestamp_ns=T0)], session="s")
    unnamed = session_turns([Utterance("Dana", "x", AT)])[0].session
    assert re.fullmatch(r"s-2026-11-20-1405-[0-9a-f]{6}", unnamed)


@pytest.mark.parametrize("speaker, problem", [
    ("", "empty"), ("Dr: Who", "holds ':'"), ("Smith, Ann", "holds ','"), ("COMMENTATOR", "TODO keyword, priority"),
    ("TODO Smith", "TODO keyword"), ("[#A] Ann", "priority"), ("x" * 101, "longer than 100"),
    ("a\x01b", "holds a control character"),
])
def test_a_speaker_who_cannot_head_a_turn_is_refused_in_one_line(speaker, problem):
    with pytest.raises(InvalidTurn, match=re.escape(problem)) as refused:
        Utterance(speaker, "hello", AT)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200


@pytest.mark.parametrize("text, at_, problem", [
    ("", AT, "empty"), ("  \n\n ", AT, "empty"), ("a\0b", AT, "NUL"), ("a\ud800", AT, "not Unicode"),
    ("ok", "yesterday", "not a date and time"), (3, AT, "must be text"), ("ok", 5, "must be a datetime"),
])
def test_bad_turns_are_refused_in_one_line(text, at_, problem):
    with pytest.raises(InvalidTurn, match=problem):
        Utterance("Dana", text, at_)


def test_names_and_times_are_tidied():
    said = Utterance("  Mary   Ann ", "x", "2026-11-20T14:05:59")
    assert (said.speaker, said.at) == ("Mary Ann", AT)
    assert Utterance("Ann", "x", datetime(2026, 11, 20, 13, 5, tzinfo=UTC)).at == \
        datetime(2026, 11, 20, 13, 5, tzinfo=UTC).astimezone().replace(tzinfo=None)


@pytest.mark.parametrize("text", [HOSTILE, ",* x", ",,#+y", "  :END:", "plain\n\n* two\n", "", "Closed: no"])
def test_escaping_reverses(text):
    assert unescape_org_text(escape_org_text(text)) == text
