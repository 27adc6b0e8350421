"""`cortex memory` through click's runner, on a real store and a copy of the bundled Org files."""

import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cortex.cli import main
from cortex.cli.app import cli as main_cli
from cortex.cli.memory import memory_group
from cortex.errors import NotFound


@pytest.fixture
def run(tmp_path, org):
    """Invoke `cortex memory ...` against a store in tmp_path tracking the copied Org folder."""
    runner = CliRunner()
    main(["ingest", "--store", str(tmp_path / "store"), "--org", str(org)])

    def invoke(*args, input=None):
        command, *rest = args
        return runner.invoke(memory_group, [command, "--store", str(tmp_path / "store"), "--org", str(org), *rest],
                             input=input, catch_exceptions=False)

    return invoke


def test_list_shows_agents_with_their_counts(run, org):
    result = run("list")
    assert result.exit_code == 0
    assert result.output.split()[:5] == ["agent", "┃", "files", "┃", "bytes"]
    rows = {row[0]: row[1:] for line in result.output.splitlines() if "│" in line
            for row in [[cell.strip() for cell in line.split("│")]]}
    assert rows["assistant"][0] == "2" and rows["assistant"][2:] == ["5", "1"]
    assert rows["reviewer"] == ["1", str((org / "agents/reviewer/memory.org").stat().st_size), "2", "0"]


def test_add_then_inspect(run, org):
    result = run("add", "assistant", "--type", "procedure", "Rotate the keys every quarter.")
    assert result.exit_code == 0
    assert result.output.startswith("added  mem-assistant-rotate-the-keys-every-quarter-")
    again = run("add", "assistant", "--type", "procedure", "rotate the keys   every quarter")
    assert again.output.startswith("already present  mem-assistant-rotate-the-keys-every-quarter-")
    shown = run("inspect", "assistant")
    assert shown.exit_code == 0
    assert shown.stdout == (org / "agents/assistant/memory.org").read_text()
    assert shown.stderr == "assistant: 3 facts, 2 procedures, 1 learned pattern; 1 daily log, 2026-11-20\n"
    found = run("search", "assistant", "when are the keys rotated?").stdout.splitlines()
    assert re.match(r"\d\.\d{3}  agents/assistant/memory\.org:\d+: Procedures / Rotate the keys", found[0])
    assert "** Rotate the keys every quarter.\n:PROPERTIES:\n" in shown.stdout and ":SOURCE:   cli\n" in shown.stdout


def test_add_says_which_current_items_are_similar(run):
    result = run("add", "assistant", "The user likes dark mode in all apps.")
    lines = result.output.splitlines()
    assert lines[0].startswith("added  mem-assistant-the-user-likes-dark-mode-")
    assert re.fullmatch(r"similar: mem-assistant-dark-mode User prefers dark mode in every app\. \(0\.\d\d\)", lines[1])
    assert len(lines) == 2
    assert run("add", "assistant", "the user likes dark mode in all apps").output.startswith("already present")
    assert "similar" not in run("add", "assistant", "Lunch is served at noon on the roof.").output
    successor = run("add", "assistant", "The user prefers light mode in every app.", "--supersedes",
                    "mem-assistant-dark-mode").output
    assert "supersedes  mem-assistant-dark-mode" in successor and "similar: mem-assistant-dark-mode" not in successor


def test_consolidate_lists_refuses_after_an_edit_applies_and_rollback_restores(run, org, tmp_path):
    assert CliRunner().invoke(main_cli, ["ingest", "--store", str(tmp_path / "store"), "--org", str(org)]).exit_code == 0
    run("add", "assistant", "The production database runs on PostgreSQL 16.")
    run("add", "assistant", "The production database runs on PostgreSQL 17.")
    listed = run("consolidate", "assistant").output
    assert re.search(r"^\[1\] supersede \(fact, 0\.\d\d\): 'The production database runs on PostgreSQL 17\.' "
                     r"replaces 'The production database runs on PostgreSQL 16\.'\n    differ in: 16 → 17\n", listed, re.M)
    assert "    +:SUPERSEDES: mem-assistant-the-production-database-runs-on-" in listed
    version = re.search(r"--apply --base (\w+)`", listed)[1]
    path = org / "agents/assistant/memory.org"
    path.write_text(path.read_text().replace("* Procedures\n", "* Procedures\n- Written by hand.\n"))  # a person's edit
    edited = path.read_bytes()
    refused = subprocess.run([sys.executable, "-c", "import sys; from cortex.cli import main; main(sys.argv[1:])",
                              "memory", "consolidate", "assistant", "--apply", "--base", version,
                              "--store", str(tmp_path / "store"), "--org", str(org)], capture_output=True, text=True)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"cortex: agents/assistant/memory.org changed since the suggestions were listed "
                                     f"(at {version}, now ")
    assert path.read_bytes() == edited
    assert run("consolidate", "assistant", "1").exit_code == 2
    applied = run("consolidate", "assistant", "--apply", "1").output
    assert "\napplied 1 to agents/assistant/memory.org; undo with `cortex rollback " in applied
    assert "- Written by hand." in path.read_text() and ":SUPERSEDED_BY: mem-assistant-" in path.read_text()
    before = re.search(r"cortex rollback (\w+)`", applied)[1]
    rolled = CliRunner().invoke(main_cli, ["rollback", before, "--store", str(tmp_path / "store"), "--org", str(org)])
    assert rolled.exit_code == 0 and path.read_bytes() == edited


def test_inspect_reports_what_is_not_an_item(run, org):
    path = org / "agents/reviewer/memory.org"
    path.write_text(path.read_text() + "* Scratch\nanything\n")
    shown = run("inspect", "reviewer")
    assert "agents/reviewer/memory.org:20: section 'Scratch' is not a memory section" in shown.stderr
    assert shown.stdout == path.read_text()


def test_compact_moves_marked_items(run, org):
    result = run("compact", "assistant", "--max-age", "36500d")
    assert result.exit_code == 0
    assert "moved    fact      Release 2.3.1 contains the fix for E1042." in result.output
    assert "1 moved, 0 already known, 0 logs deleted; undo with `cortex rollback " in result.output
    assert "Release 2.3.1 contains the fix for E1042." in (org / "agents/assistant/memory.org").read_text()
    bad = CliRunner().invoke(memory_group, ["compact", "assistant", "--max-age", "soon"])
    assert bad.exit_code == 2 and "--max-age" in bad.output


def test_purge_asks_first(run, org, tmp_path):
    declined = subprocess.run([sys.executable, "-c", "import sys; from cortex.cli import main; main(sys.argv[1:])",
                               "memory", "purge", "reviewer", "--store", str(tmp_path / "store"), "--org", str(org)],
                              input="n\n", capture_output=True, text=True)
    assert declined.returncode == 1 and "purge reviewer's files (history keeps them)?" in declined.stdout
    assert "nothing purged: reviewer's memory is as it was" in declined.stderr
    assert (org / "agents/reviewer/memory.org").exists()
    nobody = run("purge", "nobody")  # said before asking anything; nothing to do is no error (as run twice)
    assert nobody.exit_code == 0 and nobody.output == "nothing to purge: agent 'nobody' has no memory here\n"
    accepted = run("purge", "reviewer", "--hard", input="y\n")
    assert accepted.exit_code == 0 and "removed  agents/reviewer/memory.org" in accepted.output
    assert "every trace in history" in accepted.output and not (org / "agents/reviewer").exists()
    again = run("add", "reviewer", "x")
    assert again.exit_code == 0
    assert run("purge", "reviewer", "--yes").output.endswith("purged reviewer\n")
    assert run("purge", "reviewer", "--hard", "--yes").output.endswith("purged reviewer\n")  # then from history
    twice = [run(*args, "--hard", "--yes").output for args in (("purge", "reviewer"), ("forget", "reviewer", "x"))]
    assert twice == ["nothing to purge: agent 'reviewer' has no memory here or in any kept snapshot\n",
                     "nothing to forget: agent 'reviewer' has no memory item 'x' here or in any kept snapshot\n"]


def test_turn_logs_a_conversation_in_the_daily_log(run, org, tmp_path):
    said = run("turn", "assistant", "When is the next deploy?", "--session", "s-42", "--speaker", "Dana",
               "--at", "2026-11-20 14:05", "--title", "Deploy questions")
    assert said.output == "logged 1 turn of session s-42 in agents/assistant/logs/2026-11-20.org\n"
    turns = tmp_path / "turns.jsonl"
    turns.write_text('{"speaker": "assistant", "text": "Tuesday.\\nAfter the standup.", "tools": ["calendar"]}\n'
                     '\n{"text": "And E1042?", "at": "2026-11-20 14:09"}\n')
    more = run("turn", "assistant", "--session", "s-42", "--file", str(turns), "--speaker", "Dana",
               "--at", "2026-11-20 14:06")
    assert more.output == "logged 2 turns of session s-42 in agents/assistant/logs/2026-11-20.org\n"
    log = (org / "agents/assistant/logs/2026-11-20.org").read_text()
    assert log.endswith("""
* 14:05 — Deploy questions
:PROPERTIES:
:SESSION:  s-42
:PEOPLE:   Dana, assistant
:END:
** Dana: When is the next deploy?
** assistant: Tuesday.
:PROPERTIES:
:TIME:     14:06
:TOOLS:    calendar
:END:
After the standup.
** Dana: And E1042?
:PROPERTIES:
:TIME:     14:09
:END:
""")
    piped = run("turn", "assistant", "--session", "s-43", "--file", "-",
                input='{"speaker": "Eve", "text": "Up late?", "at": "2026-11-21T00:01"}\n')
    assert piped.output == "logged 1 turn of session s-43 in agents/assistant/logs/2026-11-21.org\n"
    assert "** Eve: Up late?" in (org / "agents/assistant/logs/2026-11-21.org").read_text()


@pytest.mark.parametrize("lines, problem", [
    ('{"speaker": "Ann", "text": "ok"}\n{"speaker": "Ann", "text": ', "turns.jsonl:2:28: not JSON (Expecting value)"),
    ('{"speaker": "Ann", "txt": "ok"}\n', "turns.jsonl:1: unknown key 'txt'; a turn has speaker, text, at"),
    ('{"text": "ok"}\n', "turns.jsonl:1: no 'speaker'"),
    ('["Ann", "ok"]\n', "turns.jsonl:1: a turn is an object"),
    ('{"speaker": "Ann", "text": "ok", "at": "soon"}\n', "turns.jsonl:1: turn time 'soon': not a date and time"),
    ("\n\n", "turns.jsonl: no turn in it"),
])
def test_turn_mistakes_are_one_line_errors_and_write_nothing(tmp_path, org, capsys, lines, problem):
    (tmp_path / "turns.jsonl").write_text(lines)
    before = (org / "agents/assistant/logs/2026-11-20.org").read_text()
    with pytest.raises(SystemExit) as failed:
        main(["memory", "turn", "assistant", "--session", "s", "--file", str(tmp_path / "turns.jsonl"),
              "--store", str(tmp_path / "store"), "--org", str(org)])
    err = capsys.readouterr().err
    assert failed.value.code == 1 and err.startswith(f"cortex: {tmp_path / problem}") and err.count("\n") == 1
    assert (org / "agents/assistant/logs/2026-11-20.org").read_text() == before
    assert [p.name for p in (org / "agents/assistant/logs").iterdir()] == ["2026-11-20.org"]


def test_turn_takes_text_or_a_file_and_names_the_speaker(run):
    assert "--speaker: name who said TEXT" in run("turn", "assistant", "hi", "--session", "s").output
    assert "give the turn's TEXT or --file" in run("turn", "assistant", "--session", "s").output
    assert run("turn", "assistant", "hi", "--speaker", "Dana").exit_code == 2  # --session is required


def test_inspect_shows_current_items_and_with_all_what_replaced_the_others(run, org):
    from tests.conftest import with_chain

    path = with_chain(org)
    shown = run("inspect", "assistant")
    assert shown.exit_code == 0 and "Postgres 17." in shown.stdout
    assert "Postgres 16." not in shown.stdout and "vpn.example.com" not in shown.stdout
    assert shown.stderr == ("assistant: 7 facts, 1 procedure, 1 learned pattern; 1 daily log, 2026-11-20; 3 items no "
                            "longer current, left out; --all shows them\n")
    every = run("inspect", "assistant", "--all")
    assert every.stdout == path.read_text()
    assert every.stderr.splitlines()[1:] == [
        "  The database is Postgres 15. [mem-assistant-db-15]: superseded by mem-assistant-db-16 on 2026-10-01",
        "  The database is Postgres 16. [mem-assistant-db-16]: superseded by mem-assistant-db-17 on 2026-11-03 14:00",
        "  The office VPN is vpn.example.com. [mem-assistant-vpn]: invalid from 2026-11-20"]
    then = run("inspect", "assistant", "--valid-at", "2026-10-15")
    assert "Postgres 16." in then.stdout and "vpn.example.com" in then.stdout and "Postgres 17." not in then.stdout
    assert "not valid on 2026-10-15, left out\n" in then.stderr and "--all" not in then.stderr
    found = run("search", "assistant", "which database do we run?", "--valid-at", "2026-10-15").stdout
    assert "Postgres 16." in found and "Postgres 17." not in found and "Postgres 15." not in found
    assert "Postgres 15." in run("search", "assistant", "which database do we run?", "--all").stdout
    both = run("inspect", "assistant", "--all", "--valid-at", "today")
    assert both.exit_code == 2 and "--valid-at and --all exclude each other" in both.output


def test_a_fact_that_changed_supersedes_the_old_one_and_retire_ends_one(run, org):
    memory = org / "agents/assistant/memory.org"
    result = run("add", "assistant", "The API rate limit is 120 requests per minute.",
                 "--supersedes", "mem-assistant-rate-limit", "--valid-from", "2026-11-20")
    assert result.exit_code == 0 and result.output.splitlines()[1] == "  supersedes  mem-assistant-rate-limit"
    text = memory.read_text()
    assert ":SUPERSEDED_BY: mem-assistant-the-api-rate-limit-is-" in text and ":INVALID_AT: [2026-11-20 Fri]" in text
    retired = run("retire", "assistant", "User prefers dark mode in every app.", "--at", "2026-11-21 09:30")
    assert retired.output == ("retired  mem-assistant-dark-mode  User prefers dark mode in every app.  "
                              "(no longer true from 2026-11-21 09:30)\n")
    before = memory.read_bytes()
    for args, message in [(("retire", "assistant", "mem-assistant-dark-mode"), "only a current item can be retired"),
                          (("add", "assistant", "x", "--valid-from", "next week"), "valid from 'next week': not a date"),
                          (("retire", "assistant", "nothing like it"), "has no memory item 'nothing like it'")]:
        failed = subprocess.run([sys.executable, "-c", "import sys; from cortex.cli import main; main(sys.argv[1:])",
                                 "memory", args[0], "--store",
                                 str(org.parent / "store"), "--org", str(org), *args[1:]],
                                capture_output=True, text=True)
        assert failed.returncode == 1 and message in failed.stderr and "Traceback" not in failed.stderr
    assert memory.read_bytes() == before
