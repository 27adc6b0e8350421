"""Start-up of the REPL against plain `hy -c 1`, measured in the same run.

    python bench/startup.py [--runs N]

Prints the median wall time of:
  hy -c 1                                   the baseline
  python -m cortex.repl -e '(+ 1 1)'        non-interactive evaluation (`cortex eval`)
  prompt drawn                              the interactive REPL in a pseudo-terminal, from exec
                                            until the prompt is drawn, on a copy of org/
  key echoed                                ... until a key typed the moment the prompt is drawn
                                            shows after it: the REPL responds
  line editor up                            ... until prompt-toolkit takes over the prompt (its
                                            first cursor-position query)
  ingested                                  ... until the start-up ingest line is shown
and each one's ratio to the baseline (the target is 2x for the prompt), then the CPU time of `hy -c 1` and of
the REPL until its prompt is drawn (Linux): the same comparison, less moved by other work on the machine.
"""

from __future__ import annotations

import argparse
import os
import pty
import resource
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CURSOR_QUERY = b"\x1b[6n"
ESCAPE = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]")  # the terminal control sequences between the text
KEY = b"Q"  # in no control sequence and no ingest line, so seeing it is seeing the echo
# Bytecode is cached as on an ordinary install (some sandboxes set PYTHONDONTWRITEBYTECODE, which
# would recompile cortex's own modules at every start, but not the installed ones `hy` runs).
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
       "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def timed(argv: list[str]) -> float:
    """Seconds to run a command to completion."""
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - started


def cpu_timed(argv: list[str]) -> float:
    """CPU seconds (user and system) to run a command to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=ENV)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def cpu_so_far(pid: int) -> float:
    """CPU seconds a running process has had (Linux's scheduler statistics; NaN elsewhere)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except OSError:
        return float("nan")


def reap(pid: int, seconds: float = 10.0) -> None:
    """Wait for the REPL to leave after its Ctrl-D; kill it if it has not within `seconds` (a key that met a
    redraw of the prompt is lost, and the run would wait for ever)."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def interactive(store: Path, org: Path) -> tuple[float, float, float, float, float]:
    """Seconds until the prompt is drawn, until a key typed then is echoed, until prompt-toolkit is up
    and until the ingest line appears, in a pseudo-terminal; then the CPU seconds the REPL had had when its
    prompt was seen."""
    argv = [sys.executable, "-m", "cortex.repl", "--store", str(store), str(org)]
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, ENV)
    seen, typed_at, prompt_at, echo_at, editor_at, ingested_at, prompt_cpu = b"", None, None, None, None, None, None
    deadline = started + 30
    try:
        # Done once the prompt is drawn again below the ingest line: a key sent while the line is
        # being printed would meet the terminal in cooked mode, where Ctrl-D is not a key.
        while not (ingested_at and echo_at and b"cortex=>" in seen.rpartition(b"ingested")[2]) \
                and time.perf_counter() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                chunk = os.read(fd, 65536)
                seen += chunk
                # Answer cursor-position requests as a terminal would; prompt-toolkit waits up to
                # a second for the answer before it prints above the prompt.
                for _ in range(chunk.count(CURSOR_QUERY)):
                    os.write(fd, b"\x1b[1;1R")
                now = time.perf_counter() - started
                if editor_at is None and CURSOR_QUERY in chunk:
                    editor_at = now
                if prompt_at is None and b"cortex=>" in seen:
                    prompt_at, typed_at, prompt_cpu = now, len(seen), cpu_so_far(pid)
                    os.write(fd, KEY)
                if echo_at is None and typed_at is not None and KEY in ESCAPE.sub(b"", seen[typed_at:]):
                    echo_at = now
                if ingested_at is None and b"ingested" in seen:
                    ingested_at = now
        os.write(fd, b"\x7f\x04")  # rub the key out, then leave
    finally:
        reap(pid)
        os.close(fd)
    if None in (prompt_at, echo_at, editor_at, ingested_at):
        raise RuntimeError(f"the REPL did not come up: {seen[-500:]!r}")
    return prompt_at, echo_at, editor_at, ingested_at, prompt_cpu


def first_answer(store: Path, org: Path, form: str, answer: str) -> float:
    """Seconds from exec until the REPL prints `answer` to `form`, typed the moment its line editor is up (as a
    user types their first question): the REPL's start to its first answer, in a pseudo-terminal."""
    argv = [sys.executable, "-m", "cortex.repl", "--store", str(store), str(org)]
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, ENV)
    seen, typed_at, answered_at = b"", None, None
    deadline = started + 30
    try:
        # Done once the prompt is drawn again below the answer: Ctrl-D must meet the line editor, not cooked mode.
        while not (answered_at and b"cortex=>" in seen[typed_at:].rpartition(answer.encode())[2]) \
                and time.perf_counter() < deadline:
            if select.select([fd], [], [], 0.05)[0]:
                chunk = os.read(fd, 65536)
                seen += chunk
                for _ in range(chunk.count(CURSOR_QUERY)):
                    os.write(fd, b"\x1b[1;1R")
                if typed_at is None and CURSOR_QUERY in chunk:
                    typed_at = len(seen)
                    os.write(fd, form.encode() + b"\r")
                if answered_at is None and typed_at is not None \
                        and answer.encode() in ESCAPE.sub(b"", seen[typed_at:]).rpartition(form.encode())[2]:
                    answered_at = time.perf_counter() - started
        os.write(fd, b"\x04")
    finally:
        reap(pid)
        os.close(fd)
    if answered_at is None:
        raise RuntimeError(f"the REPL did not answer {form}: {seen[-500:]!r}")
    return answered_at


def main() -> None:
    """Measure every start-up interleaved, then print medians and ratios to `hy -c 1`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cortex-startup-"))
    try:
        shutil.copytree(REPO / "org", work / "org", ignore=shutil.ignore_patterns(".cortex"))
        interactive(work / "store", work / "org")  # the first run creates the store; later ones re-open it
        results: dict[str, list[float]] = {"hy -c 1": [], "eval (+ 1 1)": [], "prompt drawn": [], "key echoed": [],
                                           "line editor up": [], "ingested": []}
        cpu: dict[str, list[float]] = {"hy -c 1": [], "prompt drawn": []}
        for _ in range(args.runs):  # interleaved, so machine noise hits every measurement alike
            results["hy -c 1"].append(timed([str(BIN / "hy"), "-c", "1"]))
            results["eval (+ 1 1)"].append(timed([sys.executable, "-m", "cortex.repl", "-e", "(+ 1 1)"]))
            *walls, prompt_cpu = interactive(work / "store", work / "org")
            for name, seconds in zip(("prompt drawn", "key echoed", "line editor up", "ingested"), walls, strict=True):
                results[name].append(seconds)
            cpu["hy -c 1"].append(cpu_timed([str(BIN / "hy"), "-c", "1"]))
            cpu["prompt drawn"].append(prompt_cpu)
    finally:
        shutil.rmtree(work)
    print_ratios(results, "median s", f"   ({args.runs} runs each)")
    print_ratios(cpu, "median CPU s")


def print_ratios(results: dict[str, list[float]], heading: str, note: str = "") -> None:
    """Each measurement's median and its ratio to the first one's (`hy -c 1`)."""
    baseline = statistics.median(next(iter(results.values())))
    print(f"{'':16}{heading:>12}{'vs hy -c 1':>12}{note}")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"{name:16}{median:12.3f}{median / baseline:11.2f}x")

if __name__ == "__main__":
    main()
