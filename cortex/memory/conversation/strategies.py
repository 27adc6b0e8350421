"""What an LLM sees of a conversation: nothing, the newest turns in a budget, or a rolling summary.

A strategy works on one identity's `TurnLog`. Every change it makes is one write
transaction that re-reads the state it changes, so handles and processes sharing a
store never write back a state another has moved on from. It appends the events it
causes to the list it is given only after the change they report has committed, so
the bus never announces a write that did not happen.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter

from ...codec import decode, encode
from ...errors import UserError
from ...hashing import Oid
from .config import MemoryConfig
from .events import Event, HealthChanged, Reason, RecoveryDropped
from .health import Health, check_transition
from .log import TurnLog
from .protocol import ContextPatch, InvalidSnapshot
from .summarizers import Summarizer, SummarizerCancelled, TimedSummarizer
from .turns import CHARS_PER_TOKEN, InvalidTurn, Turn, estimate_tokens

__all__ = ["SNAPSHOT_VERSION", "STRATEGIES", "Change", "NoMemory", "RollingSummary", "Strategy",
           "StrategyNotImplemented", "SummarizerRequired", "Truncation", "log", "make_strategy", "newest_within"]

log = logging.getLogger(__name__)

SNAPSHOT_VERSION = 1


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

    def add(self, turn_log: TurnLog, turn: Turn, events: list[Event]) -> Oid | None:
        """Append `turn` (identical turns too); return its key, or None when the strategy keeps nothing."""

        def append() -> Oid:
            state = self.state(turn_log)
            key = turn_log.append(state, turn)
            turn_log.save(state)
            return key

        return turn_log.transact(append)

    @abstractmethod
    def context(self, turn_log: TurnLog) -> ContextPatch:
        """What the next LLM call should see."""

    def health(self, turn_log: TurnLog) -> Health:
        """Only a summarizing strategy can be unhealthy."""
        return Health.HEALTHY

    def reset(self, turn_log: TurnLog, parsed: dict | None = None) -> tuple[Health, list[Turn]]:
        """In one transaction: forget the identity's memory, then load `parsed` snapshot data if given;
        return the health it had and the turns forgotten."""

        def replace() -> tuple[Health, list[Turn]]:
            prior = self.health(turn_log)
            turns = turn_log.clear()
            if parsed is not None:
                self.load(turn_log, parsed)
            return prior, turns

        return turn_log.transact(replace)

    def snapshot(self, turn_log: TurnLog) -> bytes:
        """The identity's memory as snapshot bytes."""
        return encode({"v": SNAPSHOT_VERSION, **self.export(turn_log)})

    def read_snapshot(self, data: bytes) -> dict:
        """Decode and check snapshot bytes; raise InvalidSnapshot when they do not fit."""
        try:
            decoded = decode(data)
        except (ValueError, TypeError) as exc:  # what msgpack raises on damaged or truncated bytes
            raise InvalidSnapshot(f"restore: snapshot bytes are damaged ({type(exc).__name__})") from None
        if not isinstance(decoded, dict) or decoded.get("v") != SNAPSHOT_VERSION:
            raise InvalidSnapshot(f"restore: not a version {SNAPSHOT_VERSION} conversation snapshot")
        return self.parse(decoded)

    def cancel(self) -> None:
        """Give up on slow work in flight (the memory is closing)."""

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
    """Remember nothing and touch nothing: adding and flushing are no-ops and the context is empty."""

    name = "none"

    def add(self, turn_log: TurnLog, turn: Turn, events: list[Event]) -> None:
        """Keep nothing."""
        return None

    def context(self, turn_log: TurnLog) -> ContextPatch:
        """Always empty."""
        return ContextPatch(self.name, "", (), 0)

    def reset(self, turn_log: TurnLog, parsed: dict | None = None) -> tuple[Health, list[Turn]]:
        """Nothing is kept, so nothing is forgotten (turns another strategy stored stay theirs)."""
        return Health.HEALTHY, []

    def snapshot(self, turn_log: TurnLog) -> bytes:
        """The empty snapshot, as Harbor writes it."""
        return b""

    def read_snapshot(self, data: bytes) -> dict:
        """Accept only an empty snapshot: b"" or one holding no turns."""
        if data == b"":
            return {"turns": []}
        parsed = super().read_snapshot(data)
        if parsed["turns"]:
            raise InvalidSnapshot(f"restore: the none strategy keeps nothing, so it restores only an empty "
                                  f"snapshot; this one holds {len(parsed['turns'])} turn(s)")
        return parsed


class Truncation(Strategy):
    """The newest turns whose estimate fits the token budget; older ones drop out of the context."""

    name = "truncation"

    def __init__(self, budget_tokens: int):
        self.budget_tokens = budget_tokens

    def context(self, turn_log: TurnLog) -> ContextPatch:
        """The newest turns that fit the budget; no summary."""
        turns, tokens = newest_within(turn_log, self.state(turn_log), self.budget_tokens)
        return ContextPatch(self.name, "", turns, tokens)


def _within(summary: str, budget: int) -> str:
    """The summary, or its beginning that fits in `budget` tokens, ending with "…" (nothing for no budget)."""
    if estimate_tokens(summary) <= budget:
        return summary
    return summary[:max(0, budget * CHARS_PER_TOKEN - 1)] + "…" if budget > 0 else ""


def newest_within(turn_log: TurnLog, state: dict, budget: int) -> tuple[tuple[Turn, ...], int]:
    """The newest turns (oldest first) whose token estimates sum to at most `budget`, and that sum."""
    turns = tuple(map(itemgetter(1), turn_log.newest(state, budget=budget)))
    return turns, sum(map(attrgetter("tokens"), turns))


Change = Callable[[dict, list[Event]], None]


class RollingSummary(Strategy):
    """The last `recent_turns` turns verbatim, older ones folded into a summary by a `Summarizer`.

    State: `folded` numbers the first turn not yet handed off (turns below it are in
    the summary, queued in `backlog` as [low, high) ranges, or dropped by overflow).
    A failing summarizer moves the identity healthy -> retry; `retry_attempts`
    failures in a row move it to degraded, where the context is plain truncation and
    evicted turns queue in the bounded backlog until a recovery drains it.

    The summarizer runs outside any transaction, on what a read saw; its answer is
    committed only if that is still the state (same summary, folded mark, backlog,
    health and conversation, and every turn it read still stored). Otherwise another
    writer got there first: read again and redo what is left. Turns appended
    meanwhile lie past what was read, so none is lost.
    """

    name = "rolling_summary"

    def __init__(self, summarizer: TimedSummarizer, recent_turns: int, budget_tokens: int, retry_attempts: int,
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

    def add(self, turn_log: TurnLog, turn: Turn, events: list[Event]) -> Oid:
        """Append, then fold what leaves the window (or, while degraded, try recovering and queue it)."""

        def append() -> tuple[Oid, bool]:
            state = self.state(turn_log)
            key = turn_log.append(state, turn)
            if _degraded(state):
                state["degraded_writes"] += 1
            turn_log.save(state)
            return key, _degraded(state) and state["degraded_writes"] % self.recovery_every == 0

        key, recover = turn_log.transact(append)
        try:
            # Recover first: a summarizer that answers again folds this write's eviction normally.
            if recover:
                self._recover(turn_log, events)
            self._settle(turn_log, events)
        except SummarizerCancelled:
            pass  # the memory is closing: the turn is stored and the next write folds it
        return key

    def context(self, turn_log: TurnLog) -> ContextPatch:
        """The newest unfolded turns that fit the budget, then as much of the summary as fits what is left;
        plain truncation while degraded or recovering."""
        state = self.state(turn_log)
        health = Health(state["health"])
        if _degraded(state):
            turns, tokens = newest_within(turn_log, state, self.budget_tokens)
            return ContextPatch(self.name, "", turns, tokens, health)
        turns = tuple(turn for _, turn in turn_log.newest(state, stop=state["folded"], budget=self.budget_tokens))
        tokens = sum(t.tokens for t in turns)
        summary = _within(state["summary"], self.budget_tokens - tokens)
        return ContextPatch(self.name, summary, turns, tokens + estimate_tokens(summary), health)

    def cancel(self) -> None:
        """Stop waiting for the summarizer."""
        self.summarizer.cancel()

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
        state.update(summary=parsed["summary"], folded=parsed["folded"])  # the log was empty: numbers are counts
        turn_log.save(state)

    def _unfolded(self, turn_log: TurnLog, state: dict) -> list[tuple[int, Turn]]:
        return turn_log.newest(state, stop=state["folded"])

    def _seen(self, turn_log: TurnLog) -> tuple[dict, list[tuple[int, Turn]]]:
        """The state, and the turns that left the window (to fold, or to queue while degraded)."""
        state = self.state(turn_log)
        unfolded = self._unfolded(turn_log, state)
        return state, unfolded[: max(0, len(unfolded) - self.recent_turns)]

    def _settle(self, turn_log: TurnLog, events: list[Event]) -> None:
        """Fold the turns that left the window (queue them while degraded), redoing it if another writer
        moved first."""
        while True:
            state, overflow = turn_log.view(lambda: self._seen(turn_log))
            if not overflow:
                return
            end = overflow[-1][0] + 1
            if _degraded(state):
                change = self._queue(turn_log, end)
            else:
                change = self._fold(turn_log, end, self._summarize(state["summary"], [t for _, t in overflow]))
            if self._commit_if(turn_log, state, overflow, change, events):
                return

    def _fold(self, turn_log: TurnLog, end: int, summary: str | None) -> Change:
        """The change a summarizer's answer (None: a failure) makes to the state it was asked about."""

        def change(state: dict, queued: list[Event]) -> None:
            if summary is not None:
                state.update(summary=summary, folded=end, failures=0)
                self._move(turn_log, state, Health.HEALTHY, Reason.SUMMARIZER_SUCCEEDED, queued)
                return
            state["failures"] += 1
            if state["health"] == Health.HEALTHY:
                self._move(turn_log, state, Health.RETRY, Reason.SUMMARIZER_FAILED, queued)
            if state["failures"] >= self.retry_attempts:
                self._move(turn_log, state, Health.DEGRADED, Reason.RETRIES_EXHAUSTED, queued)
                state.update(failures=0, degraded_writes=0)
                self._enqueue(turn_log, state, end, queued)

        return change

    def _queue(self, turn_log: TurnLog, end: int) -> Change:
        return lambda state, queued: self._enqueue(turn_log, state, end, queued)

    def _enqueue(self, turn_log: TurnLog, state: dict, end: int, events: list[Event]) -> None:
        state["backlog"].append([state["folded"], end])
        state["folded"] = end
        while len(state["backlog"]) > self.backlog_max:
            low, high = state["backlog"].pop(0)
            events.append(RecoveryDropped(turn_log.identity_key.hex(), Reason.BACKLOG_OVERFLOW,
                                          len(turn_log.between(low, high))))

    def _recover(self, turn_log: TurnLog, events: list[Event]) -> None:
        """Drain the backlog through the summarizer batch by batch, each committed only if nobody moved first."""
        while True:
            with turn_log.reading():
                state = self.state(turn_log)
                batch = turn_log.between(*state["backlog"][0]) if state["backlog"] else []
            if not _degraded(state):
                return  # another writer finished the recovery
            # Already recovering (a recovery cut short, or another writer's): carry on from where it is.
            if state["health"] == Health.DEGRADED:
                self._commit_if(turn_log, state, [], self._moving(turn_log, Health.RECOVERING,
                                                                  Reason.RECOVERY_STARTED), events)
                continue
            if not state["backlog"]:
                if self._commit_if(turn_log, state, [], self._moving(turn_log, Health.HEALTHY,
                                                                     Reason.BACKLOG_DRAINED), events):
                    return
                continue
            summary = self._summarize(state["summary"], [turn for _, turn in batch])
            if summary is None:
                if self._commit_if(turn_log, state, batch, self._moving(turn_log, Health.DEGRADED,
                                                                        Reason.RECOVERY_FAILED), events):
                    return
                continue
            self._commit_if(turn_log, state, batch, _drained(summary), events)

    def _commit_if(self, turn_log: TurnLog, seen: dict, read: list[tuple[int, Turn]], change: Change,
                   events: list[Event]) -> bool:
        """Apply `change` in one transaction if the state still is what `seen` and `read` were read from;
        release its events once committed."""

        def attempt() -> list[Event] | None:
            state = self.state(turn_log)
            if _basis(state) != _basis(seen) or not turn_log.stored([seq for seq, _ in read]):
                return None
            queued: list[Event] = []
            change(state, queued)
            turn_log.save(state)
            return queued

        queued = turn_log.transact(attempt)
        if queued is None:
            return False
        events.extend(queued)
        return True

    def _moving(self, turn_log: TurnLog, new: Health, reason: Reason) -> Change:
        return lambda state, queued: self._move(turn_log, state, new, reason, queued)

    def _move(self, turn_log: TurnLog, state: dict, new: Health, reason: Reason, events: list[Event]) -> None:
        prior = Health(state["health"])
        state["health"] = check_transition(prior, new).value
        if new != prior:  # staying put is allowed and announces nothing
            events.append(HealthChanged(turn_log.identity_key.hex(), prior, new, reason))

    def _summarize(self, previous: str, turns: Sequence[Turn]) -> str | None:
        # The summarizer is a plug-in at an I/O edge (often a remote model): any failure it
        # raises, or its silence past the timeout, is absorbed into the health state machine.
        try:
            summary = self.summarizer.summarize(previous, list(turns))
        except SummarizerCancelled:
            raise
        except Exception as exc:
            log.warning("summarizer %s failed: %s", type(self.summarizer.summarizer).__name__, type(exc).__name__)
            return None
        if not isinstance(summary, str):
            log.warning("summarizer %s returned %s, not text", type(self.summarizer.summarizer).__name__,
                        type(summary).__name__)
            return None
        return summary


def _drained(summary: str) -> Change:
    """The change a recovered batch makes: its summary is in, it leaves the backlog."""

    def change(state: dict, queued: list[Event]) -> None:
        state["summary"] = summary
        state["backlog"].pop(0)

    return change


def _basis(state: dict) -> tuple:
    """What a summary is computed from; a commit needs it unchanged (the epoch tells a new conversation)."""
    return state["summary"], state["folded"], state["backlog"], state["health"], state.get("epoch")


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
        return RollingSummary(TimedSummarizer(summarizer, config.summarizer_timeout), config.recent_turns,
                              config.budget_tokens, config.retry_attempts, config.backlog_max, config.recovery_every)
    raise StrategyNotImplemented(f"memory strategy {config.strategy!r} is not implemented; "
                                 f"choose one of {', '.join(STRATEGIES)}")
