"""An identity names its missing parts and hashes to a key that does not reveal them."""

import pytest

from cortex.memory.conversation import (
    EventBus,
    Identity,
    IdentityRejected,
    IdentityRequired,
)
from cortex.memory.conversation.identity import require_identity


def test_missing_parts_are_named_in_order():
    assert Identity("acme", "ada", "s1").missing == ()
    assert Identity("", "ada", "  ").missing == ("tenant", "session")
    assert Identity(None, 3, "s").missing == ("tenant", "user")


def test_key_is_hashed_and_run_scoped():
    who = Identity("acme", "ada", "s1")
    assert who.key == Identity("acme", "ada", "s1", "").key != Identity("acme", "ada", "s1", "r1").key
    assert "acme" not in who.key.hex() and len(who.key) == 32
    assert Identity("a", "bc", "d").key != Identity("ab", "c", "d").key


def test_rejection_raises_and_publishes():
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    with pytest.raises(IdentityRequired, match="snapshot: identity is missing user"):
        require_identity(Identity("acme", "", "s1"), bus, "snapshot")
    assert seen == [IdentityRejected("snapshot", ("user",))]
    assert require_identity(Identity("acme", "ada", "s1"), bus, "snapshot") == Identity("acme", "ada", "s1").key
    assert len(seen) == 1
