"""A briefing within its budget, whole items most useful first; what changed since the agent's last session."""

from datetime import datetime, timedelta

import pytest

import cortex.api as cx
from cortex.errors import NotFound
from cortex.memory.brief import brief, estimate_tokens
from cortex.memory.conversation import Utterance
from cortex.memory.items import MemoryItem

NOW = datetime(2026, 11, 27, 9, 0)


def facts(n: int) -> list[tuple[str, MemoryItem]]:
    return [("fact", MemoryItem(f"Fact {i}: " + "a sentence of ordinary length. " * 3, added=NOW - timedelta(days=i)))
            for i in range(n)]


def test_the_budget_cuts_whole_items_and_says_what_it_left_out():
    items = facts(200) + [("procedure", MemoryItem("Run make test before pushing."))]
    whole = brief("dev", items, [], [], None, budget=100_000, now=NOW)
    assert whole.left_out == {} and whole.text.count("\n- Fact ") == 200
    cut = brief("dev", items, [], [], None, budget=500, now=NOW)
    assert cut.tokens <= 500 and estimate_tokens(cut.text) == cut.tokens
    shown = [line for line in cut.text.splitlines() if line.startswith("- Fact ")]
    assert shown == [line for line in whole.text.splitlines() if line.startswith("- Fact ")][:len(shown)]  # newest
    assert "- Run make test before pushing." in cut.text  # a long section does not starve the others
    assert cut.left_out == {"fact": 200 - len(shown)}
    assert cut.text.endswith(f"Left out for the budget of 500 tokens: {200 - len(shown)} facts "
                             "(`cortex brief dev --budget 1000` shows more).\n")


def test_what_changed_since_the_last_session_and_the_open_todos(tmp_path):
    org = tmp_path / "org"
    (org / "agents" / "dev").mkdir(parents=True)
    (org / "notes.org").write_text("#+TODO: TODO | DONE\n* Deploys\n* TODO Rotate the key :dev:\n")
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        with pytest.raises(NotFound, match="agent 'dev' has no memory nor daily logs yet"):
            c.brief("dev")
        c.snapshot("before")
        later = datetime.now().replace(second=0, microsecond=0) + timedelta(minutes=1)
        c.memory.record_session("dev", [Utterance("Dana", "Deploy on Tuesday.", later)], "Deploys", session="s1")
        (org / "notes.org").write_text("#+TODO: TODO | DONE\n* Deploys on Tuesday\n* TODO [#A] Rotate the key :dev:\n")
        c.ingest()
        text = c.brief("dev", now=NOW).text
    assert f"* Changed since its last session ({later:%Y-%m-%d %H:%M})\n" in text
    assert "notes.org: Deploys on Tuesday" in text and "logs/" not in text  # its own log is the session itself
    assert "- TODO [#A] Rotate the key (notes.org)" in text


def test_its_open_todos_tagged_anywhere_by_a_heading_or_the_file(tmp_path):
    """Tagged by a heading above or by #+FILETAGS, in any folder; done ones and those that no longer hold left out;
    the same in a later session (which reads only the files naming the agent), and gone once untagged."""
    org = tmp_path / "org"
    (org / "agents" / "dev" / "logs").mkdir(parents=True)
    (org / "agents" / "dev" / "logs" / "2026-11-26.org").write_text("* 09:00 — A session\n")
    (org / "team").mkdir()
    (org / "team" / "infra.org").write_text("#+FILETAGS: :dev:\n* TODO Renew the certificate\n* DONE Move the DNS\n")
    (org / "projects.org").write_text(
        "* Cluster :dev:\n** TODO [#A] Upgrade the nodes\n** TODO An old plan\n"
        ":PROPERTIES:\n:INVALID_AT: [2020-01-01 Wed]\n:END:\n* TODO Someone else's :ops:\n")
    todos = "* Open TODOs\n- TODO [#A] Upgrade the nodes (projects.org)\n- TODO Renew the certificate (team/infra.org)\n"
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        assert todos in c.brief("dev", now=NOW).text
    with cx.open(tmp_path / "store", org) as c:
        assert todos in c.brief("dev", now=NOW).text
        (org / "team" / "infra.org").write_text("* TODO Renew the certificate\n")
        c.ingest()
        assert c.brief("dev", now=NOW).text.endswith("* Open TODOs\n- TODO [#A] Upgrade the nodes (projects.org)\n")
