"""Turns are content-addressed, round-trip through plain data, and estimate what the model sees."""

import pytest

from cortex.codec import decode, encode
from cortex.memory.conversation import (
    InvalidTurn,
    TrajectoryDigest,
    Turn,
    estimate_tokens,
)


def test_estimate_is_a_quarter_of_the_characters_rounded_up():
    assert [estimate_tokens("x" * n) for n in (0, 1, 4, 5, 400)] == [0, 1, 1, 2, 100]


def test_equal_turns_have_equal_keys_and_time_is_content():
    a = Turn("hi", "hello", timestamp_ns=1)
    assert a.key == Turn("hi", "hello", timestamp_ns=1).key
    assert a.key != Turn("hi", "hello", timestamp_ns=2).key != Turn("hi", "hello!", timestamp_ns=2).key


def test_record_round_trips_through_the_codec():
    turn = Turn("Find the invoice", "Here it is.", TrajectoryDigest(["search", "open"], "two hits", "newest first",
                ["oid:1"]), ["invoice.pdf"], ["secret-ref"], timestamp_ns=1_700_000_000_000_000_000)
    again = Turn.from_record(decode(encode(turn.record())))
    assert again == turn and again.key == turn.key
    assert again.trajectory.tools_invoked == ("search", "open")


def test_tokens_count_what_the_model_sees_not_hidden_refs():
    plain = Turn("a" * 40, "b" * 40, timestamp_ns=0)
    hidden = Turn("a" * 40, "b" * 40, hidden_artifact_refs=("h" * 400,), timestamp_ns=0)
    shown = Turn("a" * 40, "b" * 40, artifacts_shown=("s" * 400,), timestamp_ns=0)
    assert plain.tokens == estimate_tokens("a" * 40 + "\n" + "b" * 40 + "\n") == hidden.tokens
    assert shown.tokens > plain.tokens + 99


@pytest.mark.parametrize("build, field", [
    (lambda: Turn(42, "x"), "turn.user_message must be text"),
    (lambda: Turn("x", "y", artifacts_shown="one"), "turn.artifacts_shown must be a list or tuple"),
    (lambda: Turn("x", "y", timestamp_ns=1.5), "turn.timestamp_ns must be a non-negative integer"),
    (lambda: Turn("x", "y", trajectory={"tools": []}), "turn.trajectory must be a TrajectoryDigest"),
    (lambda: TrajectoryDigest(tools_invoked=[1]), "trajectory.tools_invoked must be a list or tuple of strings"),
    (lambda: Turn.from_record({"user": "x"}), "not a turn record"),
])
def test_bad_fields_say_which(build, field):
    with pytest.raises(InvalidTurn, match=field):
        build()
