"""Where agent memory lives under the Org root, and what kind of memory a headline is.

    agents/<agent-id>/memory.org            sections Facts, Procedures, Learned Patterns
    agents/<agent-id>/logs/YYYY-MM-DD.org   one level-1 entry per session: "HH:MM — title"
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from ..errors import UserError
from ..objects import Headline
from ..paths import AGENTS
from ..words import quoted

MEMORY_FILE = "memory.org"
LOGS = "logs"

# Memory types in file order: the type, its section title in memory.org, and its log tag.
ITEM_TYPES = ("fact", "procedure", "pattern")
SECTION_TITLES = {"fact": "Facts", "procedure": "Procedures", "pattern": "Learned Patterns"}
LOG = "log"

_LOG_NAME = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.org")
_FORBIDDEN = re.compile(r"[/\\\x00-\x1f\x7f]")


class BadAgentId(UserError):
    """An agent id that cannot name a folder under the Org root."""


@dataclass(frozen=True)
class MemoryTag:
    """What a headline is to agent memory: whose it is and which type (fact, procedure, pattern, log)."""

    agent: str
    type: str


def check_agent_id(agent: str) -> str:
    """Return `agent` if it can name a folder under `agents/`, else raise BadAgentId saying why."""
    if not isinstance(agent, str) or not agent.strip():
        raise BadAgentId(f"agent id {quoted(agent)}: empty; use a name such as 'assistant'")
    problem = None
    if agent.startswith("."):
        problem = "starts with a dot"
    elif ".." in agent:
        problem = "contains '..'"
    elif (bad := _FORBIDDEN.search(agent)) is not None:
        problem = f"contains {bad.group()!r} at position {bad.start()}"
    elif agent != agent.strip():
        problem = "starts or ends with whitespace"
    elif len(agent.encode()) > 200:
        problem = "is longer than 200 bytes"
    if problem:
        raise BadAgentId(f"agent id {quoted(agent)}: {problem}; an agent id names one folder under {AGENTS}/")
    return agent


def agent_folder(root: Path, agent: str) -> Path:
    """`<root>/agents/<agent>`, refusing an id or a symlink that would lead outside the Org root."""
    folder = Path(root) / AGENTS / check_agent_id(agent)
    real_root = os.path.realpath(root)
    real = os.path.realpath(folder)
    if os.path.commonpath([real_root, real]) != real_root:
        raise BadAgentId(f"agent id {quoted(agent)}: {folder} leads outside the Org root {root}")
    return folder


def memory_path(agent: str) -> str:
    """The path of an agent's memory.org relative to the Org root."""
    return f"{AGENTS}/{agent}/{MEMORY_FILE}"


def log_path(agent: str, day: date) -> str:
    """The path of an agent's daily log for `day`, relative to the Org root."""
    return f"{AGENTS}/{agent}/{LOGS}/{day.isoformat()}.org"


def log_date(name: str) -> date | None:
    """The day a log file name (`YYYY-MM-DD.org`) stands for, or None for any other name."""
    m = _LOG_NAME.fullmatch(name)
    if m is None:
        return None
    try:
        return date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def section_type(title: str) -> str | None:
    """The memory type a level-1 section title names (case-insensitive), or None."""
    folded = " ".join(title.split()).casefold()
    return next((t for t, name in SECTION_TITLES.items() if name.casefold() == folded), None)


def tagged_type(headline: Headline) -> str | None:
    """The memory type a log headline is marked with (`:fact:`, `:procedure:`, `:pattern:`), or None."""
    return next((t for t in headline.tags if t in ITEM_TYPES), None)


def classify(path: str, outline: tuple[str, ...], headline: Headline) -> MemoryTag | None:
    """Agent id and memory type of a headline at `path` / `outline`, or None when it is not agent memory.

    In memory.org every headline under a known section has that section's type (the section
    headline itself too: its text holds the section's plain-list items). In a daily log a
    headline tagged with a type has that type, every other headline is "log".
    """
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != AGENTS:
        return None
    agent = parts[1]
    try:
        check_agent_id(agent)
    except BadAgentId:
        return None
    if parts[2:] == [MEMORY_FILE]:
        kind = section_type(outline[0]) if outline else None
        return MemoryTag(agent, kind) if kind else None
    if len(parts) == 4 and parts[2] == LOGS and log_date(parts[3]) is not None:
        return MemoryTag(agent, tagged_type(headline) or LOG)
    return None


def logs_in(tree, agent: str) -> dict[str, date]:
    """The agent's daily logs in a tree (path -> document): path -> day."""
    prefix = f"{AGENTS}/{agent}/{LOGS}/"
    logs = {}
    for path in tree.entries:
        name = path[len(prefix):]
        if path.startswith(prefix) and "/" not in name and (day := log_date(name)) is not None:
            logs[path] = day
    return logs


def holds_items(agent: str, path: str) -> bool:
    """Whether `path` is the agent's memory.org or one of its daily logs."""
    logs = f"{AGENTS}/{agent}/{LOGS}/"
    return path == memory_path(agent) or (path.startswith(logs) and log_date(path[len(logs):]) is not None)
