"""Many OS processes (standing in for machines) writing one store at once lose no write, on LMDB and PostgreSQL.

Each writer is a real process: it opens the store, waits at a file barrier so that all write at
once, and prints one line per write once it is committed. A writer that loses a compare-and-swap
re-reads the ref and applies its change again, so every acknowledged write is there at the end,
and `cortex fsck` finds the store sound, even after one writer was killed with SIGKILL mid-write.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest

import cortex.api as cx
from cortex.errors import RefConflict
from cortex.memory.conversation import Identity, read_session
from cortex.retry import retrying

REPO = Path(__file__).resolve().parents[2]
CORTEX = Path(sys.executable).with_name("cortex")

# One writer. argv: store, Org root, barrier folder, name, role, count, role arguments.
# It prints {"write": ...} once each write is committed; count -1 writes until it is killed.
WRITER = """
import itertools, json, sys, time
from pathlib import Path
import cortex.api as cx

store, root, barrier, name, role, count, *args = sys.argv[1:]
count = int(count)

def done(write):
    print(json.dumps({"write": write}), flush=True)

with cx.open(store, root) as c:
    if role == "turns":
        from cortex.memory.conversation import Identity, Turn
        turns = c.conversations("truncation")
    (Path(barrier) / f"ready-{name}").touch()
    while not (Path(barrier) / "go").exists():
        time.sleep(0.001)
    for n in itertools.count() if count < 0 else range(count):
        if role == "ingest":  # a file of its own subfolder: written, then ingested alone
            path = Path(root) / name / f"note-{n}.org"
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"* Note {n} of {name}\\n" + int(args[0]) * f"** Detail of note {n}\\n")
            c.ingest(path)
            done(str(path.relative_to(root)))
        elif role == "sweep":  # the whole Org root, as a person's `cortex ingest` does
            done(str(c.ingest()))
        elif role == "snapshot":
            done(c.snapshot(f"{name} {n}").message)
        elif role == "memory":
            text = f"{name} remembers fact number {n}."
            c.memory.add_item(args[0], "fact", text, source=name)
            done(text)
        elif role == "turns":
            turns.add_turn(Identity("acme", "ada", "shared"), Turn(f"{name} asks {n}", f"answer {n}"))
            done(f"{name} asks {n}")
        elif role == "log":  # a turn of one conversation in an agent's daily log
            from cortex.memory.conversation import Utterance
            said = f"{name} says {n}"
            c.memory.record_session(args[0], [Utterance(name, said, "2026-11-20 16:45")], session="shared")
            done(said)
    if role == "turns":
        turns.close()
"""


@pytest.fixture
def root(store_at, tmp_path, org) -> Path:
    """The Org root the store tracks, ingested once (so no writer's first ingest chooses the root)."""
    with cx.open(store_at, org) as c:
        c.ingest()
    return org


def start(store_at: str, root: Path, barrier: Path, writers: dict[str, tuple]) -> dict[str, subprocess.Popen]:
    """Writer processes by name ({name: (role, count, *args)}), released together once all have opened the store."""
    barrier.mkdir()
    procs = {name: subprocess.Popen([sys.executable, "-c", WRITER, store_at, str(root), str(barrier), name,
                                     *map(str, spec)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
             for name, spec in writers.items()}
    deadline = time.monotonic() + 60
    while not all((barrier / f"ready-{name}").exists() for name in procs):
        failed = {name: p.communicate() for name, p in procs.items() if p.poll() is not None}
        assert not failed and time.monotonic() < deadline, failed
        time.sleep(0.01)
    (barrier / "go").touch()
    return procs


def acknowledged(proc: subprocess.Popen, timeout: float = 60) -> list[str]:
    """The writes a finished writer acknowledged; it must have succeeded."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return writes(out)


def writes(out: str) -> list[str]:
    return [json.loads(line)["write"] for line in out.splitlines()]


def assert_present(c, role: str, written: list[str], agent: str | None = None) -> None:
    """Every acknowledged write of a role is in the store."""
    if role == "ingest":
        tree = c.working()
        missing = [path for path in written if path not in tree.entries]
        assert not missing, f"ingests lost: {missing}"
        assert all(c.show(path) == (c.root / path).read_text() for path in written)
    elif role == "snapshot":
        # Each snapshot's parent is the HEAD it replaced: all of them on one line means no move was lost.
        line, snap = set(), c.resolve("HEAD")
        while snap is not None:
            line.add(snap.message)
            snap = snap.parent and c.store.objects[snap.parent]
        assert set(written) <= line, f"snapshots off HEAD's line: {set(written) - line}"
    elif role == "memory":
        facts = {item.title for item in c.memory.load_context(agent).facts}
        assert set(written) <= facts, f"memory items lost: {set(written) - facts}"
    elif role == "log":  # each turn once, in the order its writer logged them
        said = [u.text for u in read_session(c.show(f"agents/{agent}/logs/2026-11-20.org"), "shared",
                                             date(2026, 11, 20))]
        assert [s for s in said if s in written] == written and len(set(said)) == len(said)


def assert_sound(store_at: str, root: Path) -> None:
    """`cortex fsck` passes, through the API and the CLI."""
    with cx.open(store_at, root) as c:
        assert c.fsck() == []
    done = subprocess.run([str(CORTEX), "fsck", "--store", store_at, "--org", str(root)], capture_output=True,
                          text=True, cwd=REPO)
    assert done.returncode == 0 and done.stdout.startswith("ok:"), done.stdout + done.stderr


def test_concurrent_writers_lose_no_write(store_at, root, tmp_path):
    writers = {
        **{f"ingester{n}": ("ingest", 6, 3) for n in range(3)},
        "sweeper": ("sweep", 6),  # its scope holds every other writer's files
        "snapshotter": ("snapshot", 8),
        "ann": ("memory", 4, "ann"),  # an agent of its own
        "bob-1": ("memory", 4, "bob"), "bob-2": ("memory", 4, "bob"),  # one agent from two processes
        "talker-1": ("turns", 10), "talker-2": ("turns", 10),  # one conversation from two processes
        "Caroline": ("log", 5, "bob"), "Melanie": ("log", 5, "bob"),  # one session of bob's log from two
    }
    procs = start(store_at, root, tmp_path / "barrier", writers)
    written = {name: acknowledged(proc) for name, proc in procs.items()}
    assert all(len(written[name]) == spec[1] for name, spec in writers.items())
    with cx.open(store_at, root) as c:
        for name, (role, _, *args) in writers.items():
            assert_present(c, role, written[name], *args[:1] if role in ("memory", "log") else ())
        turns = c.conversations("truncation")
        said = [turn.user_message for turn in turns.flush(Identity("acme", "ada", "shared"))]
        turns.close()
        assert sorted(said) == sorted(written["talker-1"] + written["talker-2"])
    assert_sound(store_at, root)


def test_a_writer_killed_mid_write_loses_nothing_of_the_others(store_at, root, tmp_path):
    # The victim writes large files without end, so a kill at a random moment most likely lands in a commit.
    writers = {"victim": ("ingest", -1, 3000), "survivor": ("ingest", 12, 3),
               "survivor-memory": ("memory", 4, "ann"), "survivor-snapshots": ("snapshot", 6)}
    procs = start(store_at, root, tmp_path / "barrier", writers)
    victim = procs.pop("victim")
    time.sleep(random.uniform(0.3, 0.8))
    os.kill(victim.pid, signal.SIGKILL)
    out, _ = victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    survived = {name: acknowledged(proc) for name, proc in procs.items()}
    with cx.open(store_at, root) as c:
        assert_present(c, "ingest", writes(out))  # what the victim had acknowledged stays too
        for name, role, *agent in (("survivor", "ingest"), ("survivor-memory", "memory", "ann"),
                                   ("survivor-snapshots", "snapshot")):
            assert len(survived[name]) == writers[name][1]
            assert_present(c, role, survived[name], *agent)
        c.ingest()  # the store takes writes as before, and the victim's unfinished file is ingested as it is
        unfinished = root / "victim" / f"note-{len(writes(out))}.org"
        if unfinished.exists():
            assert c.show(str(unfinished.relative_to(root))) == unfinished.read_text()
    assert_sound(store_at, root)


def test_a_writer_tries_again_for_a_while_not_a_number_of_times():
    losses = iter(range(8))  # the 3 tries writers had were too few for 8 writers

    def race(lost):
        if lost:
            raise RefConflict("working", None, None)
        return "landed"

    assert retrying(lambda: race(next(losses, None) is not None)) == "landed"  # 8 losses, then a win
    started = time.monotonic()
    with pytest.raises(RefConflict):
        retrying(lambda: race(True), within=0.2)
    assert 0.2 <= time.monotonic() - started < 1
