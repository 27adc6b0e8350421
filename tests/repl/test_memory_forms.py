"""The REPL forms for search, agent memory, conversation memory, definitions and webhooks, through the
terminal-free core on a copy of org/ (and the hard-purge question through the prompt-toolkit app)."""

import io
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

import cortex.api as cx
import cortex.repl
from cortex.memory.conversation import Identity, Turn
from cortex.repl import eval_source
from cortex.repl.completion import SessionCompleter
from cortex.repl.core import Session
from tests.repl.test_core import Transcript  # the same captured session the core's tests use

REPO = Path(__file__).resolve().parents[2]
ASSISTANT_LOGS = "agents/assistant/logs"
PR_WEBHOOK = """(defwebhook pr-events
  :path "/hooks/pr"
  :provider github
  :secret "secret://env/REPL_PR_SECRET"
  :agent assistant
  :filter {:json-path "$.action" :equals "opened"})"""
SECRET = "never-shown-7f3a"


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def repl(tmp_path, org):
    transcript = Transcript(tmp_path / "store", org)
    yield transcript
    transcript.session.close()


def rows(shown: str) -> list[list[str]]:
    return [line.split() for line in shown.splitlines()]


def webhook_names(repl) -> list[str]:
    return [row[1] for row in rows(repl("(webhooks)"))[1:] if row[0] == "webhook"]


def completions(session, text):
    found = SessionCompleter(session).get_completions(Document(text), CompleteEvent(completion_requested=True))
    return {c.text: c.display_meta_text for c in found}


# --- start-up -------------------------------------------------------------------------------------

def python_prints(code: str) -> str:
    """What a fresh Python process running `code` prints (so imports start from nothing)."""
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                         check=False)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def test_a_session_starts_without_loading_search_the_dsl_or_webhooks(tmp_path, org):
    assert python_prints(
        "import sys; from cortex.repl.core import Session; s = Session(None, None); "
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
        "(['cortex', 'dsl'], ['cortex', 'search'], ['cortex', 'webhooks'], ['cortex', 'memory'])))") == "[]\n"


def test_the_api_names_the_features_types_but_loads_each_on_first_use():
    assert python_prints(
        "import sys, cortex.api as cx; before = sorted(m for m in sys.modules if m.split('.')[:2] in "
        "(['cortex', 'dsl'], ['cortex', 'memory'], ['cortex', 'webhooks'])); "
        "print(before, cx.RetentionPolicy.__module__, 'cortex.memory.conversation' in sys.modules)"
    ) == "[] cortex.memory.retention False\n"
    assert {"WebhookDefinition", "RetentionPolicy", "parse_duration", "Identity", "Node"} <= set(dir(cx))
    assert cx.WebhookFilter("$.a", equals=1).json_path == "$.a" and cx.memory_path("bot") == "agents/bot/memory.org"
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        cx.Nope  # noqa: B018


# --- search ---------------------------------------------------------------------------------------

def test_search_prints_a_table_and_its_results_stay_values(repl):
    shown = repl('(setv r (search "deploy pipeline" :limit 3)) r')
    table = rows(shown)
    assert table[0] == ["#", "score", "file:line", "outline", "id"]
    assert table[1][0] == "0" and table[1][2:] == ["notes/projects.org:33", "Deploy", "pipeline", "proj-deploy"]
    assert float(table[1][1]) > float(table[2][1])
    assert repl("(. (first r) id)") == '"proj-deploy"\n'
    shown = repl("(show (first r))")
    assert shown.startswith("* Deploy pipeline") and ":ID:       task-staging-migration" in shown


def test_search_filters_and_explains_its_scores(repl):
    shown = repl('(search "deploy" :agent "assistant" :type "pattern" :explain True)')
    table = rows(shown)
    found = [row for row in table[1:] if row[0].isdigit()]
    assert found and all(row[2].startswith("agents/assistant/") for row in found)
    explained = [line.strip() for line in shown.splitlines() if line.strip().startswith("fused ")]
    assert len(explained) == len(found) and "by weighted (vector 0.5, keyword 0.5)" in explained[0]
    notes = rows(repl('(search "deploy" :source "notes" :todo "WAITING")'))
    assert [row[2] for row in notes[1:]] == ["notes/projects.org:37"]
    assert repl('(search "deploy" :type "opinion")').startswith("error: unknown memory type 'opinion'")
    assert repl('(search "zzqx" :path "nowhere/")') == "no results\n"
    dated = rows(repl('(search "release fix" :since "2026-11-20" :until "2026-11-20" :path "agents/assistant/l")'))
    assert dated[1:] and all(row[2].startswith("agents/assistant/logs/2026-11-20.org:") for row in dated[1:] if row[2])


def test_search_as_of_a_snapshot_and_show_its_text_there(repl, org):
    repl('(setv before (snapshot "before"))')
    projects = org / "notes/projects.org"
    projects.write_text(projects.read_text().replace("* Deploy pipeline", "* Release pipeline"))
    repl('(ingest "notes/projects.org")')
    now = repl('(setv now (search "pipeline" :limit 1)) now')
    assert rows(now)[1][3:5] == ["Release", "pipeline"]
    then = repl('(setv then (search "pipeline" :limit 1 :as-of before)) then')
    assert rows(then)[1][3:5] == ["Deploy", "pipeline"]
    assert repl("(show (first then))").startswith("* Deploy pipeline")
    assert repl("(show (first now))").startswith("* Release pipeline")


# --- agent memory ---------------------------------------------------------------------------------

def test_memory_inspect_shows_memory_org_highlighted(tmp_path, org):
    out = Terminal()
    session = Session(tmp_path / "store", org, out=out, err=io.StringIO())
    try:
        assert session.execute('(memory-inspect "assistant")')
    finally:
        session.close()
    shown = out.getvalue()
    assert "\x1b[" in shown and "Memory of assistant" in shown and "mem-assistant-dark-mode" in shown


def test_memory_inspect_of_an_agent_without_memory(repl):
    assert repl('(memory-inspect "assistant")').startswith("#+TITLE: Memory of assistant\n")
    assert repl('(memory-inspect "nobody")') == "error: agents/nobody/memory.org: agent 'nobody' has no memory.org\n"


def test_memory_add_then_search_finds_it(repl, org):
    added = dict(line.split(None, 1) for line in repl(
        '(setv item (memory-add "assistant" "fact" "The staging database runs Postgres 16."))\nitem').splitlines())
    assert added["text"].strip() == "The staging database runs Postgres 16." and added["source"].strip() == "repl"
    memory = (org / "agents/assistant/memory.org").read_text()
    assert f":ID:       {added['id'].strip()}" in memory and "** The staging database runs Postgres 16." in memory
    found = rows(repl('(memory-search "assistant" "Postgres" :limit 1)'))
    assert found[1][2].startswith("agents/assistant/memory.org:") and found[1][-1] == added["id"].strip()
    assert repl('(memory-add "assistant" "opinion" "x")').startswith("error: memory type 'opinion'")


def test_memory_add_says_which_items_are_similar(repl):
    repl.notices.clear()
    repl('(memory-add "assistant" "fact" "The user likes dark mode in all apps.")')
    assert len(repl.notices) == 1
    assert repl.notices[0].startswith("similar: mem-assistant-dark-mode User prefers dark mode in every app. (0.")


def test_memory_add_supersedes_and_memory_retire(repl, org):
    shown = repl('(memory-add "assistant" "fact" "The API rate limit is 120 requests per minute." '
                 ':supersedes "mem-assistant-rate-limit" :valid-from "2026-11-20")')
    assert re.search(r"supersedes +mem-assistant-rate-limit", shown) and re.search(r"valid +2026-11-20 – now", shown)
    retired = repl('(memory-retire "assistant" "mem-assistant-dark-mode" :at "2026-11-21")')
    assert re.search(r"valid +2026-11-18 09:12 – 2026-11-21", retired) and re.search(r"tags +ARCHIVE", retired)
    memory = (org / "agents/assistant/memory.org").read_text()
    assert ":SUPERSEDED_BY: mem-assistant-the-api-rate-limit-is-" in memory and ":INVALID_AT: [2026-11-21 Sat]" in memory
    assert repl('(memory-retire "assistant" "mem-assistant-dark-mode")').startswith(
        "error: item mem-assistant-dark-mode 'User prefers dark mode in every app.': invalid from 2026-11-21")


def test_memory_consolidate_lists_then_applies_and_rollback_undoes_it(repl, org):
    repl('(memory-add "assistant" "fact" "The API rate limit is 120 requests per minute.")')
    before = (org / "agents/assistant/memory.org").read_bytes()
    listed = repl('(memory-consolidate "assistant")')
    assert "[1] supersede (fact, 0.9" in listed and "differ in: 100 → 120" in listed
    applied = repl('(memory-consolidate "assistant" :apply [1])')
    assert "applied 1 to agents/assistant/memory.org" in applied
    assert ":SUPERSEDED_BY: mem-assistant-the-api-rate-limit-is-" in (org / "agents/assistant/memory.org").read_text()
    repl("(rollback (. *1 before))")
    assert (org / "agents/assistant/memory.org").read_bytes() == before
    assert repl('(memory-consolidate "assistant" :apply [7])').startswith("error: no suggestion '7'")


def test_memory_compact_moves_marked_items_and_rollback_undoes_it(repl, org):
    memory = org / "agents/assistant/memory.org"
    original = memory.read_text()
    shown = repl('(setv c (memory-compact "assistant"))\nc')
    assert "moved    fact      Release 2.3.1 contains the fix for E1042." in shown
    assert "1 item moved, 0 already known, 0 logs deleted" in shown
    assert "Release 2.3.1 contains the fix for E1042." in memory.read_text()
    repl("(rollback (. c before))")
    assert repl.ok and memory.read_text() == original
    assert repl('(memory-compact "assistant" :max-age "soon")').startswith("error: max-age 'soon'")


def test_memory_purge_soft_then_hard_asks_first(repl, org):
    def kept_in_history():
        cx = repl.session.cortex
        return [path for snap in cx.snapshots() for path in cx.state(snap.oid.hex()).entries
                if path.startswith("agents/reviewer/")]

    shown = repl('(memory-purge "reviewer")')
    assert shown == "removed 1 file: agents/reviewer/memory.org\n"
    assert not (org / "agents/reviewer").exists() and kept_in_history() == ["agents/reviewer/memory.org"]

    refused = repl('(memory-purge "reviewer" :hard True)')
    assert not repl.ok and "cannot be undone" in refused and ":yes True" in refused

    questions = []
    repl.session.ask = lambda question: questions.append(question) or False
    assert repl('(memory-purge "reviewer" :hard True)') == "nothing purged: reviewer's memory is as it was\n"
    assert "every snapshot" in questions[0]
    repl.session.ask = lambda question: True
    shown = repl('(memory-purge "reviewer" :hard True)')
    assert repl.ok and "rewrote 1 snapshot" in shown and kept_in_history() == []


ENTER, CTRL_D = "\r", "\x04"


def test_the_app_asks_before_a_hard_purge(tmp_path, org):
    out = io.StringIO()
    with create_pipe_input() as pipe:
        def type_keys():
            pipe.send_text('(memory-purge "reviewer" :hard True)' + ENTER)
            time.sleep(0.5)  # the question is drawn on the dummy output: nothing to wait for but time
            pipe.send_text("y" + ENTER)
            deadline = time.monotonic() + 20
            while "removed" not in out.getvalue() and time.monotonic() < deadline:
                time.sleep(0.01)
            pipe.send_text(CTRL_D)

        typist = threading.Thread(target=type_keys, daemon=True)
        typist.start()
        status = cortex.repl.run(tmp_path / "store", org, input=pipe, output=DummyOutput(), out=out)
        typist.join(5)
    assert status == 0
    assert "removed 1 file: agents/reviewer/memory.org" in out.getvalue()
    assert not (org / "agents/reviewer").exists()


# --- conversation memory --------------------------------------------------------------------------

def test_turns_shows_the_conversation_of_an_identity(repl):
    who = Identity("acme", "ada", "s-42")
    with repl.session.cortex.conversations() as memory:
        memory.add_turn(who, Turn("When is the next deploy?", "Tuesday, with the release train."))
        memory.add_turn(who, Turn("Which release fixes E1042?", "Release 2.3.1."))
    shown = repl('(turns "acme" "ada" "s-42")').splitlines()
    assert shown[0].startswith("truncation: 2 turns, ") and shown[0].endswith("tokens (healthy)")
    assert shown[1].split() == ["#", "time", "user", "assistant", "tokens"]
    assert "When is the next deploy?" in shown[2] and "Release 2.3.1." in shown[3]
    assert repl('(len (. (turns "acme" "ada" "s-42" :budget-tokens 20) turns))') == "1\n"
    assert repl('(turns "acme" "ada" "s-other")').splitlines()[1] == "no turns"
    assert "identity is missing user" in repl('(turns "acme" "" "s-42")')


def test_add_turn_keeps_an_exchange_that_turns_then_shows(repl):
    shown = repl('(add-turn "acme" "dana" "s-42" "When is the next deploy?" "Tuesday, after the standup.")')
    assert shown.splitlines()[0].startswith("truncation: 1 turn, ") and "Tuesday, after the standup." in shown
    assert "When is the next deploy?" in repl('(turns "acme" "dana" "s-42")').splitlines()[2]
    assert "identity is missing tenant" in repl('(add-turn "" "dana" "s-42" "x" "y")')


def test_memory_turn_logs_a_turn_and_shows_its_session_entry(repl, org):
    repl('(memory-turn "assistant" "s-42" "Dana" "Is the fix for E1042 out?" :at "2026-11-20 17:00" :title "Fix")')
    shown = repl('(memory-turn "assistant" "s-42" "assistant" "Yes: release 2.3.1.\nSince Tuesday." '
                 ':at "2026-11-20 17:02")')
    assert shown == """\
* 17:00 — Fix
:PROPERTIES:
:SESSION:  s-42
:PEOPLE:   Dana, assistant
:END:
** Dana: Is the fix for E1042 out?
** assistant: Yes: release 2.3.1.
:PROPERTIES:
:TIME:     17:02
:END:
Since Tuesday.
"""
    assert (org / ASSISTANT_LOGS / "2026-11-20.org").read_text().endswith(shown)
    refused = repl('(memory-turn "assistant" "s-42" "Smith, Ann" "x")')
    assert refused.startswith("error: turn speaker 'Smith, Ann': holds ','") and refused.count("\n") == 1


# --- definitions ----------------------------------------------------------------------------------

def test_a_live_defwebhook_is_tested_routed_and_logged(repl, org, monkeypatch):
    monkeypatch.setenv("REPL_PR_SECRET", SECRET)
    defined = dict(line.split(None, 1) for line in repl(PR_WEBHOOK).replace("defined at", "defined-at").splitlines())
    assert defined["name"].strip() == "pr-events" and defined["defined-at"].strip() == "<input>:1:1"
    assert "secret secret://env/REPL_PR_SECRET" in defined["settings"]
    assert webhook_names(repl) == ["github-events", "stripe-payments", "pr-events"]
    assert "pr-events" in repl.session.cortex.registry.webhooks

    shown = dict(line.split(None, 1) for line in repl(
        '(setv t (webhook-test "pr-events" {:action "opened" :number 7} :event "pull_request")) t').splitlines())
    assert shown["verified"].strip() == "yes" and shown["filter"].startswith("matched")
    assert shown["agent"].strip() == "assistant" and shown["status"].strip() == "200 routed"
    assert shown["latency"].strip().endswith(" ms")
    delivery = shown["delivery"].strip()
    logs = [p.read_text() for p in (org / ASSISTANT_LOGS).glob("*.org")]
    entry = next(text for text in logs if delivery in text)
    assert "pull_request via pr-events" in entry and '"number": 7' in entry

    assert "filtered out" in repl('(webhook-test "pr-events" "{\\"action\\": \\"closed\\"}")')
    assert "401 rejected" in repl('(webhook-test "pr-events" {:action "opened"} :tamper True)')
    logged = rows(repl("(webhook-logs)"))
    assert logged[0][:6] == ["time", "delivery", "webhook", "trigger", "event", "answer"]
    assert [row[2] for row in logged[1:]] == [delivery, logged[2][2], logged[3][2]]
    assert logged[1][3:] == ["pr-events", "test", "pull_request", "200", "routed", "-", "assistant", logged[1][-1]]
    assert [row[6:8] for row in logged[2:]] == [["200", "filtered"], ["401", "rejected"]]
    assert len(rows(repl('(webhook-logs :name "pr-events" :tail 1)'))) == 2
    every = "\n".join(repl(form) for form in ("(webhooks)", "(webhook-logs)", "t", '(help "defwebhook")'))
    assert SECRET not in every


def test_definitions_evaluated_before_the_store_opens_land_in_the_session(tmp_path, org, monkeypatch):
    monkeypatch.setenv("REPL_PR_SECRET", SECRET)
    out, err = io.StringIO(), io.StringIO()
    status = eval_source(PR_WEBHOOK + '\n(. (webhook-test "pr-events" {"action" "opened"}) outcome)',
                         tmp_path / "store", org, out=out, err=err)
    assert status == 0, err.getvalue()
    assert out.getvalue().endswith('"routed"\n')


def test_a_bad_defwebhook_shows_where_and_the_session_goes_on(repl):
    shown = repl('(setv n 1)\n(defwebhook broken :path "/hooks/b"\n  :provider gitlab)')
    assert not repl.ok
    assert shown.startswith("error: <input>:3:13: unknown provider gitlab; did you mean github?")
    assert shown.endswith("\n  :provider gitlab)\n            ^\n")
    assert webhook_names(repl) == ["github-events", "stripe-payments"]
    assert repl("(+ n 1)") == "2\n"
    taken = repl('(defwebhook twin :path "/hooks/pr" :provider github :secret "secret://env/A")\n'
                 '(defwebhook other :path "/hooks/pr" :provider github :secret "secret://env/A")')
    assert "error: <input>:2:1: path /hooks/pr is already served by webhook twin (defined at <input>:1:1)" in taken


def test_defmemory_is_live_and_explained_by_help(repl):
    shown = repl('(defmemory scratch :store ephemeral :retention "10d")')
    assert "store ephemeral · path org/agents · retention 10d" in shown
    assert [m.name for m in repl.session.cortex.definitions().memories] == ["agent-memory", "scratch"]
    assert repl("(help defmemory)").startswith("(defmemory name #* settings)\nDefine an agent memory")
    listed = repl("(help)")
    for name in ("search", "memory-inspect", "memory-search", "memory-add", "memory-compact", "memory-purge",
                 "turns", "load-dsl", "defmemory", "defwebhook", "webhooks", "webhook-test", "webhook-logs"):
        assert f"\n{name} " in "\n" + listed, name
    assert "defwebhook is a macro: write it as a form" in repl("(list (map defwebhook [1]))")


def test_load_dsl_loads_a_file_or_nothing_with_located_errors(repl, org):
    (org / "more.hy").write_text('(defwebhook triage :path "/hooks/triage" :provider standard\n'
                                 '  :secret "secret://env/TRIAGE" :agent triage)\n')
    shown = repl('(load-dsl "more.hy")')
    assert rows(shown)[0] == ["kind", "name", "defined", "at", "settings"]
    assert rows(shown)[1][:3] == ["webhook", "triage", "more.hy:1:1"]
    assert webhook_names(repl) == ["github-events", "stripe-payments", "triage"]

    bad = '(defwebhook same :path "/hooks/triage" :provider slak :secret "secret://env/S")'
    (org / "broken.hy").write_text('(defwebhook fine :path "/hooks/fine" :provider github :secret "secret://env/F")\n'
                                   f"{bad}\n")
    column = bad.index("slak") + 1
    shown = repl('(load-dsl "broken.hy")')
    assert shown.startswith(f"error: {org}/broken.hy:2:{column}: unknown provider slak; did you mean slack?")
    assert shown.endswith(f"\n{bad}\n{' ' * (column - 1)}^\n")
    (org / "broken.hy").write_text('(defwebhook fine :path "/hooks/fine" :provider github :secret "secret://env/F")\n'
                                   '(defwebhook same :path "/hooks/triage" :provider slack :secret "secret://env/S")\n')
    assert "path /hooks/triage is already served by webhook triage" in repl('(load-dsl "broken.hy")')
    (org / "broken.hy").write_text(bad.replace("/hooks/triage", "/hooks/github").replace("slak", "slack"))
    assert "path /hooks/github is already served by webhook github-events" in repl('(load-dsl "broken.hy")')
    assert webhook_names(repl) == ["github-events", "stripe-payments", "triage"]
    assert repl('(load-dsl "missing.hy")') == f"error: {org}/missing.hy: no such file\n"


def test_completion_offers_webhook_names_and_agent_ids(repl, monkeypatch):
    session = repl.session
    session.open()
    assert completions(session, '(webhook-test "gith') == {"github-events": "webhook /hooks/github"}
    assert completions(session, '(memory-inspect "rev') == {"reviewer": "agent"}
    repl(PR_WEBHOOK.replace("assistant", "triage-bot"))
    assert completions(session, '(webhook-test "pr-') == {"pr-events": "webhook /hooks/pr"}
    assert completions(session, '(memory-add "triage') == {"triage-bot": "agent"}


def test_a_live_webhook_on_a_path_the_file_serves_is_refused_where_it_is_written(tmp_path, org):
    from cortex.repl.core import Session

    errors = io.StringIO()
    session = Session(str(tmp_path / "store"), str(org), out=io.StringIO(), err=errors)
    try:
        ok = session.execute('(defwebhook clash :path "/hooks/github" :provider github :secret "s3cret-s3cret-s3cret-s3cret-s3cr")')
        assert not ok and "/hooks/github" in errors.getvalue() and "github-events" in errors.getvalue()
        assert "clash" not in session.cortex.registry.webhooks
        assert [w.name for w in session.cortex.webhooks()] == ["github-events", "stripe-payments"]
    finally:
        session.close()


def test_search_and_memory_forms_keep_current_items_unless_asked(tmp_path, org):
    from tests.conftest import with_chain

    with_chain(org)
    repl = Transcript(tmp_path / "store", org)
    try:
        ids = lambda shown: [word for word in shown.split() if word.startswith("mem-assistant-db")]  # noqa: E731
        assert ids(repl('(search "which database do we run?" :agent "assistant")')) == ["mem-assistant-db-17"]
        assert ids(repl('(search "which database do we run?" :agent "assistant" :valid-at "2026-10-15")')) == [
            "mem-assistant-db-16"]
        assert len(ids(repl('(search "which database do we run?" :agent "assistant" :all True)'))) == 3
        assert ids(repl('(memory-search "assistant" "which database?" :valid-at "2026-09-30")')) == [
            "mem-assistant-db-15"]
        shown = repl('(memory-inspect "assistant")')
        assert "Postgres 17." in shown and "Postgres 16." not in shown
        assert repl.notices[-1].endswith("3 items no longer current, left out; :all True shows them")
        shown = repl('(memory-inspect "assistant" :all True)')
        assert "Postgres 16." in shown and repl.notices[-1] == (
            "  The office VPN is vpn.example.com. [mem-assistant-vpn]: invalid from 2026-11-20")
        shown = repl('(memory-inspect "assistant" :valid-at "2026-10-15")')
        assert "Postgres 16." in shown and "Postgres 17." not in shown
        assert "error: all and valid_at exclude each other" in repl('(search "x" :valid-at "today" :all True)')
        assert "error: 'soon' is not a moment" in repl('(memory-inspect "assistant" :valid-at "soon")')
    finally:
        repl.session.close()
