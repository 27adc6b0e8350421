"""The health state machine of a summarizing memory: healthy -> retry -> degraded -> recovering -> healthy."""

from __future__ import annotations

from enum import StrEnum

from ...errors import CortexError


class Health(StrEnum):
    """How well an identity's memory is keeping up with its summarizer."""

    HEALTHY = "healthy"
    RETRY = "retry"  # the summarizer failed; the next write tries again
    DEGRADED = "degraded"  # retries exhausted: acting as truncation, evicted turns wait in a backlog
    RECOVERING = "recovering"  # draining the backlog through the summarizer


# A retry can succeed (back to healthy) and a recovery can fail (back to degraded);
# nothing else skips a step of the cycle.
TRANSITIONS: dict[Health, frozenset[Health]] = {
    Health.HEALTHY: frozenset({Health.RETRY}),
    Health.RETRY: frozenset({Health.HEALTHY, Health.DEGRADED}),
    Health.DEGRADED: frozenset({Health.RECOVERING}),
    Health.RECOVERING: frozenset({Health.HEALTHY, Health.DEGRADED}),
}


class InvalidHealthTransition(CortexError):
    """A move the health state machine does not allow (a bug in the caller, not bad input)."""

    def __init__(self, prior: Health, new: Health):
        allowed = ", ".join(sorted(TRANSITIONS[prior])) or "nothing"
        super().__init__(f"health cannot move from {prior} to {new}; from {prior} it may move to {allowed}")
        self.prior = prior
        self.new = new


def check_transition(prior: Health, new: Health) -> Health:
    """Return `new` if the machine may move there from `prior`, else raise InvalidHealthTransition."""
    prior, new = Health(prior), Health(new)
    if new not in TRANSITIONS[prior]:
        raise InvalidHealthTransition(prior, new)
    return new
