"""Conversation memory through the session: turns kept in the store, then written into a daily log."""

import cortex.api as cx
from cortex.memory.conversation import Identity, Turn

WHO = Identity("acme", "dana", "s-42")


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


def test_a_session_becomes_searchable_versioned_memory(cortex):
    turns = [Turn("Which port does the billing service use?", "Billing listens on port 8443."),
             Turn("And the metrics endpoint?", "Metrics are on port 9102 under /metrics.")]
    path = cortex.memory.record_session("assistant", turns, "Billing ports", session="s-42")
    text = cortex.show(path)
    assert "— Billing ports" in text and ":SESSION:  s-42" in text and "** User: And the metrics endpoint?" in text
    asked = cortex.search("billing port number", agent="assistant", type="log", limit=1)[0]
    assert asked.path == path and asked.outline[-1] == "User: Which port does the billing service use?"
    answered = cortex.search("8443", agent="assistant", limit=1)[0]
    assert answered.path == path and "Billing listens on port 8443." in answered.text
    cortex.snapshot("after the session")
    assert path in cortex.state("HEAD").entries
