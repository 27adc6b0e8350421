"""OS processes writing the same identities' conversations in one store lose no turn, under every strategy,
on LMDB (one folder) and on PostgreSQL (one database)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cortex.backends import open_store
from cortex.hashing import Oid
from cortex.memory.conversation import Deps, Identity, MemoryConfig, open_memory
from cortex.memory.conversation.conformance import JoiningSummarizer, assert_no_turn_lost, make_turn

REPO = Path(__file__).resolve().parents[2]
STRATEGIES = ("none", "truncation", "rolling_summary")
WRITERS = 3
TURNS = 40  # per process and strategy
LIMITS = {"recent_turns": 2, "budget_tokens": 10**6}

# One writer: a handle per strategy over one store, each strategy on an identity of its own;
# it waits at a file barrier so that all processes write at once, then prints its puts' keys.
WRITER = """
import json, sys, time
from pathlib import Path
from cortex.backends import open_store
from cortex.memory.conversation import Deps, Identity, MemoryConfig, open_memory
from cortex.memory.conversation.conformance import JoiningSummarizer, make_turn

folder, driver, location = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
writer, count, limits = int(sys.argv[4]), int(sys.argv[5]), json.loads(sys.argv[6])
strategies = ("none", "truncation", "rolling_summary")
puts = {s: [] for s in strategies}
with open_store(location) as store:
    memories = {s: open_memory(MemoryConfig(driver=driver, strategy=s, **limits),
                               Deps(store=store, summarizer=JoiningSummarizer(pause=0.002))) for s in strategies}
    (folder / f"ready{writer}").touch()
    while not (folder / "go").exists():
        time.sleep(0.001)
    for n in range(count):
        for s in strategies:
            who = Identity("acme", "ada", s)
            turn = make_turn(1000 * writer + n)
            if n % 2:
                puts[s].append([memories[s].put(who, turn).hex(), 1000 * writer + n])
            else:
                memories[s].add_turn(who, turn)
    for memory in memories.values():
        memory.close()
print(json.dumps(puts))
"""


@pytest.fixture(params=["lmdb", "postgres"])
def store_at(request, tmp_path) -> tuple[str, str]:
    """(driver, location) of the processes' shared store: an LMDB folder, or a PostgreSQL database."""
    if request.param == "postgres":
        return "postgres", request.getfixturevalue("pg_url")
    return "lmdb", str(tmp_path / "store")


def start_writers(folder: Path, store_at: tuple[str, str], count: int) -> list[subprocess.Popen]:
    """WRITERS writer processes, released together once all have opened the store."""
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(folder), *store_at, str(w), str(count),
                                 json.dumps(LIMITS)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
               for w in range(WRITERS)]
    deadline = time.monotonic() + 60
    while not all((folder / f"ready{w}").exists() for w in range(WRITERS)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in writers), \
            [p.communicate() for p in writers if p.poll() is not None]
        time.sleep(0.01)
    (folder / "go").touch()
    return writers


def test_processes_lose_no_turn(tmp_path, store_at):
    driver, location = store_at
    outputs = []
    for writer in start_writers(tmp_path, store_at, TURNS):
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        outputs.append(json.loads(out))
    with open_store(location) as store:
        for strategy in STRATEGIES:
            who = Identity("acme", "ada", strategy)
            memories = [open_memory(MemoryConfig(driver=driver, strategy=strategy, **LIMITS),
                                    Deps(store=store, summarizer=JoiningSummarizer())) for _ in range(2)]
            written = [[make_turn(1000 * w + n) for n in range(TURNS)] for w in range(WRITERS)]
            puts = [(Oid.from_hex(key), make_turn(n)) for output in outputs for key, n in output[strategy]]
            assert_no_turn_lost(memories, who, written, puts, strategy)
