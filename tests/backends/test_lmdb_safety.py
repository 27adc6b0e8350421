"""Store safety on real LMDB files and real OS processes: compaction never swaps the file under
another process, damage and a full disk are one clear line, killed compactions leave no copies."""

from __future__ import annotations

import itertools
import os
import random
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cortex import api
from cortex.backends import StoreBusy, StoreDamaged, StoreFull, open_store
from cortex.backends import lmdb as lmdb_engine
from cortex.errors import IntegrityError, UserError
from cortex.objects import Headline

try:
    from cortex.history import fsck
except ImportError:  # fsck lived in cortex.query before history grew it
    from cortex.query import fsck

PSIZE = 4096
P_LEAF = 0x02
FSCK_IMPORT = """
try:
    from cortex.history import fsck
except ImportError:
    from cortex.query import fsck
"""

# A process that opens the store (through the engine or the api), says "ready", then idles
# until told on stdin to check, write, compact or exit; each answer is one line.
HOLDER = FSCK_IMPORT + """
import sys
from cortex.backends import StoreBusy, open_store
from cortex.objects import Headline
path, how, org = sys.argv[1:4]
if how == "api":
    from cortex import api
    cx = api.open(path, org)
    store = cx.store
else:
    store = open_store(path)
print("ready", flush=True)
for n, line in enumerate(sys.stdin):
    word = line.strip()
    if word == "check":
        print(len(store.objects), len(fsck(store)), flush=True)
    elif word == "write":
        print(store.objects.add(Headline(level=1, title=f"child {n}", raw=f"* child {n}\\n")).hex(), flush=True)
    elif word == "compact":
        try:
            store.engine.compact()
            print("compacted", flush=True)
        except StoreBusy as exc:
            print("refused", *exc.pids, flush=True)
    elif word == "exit":
        break
store.close()
"""

# A process that holds the store alone for a while, compacts it, and prints the compacted size.
ALONE = """
import sys, time
from cortex.backends import open_store
store = open_store(sys.argv[1])
with store.engine.exclusively():
    print("alone", flush=True)
    time.sleep(float(sys.argv[2]))
    store.engine.compact()
    print(store.engine.size_bytes(), flush=True)
store.close()
"""


class Child:
    """A real OS process holding the store open, driven one line at a time."""

    def __init__(self, script: str, *args):
        self.proc = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def say(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def hear(self, timeout: float = 60) -> str:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            raise AssertionError(f"child {self.pid} said nothing: {self.proc.stderr.read()}")
        return line.strip()

    def ask(self, line: str) -> str:
        self.say(line)
        return self.hear()

    def exit(self) -> None:
        self.say("exit")
        assert self.proc.wait(timeout=60) == 0, self.proc.stderr.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def children():
    """Start children with `children(script, *args)`; any still running at the end are killed."""
    started: list[Child] = []

    def start(script: str, *args) -> Child:
        started.append(Child(script, *args))
        return started[-1]

    yield start
    for child in started:
        child.kill()


def _org(folder: Path, files: int = 30, headlines: int = 40) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        body = "".join(f"* Heading {f}-{h} :t{h % 4}:\n:PROPERTIES:\n:ID: id-{f}-{h}\n:END:\n"
                       + "Some words of body text. " * (h % 6) + "\n" for h in range(headlines))
        (folder / f"notes-{f}.org").write_text(body)
    return folder


@pytest.fixture
def org(tmp_path):
    return _org(tmp_path / "org")


@pytest.fixture
def store_dir(tmp_path, org):
    """A store with an ingested Org folder, a snapshot, and free pages for compaction to give back."""
    path = tmp_path / "store"
    with api.open(path, org) as cx:
        cx.ingest()
        cx.snapshot("first")
    with open_store(path) as store:
        junk = store.table("junk")
        junk.update({b"%d" % n: os.urandom(900) for n in range(600)})
        junk.clear()
    return path


def _state(store) -> tuple:
    """What must survive: how many objects, and where every ref points."""
    return len(store.objects), {name: store.refs.get(name) for name in store.refs.names()}


def _assert_intact(store, state) -> None:
    assert _state(store) == state
    assert fsck(store) == []


# --- A: compaction never swaps the data file under another process -------------------------


def test_compaction_is_refused_while_another_process_idly_holds_the_store(store_dir, org, children):
    with open_store(store_dir) as store:
        state = _state(store)
        before = (store_dir / "data.mdb").stat().st_size
        for trial in range(20):
            child = children(HOLDER, store_dir, "api" if trial % 2 else "engine", org)
            assert child.hear() == "ready"
            with pytest.raises(StoreBusy) as refused:
                store.engine.compact()
            message = str(refused.value)
            assert f"pid {child.pid} (" in message and "python" in message and str(store_dir) in message
            assert refused.value.pids == (child.pid,)
            _assert_intact(store, state)
            assert child.ask("check") == f"{state[0]} 0"  # the child's view is whole too
            written = bytes.fromhex(child.ask("write"))  # and it still writes to the same file as we read
            assert written in store.objects
            state = _state(store)
            child.exit()
            assert (store_dir / "data.mdb").stat().st_size == before
        store.engine.compact()  # everyone else is gone
        _assert_intact(store, state)
        assert (store_dir / "data.mdb").stat().st_size < before
    with open_store(store_dir) as store:
        _assert_intact(store, state)


def test_a_refused_compaction_keeps_this_process_hold(store_dir, children):
    with open_store(store_dir) as store:
        state = _state(store)
        first = children(HOLDER, store_dir, "engine", "-")
        assert first.hear() == "ready"
        with pytest.raises(StoreBusy):
            store.engine.compact()
        first.exit()
        # Linux dropped our shared lock when the exclusive one was refused: it must be back.
        second = children(HOLDER, store_dir, "engine", "-")
        assert second.hear() == "ready"
        assert second.ask("compact") == f"refused {os.getpid()}"
        second.exit()
        _assert_intact(store, state)


def test_two_processes_compacting_at_once_both_refuse(store_dir, children):
    with open_store(store_dir) as store:
        state = _state(store)
    a, b = children(HOLDER, store_dir, "engine", "-"), children(HOLDER, store_dir, "engine", "-")
    assert a.hear() == b.hear() == "ready"
    for _ in range(15):
        a.say("compact")
        b.say("compact")
        assert (a.hear(), b.hear()) == (f"refused {b.pid}", f"refused {a.pid}")
    assert a.ask("check") == b.ask("check") == f"{state[0]} 0"
    a.exit()
    b.exit()
    with open_store(store_dir) as store:
        _assert_intact(store, state)


def test_exclusively_is_refused_while_another_process_holds_the_store(store_dir, children):
    with open_store(store_dir) as store:
        child = children(HOLDER, store_dir, "engine", "-")
        assert child.hear() == "ready"
        with pytest.raises(StoreBusy, match=f"pid {child.pid}"):
            with store.engine.exclusively():
                raise AssertionError("held the store alone while another process had it open")
        child.exit()
        with store.engine.exclusively():  # a whole hard purge runs in one such block
            store.objects.add(Headline(level=1, title="purge", raw="* purge\n"))
            store.engine.compact()
        assert fsck(store) == []


def test_opening_waits_for_a_compaction_then_sees_the_compacted_store(store_dir, children):
    with open_store(store_dir) as store:
        state = _state(store)
        before = store.engine.size_bytes()
    child = children(ALONE, store_dir, 1.0)
    assert child.hear() == "alone"
    start = time.monotonic()
    with open_store(store_dir) as store:
        waited = time.monotonic() - start
        compacted = int(child.hear())
        assert waited > 0.5
        assert compacted < before and store.engine.size_bytes() == compacted
        _assert_intact(store, state)
    assert child.proc.wait(timeout=60) == 0


def test_opening_gives_up_on_a_process_holding_the_store_alone_for_too_long(store_dir, children, monkeypatch):
    monkeypatch.setattr(lmdb_engine, "OPEN_WAIT_SECONDS", 0.3)
    child = children(ALONE, store_dir, 30)
    assert child.hear() == "alone"
    with pytest.raises(StoreBusy, match=f"pid {child.pid} .*held the store alone"):
        open_store(store_dir)
    child.kill()
    open_store(store_dir).close()


# --- B: damage is one clear line --------------------------------------------------------------


def _cortex(*args) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("cortex")
    command = [str(script)] if script.exists() else [sys.executable, "-c", "from cortex.cli.app import main; main()"]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, timeout=120)


def _one_line(result: subprocess.CompletedProcess) -> str:
    """The single line a failed command printed (exit 1: no signal, no traceback)."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("size", [lambda n: n // 2, lambda n: n - PSIZE, lambda n: 100, lambda n: 0],
                         ids=["half", "last-page", "100-bytes", "empty"])
def test_truncated_data_file_is_one_line(store_dir, org, size):
    data = store_dir / "data.mdb"
    full = data.stat().st_size
    os.truncate(data, size(full))
    line = _one_line(_cortex("stats", "--store", store_dir, "--org", org))
    assert str(store_dir) in line and "damaged" in line and "backup" in line
    if size(full) > 2 * PSIZE:
        assert "truncated" in line and f"{size(full):,} bytes" in line and f"{full:,} expected" in line
    with pytest.raises(StoreDamaged):
        open_store(store_dir)
    assert data.stat().st_size == size(full)  # LMDB did not start a new, empty store in it


def _garble(data: Path, pages, seed: int = 7) -> None:
    """Overwrite pages with random bytes that still claim to be B-tree leaves.

    A page claiming no B-tree type makes LMDB abort the process when a scan steps onto it (a
    failed assertion no error can report); `verify()` is what finds those, see below.
    """
    rng = random.Random(seed)
    with open(data, "r+b") as f:
        for page in pages:
            garbage = bytearray(rng.randbytes(PSIZE))
            garbage[10:12] = P_LEAF.to_bytes(2, sys.byteorder)  # the page header's flags
            f.seek(page * PSIZE)
            f.write(garbage)


@pytest.fixture
def dense_store(store_dir):
    """The store compacted, so that every page after the two meta pages is in use."""
    with open_store(store_dir) as store:
        store.engine.compact()
        pages = store.engine.size_bytes() // PSIZE
    return store_dir, pages


def test_garbage_in_btree_pages_is_one_line(dense_store, org):
    store_dir, pages = dense_store
    _garble(store_dir / "data.mdb", range(pages // 3, 2 * pages // 3))
    line = _one_line(_cortex("stats", "--store", store_dir, "--org", org))
    assert line.startswith(f"cortex: {store_dir}: store damaged (") and "cortex fsck" in line
    with open_store(store_dir) as store:
        assert any("page" in problem for problem in store.engine.verify())


def test_garbage_in_every_page_is_one_line_at_open(dense_store, org):
    store_dir, pages = dense_store
    _garble(store_dir / "data.mdb", range(2, pages))
    line = _one_line(_cortex("stats", "--store", store_dir, "--org", org))
    assert f"{store_dir}: store damaged" in line
    with pytest.raises(IntegrityError):
        open_store(store_dir)


def test_verify_finds_a_zeroed_page_without_crashing(dense_store, org):
    store_dir, pages = dense_store
    with open(store_dir / "data.mdb", "r+b") as f:
        f.seek(pages // 2 * PSIZE)
        f.write(bytes(PSIZE))
    with open_store(store_dir) as store:
        assert store.engine.verify()
    result = _cortex("fsck", "--store", store_dir, "--org", org)  # fsck verifies before it walks the B-trees
    assert result.returncode == 1 and "damaged data file" in result.stderr and "Traceback" not in result.stderr


# --- C: a full disk is one clear line and loses nothing ---------------------------------------


def _big(n: int, i: int) -> Headline:
    return Headline(level=1, title=f"{n}-{i}", raw=f"* {n}-{i}\n" + "x" * 6000)


def test_full_disk_is_one_clear_error_and_loses_nothing(small_disk, tmp_path):
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\1" * (256 << 10))
    path = small_disk / "store"
    acknowledged: list[Headline] = []
    with open_store(path) as store:
        with pytest.raises(StoreFull) as full:
            for n in itertools.count():
                batch = [_big(n, i) for i in range(4)]
                head = store.refs.get("HEAD")
                store.transact(lambda: (store.objects.add_many(batch),
                                        store.refs.set_if_equals("HEAD", batch[0].oid, head)))
                acknowledged += batch
        message = str(full.value)
        assert isinstance(full.value, UserError) and acknowledged
        assert message.startswith(f"{path}: the disk holding the store is full (")
        assert "free" in message and "rolled back, nothing was lost" in message
    with open_store(path) as store:  # opens on the full disk, with every acknowledged commit
        assert len(store.objects) == len(acknowledged) and all(o.oid in store.objects for o in acknowledged)
        assert store.refs.get("HEAD") == acknowledged[-4].oid
        assert fsck(store) == []
        with pytest.raises(StoreFull):
            store.objects.add_many([_big(-1, i) for i in range(4)])
        with pytest.raises(StoreFull, match="compaction was abandoned, the store is unchanged"):
            store.engine.compact()
        assert list(path.glob(".compact-*")) == [] and fsck(store) == []
        ballast.unlink()
        store.objects.add_many([_big(-1, i) for i in range(4)])  # room again: writes work
        assert len(store.objects) == len(acknowledged) + 4
    with open_store(path) as store:
        assert len(store.objects) == len(acknowledged) + 4 and fsck(store) == []


def test_a_new_store_on_a_full_disk_is_one_line(small_disk, tmp_path):
    fd = os.open(small_disk / "ballast", os.O_WRONLY | os.O_CREAT)
    with pytest.raises(OSError, match="No space"):  # fill the disk to the last block
        while True:
            os.write(fd, b"\1" * PSIZE)
    os.close(fd)
    line = _one_line(_cortex("ingest", "--store", small_disk / "new", "--org", _org(tmp_path / "org", 1, 1)))
    assert "disk holding the store is full" in line


# --- D: a killed compaction leaves no scratch copy behind -------------------------------------


KILLED_COMPACTION = """
import os, signal, sys
from cortex.backends import open_store
store = open_store(sys.argv[1])
os.replace = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)  # die just before the swap
store.engine.compact()
"""


def test_scratch_of_a_killed_compaction_is_removed_on_open(store_dir):
    with open_store(store_dir) as store:
        state = _state(store)
    killed = subprocess.run([sys.executable, "-c", KILLED_COMPACTION, str(store_dir)], capture_output=True)
    assert killed.returncode == -9, killed.stderr
    assert list(store_dir.glob(".compact-*/data.mdb"))  # a whole copy was left behind
    with open_store(store_dir) as store:
        assert list(store_dir.glob(".compact-*")) == []
        _assert_intact(store, state)
