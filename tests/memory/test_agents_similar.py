"""`AgentMemory.similar`: the current items of one agent and type close in meaning to a text being added, with the
session's embedder (the bundled MiniLM, its vectors cached in the store)."""

import pytest

from cortex.errors import UserError
from cortex.memory.agents import AgentMemory
from tests.search.test_embedders import CountingEmbedder

MEMORY = "agents/assistant/memory.org"


def test_similar_finds_current_items_of_the_same_type_closest_first(cortex):
    found = cortex.memory.similar("assistant", "fact", "The user likes dark mode in all apps.")
    assert [item.id for item, _ in found] == ["mem-assistant-dark-mode"]
    assert 0.7 <= found[0][1] < 1
    assert cortex.memory.similar("assistant", "procedure", "The user likes dark mode in all apps.") == []
    assert cortex.memory.similar("assistant", "fact", "Lunch is served at noon on the roof.") == []


def test_the_same_text_is_not_similar_but_already_present(cortex):
    text = "user prefers dark mode in every app"
    assert cortex.memory.similar("assistant", "fact", text) == []
    assert cortex.memory.known_item("assistant", "fact", text).id == "mem-assistant-dark-mode"


def test_an_item_that_no_longer_holds_is_not_similar(cortex, org):
    path = org / MEMORY
    path.write_text(path.read_text().replace(":SOURCE:   session 2026-11-18 09:10\n:END:\n** The API",
                                             ":SOURCE:   session 2026-11-18 09:10\n:INVALID_AT: [2026-11-19 Thu]\n"
                                             ":END:\n** The API", 1))
    assert cortex.memory.similar("assistant", "fact", "The user likes dark mode in all apps.") == []


def test_a_check_embeds_only_the_new_text_once_the_items_are_cached(cortex):
    cortex.memory.similar("assistant", "fact", "The user likes dark mode in all apps.")
    counting = cortex._embedder.embedder = CountingEmbedder(cortex._embedder.embedder)
    cortex.memory.similar("assistant", "fact", "The API allows 100 requests a minute.")
    assert counting.embedded == ["The API allows 100 requests a minute."]


def test_a_bad_type_is_refused_and_without_an_embedder_nothing_is_similar(cortex):
    with pytest.raises(UserError, match="memory type 'opinion'"):
        cortex.memory.similar("assistant", "opinion", "x")
    assert AgentMemory(cortex.workspace).similar("assistant", "fact", "The user likes dark mode.") == []


def test_a_hard_forget_leaves_no_vector_of_its_text_in_the_session(cortex):
    cortex.memory.similar("assistant", "fact", "The user likes dark mode in all apps.")
    assert "User prefers dark mode in every app." in cortex._embedder._recent
    cortex.memory.forget("assistant", "mem-assistant-dark-mode", hard=True)
    assert "User prefers dark mode in every app." not in cortex._embedder._recent
