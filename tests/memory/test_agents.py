"""Agent memory in Org files: the context contract, safe writes, compaction, purge, on real files and LMDB."""

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

import cortex.api as cx
from cortex.errors import NotFound, UserError
from cortex.memory import memoryfile
from cortex.memory.agents import MemoryContext
from cortex.memory.items import BadItemText, MemoryItem
from cortex.memory.layout import BadAgentId, MemoryTag, classify
from cortex.memory.memoryfile import MemoryConflict, MemoryFile
from cortex.memory.retention import RetentionPolicy

NOW = datetime(2026, 11, 21, 10, 5)
MEMORY = "agents/assistant/memory.org"


def titles(items):
    return [item.title for item in items]


def test_load_context_reads_items_with_their_properties(cortex):
    context = cortex.memory.load_context("assistant")
    assert titles(context.facts) == ["The staging cluster lives in eu-west-1.",
                                     "User prefers dark mode in every app.",
                                     "The API rate limit is 100 requests per minute."]
    plain, dark_mode = context.facts[0], context.facts[1]
    assert plain.plain and plain.id is None
    assert dark_mode == MemoryItem("User prefers dark mode in every app.", id="mem-assistant-dark-mode",
                                   added=datetime(2026, 11, 18, 9, 12), source="session 2026-11-18 09:10")
    assert titles(context.procedures) == ["Run the test suite before committing changes."]
    assert titles(context.patterns) == ["Questions about deploys usually mean the Tuesday release train."]
    assert context.warnings == []


def test_a_missing_agent_is_an_empty_context_and_nothing_is_created(cortex, org):
    context = cortex.memory.load_context("newcomer")
    assert len(context) == 0 and context.warnings == []
    assert not (org / "agents" / "newcomer").exists()


def test_save_writes_readable_org_appends_the_log_and_ingests(cortex, org):
    context = MemoryContext(facts=["The database is Postgres 16."],
                            procedures=[MemoryItem("Deploy on Tuesdays.\nCheck the release train first.",
                                                   tags=("ops",))],
                            patterns=[MemoryItem("Mornings are for reviews.", plain=True)],
                            summary="Talked about the database.", title="Database chat")
    saved = cortex.memory.save_context("newcomer", context, now=NOW)
    assert (org / "agents/newcomer/memory.org").read_text() == textwrap.dedent("""\
        #+TITLE: Memory of newcomer

        * Facts
        ** The database is Postgres 16.
        :PROPERTIES:
        :ID:       mem-newcomer-the-database-is-postgres-16-bbb4ee
        :ADDED:    [2026-11-21 Sat 10:05]
        :SOURCE:   session 2026-11-21 10:05
        :END:

        * Procedures
        ** Deploy on Tuesdays.                                                  :ops:
        :PROPERTIES:
        :ID:       mem-newcomer-deploy-on-tuesdays-check-the-c1e183
        :ADDED:    [2026-11-21 Sat 10:05]
        :SOURCE:   session 2026-11-21 10:05
        :END:
        Check the release train first.

        * Learned Patterns
        - Mornings are for reviews.
        """)
    assert (org / "agents/newcomer/logs/2026-11-21.org").read_text() == textwrap.dedent("""\
        #+TITLE: newcomer — 2026-11-21

        * 10:05 — Database chat
        :PROPERTIES:
        :SESSION:  s-2026-11-21-1005
        :END:
        Talked about the database.
        """)
    assert saved.procedures[0].text == "Deploy on Tuesdays.\nCheck the release train first."
    assert saved.patterns == [MemoryItem("Mornings are for reviews.", plain=True)]
    # written and ingested in the same step: each item is its own object in the working state
    node = cortex.lookup("mem-newcomer-the-database-is-postgres-16-bbb4ee")
    assert node.path == "agents/newcomer/memory.org" and node.outline == ("Facts", "The database is Postgres 16.")
    assert cortex.show("agents/newcomer/logs/2026-11-21.org").startswith("#+TITLE: newcomer")
    assert cortex.memory.load_context("newcomer") == saved


def test_second_session_appends_and_saving_again_changes_nothing(cortex, org):
    first = cortex.memory.save_context("assistant", MemoryContext(summary="One.", title="First"), now=NOW)
    before = (org / MEMORY).read_bytes()
    again = cortex.memory.save_context("assistant", replace(first, summary="Two.", title="Second"),
                                       now=NOW + timedelta(hours=2))
    assert (org / MEMORY).read_bytes() == before and again == first
    log = (org / "agents/assistant/logs/2026-11-21.org").read_text()
    assert log.index("* 10:05 — First") < log.index("\n\n* 12:05 — Second\n") and log.endswith("Two.\n")


def test_removing_and_changing_items_rewrites_only_those(cortex, org):
    context = cortex.memory.load_context("assistant")
    context.facts = [f for f in context.facts if f.id != "mem-assistant-dark-mode"]
    context.procedures[0] = replace(context.procedures[0], text="Run the full test suite before committing.")
    context.facts.remove(context.facts[0])  # the plain list item
    cortex.memory.save_context("assistant", context, now=NOW)
    text = (org / MEMORY).read_text()
    assert "dark mode" not in text and "eu-west-1" not in text
    assert "** Run the full test suite before committing.\n:PROPERTIES:\n:ID:       mem-assistant-tests-first\n" \
           ":ADDED:    [2026-11-18 Wed 09:30]\n" in text
    assert text.endswith("* Learned Patterns\n** Questions about deploys usually mean the Tuesday release train.\n"
                         ":PROPERTIES:\n:ID:       mem-assistant-deploy-questions\n:ADDED:    [2026-11-20 Fri 11:00]\n"
                         ":SOURCE:   log 2026-11-20 11:00\n:END:\n")


def test_unknown_sections_and_free_text_are_reported_and_kept_byte_for_byte(cortex, org):
    path = org / MEMORY
    original = path.read_text()
    notes = "* Notes :private:\nWhatever I like, *bold*.\n** Sub note\n\n"
    path.write_text(original.replace("* Facts\n", notes + "* Facts\nSome words of my own.\n")
                    + "* Facts\n** A second facts section\n")
    context = cortex.memory.load_context("assistant")
    assert context.warnings == [
        f"{MEMORY}:4: section 'Notes' is not a memory section (Facts, Procedures, Learned Patterns); kept as it is",
        f"{MEMORY}:9: free text in 'Facts' is not an item; kept as it is",
        f"{MEMORY}:39: a second 'Facts' section is not read; kept as it is",
    ]
    assert len(context.facts) == 3
    context.facts.append("Added after the notes.")
    cortex.memory.save_context("assistant", context, now=NOW)
    text = path.read_text()
    assert notes + "* Facts\nSome words of my own.\n- The staging cluster" in text
    assert text.endswith("* Facts\n** A second facts section\n")
    assert text.count("** Added after the notes.") == 1


def test_a_hand_edit_and_a_save_that_do_not_overlap_are_merged(cortex, org):
    context = cortex.memory.load_context("assistant")
    path = org / MEMORY
    path.write_text(path.read_text()
                    .replace("every app.", "every app, including the terminal.")
                    .replace("* Procedures\n", "* Procedures\n- Ask before deleting branches.\n"))
    context.facts.append("The on-call rotation changes on Mondays.")
    context.patterns.clear()
    cortex.memory.save_context("assistant", context, now=NOW)
    merged = cortex.memory.load_context("assistant")
    assert titles(merged.facts) == ["The staging cluster lives in eu-west-1.",
                                    "User prefers dark mode in every app, including the terminal.",
                                    "The API rate limit is 100 requests per minute.",
                                    "The on-call rotation changes on Mondays."]
    assert titles(merged.procedures) == ["Ask before deleting branches.", "Run the test suite before committing changes."]
    assert merged.patterns == []


def test_overlapping_edits_are_refused_naming_the_file_and_item(cortex, org):
    context = cortex.memory.load_context("assistant")
    path = org / MEMORY
    hand_edited = path.read_text().replace("100 requests per minute", "120 requests per minute")
    path.write_text(hand_edited)
    context.facts[2] = replace(context.facts[2], text="The API rate limit is 50 requests per minute.")
    context.procedures.clear()
    with pytest.raises(MemoryConflict) as err:
        cortex.memory.save_context("assistant", context, now=NOW)
    assert f"{MEMORY}:12: item mem-assistant-rate-limit 'The API rate limit is 120 requests per minute.' " \
           "was changed in the file, and changed differently here" in str(err.value)
    assert path.read_text() == hand_edited  # the hand edit survives, nothing else was written either
    assert "Run the test suite" in path.read_text()


def test_a_hand_edit_saved_while_the_agent_saves_is_merged_not_overwritten(cortex, org, monkeypatch):
    path = org / MEMORY
    rewrite = MemoryFile.rewrite
    calls = []

    def person_saves_meanwhile(self, *args):
        calls.append(1)
        if len(calls) == 1:  # between the agent reading the file and replacing it
            path.write_text(path.read_text().replace("* Procedures\n", "* Procedures\n- Typed in Emacs.\n"))
        return rewrite(self, *args)

    monkeypatch.setattr(MemoryFile, "rewrite", person_saves_meanwhile)
    cortex.memory.add_item("assistant", "fact", "Saved by the agent.")
    assert len(calls) == 2
    text = path.read_text()
    assert "* Procedures\n- Typed in Emacs.\n" in text and "** Saved by the agent.\n" in text


def test_a_conflict_with_bytes_the_file_no_longer_holds_is_not_raised(cortex, org):
    path = org / MEMORY
    stale = cortex.memory.load_context("assistant")
    first = cortex.memory.load_context("assistant")
    first.facts[2] = replace(first.facts[2], text="The API rate limit is 120 requests per minute.")
    cortex.memory.save_context("assistant", first, now=NOW)  # what this process wrote last: 120
    path.write_text(path.read_text().replace("120 requests", "100 requests"))  # a person puts it back
    stale.facts[2] = replace(stale.facts[2], text="The API rate limit is 50 requests per minute.")
    saved = cortex.memory.save_context("assistant", stale, now=NOW)
    assert titles(saved.facts)[2] == "The API rate limit is 50 requests per minute."
    assert "50 requests per minute" in path.read_text()


def test_saving_again_reads_no_file_whole_and_loads_as_a_fresh_read_does(cortex, org, tmp_path, monkeypatch):
    reads = []
    read = memoryfile._Reader.read
    monkeypatch.setattr(memoryfile._Reader, "read", lambda self, *args: reads.append(1) or read(self, *args))
    context = cortex.memory.load_context("assistant")
    reads.clear()
    for n in range(3):
        context.facts.append(f"Fact number {n} of this session.")
        context.patterns.append(MemoryItem(f"Pattern {n} as a list item.", plain=True))
        context = cortex.memory.save_context("assistant", context, now=NOW)
    context.procedures[0] = replace(context.procedures[0], text="Run the full test suite first.")
    del context.facts[1]
    saved = cortex.memory.save_context("assistant", context, now=NOW)
    assert reads == []  # every model after the first is derived from the one before
    cortex.close()
    with cx.open(tmp_path / "store", org) as fresh:
        assert fresh.memory.load_context("assistant") == saved
    assert titles(saved.facts)[-1] == "Fact number 2 of this session." and "dark mode" not in (org / MEMORY).read_text()


def test_a_hand_edit_after_a_save_is_read_and_merged(cortex, org):
    cortex.memory.add_item("assistant", "fact", "Saved first.")
    context = cortex.memory.load_context("assistant")
    path = org / MEMORY
    path.write_text(path.read_text().replace("* Procedures\n", "* Procedures\n- Typed in Emacs.\n"))
    assert titles(cortex.memory.load_context("assistant").procedures)[0] == "Typed in Emacs."
    context.facts.append("Saved second.")
    saved = cortex.memory.save_context("assistant", context, now=NOW)
    assert titles(saved.procedures)[0] == "Typed in Emacs."
    assert titles(saved.facts)[-2:] == ["Saved first.", "Saved second."]
    assert "* Procedures\n- Typed in Emacs.\n" in path.read_text()


def test_crlf_files_stay_crlf(cortex, org):
    path = org / "agents/reviewer/memory.org"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    context = cortex.memory.load_context("reviewer")
    assert titles(context.facts) == ["The main branch is protected; merges need one approval."]
    context.patterns.append("Large diffs get split.")
    cortex.memory.save_context("reviewer", context, now=NOW)
    data = path.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") and b"** Large diffs get split.\r\n:PROPERTIES:\r\n" in data


def test_unreadable_memory_is_refused_with_its_location(cortex, org):
    (org / MEMORY).write_bytes(b"* Facts\n- caf\xe9\n")
    for call in (lambda: cortex.memory.load_context("assistant"),
                 lambda: cortex.memory.add_item("assistant", "fact", "x")):
        with pytest.raises(UserError, match=f"^{MEMORY}:2: not UTF-8 \\(byte 0xe9\\)$"):
            call()
    assert (org / MEMORY).read_bytes() == b"* Facts\n- caf\xe9\n"


def test_a_context_saved_under_another_agent_is_copied(cortex, org):
    context = cortex.memory.load_context("reviewer")
    cortex.memory.save_context("assistant", context, now=NOW)
    facts = titles(cortex.memory.load_context("assistant").facts)
    assert "The main branch is protected; merges need one approval." in facts and len(facts) == 4


def test_a_summary_that_would_start_a_new_entry_is_refused(cortex, org):
    with pytest.raises(UserError, match="line 2: starts with"):
        cortex.memory.save_context("assistant", MemoryContext(summary="fine\n* not fine"), now=NOW)
    assert not (org / "agents/assistant/logs/2026-11-21.org").exists()


def test_add_item_adds_once(cortex, org):
    existing = cortex.memory.add_item("assistant", "fact", "the api rate limit is 100 requests per minute")
    assert existing.id == "mem-assistant-rate-limit"
    item = cortex.memory.add_item("assistant", "procedure", "Tag releases with the date.", source="cli", now=NOW)
    assert item == MemoryItem("Tag releases with the date.", id="mem-assistant-tag-releases-with-the-date-7ca1cb",
                              added=NOW, source="cli")
    assert cortex.memory.add_item("assistant", "procedure", "Tag releases with the date") == item
    assert (org / MEMORY).read_text().count("Tag releases") == 1
    assert cortex.lookup(item.id).outline == ("Procedures", "Tag releases with the date.")
    # its writers' lock is kept outside the Org folder, where `git status` would show it
    assert sorted(p.name for p in (org / MEMORY).parent.iterdir()) == ["logs", "memory.org"]
    with pytest.raises(UserError, match="memory type 'opinion': use one of fact, procedure, pattern"):
        cortex.memory.add_item("assistant", "opinion", "Tabs are better.")


def test_an_id_taken_by_other_content_is_refused(cortex, org):
    with pytest.raises(MemoryConflict, match="mem-assistant-dark-mode 'User prefers dark mode in every app.' "
                                             "is already in the file with other content"):
        cortex.memory.add_item("assistant", "fact", "User prefers light mode.", id="mem-assistant-dark-mode")


@pytest.mark.parametrize("text, message", [
    ("   ", "Facts: empty item text"),
    ("Release notes :draft:", "ends with what Org reads as tags"),
    ("First line\n* Not a new section", "line 2 of its text starts with '* ', which Org reads as a new headline"),
])
def test_item_text_org_would_misread_is_refused(cortex, org, text, message):
    before = (org / MEMORY).read_bytes()
    with pytest.raises(BadItemText, match=re.escape(message)):
        cortex.memory.save_context("assistant", MemoryContext(facts=[text]), now=NOW)
    assert (org / MEMORY).read_bytes() == before


@pytest.mark.parametrize("agent", ["", "a/b", "..", "x..y", "nul\0byte", ".hidden", "../outside", "back\\slash"])
def test_bad_agent_ids_are_refused_and_nothing_is_touched(cortex, org, tmp_path, agent):
    def files():  # (but the working copy's own records, which the last sync settles as it likes)
        return sorted(p for p in tmp_path.rglob("*") if "store" not in p.parts and ".cortex" not in p.parts)

    before = files()
    memory = cortex.memory
    for call in (lambda: memory.load_context(agent), lambda: memory.save_context(agent, MemoryContext(facts=["x"])),
                 lambda: memory.add_item(agent, "fact", "x"), lambda: memory.delete_context(agent),
                 lambda: memory.compact(agent), lambda: memory.purge(agent, hard=True),
                 lambda: memory.search(agent, "x"), lambda: cortex.search("x", agent=agent)):
        with pytest.raises(BadAgentId, match="agent id"):
            call()
    assert files() == before


def test_a_symlinked_agent_folder_leading_outside_is_refused(cortex, org, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (org / "agents" / "sneaky").symlink_to(outside)
    with pytest.raises(UserError, match="leads outside the Org root"):
        cortex.memory.save_context("sneaky", MemoryContext(facts=["x"]))
    assert list(outside.iterdir()) == []


def test_two_processes_saving_the_same_agent_lose_nothing(cortex, org, tmp_path):
    cortex.close()  # each process opens the store itself
    start = tmp_path / "start"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        import cortex.api as cx
        name = sys.argv[1]
        with cx.open({str(tmp_path / "store")!r}, {str(org)!r}) as c:
            while not Path({str(start)!r}).exists():
                time.sleep(0.001)
            for n in range(12):
                context = c.memory.load_context("assistant")
                context.facts.append(f"{{name}} learned fact {{n}}.")
                context.summary = f"{{name}} session {{n}}"
                c.memory.save_context("assistant", context)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    workers = [subprocess.Popen([sys.executable, "-c", script, name], env=env, stderr=subprocess.PIPE)
               for name in ("alpha", "beta")]
    start.touch()
    for worker in workers:
        assert worker.wait(timeout=120) == 0, worker.stderr.read().decode()
    with cx.open(tmp_path / "store", org) as c:
        facts = titles(c.memory.load_context("assistant").facts)
        wanted = [f"{name} learned fact {n}." for name in ("alpha", "beta") for n in range(12)]
        assert sorted(f for f in facts if "learned" in f) == sorted(wanted)
        assert len(facts) == 3 + 24
        logs = "".join(p.read_text() for p in (org / "agents/assistant/logs").glob("*.org"))
        assert sorted(re.findall(r"\n(\w+ session \d+)\n", logs)) == sorted(
            f"{name} session {n}" for name in ("alpha", "beta") for n in range(12))


def test_compaction_moves_marked_items_deletes_old_logs_and_rollback_undoes_it(cortex, org):
    logs = org / "agents/assistant/logs"
    (logs / "2026-07-01.org").write_text(
        "* 08:30 — Old session\nWe learned something.\n** The VPN needs a restart after upgrades.  :fact:\n"
        "** Not marked, stays in the log\n")
    (logs / "2026-11-21.org").write_text(
        "* 09:00 — Today\n** Questions about deploys usually mean the Tuesday release train  :pattern:\n"
        "** Read the runbook before paging anyone.  :procedure:urgent:\nStart with the index.\n")
    memory_before = (org / MEMORY).read_bytes()
    report = cortex.memory.compact("assistant", RetentionPolicy(max_age=timedelta(days=90)), now=NOW)
    assert [(kind, item.text, item.source, item.added, item.tags) for kind, item in report.moved] == [
        ("fact", "The VPN needs a restart after upgrades.", "log 2026-07-01 08:30", datetime(2026, 7, 1, 8, 30), ()),
        ("fact", "Release 2.3.1 contains the fix for E1042.", "log 2026-11-20 16:45", datetime(2026, 11, 20, 16, 45),
         ()),
        ("procedure", "Read the runbook before paging anyone.\nStart with the index.", "log 2026-11-21 09:00",
         datetime(2026, 11, 21, 9, 0), ("urgent",)),
    ]
    assert report.duplicates == 1 and report.deleted_logs == ["agents/assistant/logs/2026-07-01.org"]
    assert not (logs / "2026-07-01.org").exists()
    context = cortex.memory.load_context("assistant")
    assert "The VPN needs a restart after upgrades." in titles(context.facts)
    assert titles(context.patterns) == ["Questions about deploys usually mean the Tuesday release train."]
    assert ":COMPACTED: [2026-11-21 Sat 10:05]" in (logs / "2026-11-21.org").read_text()
    assert cortex.memory.compact("assistant", now=NOW).moved == []  # compacted items are not moved twice
    cortex.rollback(report.before.oid.hex())
    assert (org / MEMORY).read_bytes() == memory_before
    assert (logs / "2026-07-01.org").exists() and ":COMPACTED:" not in (logs / "2026-11-21.org").read_text()


def test_retention_policy():
    policy = RetentionPolicy(max_age=timedelta(days=90))
    today = NOW.date()
    assert policy.expired(today - timedelta(days=91), today) and not policy.expired(today - timedelta(days=90), today)
    assert RetentionPolicy().max_age == timedelta(days=90)
    with pytest.raises(UserError, match="max_age must be a timedelta"):
        RetentionPolicy(max_age=90)
    with pytest.raises(UserError, match="is negative"):
        RetentionPolicy(max_age=timedelta(days=-1))


def test_delete_list_and_stats(cortex, org):
    memory = cortex.memory
    assert memory.list_agent_contexts() == ["assistant", "reviewer"]
    stats = memory.get_storage_stats()
    assert stats["assistant"].files == 2 and stats["assistant"].logs == 1 and stats["assistant"].items == 5
    assert stats["assistant"].bytes == sum(p.stat().st_size for p in (org / "agents/assistant").rglob("*.org"))
    assert stats["reviewer"].items == 2
    assert memory.delete_context("reviewer") is True
    assert memory.delete_context("reviewer") is False
    assert memory.list_agent_contexts() == ["assistant"]
    assert "agents/reviewer/memory.org" not in cortex.working().entries
    assert "agents/reviewer/memory.org" in cortex.state("HEAD").entries  # snapshotted before deleting


def test_soft_purge_removes_files_and_working_items_and_rollback_restores(cortex, org):
    cortex.memory.add_item("reviewer", "fact", "Reviews happen after lunch.")
    report = cortex.memory.purge("reviewer")
    assert report.files == ["agents/reviewer/memory.org"] and report.history is None
    assert not (org / "agents/reviewer").exists()
    assert not [p for p in cortex.working().entries if p.startswith("agents/reviewer/")]
    assert all(not node.path.startswith("agents/reviewer/") for node in cortex.headlines())
    cortex.rollback("HEAD")
    assert "Reviews happen after lunch." in (org / "agents/reviewer/memory.org").read_text()
    with pytest.raises(NotFound, match="agent 'nobody' has no memory"):
        cortex.memory.purge("nobody")


SECRET = "The vault passphrase is correct-horse-battery-staple-42."


def purge_hard_with_history(cortex):
    cortex.snapshot("before")
    cortex.memory.add_item("reviewer", "fact", SECRET)
    cortex.snapshot("with the secret")
    cortex.memory.add_item("assistant", "fact", "Unrelated knowledge stays.")
    cortex.snapshot("after")
    return cortex.memory.purge("reviewer", hard=True)


def test_hard_purge_rewrites_every_snapshot_without_the_agent(cortex):
    messages = ["after", "with the secret", "before"]
    report = purge_hard_with_history(cortex)
    assert report.files == ["agents/reviewer/memory.org"]
    assert report.history.snapshots == 3 and report.history.objects > 0
    assert [s.message for s in cortex.snapshots()] == messages
    for snap in cortex.snapshots():
        assert not [p for p in cortex.state(snap.oid.hex()).entries if p.startswith("agents/reviewer/")]
    assert cortex.resolve("HEAD") == cortex.snapshots()[0]
    assert cortex.resolve("HEAD~2") == cortex.snapshots()[2]  # parents were rewritten too
    assert all(SECRET not in cortex.show(n) for n in cortex.headlines())
    assert "Unrelated knowledge stays." in cortex.show(MEMORY)
    assert cortex.fsck() == []
    with pytest.raises(NotFound, match="agent 'nobody' has no memory here or in any kept snapshot"):
        cortex.memory.purge("nobody", hard=True)


def test_hard_purge_leaves_no_trace_in_the_store_file(cortex, tmp_path):
    purge_hard_with_history(cortex)
    cortex.close()
    data = (tmp_path / "store" / "data.mdb").read_bytes()
    assert b"Unrelated knowledge stays." in data
    assert SECRET.encode() not in data


@pytest.mark.parametrize("path, outline, tags, expected", [
    ("agents/assistant/memory.org", ("Facts", "User prefers dark mode."), (), MemoryTag("assistant", "fact")),
    ("agents/assistant/memory.org", ("Learned Patterns",), (), MemoryTag("assistant", "pattern")),
    ("agents/assistant/memory.org", ("procedures", "x", "deeper"), (), MemoryTag("assistant", "procedure")),
    ("agents/assistant/memory.org", ("Notes",), (), None),
    ("agents/assistant/logs/2026-11-20.org", ("11:00 — Session",), (), MemoryTag("assistant", "log")),
    ("agents/assistant/logs/2026-11-20.org", ("11:00 — Session", "x"), ("pattern",), MemoryTag("assistant", "pattern")),
    ("agents/assistant/logs/notes.org", ("x",), (), None),
    ("agents/.hidden/memory.org", ("Facts", "x"), (), None),
    ("notes/memory.org", ("Facts", "x"), (), None),
])
def test_classify(path, outline, tags, expected):
    from cortex.objects import Headline

    headline = Headline(level=len(outline), title=outline[-1], raw="", tags=tags)
    assert classify(path, outline, headline) == expected


def test_a_memory_add_makes_only_the_agent_s_folder_of_the_tree_again(store_at, tmp_path, monkeypatch):
    from cortex import objects
    org = tmp_path / "org"
    for n in range(20):
        (org / "notes" / f"p{n:02}").mkdir(parents=True)
        for i in range(5):
            (org / "notes" / f"p{n:02}" / f"n{i}.org").write_text(f"* Note {n}\n")
    with cx.open(store_at, org) as c:
        c.ingest()
        c.memory.add_item("ann", "fact", "Ann likes tea.")
        encoded, encode = [], objects.encode_object  # how many entries each tree and folder encoded held

        def encoding(kind, fields):
            encoded.append(len(fields.get("files") or fields.get("folders") or fields.get("entries") or ()))
            return encode(kind, fields)

        monkeypatch.setattr(objects, "encode_object", encoding)
        c.memory.add_item("ann", "fact", "Ann takes it green.")
        assert sum(encoded) < 101  # agents/ann's folder and the root, never every path of the tree
        assert titles(c.memory.load_context("ann").facts) == ["Ann likes tea.", "Ann takes it green."]
