"""How soon a new user's first search answers: right after an ingest of the corpus interrupted while it embeds.

    .venv/bin/python bench/first_answer.py

The baseline is orgparse loading every file of the shared corpus, in this process. Then `cortex ingest` of
the corpus runs in a pseudo-terminal and is sent Ctrl-C (SIGINT) once its embedding bar has moved, and
`cortex search` runs in a new process, as a user would type it: from its start to its answer is the figure
(bar: 3x the parse). The search spends its budget (cortex.cli.search.SEARCH_BUDGET) embedding, then
answers by the vectors there are and by words; a second search goes on from there.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orgparse

from _common import CORPUS, REPO, best_of, corpus_copy, corpus_files, report

QUERY = "how do I export to HTML"
CORTEX = [sys.executable, "-c", "from cortex.cli import main; main()"]
EMBEDDED = re.compile(r"embedding for search\D*?(\d+)/(\d+)")
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def parse_with_orgparse(files: list[Path]) -> None:
    for path in files:
        orgparse.loadi(path.read_text().split("\n"))  # as bench/ingest.py


def interrupted_ingest(store: Path, org: Path) -> tuple[float, str]:
    """Run `cortex ingest` of `org` on a terminal, Ctrl-C it once some items are embedded; (seconds to the
    Ctrl-C, screen)."""
    program, typist = os.openpty()
    start = time.perf_counter()
    ingest = subprocess.Popen([*CORTEX, "ingest", "--store", str(store), "--org", str(org)], cwd=REPO,
                              stdin=program, stdout=program, stderr=program, env={**os.environ, "COLUMNS": "120"})
    os.close(program)
    seen = b""
    try:
        while not ((found := EMBEDDED.findall(screen(seen[-4096:]))) and int(found[-1][0]) > 0):
            if ingest.poll() is not None:
                sys.exit(f"cortex ingest ended before it embedded anything:\n{screen(seen)[-2000:]}")
            if select.select([typist], [], [], 0.1)[0]:
                seen += os.read(typist, 65536)
        until_interrupt = time.perf_counter() - start
        ingest.send_signal(signal.SIGINT)  # what Ctrl-C on its terminal sends
        while select.select([typist], [], [], 5)[0]:
            try:
                chunk = os.read(typist, 65536)
            except OSError:  # the terminal is closed once the process is gone
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if ingest.poll() is None:
            ingest.wait(20)
        os.close(typist)
    if ingest.returncode != 130:
        sys.exit(f"cortex ingest exited {ingest.returncode}, not 130 (interrupted):\n{screen(seen)[-2000:]}")
    return until_interrupt, screen(seen)


def screen(output: bytes) -> str:
    """What a terminal shows of `output`, without its control sequences."""
    return ESCAPES.sub("", output.decode(errors="replace"))


def cold_search(store: Path) -> tuple[float, str]:
    """Seconds from starting `cortex search` in a new process to its answer, and what it said on stderr."""
    start = time.perf_counter()
    done = subprocess.run([*CORTEX, "search", QUERY, "--store", str(store), "-n", "5"], cwd=REPO,
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stderr.strip()


def main() -> None:
    files = corpus_files()
    parse = best_of(lambda: parse_with_orgparse(files), repeat=2)
    print(f"{len(files)} Org files of {CORPUS}; query {QUERY!r}")
    report("orgparse parse of every file (baseline)", parse, parse)
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "store"
        until_interrupt, shown = interrupted_ingest(store, corpus_copy(Path(folder) / "org"))
        kept = re.findall(r"interrupted: (vectors: [\d,]+ of [\d,]+ items)", shown)
        report("cortex ingest until Ctrl-C (parse, index, a first batch)", until_interrupt, parse)
        print(f"  it said: interrupted: {kept[-1] if kept else '?'} kept")
        for name in ("first cortex search after it (a new process)", "second cortex search (a new process)"):
            seconds, said = cold_search(store)
            report(name, seconds, parse, target="bar 3x" if name.startswith("first") else "")
            print(f"  it said: {said or 'nothing: every item had a vector'}")


if __name__ == "__main__":
    main()
