"""Compaction tells what memory.org holds as consolidation does (the bundled MiniLM): a near duplicate of a current
item is not moved, a likely successor supersedes the item it replaces, and a rollback undoes it all."""

import re
from datetime import datetime

MEMORY = "agents/assistant/memory.org"
NOW = datetime(2026, 11, 22, 10, 0)


def test_near_duplicates_stay_out_and_successors_supersede_in_turn(cortex, org):
    logs = org / "agents/assistant/logs"
    (logs / "2026-11-10.org").write_text(
        "* 08:30 — Limits\n** The API rate limit is 80 requests per minute.  :fact:\n")
    (logs / "2026-11-21.org").write_text(
        "* 09:00 — Settings\n** The user prefers dark mode in all of their apps.  :fact:\n"
        "** The API rate limit is 120 requests per minute.  :fact:\n"
        "** The VPN needs a restart after upgrades.  :fact:\n"
        "* 11:00 — Again\n** The VPN needs a restart after every upgrade.  :fact:\n")
    before = (org / MEMORY).read_bytes()
    report = cortex.memory.compact("assistant", now=NOW)
    moved = {item.title: item for _, item in report.moved}
    assert list(moved) == ["The API rate limit is 80 requests per minute.", "Release 2.3.1 contains the fix for E1042.",
                           "The API rate limit is 120 requests per minute.", "The VPN needs a restart after upgrades."]
    assert [(kind, item.title, known.id) for kind, item, known, _ in report.near] == [
        ("fact", "The user prefers dark mode in all of their apps.", "mem-assistant-dark-mode"),
        ("fact", "The VPN needs a restart after every upgrade.", moved["The VPN needs a restart after upgrades."].id)]
    assert report.duplicates == 2
    old, new = moved["The API rate limit is 80 requests per minute."], moved["The API rate limit is 120 requests per minute."]
    assert old.validity.replaced_by == ("mem-assistant-rate-limit",) and "ARCHIVE" in old.tags and not old.current
    assert new.validity.replaces == ("mem-assistant-rate-limit",) and new.current
    text = (org / MEMORY).read_text()
    assert re.search(r"\*\* The API rate limit is 100 requests per minute\. +:ARCHIVE:\n:PROPERTIES:\n"
                     r":ID: +mem-assistant-rate-limit\n:ADDED: +\[2026-11-19 Thu 15:40\]\n:SOURCE: .*\n"
                     rf":SUPERSEDES: {old.id}\n:VALID_FROM: \[2026-11-19 Thu 15:40\]\n"
                     rf":INVALID_AT: \[2026-11-21 Sat 09:00\]\n:SUPERSEDED_BY: {new.id}\n", text)
    assert ":VALID_FROM: [2026-11-21 Sat 09:00]" in text and "all of their apps" not in text
    lines = report.lines()
    assert "  moved    fact      The API rate limit is 120 requests per minute.  (supersedes mem-assistant-rate-limit)" \
           in lines
    assert any(re.fullmatch(r"  known    fact      The user prefers dark mode in all of their apps\.  "
                            r"\(as mem-assistant-dark-mode, 0\.\d\d\)", line) for line in lines)
    cortex.rollback(report.before.oid.hex())
    assert (org / MEMORY).read_bytes() == before


def test_a_compaction_that_changes_nothing_takes_no_snapshot(cortex):
    cortex.memory.compact("assistant", now=NOW)  # moves what the bundled log marks
    taken = cortex.snapshot_count
    again = cortex.memory.compact("assistant", now=NOW)
    assert again.moved == [] and again.before == again.after and cortex.snapshot_count == taken
