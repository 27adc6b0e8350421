"""Conversation memory through the session: turns kept in the store, then logged in an agent's daily logs in the
conversation layout, with an Org folder and without one."""

import threading
from datetime import datetime

import pytest

import cortex.api as cx
from cortex.memory.conversation import Identity, InvalidTurn, Turn, Utterance, read_session
from cortex.query import render_file

WHO = Identity("acme", "dana", "s-42")
NOW = datetime(2026, 11, 20, 14, 5)
LOG = "agents/assistant/logs/2026-11-20.org"


def test_conversation_turns_survive_reopening_the_store(tmp_path, org):
    with cx.open(tmp_path / "store", org) as c:
        memory = c.conversations()
        memory.add_turn(WHO, Turn("Where does staging run?", "In eu-west-1."))
        memory.close()
    with cx.open(tmp_path / "store", org) as c:
        memory = c.conversations()
        context = memory.get_llm_context(WHO)
        assert [t.assistant_response for t in context.turns] == ["In eu-west-1."]
        memory.close()


def test_a_session_becomes_searchable_versioned_memory_under_its_speakers_names(cortex):
    turns = [Turn("Which port does the billing service use?", "Billing listens on port 8443."),
             Turn("And the metrics endpoint?", "Metrics are on port 9102 under /metrics.")]
    path = cortex.memory.record_session("assistant", turns, "Ops questions", session="s-42", user="Dana")
    text = cortex.show(path)
    assert "— Ops questions" in text and ":SESSION:  s-42" in text and ":PEOPLE:   Dana, assistant" in text
    assert "** Dana: And the metrics endpoint?\n** assistant: Metrics are on port 9102 under /metrics.\n" in text
    found = cortex.search("billing service port", agent="assistant", type="log", limit=2)
    assert {(hit.path, hit.outline[-1]) for hit in found} == {
        (path, "Dana: Which port does the billing service use?"), (path, "assistant: Billing listens on port 8443.")}
    answered = cortex.search("8443", agent="assistant", limit=1)[0]
    assert answered.path == path and answered.outline[-1] == "assistant: Billing listens on port 8443."
    cortex.snapshot("after the session")
    assert path in cortex.state("HEAD").entries


def test_turns_logged_later_join_their_session_entry_in_the_file_and_the_store(cortex, org):
    memory = cortex.memory
    memory.record_session("assistant", [Utterance("Dana", "Is the fix for E1042 out?", NOW)], "Deploy questions",
                          session="s-42")
    memory.record_session("assistant", [Utterance("Eve", "Unrelated.", NOW.replace(minute=10))], session="s-43")
    memory.record_session("assistant", [Utterance("assistant", "Yes: release 2.3.1.\nSince Tuesday.",
                                                  NOW.replace(minute=12))], session="s-42")
    text = (org / LOG).read_text()
    assert text == cortex.show(LOG) and text.count(":SESSION:  s-42") == 1
    assert [(u.speaker, u.text) for u in read_session(text, "s-42", NOW.date())] == [
        ("Dana", "Is the fix for E1042 out?"), ("assistant", "Yes: release 2.3.1.\nSince Tuesday.")]
    assert text.index("** assistant: Yes") < text.index("— Conversation")  # in its entry, before s-43's
    assert text.startswith("#+TITLE: assistant — 2026-11-20\n\n* 11:00 — Answered deploy questions\n")  # kept


def test_threads_logging_one_session_at_once_lose_no_turn_and_keep_each_ones_order(cortex, org):
    def talk(name):
        for n in range(5):
            cortex.memory.record_session("assistant", [Utterance(name, f"{name} says {n}", NOW)], session="s-busy")

    threads = [threading.Thread(target=talk, args=(f"Speaker{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    said = [u.text for u in read_session((org / LOG).read_text(), "s-busy", NOW.date())]
    assert sorted(said) == sorted(f"Speaker{k} says {n}" for k in range(4) for n in range(5))
    for k in range(4):
        assert [s for s in said if s.startswith(f"Speaker{k} ")] == [f"Speaker{k} says {n}" for n in range(5)]
    assert read_session(cortex.show(LOG), "s-busy", NOW.date()) == read_session((org / LOG).read_text(), "s-busy",
                                                                                NOW.date())


def test_without_an_org_folder_turns_commit_to_the_working_state(store_at, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with cx.open(store_at, folder=False) as c:
        c.memory.record_session("bot", [Utterance("Dana", "Hello?", NOW)], "Greeting", session="s-1")
        c.memory.record_session("bot", [Utterance("bot", "Hello, Dana.", NOW)], session="s-1")
        text = render_file(c.store, c.working(), "agents/bot/logs/2026-11-20.org")
    assert [(u.speaker, u.text) for u in read_session(text, "s-1", NOW.date())] == [
        ("Dana", "Hello?"), ("bot", "Hello, Dana.")]
    assert not (tmp_path / "org").exists()


def test_a_bad_turn_is_refused_before_anything_is_written(cortex, org):
    before = (org / LOG).read_bytes()
    with pytest.raises(InvalidTurn, match="turn 2: a Turn or an Utterance, not str"):
        cortex.memory.record_session("assistant", [Utterance("Dana", "fine", NOW), "not a turn"], session="s")
    with pytest.raises(InvalidTurn, match="session title '  ': empty"):
        cortex.memory.record_session("assistant", [Utterance("Dana", "fine", NOW)], "  ", session="s")
    assert (org / LOG).read_bytes() == before and cortex.show(LOG).encode() == before
