"""Which writes of agent memory wait for review: what a write touches (memory.org's sections, the daily logs)
and what it does, against the review policies the definitions declare (`defmemory ... :review`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..dsl.definitions import ReviewPolicy
from ..review import Write
from .layout import holds_items, memory_path, section_type

__all__ = ["needs_review", "touched"]

_SECTIONS = {"fact": "facts", "procedure": "procedures", "pattern": "patterns"}
_MEMORY = frozenset(_SECTIONS.values())


def touched(write: Write) -> set[str]:
    """The parts of the agent's memory a write changes: `facts`, `procedures`, `patterns` (memory.org's sections;
    a change outside them, every one) and `logs`; any other file of the agent counts as every part."""
    found: set[str] = set()
    for path in write.paths:
        if path == memory_path(write.agent):
            found |= _sections(write, path)
        elif holds_items(write.agent, path):
            found.add("logs")
        else:
            found |= _MEMORY | {"logs"}
    return found


def _sections(write: Write, path: str) -> set[str]:
    """The sections of memory.org whose subtree differs between the write's base and its tree."""
    versions = [write.get(oid) if (oid := tree.entries.get(path)) is not None else None
                for tree in (write.base, write.tree)]
    if None in versions or versions[0].preamble != versions[1].preamble:
        return set(_MEMORY)
    before, after = ({write.get(oid).title: oid for oid in document.children} for document in versions)
    found = set()
    for title in before.keys() | after.keys():
        if before.get(title) != after.get(title):
            kind = section_type(title)
            found |= {_SECTIONS[kind]} if kind else set(_MEMORY)
    return found


def needs_review(policies: Sequence[ReviewPolicy]) -> Callable[[Write], bool]:
    """The policy of a workspace under review: a write waits when one of `policies` says it does."""
    def waits(write: Write) -> bool:
        operations, sections = set(write.operation.split("+")), touched(write)
        return any(policy.waits(write.agent, sections, operations) for policy in policies)

    return waits
