"""`defmemory ... :review`: which writes of agent memory wait for a person, read as data, checked with located
one-line problems, and written back as it was read."""

import pytest

from cortex.dsl import DslError, parse_definitions, render_definition
from cortex.dsl.definitions import ReviewPolicy


@pytest.mark.parametrize("value, policy", [
    ("True", ReviewPolicy()),
    ("False", None),
    ('{:agents [scraper "assistant"] :sections [Facts logs] :operations [add compact]}',
     ReviewPolicy(("scraper", "assistant"), ("facts", "logs"), ("add", "compact"))),
])
def test_review_takes_true_false_or_the_writes_that_wait(value, policy):
    memory = parse_definitions(f"(defmemory agent-memory :review {value})").memories[0]
    assert memory.review == policy
    assert parse_definitions(render_definition(memory)).memories[0] == memory


@pytest.mark.parametrize("value, says", [
    ("3", ":review takes True, False or a map"),
    ("{:sections [fact]}", "unknown section fact; did you mean facts?"),
    ("{:operations [erase]}", "unknown operation erase"),
    ("{:operations []}", ":operations takes a list of operations"),
    ('{:agents ["two words"]}', ":agents takes agents like assistant"),
    ("{:agent [a]}", "unknown keyword :agent in :review; did you mean :agents?"),
])
def test_a_bad_review_is_a_located_problem(value, says):
    with pytest.raises(DslError) as raised:
        parse_definitions(f"(defmemory agent-memory :review {value})", "defs.hy")
    first = str(raised.value).splitlines()[0]
    assert first.startswith("defs.hy:1:") and says in first


def test_a_memory_under_review_says_so_in_its_settings():
    memory = parse_definitions("(defmemory m :review {:sections [facts]})").memories[0]
    assert memory.settings().endswith("· review sections facts")
