"""Conversation memory: identity-scoped, strategy-driven, loud about failure.

Open one through the driver registry and pass a full identity at every call:

    from cortex.memory.conversation import Deps, Identity, MemoryConfig, Turn, open_memory

    memory = open_memory(MemoryConfig(driver="lmdb", path="snapshots/conversation", strategy="truncation"))
    who = Identity(tenant="acme", user="ada", session="s-42")
    memory.add_turn(who, Turn("What is due today?", "The report."))
    patch = memory.get_llm_context(who)       # strategy, summary, recent turns, token estimate

Strategies: `none` keeps nothing; `truncation` shows the newest turns that fit
`budget_tokens`; `rolling_summary` shows `recent_turns` turns verbatim and folds older
ones into a summary through a `Summarizer`, walking the health state machine
(healthy <-> retry <-> degraded <-> recovering -> healthy) when the summarizer fails.
Every turn stays in the store until `flush`, which returns them (identical turns are
kept apart: `add_turn` always appends, and `put` returns a key no other turn ever
gets, so `delete(key)` removes exactly that turn). `AgentMemory.record_session` logs them in
the agent's daily Org logs in the conversation layout (`orglog`: one entry per session
and day, one headline per turn under the speaker's own name, the whole turn kept), so a
finished session becomes versioned, searchable long-term memory; `Utterance` is a turn
of any speaker, for conversations of more than two people.

Token counts are estimates: ceil(characters / 4) (see `turns.estimate_tokens`).

Plugging in an LLM-backed summarizer: any object with
`summarize(previous_summary: str, turns: Sequence[Turn]) -> str` is a Summarizer.
Build the prompt from the previous summary and each turn's `user_message` and
`assistant_response`, call the model, return its text; raise on any failure (a
timeout, a refusal, an empty answer) rather than returning a placeholder: the
strategy retries on the next write, degrades to truncation after `retry_attempts`
failures, and drains the queued turns through the summarizer once it answers again.
The call runs on a worker thread, outside any store transaction, while other
identities carry on; an answer later than `summarizer_timeout` seconds counts as a
failure, and `close()` stops waiting for calls in flight. The answer is committed
only if the state it summarised is still the state, so handles and processes
sharing a store never lose each other's turns. Pass it as `Deps(summarizer=...)`;
`ExtractiveSummarizer` is a model-free one for demos and tests.

Writing a driver: a driver is a factory `(MemoryConfig, Deps) -> MemoryStore` given
to `register(name, factory)`. The `memory` driver shares a conversation between the
handles given one in-process store in `Deps(store=...)` (and only then); the `lmdb`
driver between every handle and process on one store folder (`path`); the `postgres`
driver between every handle, process and machine on one database
(`url="postgresql://user:password@host/database"`). Snapshots move between all three.
Concurrent writes of a process share commits (group commit), and each call returns
only once its write is durable. Most drivers need only
a cortex `Store` (any engine) and return
`ConversationMemory(store, make_strategy(config, deps.summarizer), deps.bus)`.
`conformance.MemoryStoreContract` is the test suite every driver passes.
"""

from ...org import escape_text as escape_org_text, unescape_text as unescape_org_text  # the layout's escape
from .config import ConfigError, Deps, MemoryConfig
from .drivers import DEFAULT_DRIVER, DriverAlreadyRegistered, DriverRegistry, UnknownDriver, register, registry
from .drivers import open as open_memory
from .events import (Event, EventBus, HealthChanged, IdentityRejected, ItemDeleted, ItemPut, Reason,
                     RecoveryDropped)
from .health import Health, InvalidHealthTransition, check_transition
from .identity import Identity, IdentityRequired
from .orglog import Utterance, read_session, turns_to_org_log
from .protocol import ContextPatch, InvalidSnapshot, MemoryStore, Snapshot, StoreClosed
from .store import ConversationMemory
from .strategies import StrategyNotImplemented, SummarizerRequired, make_strategy
from .summarizers import ExtractiveSummarizer, Summarizer
from .turns import InvalidTurn, TrajectoryDigest, Turn, estimate_tokens

__all__ = [
    "DEFAULT_DRIVER", "ConfigError", "ContextPatch", "ConversationMemory", "Deps", "DriverAlreadyRegistered",
    "DriverRegistry", "Event", "EventBus", "ExtractiveSummarizer", "Health", "HealthChanged", "Identity",
    "IdentityRejected", "IdentityRequired", "InvalidHealthTransition", "InvalidSnapshot", "InvalidTurn",
    "ItemDeleted", "ItemPut", "MemoryConfig", "MemoryStore", "Reason", "RecoveryDropped", "Snapshot",
    "StoreClosed", "StrategyNotImplemented", "Summarizer", "SummarizerRequired", "TrajectoryDigest", "Turn",
    "UnknownDriver", "Utterance", "check_transition", "escape_org_text", "estimate_tokens", "make_strategy",
    "open_memory", "read_session", "register", "registry", "turns_to_org_log", "unescape_org_text",
]
