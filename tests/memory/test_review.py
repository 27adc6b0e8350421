"""Review policies in the definitions: which writes of agent memory wait for a person, decided by agent, by the
part of memory a write touches and by what it does; every other write lands at once."""

from datetime import datetime

import pytest

import cortex.api as cx
from cortex.dsl.definitions import ReviewPolicy
from cortex.memory.conversation import Utterance
from cortex.memory.review import touched
from cortex.review import Write

NOW = datetime(2026, 11, 20, 14, 5)


def opened(tmp_path, org, review: str):
    """A session whose definitions declare one memory with this `:review` value."""
    (org / "definitions.hy").write_text(f"(defmemory agent-memory :review {review})\n")
    c = cx.open(tmp_path / "store", org)
    c.ingest()
    return c


def waited(c, write) -> bool:
    """Whether `write()` became a proposal (else it landed in the working state)."""
    before, working = len(c.proposals()), c.working()
    write()
    made = len(c.proposals()) - before
    assert made in (0, 1) and (made == 1) == (c.working() == working)
    return made == 1


def test_by_agent_only_the_agents_named_wait(tmp_path, org):
    with opened(tmp_path, org, "{:agents [scraper]}") as c:
        assert waited(c, lambda: c.memory.add_item("scraper", "fact", "Prices changed on Monday."))
        assert not waited(c, lambda: c.memory.add_item("assistant", "fact", "Prices changed on Monday."))


def test_by_section_facts_wait_and_daily_logs_do_not(tmp_path, org):
    with opened(tmp_path, org, "{:sections [facts]}") as c:
        assert waited(c, lambda: c.memory.add_item("assistant", "fact", "The office moved to Porto."))
        assert not waited(c, lambda: c.memory.add_item("assistant", "procedure", "Lock the door."))
        assert not waited(c, lambda: c.memory.record_session(
            "assistant", [Utterance("Dana", "Where is the office now?", NOW)], "Office", session="s-1"))


def test_by_operation_adds_wait_and_forgets_and_compactions_do_not(tmp_path, org):
    with opened(tmp_path, org, "{:operations [add]}") as c:
        assert waited(c, lambda: c.memory.add_item("assistant", "fact", "The office moved to Porto."))
        assert not waited(c, lambda: c.memory.forget("assistant", "mem-assistant-dark-mode"))
        assert not waited(c, lambda: c.memory.compact("assistant", now=NOW))


def test_review_true_makes_every_write_wait_and_no_review_none(tmp_path, org):
    with opened(tmp_path, org, "True") as c:
        assert waited(c, lambda: c.memory.forget("assistant", "mem-assistant-dark-mode"))
    (org / "definitions.hy").unlink()
    with cx.open(tmp_path / "store", org) as c:
        assert not waited(c, lambda: c.memory.add_item("assistant", "fact", "No review here."))


def test_a_broken_definitions_file_that_declares_review_lets_no_write_through(tmp_path, org):
    with opened(tmp_path, org, "{:sections [fact]}") as c:
        with pytest.raises(cx.DslError, match="unknown section fact"):
            c.memory.add_item("assistant", "fact", "Not written.")
        assert c.proposals() == [] and "Not written." not in c.show("agents/assistant/memory.org")


@pytest.mark.parametrize("policy, agent, sections, operations, waits", [
    (ReviewPolicy(), "a", set(), {"add"}, True),
    (ReviewPolicy(agents=("b",)), "a", {"facts"}, {"add"}, False),
    (ReviewPolicy(sections=("facts",)), "a", {"logs"}, {"turns"}, False),
    (ReviewPolicy(sections=("facts", "logs")), "a", {"logs"}, {"turns"}, True),
    (ReviewPolicy(operations=("add",)), "a", {"facts"}, {"delivery", "add"}, True),
    (ReviewPolicy(operations=("add",)), "a", {"facts"}, {"forget"}, False),
])
def test_a_policy_waits_only_when_every_rule_it_gives_holds(policy, agent, sections, operations, waits):
    assert policy.waits(agent, sections, operations) is waits


def test_what_a_write_touches_is_read_from_the_sections_it_changes(cortex):
    memory = cortex.memory
    base = cortex.working()
    memory.add_item("assistant", "procedure", "Back up first.")
    memory.record_session("assistant", [Utterance("Dana", "Hello.", NOW)], "Hi", session="s-2")
    get = cortex.store.objects.__getitem__
    assert touched(Write("assistant", "add", base, cortex.working(), get)) == {"procedures", "logs"}
