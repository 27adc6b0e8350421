"""Two OS processes writing one identity's conversation in one LMDB store lose no turn, under every strategy."""

import json
import subprocess
import sys
import time
from pathlib import Path

from cortex.backends import open_store
from cortex.hashing import Oid
from cortex.memory.conversation import Deps, Identity, MemoryConfig, open_memory
from cortex.memory.conversation.conformance import JoiningSummarizer, assert_no_turn_lost, make_turn

REPO = Path(__file__).resolve().parents[1]
STRATEGIES = ("none", "truncation", "rolling_summary")
TURNS = 40  # per process and strategy
LIMITS = {"recent_turns": 2, "budget_tokens": 10**6}

# One writer: a handle per strategy over one store, each strategy on an identity of its own;
# it waits at a file barrier so that both processes write at once, then prints its puts' keys.
WRITER = """
import json, sys, time
from pathlib import Path
from cortex.backends import open_store
from cortex.memory.conversation import Deps, Identity, MemoryConfig, open_memory
from cortex.memory.conversation.conformance import JoiningSummarizer, make_turn

folder, writer, count, limits = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
strategies = ("none", "truncation", "rolling_summary")
puts = {s: [] for s in strategies}
with open_store(folder / "store") as store:
    memories = {s: open_memory(MemoryConfig(driver="lmdb", strategy=s, **limits),
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


def start_writers(folder: Path, count: int) -> list[subprocess.Popen]:
    """Two writer processes, released together once both have opened the store."""
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(w), str(count), json.dumps(LIMITS)],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for w in range(2)]
    deadline = time.monotonic() + 60
    while not all((folder / f"ready{w}").exists() for w in range(2)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in writers), \
            [p.communicate() for p in writers if p.poll() is not None]
        time.sleep(0.01)
    (folder / "go").touch()
    return writers


def test_two_processes_lose_no_turn(tmp_path):
    outputs = []
    for writer in start_writers(tmp_path, TURNS):
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        outputs.append(json.loads(out))
    with open_store(tmp_path / "store") as store:
        for strategy in STRATEGIES:
            who = Identity("acme", "ada", strategy)
            memories = [open_memory(MemoryConfig(driver="lmdb", strategy=strategy, **LIMITS),
                                    Deps(store=store, summarizer=JoiningSummarizer())) for _ in range(2)]
            written = [[make_turn(1000 * w + n) for n in range(TURNS)] for w in range(2)]
            puts = [(Oid.from_hex(key), make_turn(n)) for output in outputs for key, n in output[strategy]]
            assert_no_turn_lost(memories, who, written, puts, strategy)
