"""The health state machine of a summarizing memory: healthy -> retry -> degraded -> recovering -> healthy."""

from __future__ import annotations

from enum import StrEnum

from ...errors import CortexError

__all__ = ["TRANSITIONS", "Health", "InvalidHealthTransition", "check_transition"]


class Health(StrEnum):
    """How well an identity's memory is keeping up with its summarizer."""

    HEALTHY = "healthy"
    RETRY = "retry"  # the summarizer failed; the next write tries again
    DEGRADED = "degraded"  # retries exhausted: acting as truncation, evicted turns wait in a backlog
    RECOVERING = "recovering"  # draining the backlog through the summarizer


# Harbor's machine: healthy <-> retry <-> degraded <-> recovering, and a recovery can end healthy.
# Staying put is a valid move (it announces nothing); nothing else skips a step.
TRANSITIONS: dict[Health, frozenset[Health]] = {
    Health.HEALTHY: frozenset({Health.HEALTHY, Health.RETRY}),
    Health.RETRY: frozenset({Health.RETRY, Health.HEALTHY, Health.DEGRADED}),
    Health.DEGRADED: frozenset({Health.DEGRADED, Health.RETRY, Health.RECOVERING}),
    Health.RECOVERING: frozenset({Health.RECOVERING, Health.HEALTHY, Health.DEGRADED}),
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
