"""A made-up, deterministic Org root of about N headlines, shaped as a team's memory:

    agents/agent-NN/memory.org           100 agents, Facts / Procedures / Learned Patterns (5% of the headlines)
    agents/agent-NN/logs/YYYY-MM-DD.org  a daily log per agent and day over N/1,000 days (1M: 2.7 years): session
                                         entries with items marked for compaction, and conversations in the
                                         conversation layout, a headline per turn (about 55%)
    notes/pNN/notes-NNNN.org             notes of 200 headlines: TODO keywords, priorities, tags, planning dates,
                                         clocks, properties, :ID:s and id links (the rest; bench/query.py's shape)

The same N and seed always write the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path

from query import TODAY, headline

from cortex.memory.conversation.orglog import Utterance, turns_to_org_log
from cortex.memory.items import MemoryItem, render_item
from cortex.memory.layout import ITEM_TYPES, SECTION_TITLES, log_path, memory_path
from cortex.memory.logs import render_entry

AGENTS = 100
NOTES_PER_FILE = 200
WORDS = ("deploy staging cluster migration release train rate limit database backup token invoice customer "
         "retry queue latency cache index schema rollout incident review budget meeting owner design").split()
PEOPLE = ("Dana", "Sam", "Ada", "Lin", "Omar", "Rui", "Ines", "Kofi")


@dataclass
class Corpus:
    """What was written: the root, its headline count, and paths the benchmark edits."""

    root: Path
    headlines: int
    files: int
    agents: list[str]
    note: Path  # a notes file in the middle of the corpus
    log: Path  # a daily log of the last day


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize()


def agent_names() -> list[str]:
    return [f"agent-{a:02}" for a in range(AGENTS)]


def memory_file(rng: random.Random, agent: str, items: int, first_day: date, days: int) -> tuple[str, int]:
    """An agent's memory.org with `items` items spread over its sections, added over `days` from `first_day`, and
    its headline count."""
    parts = [f"#+TITLE: Memory of {agent}\n#+STARTUP: overview\n"]
    for kind in ITEM_TYPES:
        parts.append(f"\n* {SECTION_TITLES[kind]}\n")
        for n in range(items // len(ITEM_TYPES)):
            added = datetime.combine(first_day + timedelta(days=rng.randrange(days)), time(9, rng.randrange(60)))
            text = f"{sentence(rng, 8)} ({kind} {n})."
            parts.append(render_item(MemoryItem(text, id=f"mem-{agent}-{kind}-{n}", added=added,
                                                source=f"session {added:%Y-%m-%d %H:%M}")))
    return "".join(parts), 3 + 3 * (items // len(ITEM_TYPES))


def session_entry(rng: random.Random, day: date, hour: int) -> tuple[str, int]:
    """A session's entry with up to two items marked for compaction, and its headline count."""
    moment = datetime.combine(day, time(hour, rng.randrange(60)))
    entry = render_entry(moment, sentence(rng, 4), sentence(rng, 12) + ".", f"s-{moment:%Y-%m-%d-%H%M}")
    marked = rng.randrange(3)
    for _ in range(marked):
        entry += f"** {sentence(rng, 7)}.  :{rng.choice(('fact', 'procedure', 'pattern'))}:\n"
    return entry, 1 + marked


def conversation_entry(rng: random.Random, day: date, hour: int) -> tuple[str, int]:
    """A conversation of 2-8 turns as the conversation layout keeps it, and its headline count."""
    start = datetime.combine(day, time(hour, rng.randrange(50)))
    person = rng.choice(PEOPLE)
    turns = [Utterance(person if n % 2 == 0 else "Assistant", sentence(rng, rng.randint(5, 20)) + ".",
                       start + timedelta(minutes=n)) for n in range(2 * rng.randint(1, 4))]
    return turns_to_org_log(turns, sentence(rng, 3), session=f"c-{start:%Y%m%d%H%M}-{person}") + "\n", 1 + len(turns)


def daily_log(rng: random.Random, agent: str, day: date) -> tuple[str, int]:
    """An agent's log of `day`: one or two entries, sessions or conversations."""
    parts, count = [f"#+TITLE: {agent} — {day}\n\n"], 0
    for hour in sorted(rng.sample(range(8, 19), rng.choice((1, 1, 2)))):
        text, n = (conversation_entry if rng.random() < 0.6 else session_entry)(rng, day, hour)
        parts.append(text)
        count += n
    return "".join(parts), count


def notes_file(rng: random.Random, first: int, count: int) -> str:
    """`count` notes headlines numbered from `first`, shaped as bench/query.py's."""
    level, parts = 1, ["#+TITLE: Notes\n#+TODO: TODO NEXT | DONE\n\n"]
    for n in range(first, first + count):
        level = rng.randint(1, min(level + 1, 4))
        parts.append(headline(rng, n, level))
    return "".join(parts)


def write(root: Path, path: str, text: str) -> Path:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def generate(root: Path, size: int, seed: int = 35) -> Corpus:
    """Write an Org root of about `size` headlines under `root` (made empty first)."""
    rng = random.Random(seed)
    agents, days = agent_names(), max(5, size // 1000)
    first_day = TODAY - timedelta(days=days)
    count = files = 0
    for agent in agents:
        text, n = memory_file(rng, agent, size // 20 // AGENTS, first_day, days)
        write(root, memory_path(agent), text)
        count, files = count + n, files + 1
    log = None
    for agent in agents:
        for d in range(days):
            text, n = daily_log(rng, agent, first_day + timedelta(days=d + 1))
            log = write(root, log_path(agent, first_day + timedelta(days=d + 1)), text)
            count, files = count + n, files + 1
    notes = []
    while count < size:  # numbered from 0, so that their id links lead to the first thousand :ID:s
        per = min(NOTES_PER_FILE, size - count)
        notes.append(write(root, f"notes/p{len(notes) // 100:02}/notes-{len(notes):04}.org",
                           notes_file(rng, len(notes) * NOTES_PER_FILE, per)))
        count, files = count + per, files + 1
    return Corpus(root, count, files, agents, notes[len(notes) // 2], log)
