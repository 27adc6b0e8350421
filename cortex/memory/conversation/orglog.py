"""A session's turns as one Org entry of an agent's daily log (`agents/<id>/logs/YYYY-MM-DD.org`).

    * 14:05 — <title>
    :PROPERTIES:
    :SESSION:  <session>
    :TURNS:    <n>
    :END:
    <summary paragraph>
    ** User: <first line of the message>
    <message, unless the headline holds all of it>
    ** Assistant
    <response>
    - Tools :: <tools invoked>
    - Artifacts :: <artifacts shown>

Conversation text is data, never structure: a line that Org would read as a headline,
keyword, block, drawer or planning line gets a leading comma, as Org escapes such lines
inside blocks; lines already starting with commas get one more, so the escape reverses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, tzinfo

from ...errors import UserError
from .summarizers import ExtractiveSummarizer, Summarizer
from .turns import Turn

# Lines Org reads as structure: headlines, keywords and blocks, drawers, planning.
_STRUCTURE = r"(?:\*+(?:[ \t]|$)|#\+|:[\w-]*:(?:[ \t]|$)|(?:SCHEDULED|DEADLINE|CLOSED):)"
_ESCAPABLE = re.compile(rf"^([ \t]*)(,*{_STRUCTURE})")
_ESCAPED = re.compile(rf"^([ \t]*),(,*{_STRUCTURE})")
_TRAILING_TAGS = re.compile(r"(?:(?:^|[ \t]+):[\w@#%:]+:)+[ \t]*$")
_TITLE_WIDTH = 72


def escape_org_text(text: str) -> str:
    """`text` with every line Org would parse as structure escaped by a leading comma."""
    return "\n".join(_ESCAPABLE.sub(r"\1,\2", line) for line in text.split("\n"))


def unescape_org_text(text: str) -> str:
    """Undo `escape_org_text`."""
    return "\n".join(_ESCAPED.sub(r"\1\2", line) for line in text.split("\n"))


def headline_text(text: str) -> str:
    """One line fit for a headline title: first line, whitespace collapsed, no trailing tags, bounded width."""
    line = " ".join(text.strip().split("\n", 1)[0].split()) if text.strip() else ""
    line = _TRAILING_TAGS.sub("", line)
    return line if len(line) <= _TITLE_WIDTH else line[: _TITLE_WIDTH - 1].rstrip() + "…"


def turns_to_org_log(turns: Sequence[Turn], title: str, *, session: str = "", summary: str | None = None,
                     summarizer: Summarizer | None = None, tz: tzinfo | None = None) -> str:
    """One level-1 Org entry for a session: time and title, properties, a summary, then each exchange.

    The summary is `summary` when given, else `summarizer` (an ExtractiveSummarizer by
    default) run over the turns. The time is the first turn's, in `tz` (local time when None).
    """
    if not turns:
        raise UserError("turns_to_org_log: a session log entry needs at least one turn")
    if summary is None:
        summary = (summarizer or ExtractiveSummarizer()).summarize("", list(turns))
    started = datetime.fromtimestamp(turns[0].timestamp_ns / 1e9, tz)
    lines = [f"* {started:%H:%M} — {headline_text(title)}", ":PROPERTIES:"]
    if session.strip():
        lines.append(f":{'SESSION:':<9} {' '.join(session.split())}")
    lines += [f":{'TURNS:':<9} {len(turns)}", ":END:"]
    if summary.strip():
        lines.append(escape_org_text(summary.strip()))
    for turn in turns:
        title = headline_text(turn.user_message)
        lines.append(f"** User: {title}".rstrip())
        if turn.user_message.strip() != title:  # the headline does not already say it all
            lines.append(escape_org_text(turn.user_message.strip("\n")))
        lines.append("** Assistant")
        if turn.assistant_response.strip():
            lines.append(escape_org_text(turn.assistant_response.strip("\n")))
        tools = turn.trajectory.tools_invoked if turn.trajectory else ()
        for label, items in (("Tools", tools), ("Artifacts", turn.artifacts_shown)):
            if items:
                lines.append(f"- {label} :: {escape_org_text(', '.join(' '.join(i.split()) for i in items))}")
    return "\n".join(lines) + "\n"
