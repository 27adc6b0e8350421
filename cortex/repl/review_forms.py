"""The REPL's forms over the writes of agents under review (proposals), over `cortex.api`."""

from __future__ import annotations

from .registry import form
from .values import Message


def _shown(session, proposal) -> str:
    """A proposal's lines and, while it waits, its patch."""
    lines = proposal.lines()
    if proposal.pending:
        lines += ["  " + line for line in session.cortex.proposal_patch(proposal.id).splitlines()]
    return "\n".join(lines)


@form
def review(session, *, agent=None, status="pending"):
    """The writes of agents under review, each with its patch: (review), (review :agent "assistant"),
    (review :status "rejected") with the reasons; :status "accepted" or "all" too."""
    found = session.cortex.proposals(None if status == "all" else status, agent)
    return Message("\n".join(_shown(session, p) for p in found) or f"no proposals {status}")


@form
def review_show(session, proposal):
    """One proposal (by its id, or a unique prefix) and its patch: (review-show "0badc0de")."""
    return Message(_shown(session, session.cortex.proposal(proposal)))


@form
def review_accept(session, proposal, *only):
    """Merge a proposal into the working state, headline by headline, in one commit: (review-accept "0badc0de");
    (review-accept "0badc0de" "Facts / Prefers tea") takes that headline's change alone (by :ID: or outline path)."""
    return Message(str(session.cortex.accept_proposal(proposal, list(only) or None)))


@form
def review_reject(session, proposal, *, reason=""):
    """Reject a proposal: it never reaches the files, and stays listed with its reason:
    (review-reject "0badc0de" :reason "not a fact")."""
    decided = session.cortex.reject_proposal(proposal, reason)
    return Message(f"rejected {decided.id}" + (f": {decided.reason}" if decided.reason else ""))
