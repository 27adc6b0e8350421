"""The health state machine allows Harbor's edges both ways, a recovery that ends healthy, and staying put."""

import itertools

import pytest

from cortex.memory.conversation import Health, HealthChanged, InvalidHealthTransition, Reason, check_transition

H, R, D, V = Health.HEALTHY, Health.RETRY, Health.DEGRADED, Health.RECOVERING
ALLOWED = {(H, R), (R, D), (D, V), (V, H),  # the cycle
           (R, H), (D, R), (V, D),  # healthy <-> retry <-> degraded <-> recovering, both ways
           (H, H), (R, R), (D, D), (V, V)}  # staying put


@pytest.mark.parametrize("prior, new", list(itertools.product(Health, Health)))
def test_only_the_documented_moves_are_allowed(prior, new):
    if (prior, new) in ALLOWED:
        assert check_transition(prior, new) is new
    else:
        with pytest.raises(InvalidHealthTransition) as err:
            check_transition(prior, new)
        assert (err.value.prior, err.value.new) == (prior, new)
        assert f"from {prior} to {new}" in str(err.value)


def test_states_read_as_their_names():
    assert check_transition("healthy", "retry") is Health.RETRY
    assert [h.value for h in Health] == ["healthy", "retry", "degraded", "recovering"]


def test_an_event_cannot_announce_a_forbidden_move():
    key = "ab" * 32
    assert HealthChanged(key, D, V, Reason.RECOVERY_STARTED).new is V
    with pytest.raises(InvalidHealthTransition):
        HealthChanged(key, D, H, Reason.STATE_RESET)
