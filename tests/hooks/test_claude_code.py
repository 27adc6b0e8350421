"""Claude Code's hook contract: a transcript read into turns, payloads checked, the settings block merged."""

from datetime import datetime, timezone

import pytest

from cortex.errors import UserError
from cortex.hooks import claude_code as cc
from tests.conftest import REPO

TRANSCRIPT = REPO / "tests" / "data" / "claude_code" / "transcript.jsonl"


def test_a_transcript_is_what_was_typed_and_answered():
    title, said = cc.transcript(str(TRANSCRIPT))
    assert title == "Checkout total rounding fix"
    assert [(u.speaker, u.text.splitlines()[0], u.tools) for u in said] == [
        ("User", "The checkout test fails on CI, can you look?", ()),
        ("Claude", "Let me run the test.", ("Bash", "Edit")),  # one answer across its tool calls
        ("User", "Thanks. Note that prices are in cents from now on.", ()),  # the /cost line was no prompt
        ("Claude", "Noted: prices are integers in cents.", ()),  # the subagent's line is not the session's
    ]
    assert said[1].text.endswith("* It now rounds to cents, and the test passes.")
    assert said[0].at == datetime(2026, 11, 20, 14, 5, tzinfo=timezone.utc).astimezone().replace(tzinfo=None)


def test_a_transcript_being_written_or_without_summary(tmp_path):
    lines = TRANSCRIPT.read_text().splitlines()[1:3] + ['{"type": "user", "message": {"role": "us']
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines))
    title, said = cc.transcript(str(path))
    assert title == "The checkout test fails on CI, can you look?"
    assert [u.speaker for u in said] == ["User"]  # an answer of thinking only says nothing


@pytest.mark.parametrize("text, event, message", [
    ("[1]", "SessionStart", "a JSON object is expected, not list"),
    ('{"hook_event_name": "SessionEnd"}', "PreCompact", "hook_event_name is 'SessionEnd'"),
    ('{"session_id": "s"}', "SessionEnd", "no transcript_path"),
    ('{"cwd": 3}', "SessionStart", "cwd must be text"),
])
def test_a_payload_that_is_not_claude_codes_is_one_line(text, event, message):
    with pytest.raises(UserError, match=message):
        cc.read_payload(text, event)


def test_event_names_and_the_merge_of_settings():
    assert cc.event_named("session-start") == cc.event_named("SessionStart") == "SessionStart"
    with pytest.raises(UserError, match="use SessionStart, PreCompact, SessionEnd"):
        cc.event_named("Stop")
    theirs = {"matcher": "", "hooks": [{"type": "command", "command": "notify-send start"}]}
    settings = {"hooks": {"SessionStart": [theirs]}}
    old = {"SessionStart": "/old/cortex hook claude-code SessionStart --agent a"}
    cc.installed_hooks(settings, old, "settings.json")
    new = {"SessionStart": "/new/cortex hook claude-code SessionStart --agent a"}
    merged = cc.installed_hooks(settings, new, "settings.json")
    assert merged["hooks"]["SessionStart"] == [theirs, {"hooks": [{"type": "command", "command": new["SessionStart"]}]}]
    with pytest.raises(UserError, match='"hooks".SessionEnd is not a list'):
        cc.installed_hooks({"hooks": {"SessionEnd": {}}}, {"SessionEnd": "x"}, "settings.json")
