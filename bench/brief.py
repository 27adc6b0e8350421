"""`cortex brief` on an agent with 1,000 items and 90 days of logs (three sessions a day), 200 open TODOs among
2,000 headlines (20 tagged with the agent) and 50 headlines changed since its last session: in a process that has
the store open (what a runtime calling the api pays) against loading the agent's memory alone; the store opened and
the agent briefed, as `cortex brief` and the SessionStart hook do it (target <= 300 ms), and the same when every
file's tags are read first (as after a change of every file), against opening it and loading the agent's memory;
and `cortex brief` as a process against `cortex --version` (Python and the CLI starting).

    .venv/bin/python bench/brief.py [--notes N]     (--notes: N headlines of other notes in the store too)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from _common import report, timed
from memory import seeded, write_logs
from postgres import generated_org

import cortex.api as cx
from cortex.orgquery.summaries import SUMMARIES_FILE

AGENT = "small"  # as `seeded` names the agent's items
CORTEX = str(Path(sys.executable).with_name("cortex"))


def median_of(fn, rounds: int = 15) -> float:
    """The median seconds of `rounds` runs of `fn`."""
    return statistics.median(timed(lambda _: fn(), range(rounds)))


def prepared(work: Path, notes: int = 0) -> tuple[Path, Path]:
    """A store over an Org folder holding the agent's 1,000 items, its 90 daily logs, a projects file of 2,000
    headlines (200 open TODOs, 20 tagged with the agent), 50 of them changed since the snapshot before its last
    session, and `notes` headlines of other notes (none of them the agent's)."""
    org, store = work / "org", work / "store"
    write_logs(org / "agents" / AGENT / "logs", 90)
    generated_org(org / "notes", notes)
    headlines = [f"* {'TODO' if n % 10 == 0 else 'DONE' if n % 10 == 1 else ''} Task {n} of the project"
                 f"{'   :' + AGENT + ':' if n % 100 == 0 else ''}\nSome notes on task {n}.\n" for n in range(2000)]
    (org / "projects.org").write_text("".join(headlines))
    with cx.open(store, org) as c:
        c.ingest()
        seeded(c, AGENT, 1000)
        c.snapshot("before the last session")
        later = datetime.now() + timedelta(minutes=1)
        (org / "agents" / AGENT / "logs" / f"{later:%Y-%m-%d}.org").write_text(
            f"* {later:%H:%M} — The last session\n:PROPERTIES:\n:SESSION:  s-last\n:END:\n")
        for n in range(0, 2000, 40):
            headlines[n] = headlines[n].replace("Some notes", "Changed notes")
        (org / "projects.org").write_text("".join(headlines))
        c.ingest()
        briefing = c.brief(AGENT, budget=10_000_000)
        listed = [line for line in briefing.text.splitlines() if line.startswith("- ")]
        assert len(listed) == 1000 + 20 + 50, len(listed)  # items, the TODOs tagged with the agent, the changes
    return store, org


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=0, help="headlines of other notes in the store (default 0)")
    notes = parser.parse_args().notes
    with tempfile.TemporaryDirectory() as tmp:
        store, org = prepared(Path(tmp), notes)
        if notes:
            print(f"with {notes:,} headlines of other notes in the store")
        with cx.open(store, org) as c:
            load = median_of(lambda: c.memory.load_context(AGENT))
            warm = median_of(lambda: c.brief(AGENT))
        report("load_context of 1,000 items (baseline)", load, load)
        report("brief: 1,000 items, 90 logs, 20 TODOs of 200, 50 changes", warm, load)

        def opened():
            with cx.open(store, org) as c:
                c.memory.load_context(AGENT)

        def briefed():
            with cx.open(store, org) as c:
                c.brief(AGENT)

        def first():  # as after a change of every file: each one's tags read (`cortex.orgquery.summaries`)
            (index_folder / SUMMARIES_FILE).unlink()
            briefed()

        with cx.open(store, org) as c:
            index_folder = c._index_folder()
        open_s, brief_s, first_s = median_of(opened, 7), median_of(briefed, 7), median_of(first, 3)
        report("store opened and memory loaded (baseline)", open_s, open_s)
        report("store opened and agent briefed", brief_s, open_s, target=f"({brief_s * 1e3:.0f} ms; target <= 300 ms)")
        report("  the same, every file's tags read first", first_s, open_s)

        version = median_of(lambda: subprocess.run([CORTEX, "--version"], check=True, capture_output=True), 5)
        process = median_of(lambda: subprocess.run([CORTEX, "brief", AGENT, "--store", str(store), "--org", str(org)],
                                                   check=True, capture_output=True), 5)
        report("cortex --version as a process (baseline)", version, version)
        report("cortex brief as a process", process, version)


if __name__ == "__main__":
    main()
