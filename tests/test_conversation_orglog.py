"""A session becomes one readable Org log entry whose conversation text can never become Org structure."""

import re
from datetime import UTC

import orgparse
import pytest

from cortex.errors import UserError
from cortex.memory.conversation import (
    ExtractiveSummarizer,
    TrajectoryDigest,
    Turn,
    escape_org_text,
    turns_to_org_log,
    unescape_org_text,
)
from cortex.memory.conversation.orglog import headline_text

T0 = 1_700_000_000 * 10**9  # 2023-11-14 22:13:20 UTC
HOSTILE = """Please check these lines:
* Fake headline :tag:
#+TODO: A B
:PROPERTIES:
:ID: x
:END:
SCHEDULED: <2024-01-01>
,* already escaped
  #+begin_src python
*bold* stays"""


def test_entry_shape():
    turns = [Turn("What is due?", "The report, by Friday.\nThen the slides.", TrajectoryDigest(("calendar",)),
                  ("report.org",), timestamp_ns=T0),
             Turn("Thanks", "You are welcome.", timestamp_ns=T0 + 60 * 10**9)]
    text = turns_to_org_log(turns, "Deadlines", session="s-42", summary="The report is due Friday.",
                            tz=UTC)
    assert text == """\
* 22:13 — Deadlines
:PROPERTIES:
:SESSION:  s-42
:TURNS:    2
:END:
The report is due Friday.
** User: What is due?
** Assistant
The report, by Friday.
Then the slides.
- Tools :: calendar
- Artifacts :: report.org
** User: Thanks
** Assistant
You are welcome.
"""


def test_summary_defaults_to_the_extractive_summarizer():
    turns = [Turn("Where is the LMDB map size set? I forgot.", "The LMDB map size is set at open.",
                  timestamp_ns=T0)]
    text = turns_to_org_log(turns, "Config", tz=UTC)
    assert text.split("\n")[4] == ExtractiveSummarizer().summarize("", turns)
    assert ":SESSION:" not in text


def test_conversation_text_never_becomes_structure():
    turns = [Turn(HOSTILE, "Done.\n** also fake", timestamp_ns=T0),
             Turn(":PROPERTIES:\n:ID: evil\n:END:", "SCHEDULED: <2024-01-01>\nok", timestamp_ns=T0 + 1)]
    text = turns_to_org_log(turns, "Hostile :work:", session="s-1", summary="* not a headline", tz=UTC)
    root = orgparse.loads(text)
    assert [(n.level, n.heading) for n in root[1:]] == [
        (1, "22:13 — Hostile"), (2, "User: Please check these lines:"), (2, "Assistant"), (2, "User:"),
        (2, "Assistant")]
    assert root[1].properties == {"SESSION": "s-1", "TURNS": "2"} and all(not n.tags for n in root[1:])
    ours = {0, 1, 2, 3, 4}
    lines = text.split("\n")
    ours |= {i for i, line in enumerate(lines) if re.match(r"\*\* (User|Assistant)", line)}
    assert all(not re.match(r"\s*(\*+ |#\+|:\w+:|SCHEDULED:)", line) for i, line in enumerate(lines)
               if i not in ours)
    body = text.split("** User: Please check these lines:\n")[1].split("\n** Assistant")[0]
    assert unescape_org_text(body) == HOSTILE


@pytest.mark.parametrize("text", [HOSTILE, ",* x", ",,#+y", "  :END:", "plain\n\n* two\n", ""])
def test_escaping_reverses(text):
    assert unescape_org_text(escape_org_text(text)) == text


def test_headline_text_is_one_bounded_line_without_tags():
    assert headline_text("  first   line :a:b:  \nsecond") == "first line"
    long = headline_text("word " * 40)
    assert len(long) == 72 and long.endswith("…")
    assert headline_text("\n\n") == ""


def test_an_empty_session_is_refused():
    with pytest.raises(UserError, match="at least one turn"):
        turns_to_org_log([], "Nothing")
