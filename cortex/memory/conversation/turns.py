"""One exchange of a conversation, its content hash and its token estimate."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from functools import cache, cached_property

from ...codec import encode
from ...errors import UserError
from ...hashing import Oid, hash_bytes
from ...words import when

__all__ = ["CHARS_PER_TOKEN", "InvalidTurn", "TrajectoryDigest", "Turn", "estimate_tokens"]

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Tokens an LLM will likely spend on `text`: ceil(characters / 4).

    The rule of thumb holds within ~20% for English on common BPE vocabularies; the
    exact count depends on the model, which this layer does not know.
    """
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class InvalidTurn(UserError):
    """A turn field has the wrong type."""


@dataclass(frozen=True)
class TrajectoryDigest:
    """What was done to produce a response: tools invoked, what was seen and why, artifacts touched."""

    tools_invoked: tuple[str, ...] = ()
    observation_summary: str = ""
    reasoning_summary: str = ""
    artifact_refs: tuple[str, ...] = ()

    def __post_init__(self):
        _check_fields(self, "trajectory")

    def visible_text(self) -> str:
        """The digest as the model will read it."""
        return "\n".join([*self.tools_invoked, self.observation_summary, self.reasoning_summary,
                          *self.artifact_refs])


@dataclass(frozen=True)
class Turn:
    """A user message, the response to it, how it was produced, and when."""

    user_message: str
    assistant_response: str
    trajectory: TrajectoryDigest | None = None
    artifacts_shown: tuple[str, ...] = ()
    hidden_artifact_refs: tuple[str, ...] = ()  # kept for the runtime, never shown to the model
    timestamp_ns: int = field(default_factory=time.time_ns)

    def __post_init__(self):
        _check_fields(self, "turn")
        if self.trajectory is not None and not isinstance(self.trajectory, TrajectoryDigest):
            raise InvalidTurn(f"turn.trajectory must be a TrajectoryDigest or None, got "
                              f"{type(self.trajectory).__name__}")
        if isinstance(self.timestamp_ns, bool) or not isinstance(self.timestamp_ns, int) or self.timestamp_ns < 0:
            raise InvalidTurn(f"turn.timestamp_ns must be a non-negative integer (ns since the epoch), got "
                              f"{self.timestamp_ns!r}")

    def record(self) -> dict:
        """The turn as plain data for the canonical codec."""
        t = self.trajectory
        return {
            "user": self.user_message,
            "assistant": self.assistant_response,
            "trajectory": None if t is None else {
                "tools": list(t.tools_invoked), "observation": t.observation_summary,
                "reasoning": t.reasoning_summary, "artifacts": list(t.artifact_refs)},
            "shown": list(self.artifacts_shown),
            "hidden": list(self.hidden_artifact_refs),
            "time_ns": self.timestamp_ns,
        }

    @classmethod
    def from_record(cls, record: dict) -> Turn:
        """Rebuild a turn from `record()` output; raise InvalidTurn when it does not fit."""
        try:
            t = record["trajectory"]
            trajectory = None if t is None else TrajectoryDigest(
                tuple(t["tools"]), t["observation"], t["reasoning"], tuple(t["artifacts"]))
            return cls(record["user"], record["assistant"], trajectory, tuple(record["shown"]),
                       tuple(record["hidden"]), record["time_ns"])
        except (KeyError, TypeError) as exc:
            raise InvalidTurn(f"not a turn record: {exc!r}") from None

    @cached_property
    def key(self) -> Oid:
        """The content hash: equal turns (same text, same time) have equal ones; a stored turn's key is
        what `put` returns, which no other turn shares."""
        return hash_bytes(encode(["turn", self.record()]))

    @cached_property
    def tokens(self) -> int:
        """The estimated tokens of what the model sees of this turn (hidden refs excluded)."""
        digest = "" if self.trajectory is None else self.trajectory.visible_text()
        return estimate_tokens("\n".join([self.user_message, self.assistant_response, digest,
                                          *self.artifacts_shown]))

    def repl_row(self, renderer, index: int) -> dict:
        """The REPL's row of a turn in a table."""
        return {"#": str(index), "time": when(self.timestamp_ns), "user": self.user_message,
                "assistant": self.assistant_response, "tokens": str(self.tokens)}


def _check_fields(obj, where: str) -> None:
    texts, lists = _field_kinds(type(obj))
    for name in texts:
        if not isinstance(getattr(obj, name), str):
            raise InvalidTurn(f"{where}.{name} must be text, got {type(getattr(obj, name)).__name__}")
    for name in lists:
        value = getattr(obj, name)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise InvalidTurn(f"{where}.{name} must be a list or tuple of strings, got {value!r}")
        object.__setattr__(obj, name, tuple(value))


@cache
def _field_kinds(cls) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Names of the text fields and of the string-tuple fields of a dataclass."""
    return (tuple(f.name for f in fields(cls) if f.type == "str"),
            tuple(f.name for f in fields(cls) if f.type == "tuple[str, ...]"))
