"""What an LLM sees of a conversation: nothing, the newest turns in a budget, or a rolling summary.

A strategy works on one identity's `TurnLog`. It appends the events it causes to the
list it is given only after the change they report has committed, so the bus never
announces a write that did not happen.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence

from ...errors import UserError
from .config import MemoryConfig
from .events import Event, HealthChanged, Reason, RecoveryDropped
from .health import Health, check_transition
from .log import TurnLog
from .protocol import ContextPatch, InvalidSnapshot
from .summarizers import Summarizer
from .turns import InvalidTurn, Turn, estimate_tokens

log = logging.getLogger(__name__)


class StrategyNotImplemented(UserError):
    """The configured strategy name is not one this version knows."""


class SummarizerRequired(UserError):
    """The rolling summary strategy was opened without a summarizer."""


class Strategy(ABC):
    """Keeps every turn; subclasses decide what the model sees."""

    name = ""

    def state(self, turn_log: TurnLog) -> dict:
        """The identity's state with this strategy's defaults filled in."""
        return turn_log.state()

    def add(self, turn_log: TurnLog, turn: Turn, events: list[Event]) -> bool:
        """Append `turn`; False if it was already stored."""

        def append() -> bool:
            state = self.state(turn_log)
            if turn_log.append(state, turn) is None:
                return False
            turn_log.save(state)
            return True

        return turn_log.transact(append)

    @abstractmethod
    def context(self, turn_log: TurnLog) -> ContextPatch:
        """What the next LLM call should see."""

    def health(self, turn_log: TurnLog) -> Health:
        """Only a summarizing strategy can be unhealthy."""
        return Health.HEALTHY

    def export(self, turn_log: TurnLog) -> dict:
        """The identity's memory as plain data for a snapshot."""
        return {"turns": [turn.record() for _, turn in turn_log.all()]}

    def parse(self, data) -> dict:
        """Check snapshot data written by `export`; raise InvalidSnapshot when it does not fit."""
        if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
            raise InvalidSnapshot(f"restore: a {self.name} snapshot holds a list of turns")
        try:
            return {**data, "turns": [Turn.from_record(record) for record in data["turns"]]}
        except InvalidTurn as exc:
            raise InvalidSnapshot(f"restore: damaged turn in snapshot: {exc}") from None

    def load(self, turn_log: TurnLog, parsed: dict) -> None:
        """Write parsed snapshot data into an empty log (inside the caller's transaction)."""
        state = self.state(turn_log)
        for turn in parsed["turns"]:
            turn_log.append(state, turn)
        turn_log.save(state)


class NoMemory(Strategy):
    """Remember nothing: adding is a no-op and the context is empty."""

    name = "none"

    def add(self, turn_log: TurnLog, turn: Turn, events: list[Event]) -> bool:
        """Keep nothing."""
        return False

    def context(self, turn_log: TurnLog) -> ContextPatch:
        """Always empty."""
        return ContextPatch(self.name, "", (), 0)

    def export(self, turn_log: TurnLog) -> dict:
        """Nothing to carry over."""
        return {"turns": []}


class Truncation(Strategy):
    """The newest turns whose estimate fits the token budget; older ones drop out of the context."""

    name = "truncation"

    def __init__(self, budget_tokens: int):
        self.budget_tokens = budget_tokens

    def context(self, turn_log: TurnLog) -> ContextPatch:
        """The newest turns that fit the budget; no summary."""
        turns, tokens = newest_within(turn_log, self.state(turn_log), self.budget_tokens)
        return ContextPatch(self.name, "", turns, tokens)


def newest_within(turn_log: TurnLog, state: dict, budget: int) -> tuple[tuple[Turn, ...], int]:
    """The newest turns (oldest first) whose token estimates sum to at most `budget`, and that sum."""
    kept, tokens = [], 0
    for _, turn in turn_log.newest(state):
        if tokens + turn.tokens > budget:
            break
        kept.append(turn)
        tokens += turn.tokens
    return tuple(reversed(kept)), tokens


class RollingSummary(Strategy):
    """The last `recent_turns` turns verbatim, older ones folded into a summary by a `Summarizer`.

    State: `folded` numbers the first turn not yet handed off (turns below it are in
    the summary, queued in `backlog` as [low, high) ranges, or dropped by overflow).
    A failing summarizer moves the identity healthy -> retry; `retry_attempts`
    failures in a row move it to degraded, where the context is plain truncation and
    evicted turns queue in the bounded backlog until a recovery drains it.
    """

    name = "rolling_summary"

    def __init__(self, summarizer: Summarizer, recent_turns: int, budget_tokens: int, retry_attempts: int,
                 backlog_max: int, recovery_every: int):
        self.summarizer = summarizer
        self.recent_turns = recent_turns
        self.budget_tokens = budget_tokens
        self.retry_attempts = retry_attempts
        self.backlog_max = backlog_max
        self.recovery_every = recovery_every

    def state(self, turn_log: TurnLog) -> dict:
        """The stored state over fresh defaults; a log another strategy wrote starts with nothing folded."""
        # Fresh defaults each time: the backlog list is mutated in place.
        defaults = {"summary": "", "health": Health.HEALTHY.value, "failures": 0, "folded": 0, "backlog": [],
                    "degraded_writes": 0}
        return {**defaults, **turn_log.state()}

    def health(self, turn_log: TurnLog) -> Health:
        """The stored health state."""
        return Health(self.state(turn_log)["health"])

    def add(self, turn_log: TurnLog, turn: Turn, events: list[Event]) -> bool:
        """Append, then fold what leaves the window (or, while degraded, try recovering and queue it)."""

        def append() -> dict | None:
            state = self.state(turn_log)
            if turn_log.append(state, turn) is None:
                return None
            if _degraded(state):
                state["degraded_writes"] += 1
            turn_log.save(state)
            return state

        state = turn_log.transact(append)
        if state is None:
            return False
        # Recover first: a summarizer that answers again folds this write's eviction normally.
        if _degraded(state) and state["degraded_writes"] % self.recovery_every == 0:
            self._recover(turn_log, state, events)
        if _degraded(state):
            self._queue_overflow(turn_log, state, events)
        else:
            self._fold_overflow(turn_log, state, events)
        return True

    def context(self, turn_log: TurnLog) -> ContextPatch:
        """Summary plus every unfolded turn; plain truncation while degraded or recovering."""
        state = self.state(turn_log)
        health = Health(state["health"])
        if _degraded(state):
            turns, tokens = newest_within(turn_log, state, self.budget_tokens)
            return ContextPatch(self.name, "", turns, tokens, health)
        turns = tuple(turn for _, turn in self._unfolded(turn_log, state))
        tokens = estimate_tokens(state["summary"]) + sum(t.tokens for t in turns)
        return ContextPatch(self.name, state["summary"], turns, tokens, health)

    def export(self, turn_log: TurnLog) -> dict:
        """Turns, summary, and how many leading turns the summary accounts for."""
        state = self.state(turn_log)
        pairs = turn_log.all()
        # Queued turns are not in the summary: the restored memory folds them again.
        first_unsummarized = state["backlog"][0][0] if state["backlog"] else state["folded"]
        return {"turns": [turn.record() for _, turn in pairs], "summary": state["summary"],
                "folded": sum(1 for seq, _ in pairs if seq < first_unsummarized)}

    def parse(self, data) -> dict:
        """Also check the summary and the folded count."""
        parsed = super().parse(data)
        folded, summary = parsed.get("folded"), parsed.get("summary")
        if not isinstance(summary, str) or isinstance(folded, bool) or not isinstance(folded, int) \
                or not 0 <= folded <= len(parsed["turns"]):
            raise InvalidSnapshot("restore: a rolling_summary snapshot holds a summary and how many leading "
                                  "turns it folds")
        return parsed

    def load(self, turn_log: TurnLog, parsed: dict) -> None:
        """Turns, then the summary and folded count; health starts healthy."""
        super().load(turn_log, parsed)
        state = self.state(turn_log)
        state.update(summary=parsed["summary"], folded=parsed["folded"])
        turn_log.save(state)

    def _unfolded(self, turn_log: TurnLog, state: dict) -> list[tuple[int, Turn]]:
        return list(turn_log.newest(state, stop=state["folded"]))[::-1]

    def _overflow(self, turn_log: TurnLog, state: dict) -> list[tuple[int, Turn]]:
        unfolded = self._unfolded(turn_log, state)
        return unfolded[: max(0, len(unfolded) - self.recent_turns)]

    def _fold_overflow(self, turn_log: TurnLog, state: dict, events: list[Event]) -> None:
        overflow = self._overflow(turn_log, state)
        if not overflow:
            return
        end = overflow[-1][0] + 1
        summary = self._summarize(state["summary"], [turn for _, turn in overflow])
        queued: list[Event] = []
        if summary is not None:
            state.update(summary=summary, folded=end, failures=0)
            if state["health"] == Health.RETRY:
                self._move(turn_log, state, Health.HEALTHY, Reason.SUMMARIZER_SUCCEEDED, queued)
        else:
            state["failures"] += 1
            if state["health"] == Health.HEALTHY:
                self._move(turn_log, state, Health.RETRY, Reason.SUMMARIZER_FAILED, queued)
            if state["failures"] >= self.retry_attempts:
                self._move(turn_log, state, Health.DEGRADED, Reason.RETRIES_EXHAUSTED, queued)
                state.update(failures=0, degraded_writes=0)
                self._enqueue(turn_log, state, end, queued)
        _commit(turn_log, state, queued, events)

    def _queue_overflow(self, turn_log: TurnLog, state: dict, events: list[Event]) -> None:
        overflow = self._overflow(turn_log, state)
        if not overflow:
            return
        queued: list[Event] = []
        self._enqueue(turn_log, state, overflow[-1][0] + 1, queued)
        _commit(turn_log, state, queued, events)

    def _enqueue(self, turn_log: TurnLog, state: dict, end: int, events: list[Event]) -> None:
        state["backlog"].append([state["folded"], end])
        state["folded"] = end
        while len(state["backlog"]) > self.backlog_max:
            low, high = state["backlog"].pop(0)
            events.append(RecoveryDropped(turn_log.identity_key.hex(), Reason.BACKLOG_OVERFLOW,
                                          len(turn_log.between(low, high))))

    def _recover(self, turn_log: TurnLog, state: dict, events: list[Event]) -> None:
        def step(new: Health | None = None, reason: Reason | None = None) -> None:
            queued: list[Event] = []
            if new is not None:
                self._move(turn_log, state, new, reason, queued)
            _commit(turn_log, state, queued, events)

        if state["health"] != Health.RECOVERING:  # a recovery interrupted by a crash resumes as it was
            step(Health.RECOVERING, Reason.RECOVERY_STARTED)
        while state["backlog"]:
            low, high = state["backlog"][0]
            summary = self._summarize(state["summary"], turn_log.between(low, high))
            if summary is None:
                step(Health.DEGRADED, Reason.RECOVERY_FAILED)
                return
            state["summary"] = summary
            state["backlog"].pop(0)
            step()
        step(Health.HEALTHY, Reason.BACKLOG_DRAINED)

    def _move(self, turn_log: TurnLog, state: dict, new: Health, reason: Reason, events: list[Event]) -> None:
        prior = Health(state["health"])
        state["health"] = check_transition(prior, new).value
        events.append(HealthChanged(turn_log.identity_key.hex(), prior, new, reason))

    def _summarize(self, previous: str, turns: Sequence[Turn]) -> str | None:
        # The summarizer is a plug-in at an I/O edge (often a remote model): any failure it
        # raises is absorbed into the health state machine, which is the failure surface.
        try:
            summary = self.summarizer.summarize(previous, list(turns))
        except Exception as exc:
            log.warning("summarizer %s failed: %s", type(self.summarizer).__name__, type(exc).__name__)
            return None
        if not isinstance(summary, str):
            log.warning("summarizer %s returned %s, not text", type(self.summarizer).__name__,
                        type(summary).__name__)
            return None
        return summary


def _commit(turn_log: TurnLog, state: dict, queued: list[Event], events: list[Event]) -> None:
    """Save `state`, then release the events it causes (never before the change they report lands)."""
    turn_log.save(state)
    events.extend(queued)


def _degraded(state: dict) -> bool:
    return state["health"] in (Health.DEGRADED, Health.RECOVERING)


STRATEGIES = ("none", "truncation", "rolling_summary")


def make_strategy(config: MemoryConfig, summarizer: Summarizer | None) -> Strategy:
    """The strategy `config` names; raise StrategyNotImplemented or SummarizerRequired."""
    if config.strategy == "none":
        return NoMemory()
    if config.strategy == "truncation":
        return Truncation(config.budget_tokens)
    if config.strategy == "rolling_summary":
        if summarizer is None:
            raise SummarizerRequired("the rolling_summary strategy needs a summarizer: pass Deps(summarizer=...) "
                                     "(ExtractiveSummarizer works without a model)")
        if not callable(getattr(summarizer, "summarize", None)):
            raise SummarizerRequired(f"{type(summarizer).__name__} has no summarize(previous_summary, turns) method")
        return RollingSummary(summarizer, config.recent_turns, config.budget_tokens, config.retry_attempts,
                              config.backlog_max, config.recovery_every)
    raise StrategyNotImplemented(f"memory strategy {config.strategy!r} is not implemented; "
                                 f"choose one of {', '.join(STRATEGIES)}")
