"""Agent memory: saving one fact at 10k vs 100 items, facts added from many threads at once, a fact superseding
another, an add with its similar check, adding a turn to a conversation in a daily log, compacting 90 daily logs,
searching one agent, and searching current items only (superseded ones left out) vs every item at 10k items; and how
often the similar suggestion and consolidation's suggestions are right on the labelled sets
tests/data/similar_*.json."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta
from itertools import count
from pathlib import Path

from _common import REPO, best_of, percentiles, report, timed, untracked

import cortex.api as cx
import cortex.ingest as ingesting
from cortex.files import write_atomically
from cortex.memory.agents import MemoryContext
from cortex.memory.items import MemoryItem
from cortex.memory.conversation import Utterance
from cortex.memory.conversation.orglog import session_turns
from cortex.memory.retention import RetentionPolicy

NOW = datetime(2026, 11, 21, 10, 0)
NAMES = ["Dana", "Sam", "Ada", "Lin", "Omar", "Rui", "Ines", "Kofi"]
LABELLED = {name: REPO / "tests" / "data" / f"similar_{name}.json" for name in ("infrastructure", "people")}
KINDS = {"duplicate": "merge", "successor": "supersede"}


def seeded(c, agent: str, items: int) -> MemoryContext:
    """An agent whose memory holds `items` facts, procedures and patterns."""
    kinds = ("facts", "procedures", "patterns")
    context = MemoryContext(**{k: [f"{k} item {n} of {agent}: a sentence of ordinary length about something."
                                   for n in range(items) if n % 3 == i] for i, k in enumerate(kinds)})
    return c.memory.save_context(agent, context, now=NOW)


def save_one_fact(c, agents: dict[str, MemoryContext], label: str, rounds: int = 15) -> dict[str, float]:
    """Median time per agent of saving its context with one more fact (merge, atomic write, re-ingest).

    The agents take turns, so a slow moment of the disk (fsync dominates at 100 items) hits them alike.
    """
    times: dict[str, list[float]] = {agent: [] for agent in agents}
    for n in range(rounds):
        for agent, context in agents.items():
            context.facts.append(f"New fact {label} {n} for {agent}.")
            start = time.perf_counter()
            agents[agent] = c.memory.save_context(agent, context, now=NOW)
            times[agent].append(time.perf_counter() - start)
    return {agent: statistics.median(seconds) for agent, seconds in times.items()}


def concurrent_adds(c, threads: int = 20) -> None:
    """Facts added to one agent by `threads` threads at once (their saves are grouped: one write of memory.org,
    one ingest) against the same number added one after another, into a memory of 100 items."""
    seeded(c, "grouped", 100)
    rounds = count()

    def add_all(pool: ThreadPoolExecutor | None) -> None:
        this = next(rounds)
        facts = [f"Fact {n} of round {this}, a sentence of ordinary length." for n in range(threads)]
        add = lambda text: c.memory.add_item("grouped", "fact", text, now=NOW)  # noqa: E731
        list(pool.map(add, facts) if pool else map(add, facts))

    alone = best_of(lambda: add_all(None), repeat=3)
    with ThreadPoolExecutor(threads) as pool:
        together = best_of(lambda: add_all(pool), repeat=3)
    report(f"{threads} facts added from {threads} threads at once vs one after another", together, alone,
           target="(saves grouped: one write, one ingest)")


def supersede_vs_add(c, rounds: int = 15) -> None:
    """A fact that supersedes another (both items rewritten, one commit) against a plain add, into a memory of
    100 items: median of `rounds` each, taking turns."""
    seeded(c, "changing", 100)
    added, superseded = [], []
    previous = c.memory.add_item("changing", "fact", "The database is version 0.", now=NOW).id
    for n in range(1, rounds + 1):
        start = time.perf_counter()
        c.memory.add_item("changing", "fact", f"Plain fact {n}, a sentence of ordinary length.", now=NOW)
        added.append(time.perf_counter() - start)
        start = time.perf_counter()
        previous = c.memory.add_item("changing", "fact", f"The database is version {n}.", supersedes=previous,
                                     now=NOW).id
        superseded.append(time.perf_counter() - start)
    report("memory add of one fact, 100 items (baseline)", statistics.median(added), statistics.median(added))
    report("memory add --supersedes an item, 100 items", statistics.median(superseded), statistics.median(added),
           target="(target <= 1.2)")


def similar_check_cost(c, rounds: int = 15) -> None:
    """An add with its similar check, as `memory add` makes them, against the add alone, at 100 and at 10k items
    (median of `rounds` each, taking turns), the items' vectors known (kept in memory by the session after a first
    check, or a search): a check embeds the new text. And the first check at 10k items, which embeds every fact
    once."""
    seeded(c, "checked", 100)
    start = time.perf_counter()
    c.memory.similar("large", "fact", "The first check embeds every fact.")
    first = time.perf_counter() - start
    c.memory.similar("checked", "fact", "The first check embeds every fact.")
    for agent, size in (("checked", "100"), ("large", "10k")):
        times: dict[bool, list[float]] = {False: [], True: []}
        for n in range(rounds):
            for check in (False, True):
                text = f"Fact {n} {check}: a sentence of ordinary length about deploys and the staging cluster."
                start = time.perf_counter()
                c.memory.add_item(agent, "fact", text, now=NOW)
                if check:
                    c.memory.similar(agent, "fact", text)
                times[check].append(time.perf_counter() - start)
        alone, checked = statistics.median(times[False]), statistics.median(times[True])
        report(f"memory add of one fact, {size} items (baseline)", alone, alone)
        report(f"memory add and its similar check, {size} items", checked, alone,
               target="(the new text embedded, the others' vectors in memory)")
        if size == "10k":
            report("the first similar check at 10k items (embeds 3.3k facts)", first, alone, target="(once per store)")


def labelled_quality(c) -> None:
    """Precision and recall on the labelled sets: of the similar suggestion (each newer text checked against a
    memory of every older one), and of consolidation's suggestions (a memory of every older text, then every
    newer one a month later). A suggestion is right on a pair labelled duplicate (merge) or successor
    (supersede), older to newer; every other suggestion, across pairs too, is wrong."""
    for name, path in LABELLED.items():
        pairs = json.loads(path.read_text())["pairs"]
        agent, positives = f"labelled-{name}", sum(p["label"] != "unrelated" for p in pairs)
        older = [MemoryItem(p["old"], added=NOW - timedelta(days=60)) for p in pairs]
        c.memory.save_context(agent, MemoryContext(facts=older), now=NOW - timedelta(days=60))
        partner = {p["new"]: p for p in pairs}
        suggested = right = 0
        for p in pairs:
            found = c.memory.similar(agent, "fact", p["new"])
            suggested += len(found)
            right += p["label"] != "unrelated" and p["old"] in [item.text for item, _ in found]
        print(f"similar suggestion on {name}: precision {right / max(suggested, 1):.2f} ({right} of {suggested} "
              f"suggested), recall {right / positives:.2f} (of {positives} related pairs)")
        newer = [MemoryItem(p["new"], added=NOW - timedelta(days=30)) for p in pairs]
        c.memory.save_context(agent, MemoryContext(facts=older + newer), now=NOW - timedelta(days=30))
        start = time.perf_counter()
        suggestions = c.memory.consolidate(agent).suggestions
        seconds = time.perf_counter() - start
        labels = [partner.get(p.newer[1].text) for p in suggestions]
        paired = [p for p, label in zip(suggestions, labels) if label and label["old"] == p.older[1].text
                  and label["label"] != "unrelated"]
        kinds = [p for p in paired if KINDS[partner[p.newer[1].text]["label"]] == p.kind]
        merges = [p for p in suggestions if p.kind == "merge"]
        print(f"consolidation on {name}: {len(suggestions)} suggestions in {seconds:.2f} s; precision "
              f"{len(kinds) / max(len(suggestions), 1):.2f} (right pair and kind), "
              f"{len(paired) / max(len(suggestions), 1):.2f} (right pair); recall {len(kinds) / positives:.2f}; "
              f"merges that are duplicates {sum(p in paired for p in merges)} of {len(merges)}")


def file_write(path: Path, rounds: int = 15) -> float:
    """Median time of writing a file's own bytes back atomically, as a save does."""
    data = path.read_bytes()
    return statistics.median(timed(lambda _: write_atomically(path, data), range(rounds)))


def save_beside_logs(c, org: Path, context: MemoryContext, baseline: float) -> MemoryContext:
    """A save in an agent with 90 daily logs of a day's conversation each, against the same agent without them."""
    logs = org / "agents/small/logs"
    write_logs(logs, 90)
    for log in logs.iterdir():
        log.write_text(log.read_text() + ("A line of the conversation that went on for a while. " * 20 + "\n") * 40)
    kb = sum(log.stat().st_size for log in logs.iterdir()) / 90 / 1e3
    time.sleep(ingesting.RACY_SECONDS)  # logs are old by the time an agent saves again, so a stat shows them unchanged
    c.ingest(logs)
    seconds = save_one_fact(c, {"small": context}, "beside logs")
    report(f"save_context of one fact beside 90 logs of {kb:.0f} kB, 100 items", seconds["small"], baseline,
           target="(vs none)")
    return c.memory.load_context("small")


def write_logs(folder: Path, days: int) -> None:
    """`days` daily logs ending today, three sessions each, two marked items per session."""
    folder.mkdir(parents=True, exist_ok=True)
    for back in range(days):
        day = date(2026, 11, 21) - timedelta(days=back)
        entries = []
        for hour in (9, 13, 17):
            entries.append(
                f"* {hour:02}:00 — Session {back}-{hour}\n:PROPERTIES:\n:SESSION:  s-{day}-{hour:02}00\n:END:\n"
                f"Talked about topic {back} and follow-up {hour}; nothing else of note.\n"
                f"** The on-call engineer of team {back}-{hour} is {NAMES[(back + hour) % len(NAMES)]}.  :fact:\n"
                f"** Team {back}-{hour} has its code review at {hour}:00 on {day:%A}s.  :pattern:\n")
        (folder / f"{day}.org").write_text(f"#+TITLE: logger — {day}\n\n" + "\n".join(entries))


def conversation_turns(c, org: Path, sessions: int = 100, turns: int = 20, rounds: int = 15) -> None:
    """Adding one turn to a conversation in the conversation layout, in a day's log of `sessions` sessions of `turns`
    turns: to the last session's entry (an append), to the first one's (an insert before all the others) and as a
    new session's first, against appending a session entry with save_context to such a log (the baseline: the same
    write path, an append)."""
    for agent in ("talker", "saver"):
        log = org / f"agents/{agent}/logs/{NOW.date()}.org"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_bytes(seeded_conversations(sessions, turns))
    kb = log.stat().st_size / 1e3
    time.sleep(ingesting.RACY_SECONDS)
    c.ingest(org / "agents")
    said = count()

    def turn(session: str) -> float:
        utterance = Utterance("Caroline", f"Turn {next(said)}: a sentence of ordinary length about the weekend.",
                              NOW)
        start = time.perf_counter()
        c.memory.record_session("talker", [utterance], session=session)
        return time.perf_counter() - start

    def entry() -> float:
        start = time.perf_counter()
        c.memory.save_context("saver", MemoryContext(summary="Talked about the weekend.", title="Chat"), now=NOW)
        return time.perf_counter() - start

    times: dict[str, list[float]] = {"entry": [], "last": [], "first": [], "new": []}
    for n in range(rounds):  # in turns, so a slow moment of the disk hits them alike
        times["entry"].append(entry())
        times["new"].append(turn(f"s-new-{n}"))
        times["last"].append(turn(f"s-new-{n}"))  # the entry just started, the last in the log
        times["first"].append(turn("s-0"))
    entry_s, last_s, first_s, new_s = (statistics.median(times[k]) for k in ("entry", "last", "first", "new"))
    report(f"save_context appends a session entry to a {kb:.0f} kB log (baseline)", entry_s, entry_s)
    report("record_session adds a turn to the last session's entry", last_s, entry_s, target="(target ~1)")
    report(f"record_session adds a turn to the first of {sessions} sessions' entries", first_s, entry_s,
           target="(an insert: the log hashed whole)")
    report("record_session starts a new session's entry with a turn", new_s, entry_s,
           target="(every :SESSION: looked at)")



def seeded_conversations(sessions: int, turns: int) -> bytes:
    """A day's log of `sessions` sessions of two people and `turns` turns each, in the conversation layout."""
    data = None
    for n in range(sessions):
        said = [Utterance(("Caroline", "Melanie")[k % 2], f"Turn {k} of session {n}: a sentence of ordinary length "
                          "about the support group and the weekend.", NOW.replace(hour=n % 24)) for k in range(turns)]
        data = session_turns(said, session=f"s-{n}", title=f"Session {n}")[0].applied(data, "talker")
    return data


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-memory-"))
    org = work / "org"
    org.mkdir()
    with cx.open(work / "store", org) as c:
        c.ingest()
        small = seeded(c, "small", 100)
        large = seeded(c, "large", 10_000)
        size = (org / "agents/large/memory.org").stat().st_size
        print(f"memory.org: 100 items {(org / 'agents/small/memory.org').stat().st_size / 1e3:.1f} kB, "
              f"10k items {size / 1e6:.2f} MB")
        saves = {"small": small, "large": large}
        seconds = save_one_fact(c, saves, "alone")
        small, large = saves["small"], saves["large"]
        report("save_context + re-index of one new fact, 100 items (baseline)", seconds["small"], seconds["small"])
        report("save_context + re-index of one new fact, 10k items", seconds["large"], seconds["small"],
               target="(target ~1; median of 15)")
        writes = {agent: file_write(org / f"agents/{agent}/memory.org") for agent in saves}
        report("of which the atomic write of memory.org alone, 10k vs 100 items", writes["large"], writes["small"],
               target="(temporary file, fsync, rename: the floor)")
        small = save_beside_logs(c, org, small, seconds["small"])
        concurrent_adds(c)
        supersede_vs_add(c)
        similar_check_cost(c)
        labelled_quality(c)
        conversation_turns(c, org)

        logs = org / "agents/logger/logs"
        write_logs(logs, 90)

        cold = work / "cold" / "agents/logger/logs"  # the logs in a folder of their own: a new store tracks it
        shutil.copytree(logs, cold)

        def cold_ingest():
            with cx.open(work / "store-logs", work / "cold") as fresh:
                fresh.ingest()
            shutil.rmtree(work / "store-logs")
            untracked(work / "cold")

        ingest_s = best_of(cold_ingest, repeat=3)
        report("cold ingest of 90 daily logs (baseline)", ingest_s, ingest_s)
        c.ingest(logs)
        start = time.perf_counter()
        result = c.memory.compact("logger", RetentionPolicy(timedelta(days=30)), now=NOW)
        compact_s = time.perf_counter() - start
        chained = sum(bool(item.validity.replaces) for _, item in result.moved)
        report(f"compact 90 logs ({len(result.moved)} items moved, {chained} superseding, {len(result.near)} near "
               f"duplicates, {len(result.deleted_logs)} logs deleted)", compact_s, ingest_s)
        search_latency(c, small, large)
        validity_filter(c, org)
    shutil.rmtree(work)


def search_latency(c, small: MemoryContext, large: MemoryContext) -> None:
    """Query latency within one agent at 10k items, and a save whose new fact the next search finds."""
    queries = [f"{kind} item {n} ordinary sentence" for kind in ("facts", "patterns") for n in range(10)]
    start = time.perf_counter()
    c.search("warm up")  # the first search embeds every item once
    print(f"search index built over {len(c.headlines())} headlines in {time.perf_counter() - start:.1f} s")

    everything = percentiles(timed(lambda q: c.search(q, limit=10), queries))
    one_agent = percentiles(timed(lambda q: c.memory.search("large", q, limit=10), queries))
    print(f"search p50/p95 over the whole store (baseline): {everything[0]:.1f} / {everything[1]:.1f} ms")
    report("search p50 within one agent at 10k items vs the whole store", one_agent[0] / 1e3,
           everything[0] / 1e3)

    def save_and_find(agent: str, context: MemoryContext) -> float:
        context = c.memory.load_context(agent)
        context.facts.append(f"The searchable fact of {agent} is zebra-{len(context)}.")
        start = time.perf_counter()
        c.memory.save_context(agent, context, now=NOW)
        found = c.memory.search(agent, f"zebra-{len(context) - 1}", limit=1)
        assert found and f"zebra-{len(context) - 1}" in found[0].item.text
        return time.perf_counter() - start

    small_s = min(save_and_find("small", small) for _ in range(3))
    report("save_context + search finds the new fact, 100 items (baseline)", small_s, small_s)
    large_s = min(save_and_find("large", large) for _ in range(3))
    report("save_context + search finds the new fact, 10k items", large_s, small_s, target="(target ~1)")


def validity_filter(c, org: Path, rounds: int = 5) -> None:
    """Search with the validity filter (the default: current items only) vs without it (`all=True`), at 10k items
    of which every tenth was superseded: over the whole store and within the agent; and the share of the current
    searches' results that are current. The agent's items are the large one's texts, whose vectors are cached."""
    text = (org / "agents/large/memory.org").read_text().replace("mem-large-", "mem-versions-")
    ids = re.findall(r"^:ID: +(\S+)$", text, re.M)
    replaced = {old: new for old, new in zip(ids[::10], ids[1::10])}
    text = re.sub(r"^:ID: +(\S+)\n", lambda m: m[0] + (
        f":INVALID_AT: [2026-11-20 Fri]\n:SUPERSEDED_BY: {replaced[m[1]]}\n" if m[1] in replaced else ""), text,
                  flags=re.M)
    folder = org / "agents/versions"
    folder.mkdir()
    (folder / "memory.org").write_text(text)
    c.ingest(folder)
    queries = [f"{kind} item {n} ordinary sentence" for kind in ("facts", "patterns") for n in range(10)]
    for scope in ({}, {"agent": "versions"}):
        for every in (False, True):
            c.search(queries[0], all=every, **scope)  # the filters' masks and weights made once
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(rounds):  # in turns, so a slow moment of the machine hits both alike
            for every in (True, False):
                times[every] += timed(lambda q: c.search(q, limit=10, all=every, **scope), queries)
        where = "within the agent" if scope else "over the whole store"
        report(f"search of current items vs every item, {where} (1k of 10k superseded)",
               statistics.median(times[False]), statistics.median(times[True]), target="(target <= 1.1)")
    found = [r for q in queries for r in c.search(q, limit=10, agent="versions")]
    current = sum(r.id not in replaced for r in found)
    print(f"current-only searches: {current} of {len(found)} results current ({current / len(found):.0%}; goal 100%)")


if __name__ == "__main__":
    main()
