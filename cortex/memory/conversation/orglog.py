"""The conversation layout: how an agent's conversations are kept in its daily logs (`agents/<id>/logs/DAY.org`).

    * 14:05 — Deploy questions
    :PROPERTIES:
    :SESSION:  s-42
    :PEOPLE:   Dana, assistant
    :END:
    ** Dana: When is the next deploy?
    ** assistant: Tuesday, after the standup.
    The release train leaves at ten.
    ** Dana: And is the fix for E1042 in it?
    :PROPERTIES:
    :TIME:     14:09
    :END:
    ** assistant: Yes: release 2.3.1.
    :PROPERTIES:
    :TOOLS:    search
    :END:

A session has one level-1 entry in the log of each day it has turns on: `HH:MM — title` at its first turn
that day, its :SESSION: and the :PEOPLE: who speak in it (in the order they first speak), then its summary when
one is given. Each turn is one level-2 headline: the speaker's own name, a colon, the turn's first line whole;
the turn's other lines are the body, the first never repeated. A turn's :TIME: is written when its minute is
not the one before it (the entry's or the previous turn's); its :TOOLS: and :ARTIFACTS: when it has some, as
Org's multi-valued properties (space-separated, `%20` for a space inside a value, `%25` for a `%`).

Turns added to a session later go to the end of its entry in the log of their day, and the people who had not
spoken yet to its :PEOPLE:; a session that goes on past midnight continues in an entry of the next day's log,
with the same :SESSION: and title. A turn's text is kept whole: line ends become "\\n", and the blank space at
the ends of its lines and blank lines around it go. A first line that Org would read as ending in tags goes to
the body under `** Name:`; `read_session` gives every turn back as it was logged.

Conversation text is data, never structure: a line that Org would read as a headline,
keyword, block, drawer or planning line gets a leading comma, as Org escapes such lines
inside blocks; lines already starting with commas get one more, so the escape reverses (`org.escape_text`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, tzinfo
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import quote, unquote

from ...objects import Headline
from ...org import Section, escape_text, parse, unescape_text
from ..logs import ENTRY_TIME, log_addition, render_entry
from .summarizers import Summarizer
from .turns import InvalidTurn, Turn

DEFAULT_TITLE = "Conversation"
NAME_LIMIT = 100  # characters of a speaker's name
_NAME_STOP = re.compile(r"[:,]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_KEY = b":SESSION:"
_KEY_ANY_CASE = re.compile(rb"(?i):session:")
_TIME_LINE = re.compile(rb"^[ \t]*:TIME:[ \t]+(\d{1,2}:\d{2})[ \t]*\r?$", re.M | re.I)
_HEAD_TIME = re.compile(rb"\*+[ \t]+(\d{1,2}:\d{2})\b")
_SPACE_OR_PERCENT = re.compile(r"[%\s]")


@dataclass(frozen=True)
class Utterance:
    """One turn of a conversation as a daily log keeps it: who spoke, what they said, when, with which tools
    and artifacts.

    The speaker's name is one line without `:` or `,`; the text is kept whole (see the module); `at` is a
    datetime (an aware one is taken in local time), ISO text such as "2026-11-20 14:05", or None: when it is
    logged.
    """

    speaker: str
    text: str
    at: datetime | str | None = None
    tools: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "speaker", speaker_name(self.speaker))
        object.__setattr__(self, "text", turn_text(self.text))
        object.__setattr__(self, "at", _moment(self.at))
        for name in ("tools", "artifacts"):
            object.__setattr__(self, name, _values(getattr(self, name), name))


def speaker_name(name: str) -> str:
    """A speaker's name with its blank space collapsed; InvalidTurn when it cannot head a turn."""
    if not isinstance(name, str):
        raise InvalidTurn(f"turn speaker must be text, got {type(name).__name__}")
    name = " ".join(name.split())
    if not name:
        raise InvalidTurn("turn speaker: empty; name who spoke, such as 'Dana'")
    problem = None
    if len(name) > NAME_LIMIT:
        problem = f"is longer than {NAME_LIMIT} characters"
    elif _CONTROL.search(name):
        problem = "holds a control character"
    elif (bad := _NAME_STOP.search(name)) is not None:
        problem = f"holds {bad.group()!r}, which a turn's headline or :PEOPLE: would read as the end of the name"
    elif not _reads_plainly(f"** {name}:", f"{name}:"):
        problem = "starts with what Org reads as a TODO keyword, priority or COMMENT"
    if problem:
        raise InvalidTurn(f"turn speaker {name[:40]!r}: {problem}")
    return name


def turn_text(text: str) -> str:
    """A turn's text as it is kept: line ends "\\n", no blank space at line ends or blank lines around it."""
    if not isinstance(text, str):
        raise InvalidTurn(f"turn text must be text, got {type(text).__name__}")
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    kept = "\n".join(lines).strip("\n")
    if not kept:
        raise InvalidTurn("turn text: empty; a turn says something")
    if "\0" in kept:
        raise InvalidTurn(f"turn text {kept[:40]!r}: holds a NUL character, which no Org file may")
    try:
        kept.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTurn(f"turn text {kept[:40]!r}: character {exc.start + 1} is not Unicode text") from None
    return kept


def exchange(turn: Turn, user: str, assistant: str, tz: tzinfo | None = None) -> list[Utterance]:
    """The two turns of an exchange: what `user` said, then what `assistant` answered (a side with no text is
    left out), at the exchange's time in `tz` (local when None), the answer with the tools it invoked and the
    artifacts it showed."""
    at = datetime.fromtimestamp(turn.timestamp_ns / 1e9, tz).replace(tzinfo=None)
    tools = turn.trajectory.tools_invoked if turn.trajectory else ()
    said = []
    if turn.user_message.strip():
        said.append(Utterance(user, turn.user_message, at))
    if turn.assistant_response.strip():
        said.append(Utterance(assistant, turn.assistant_response, at, tools, turn.artifacts_shown))
    return said


TURN_KEYS = ("speaker", "text", "at", "tools", "artifacts")


def utterance_from(row, where: str, speaker: str | None = None, at: datetime | str | None = None) -> Utterance:
    """A turn from plain data (`{"speaker": ..., "text": ..., "at": ..., "tools": [...], "artifacts": [...]}`,
    `speaker` and `at` when a row has none); an InvalidTurn saying `where` when it is not one."""
    if not isinstance(row, dict):
        raise InvalidTurn(f"{where}: a turn is an object with \"speaker\" and \"text\", not {type(row).__name__}")
    if unknown := sorted(set(row) - set(TURN_KEYS), key=str):
        raise InvalidTurn(f"{where}: unknown key {str(unknown[0])[:40]!r}; a turn has {', '.join(TURN_KEYS)}")
    row = {"speaker": speaker, "at": at, **{key: value for key, value in row.items() if value is not None}}
    for key in ("speaker", "text"):
        if row.get(key) is None:
            raise InvalidTurn(f"{where}: no {key!r}")
    try:
        return Utterance(row["speaker"], row["text"], row["at"], row.get("tools", ()), row.get("artifacts", ()))
    except InvalidTurn as exc:
        raise InvalidTurn(f"{where}: {exc}") from None


@dataclass(frozen=True)
class SessionTurns:
    """Turns of one session on one day, to log: added to the end of the session's entry in that day's log, or
    as a new entry with `title` and `summary` when the log has none."""

    session: str
    turns: tuple[Utterance, ...]
    title: str = DEFAULT_TITLE
    summary: str = ""

    @property
    def day(self) -> date:
        return self.turns[0].at.date()

    @property
    def people(self) -> list[str]:
        """The speakers, in the order they first speak."""
        return list(dict.fromkeys(u.speaker for u in self.turns))

    def applied(self, old: bytes | None, log_title: str) -> bytes:
        """The bytes of the day's log `old` (None: no log yet, which gets `log_title`) with these turns in."""
        found = None if old is None else _entry_span(old, self.session)
        if found is None:
            return (old or b"") + log_addition(old, [self.entry()], log_title)
        start, head_end, drawer_end, end, people = found
        nl = b"\r\n" if old[head_end - 2:head_end] == b"\r\n" else b"\n"
        times = _TIME_LINE.findall(old, drawer_end, end)
        heading = _HEAD_TIME.match(old, start)
        previous = times[-1] if times else heading[1] if heading else b""
        block = "\n".join(_turn_lines(self.turns, _clock(previous.decode()))).encode("utf-8")
        block = block.replace(b"\n", nl) if nl != b"\n" else block
        insert = start + len(old[start:end].rstrip(b"\r\n"))
        data = old[:insert] + nl + block + (old[insert:] or nl)
        return _with_people(data, drawer_end, people, self.people, nl)

    def entry(self) -> str:
        """The session's entry as it starts in a log: heading, properties, summary, turns."""
        head = render_entry(self.turns[0].at, self.title, escape_text(self.summary), self.session,
                            people=self.people)
        return head + "\n".join(_turn_lines(self.turns, self.turns[0].at.time())) + "\n"


def session_turns(turns: Sequence[Turn | Utterance], *, session: str = "", title: str | None = None,
                  summary: str | None = None, summarizer: Summarizer | None = None, user: str = "User",
                  assistant: str = "Assistant", now: datetime | None = None,
                  tz: tzinfo | None = None) -> list[SessionTurns]:
    """A conversation's turns to log, by day in the order they come: exchanges (`Turn`, their times read in `tz`)
    split into the turns of `user` and `assistant`, turns of any speaker (`Utterance`) as they are, a turn with no
    time taken at `now`.

    The summary (`summary`, else `summarizer`'s over the exchanges, else none) goes with the first day's turns.
    Without `session` the turns are a session of their own, named after the time of the first.
    """
    if isinstance(turns, (str, bytes)) or not isinstance(turns, Sequence):
        raise InvalidTurn(f"turns must be a list of Turn or Utterance, got {type(turns).__name__}")
    said: list[Utterance] = []
    for n, turn in enumerate(turns, 1):
        if isinstance(turn, Turn):
            said += exchange(turn, user, assistant, tz)
        elif isinstance(turn, Utterance):
            said.append(turn)
        else:
            raise InvalidTurn(f"turn {n}: a Turn or an Utterance, not {type(turn).__name__}")
    if not said:
        raise InvalidTurn("no turn to log: every turn given is empty" if turns else "no turn to log")
    now = (now or datetime.now()).replace(second=0, microsecond=0)
    said = [u if u.at is not None else replace(u, at=now) for u in said]
    session = _session_id(session, said[0].at)
    title = _title(title)
    if summary is None and summarizer is not None:
        summary = summarizer.summarize("", [t for t in turns if isinstance(t, Turn)])
    if summary is not None and not isinstance(summary, str):
        raise InvalidTurn(f"session summary must be text, got {type(summary).__name__}")
    days: dict[date, list[Utterance]] = {}
    for u in said:
        days.setdefault(u.at.date(), []).append(u)
    return [SessionTurns(session, tuple(day_turns), title, (summary or "") if n == 0 else "")
            for n, day_turns in enumerate(days.values())]


def turns_to_org_log(turns: Sequence[Turn | Utterance], title: str, *, session: str = "", user: str = "User",
                     assistant: str = "Assistant", summary: str | None = None, summarizer: Summarizer | None = None,
                     tz: tzinfo | None = None) -> str:
    """A session's level-1 entry in the conversation layout (its first day's, when it runs past midnight): the
    Org text `record_session` would start a log entry with. Exchanges' times are read in `tz` (local when None)."""
    return session_turns(turns, session=session, title=title, summary=summary, summarizer=summarizer, user=user,
                         assistant=assistant, tz=tz)[0].entry()


def read_session(text: str, session: str, day: date) -> list[Utterance]:
    """The turns of `session` in the text of its log of `day`, as they were logged (times to the minute)."""
    parsed = parse(text)
    get = {obj.oid: obj for obj in parsed.objects}.__getitem__
    wanted = " ".join(session.split())
    said = []
    for entry in map(get, parsed.document.children):
        if " ".join((entry.get("SESSION") or "").split()) != wanted:
            continue
        clock = _clock(m[0] if (m := ENTRY_TIME.match(entry.title)) else "")
        for headline in map(get, entry.children):
            name, colon, first = headline.title.partition(":")
            clock = _clock(headline.get("TIME") or "") or clock
            if not colon:
                continue
            body = unescape_text(_body(headline))
            text = first.removeprefix(" ") + ("\n" + body if body and first else body)
            try:
                said.append(Utterance(name, text, None if clock is None else datetime.combine(day, clock),
                                      _read_values(headline.get("TOOLS")), _read_values(headline.get("ARTIFACTS"))))
            except InvalidTurn:  # a headline a person wrote that is no turn
                continue
    return said


def session_entry(text: str, session: str) -> str | None:
    """The Org text of `session`'s entry in a log's text (the last one, if a person made several), or None."""
    data = text.encode("utf-8")
    found = _entry_span(data, " ".join(session.split()))
    return None if found is None else data[found.start:found.end].decode("utf-8")


def _turn_lines(turns: Sequence[Utterance], previous: time | None) -> list[str]:
    """The lines of turns' headlines; `previous` is the time in effect before them (None: unknown, so the first
    says its own)."""
    lines = []
    for u in turns:
        first, _, rest = u.text.partition("\n")
        head = f"** {u.speaker}: {first}"
        if first.endswith(":") and not _reads_plainly(head, f"{u.speaker}: {first}"):  # it would end in tags
            head, rest = f"** {u.speaker}:", u.text
        properties = []
        if previous is None or f"{u.at:%H:%M}" != f"{previous:%H:%M}":
            properties.append(("TIME", f"{u.at:%H:%M}"))
        properties += [(name, _written_values(values)) for name, values in
                       (("TOOLS", u.tools), ("ARTIFACTS", u.artifacts)) if values]
        lines.append(head)
        if properties:
            lines += [":PROPERTIES:", *(f":{name + ':':<9} {value}" for name, value in properties), ":END:"]
        if rest:
            lines.append(escape_text(rest))
        previous = u.at.time()
    return lines


def _entry_span(data: bytes, session: str) -> _Entry | None:
    """Where the last level-1 entry of `session` is in a log's bytes (the last one, if a person made several).

    :SESSION: keys are looked for from the end of the log, as written (so that finding the entry turns are
    added to costs what follows it), then in any case, as Org reads property names."""
    at = len(data)
    while (at := data.rfind(_KEY, 0, at)) >= 0:
        if (found := _entry_at(data, at, session)) is not None:
            return found
    for key in reversed([m.start() for m in _KEY_ANY_CASE.finditer(data) if m[0] != _KEY]):
        if (found := _entry_at(data, key, session)) is not None:
            return found
    return None


class _Entry(NamedTuple):
    """A session's entry in a log's bytes."""

    start: int  # its heading line
    head_end: int  # past its heading line
    drawer_end: int  # where its property drawer's :END: line starts
    end: int  # past its last line
    people: tuple[int, int, str] | None  # its :PEOPLE: line (start, end before the line end) and value


def _entry_at(data: bytes, key: int, session: str) -> _Entry | None:
    """The entry whose :SESSION: key starts at `key`, if its value is `session` and the key is in the property
    drawer of a level-1 heading (see `_entry_span`)."""
    line = data.rfind(b"\n", 0, key) + 1
    line_end = data.find(b"\n", key)
    line_end = len(data) if line_end < 0 else line_end
    if data[line:key].strip(b" \t") or " ".join(data[key + len(_KEY):line_end].decode("utf-8", "replace")
                                                .split()) != session:
        return None
    start = data.rfind(b"\n* ", 0, line) + 1
    if start == 0 and not data.startswith(b"* "):
        return None
    after = data.find(b"\n* ", line_end)
    end = len(data) if after < 0 else after + 1
    # Line ends are kept by decoding, so the section's lines are the entry's lines of bytes.
    section = Section.of(data[start:end].decode("utf-8", "replace"))
    if section.drawer_end is None or not section.drawer < data.count(b"\n", start, line) < section.drawer_end:
        return None  # the :SESSION: of something else than the heading's drawer
    starts = _line_starts(data, start, section.drawer_end)
    names = [name.upper() for name, _ in section.properties]
    people = None
    if "PEOPLE" in names:
        k = names.index("PEOPLE")
        at, after = starts[section.drawer + 1 + k], starts[section.drawer + 2 + k]
        people = (at, after - 1 - (data[after - 2:after - 1] == b"\r"), section.properties[k][1])
    return _Entry(start, starts[1], starts[section.drawer_end], end, people)


def _line_starts(data: bytes, start: int, last: int) -> list[int]:
    """Where the lines 0 to `last` of the text from `start` start."""
    starts = [start]
    for _ in range(last):
        starts.append(data.find(b"\n", starts[-1]) + 1)
    return starts


def _with_people(data: bytes, drawer_end: int, line: tuple[int, int, str] | None, people: list[str],
                 nl: bytes) -> bytes:
    """`data` with the people who had not spoken in the entry yet added to its :PEOPLE: `line` (made if missing)."""
    known = [] if line is None else [p.strip() for p in line[2].split(",") if p.strip()]
    new = [p for p in people if p not in known]
    if not new:
        return data
    written = f":{'PEOPLE:':<9} {', '.join(known + new)}".encode("utf-8")
    if line is None:
        return data[:drawer_end] + written + nl + data[drawer_end:]
    return data[:line[0]] + written + data[line[1]:]


def _body(headline: Headline) -> str:
    """A headline's own text after its heading, planning line and property drawer."""
    lines = [line.removesuffix("\r") for line in headline.raw.split("\n")]
    return "\n".join(lines[Section.of(headline.raw).body:]).rstrip("\n")


def _session_id(session: str, first: datetime) -> str:
    """The session named, whitespace collapsed; with none, a new id of the first turn's time."""
    if not isinstance(session, str):
        raise InvalidTurn(f"session must be text, got {type(session).__name__}")
    session = " ".join(session.split())
    if not session:
        return f"s-{first:%Y-%m-%d-%H%M}-{secrets.token_hex(3)}"
    if _CONTROL.search(session):
        raise InvalidTurn(f"session {session[:40]!r}: holds a control character")
    return session


def _title(title: str | None) -> str:
    """A new entry's title, whitespace collapsed (None: the default)."""
    if title is None:
        return DEFAULT_TITLE
    if not isinstance(title, str) or not title.strip():
        raise InvalidTurn(f"session title {title!r:.40}: empty; leave it out for {DEFAULT_TITLE!r}")
    return " ".join(title.split())


def _moment(at) -> datetime | None:
    """A turn's time in local time, to the minute (None stays None)."""
    if at is None:
        return None
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at.strip())
        except ValueError:
            raise InvalidTurn(f"turn time {at[:40]!r}: not a date and time such as 2026-11-20 14:05") from None
    if not isinstance(at, datetime):
        raise InvalidTurn(f"turn time must be a datetime or text such as 2026-11-20 14:05, got {type(at).__name__}")
    if at.tzinfo is not None:
        at = at.astimezone().replace(tzinfo=None)
    return at.replace(second=0, microsecond=0)


def _clock(text: str) -> time | None:
    """`HH:MM` as a time of day, or None."""
    m = ENTRY_TIME.fullmatch(text.strip())
    if m is None or int(m[1]) > 23 or int(m[2]) > 59:
        return None
    return time(int(m[1]), int(m[2]))


def _values(values, name: str) -> tuple[str, ...]:
    """A turn's tools or artifacts: non-empty strings, each whitespace-collapsed."""
    if isinstance(values, str) or not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        raise InvalidTurn(f"turn {name} must be a list of strings, got {values!r:.60}")
    return tuple(v for v in (" ".join(value.split()) for value in values) if v)


def _written_values(values: tuple[str, ...]) -> str:
    """Values as one multi-valued property: separated by spaces, a space or `%` inside one percent-encoded."""
    return " ".join(_SPACE_OR_PERCENT.sub(lambda m: quote(m[0]), v) for v in values)


def _read_values(text: str | None) -> tuple[str, ...]:
    return tuple(unquote(v) for v in (text or "").split())


@lru_cache(maxsize=256)
def _reads_plainly(line: str, title: str) -> bool:
    """Whether Org reads the headline `line` as exactly `title`: no TODO keyword, priority, COMMENT or tags."""
    headline = next(o for o in parse(line + "\n").objects if isinstance(o, Headline))
    return headline.title == title and headline.todo is None and headline.priority is None and not headline.tags
