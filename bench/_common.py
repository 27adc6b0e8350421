"""Helpers shared by the benchmarks: the corpus, timing, and ratio lines."""

from __future__ import annotations

import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
sys.path.insert(0, str(REPO))


def corpus_files() -> list[Path]:
    """Every Org file of the shared corpus, or exit with a message when it is absent."""
    if not CORPUS.is_dir():
        sys.exit(f"the corpus is not at {CORPUS}")
    return sorted(p for p in CORPUS.rglob("*.org") if "oracle" not in p.parts)


def corpus_copy(target: Path) -> Path:
    """A private copy of the corpus's Org files at `target` (a store makes the folder it tracks a working copy
    of it, which the corpus, read-only, cannot be)."""
    shutil.copytree(CORPUS, target, ignore=shutil.ignore_patterns("oracle", "*.md", "*.sh", "*.py"))
    return target


def examples_copy(target: Path) -> Path:
    """A private copy of the bundled Org examples at `target`, without the working-copy record the tour's
    store left in them."""
    shutil.copytree(REPO / "org", target, ignore=shutil.ignore_patterns(".cortex"))
    return target


def untracked(folder: Path) -> None:
    """Make `folder` an Org folder no store has seen (a new store can then track it): its record goes."""
    shutil.rmtree(folder / ".cortex", ignore_errors=True)


def best_of(fn, repeat: int = 3) -> float:
    """The fastest of `repeat` runs of `fn`, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def timed(function, arguments) -> list[float]:
    """Seconds taken by `function(argument)` for each argument, in order."""
    times = []
    for argument in arguments:
        start = time.perf_counter()
        function(argument)
        times.append(time.perf_counter() - start)
    return times


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p95 of a list of seconds, in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(len(ordered) * 0.95) - 1] * 1e3


def report(name: str, value: float, baseline: float, unit: str = "s", target: str = "") -> None:
    """Print one measurement with its ratio to the baseline measured in the same run."""
    ratio = value / baseline if baseline else float("inf")
    print(f"{name:58} {value:10.4f} {unit}  ratio {ratio:8.3f}  {target}")
