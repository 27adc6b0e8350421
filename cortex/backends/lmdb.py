"""The LMDB engine: one environment per store folder, a growing map, thread-bound transactions.

Processes share a store folder through two flock files in it. Every process that has the store
open holds `OPEN_LOCK` shared, from before it maps the data file until it has unmapped it;
compaction holds it exclusively, so the data file is never replaced under a process that maps
it. `GATE_LOCK` is held briefly around changing that hold (Linux drops a shared flock before it
tries for an exclusive one) and around creating the data file.

LMDB's own errors never reach the user raw: damage becomes `StoreDamaged`, a full disk
`StoreFull`, both one clear line in the CLI.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import lmdb

from .base import ENGINE_TABLES, Engine, NoStore, StoreBusy, StoreDamaged, StoreFull, StoreLocked
from .group import GroupCommit, Member

T = TypeVar("T")

INITIAL_MAP_SIZE = 256 << 20
OPEN_LOCK, GATE_LOCK = "cortex-open.lock", "cortex-gate.lock"
SCRATCH_PREFIX = ".compact-"
OPEN_WAIT_SECONDS = 60.0  # how long opening waits for a process that holds the store alone (compacting it)
LOCK_TABLE_SIZE = 8192  # the size LMDB gives lock.mdb for its default 126 readers
LOW_SPACE = 64 << 20  # below this much free space, a failed write is blamed on a full disk
# Errors that mean the data file holds bytes LMDB did not write. Two more join them on reads only:
# BadValsizeError (on a write it means "key too long") and BadTxnError (a read transaction that
# already hit damage refuses every later read).
DAMAGE_ERRORS = tuple(getattr(lmdb, name) for name in (  # the last two are new in py-lmdb 2
    "CorruptedError", "PageNotFoundError", "InvalidError", "PanicError", "IncompatibleError", "BadChecksumError",
    "ProblemError") if hasattr(lmdb, name))
READ_DAMAGE_ERRORS = (*DAMAGE_ERRORS, lmdb.BadValsizeError, lmdb.BadTxnError)
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO)  # LMDB reports a short write as EIO
ROLLED_BACK = "the transaction was rolled back, nothing was lost"
ABANDONED = "the compaction was abandoned, the store is unchanged"

_open_envs: dict[str, "LmdbEngine"] = {}
_open_lock = threading.Lock()

__all__ = ["LmdbEngine", "StoreBusy", "StoreDamaged", "StoreFull", "StoreLocked"]


class LmdbEngine(Engine):
    """Tables as LMDB sub-databases; writes go through `transact`, which grows the map when full."""

    def __init__(self, location, map_size: int = INITIAL_MAP_SIZE, create: bool = True):
        self.path = Path(location).expanduser().resolve()
        self.location = str(self.path)
        self._closed = True  # until everything below is open
        if not create and not (self.path / "data.mdb").is_file():
            raise NoStore(f"{self.path}: no store here")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._open_failure(exc) from None
        with _open_lock:
            if str(self.path) in _open_envs:
                raise StoreLocked(f"{self.path}: this store is already open in this process")
            _open_envs[str(self.path)] = self
        try:
            self._hold = _Hold(self.path)
        except OSError as exc:  # a read-only folder, say
            self._unregister()
            raise self._open_failure(exc) from None
        except BaseException:
            self._unregister()
            raise
        try:
            _remove_scratch(self.path)  # our shared hold proves no compaction runs: its leftovers are garbage
            self.env, self._dbs = self._open_env(map_size)
        except BaseException:
            self._hold.release()
            self._unregister()
            raise
        self._local = threading.local()
        self._group = GroupCommit(self._commit_group)
        self._exclusive, self._exclusive_lock = 0, threading.Lock()
        self._closed = False

    # --- opening -------------------------------------------------------------------------

    def _open_env(self, map_size: int) -> tuple[lmdb.Environment, dict]:
        """Map the data file and its tables; the caller holds the store."""
        data = self.path / "data.mdb"
        if _file_size(data):
            return self._map(map_size)
        # LMDB silently starts an empty store in a missing or empty data file: create it under the
        # gate, so that an empty file seen there is one that lost its contents, not one being made.
        with self._hold.gate():
            if data.exists() and _file_size(data) == 0:
                raise StoreDamaged(f"{self.path}: store damaged: its data file {data} is empty; restore the "
                                   "folder from a backup or import an export (remove it if it never held data)")
            try:
                _reserve_lock_table(self.path / "lock.mdb")
            except OSError as exc:
                raise self._open_failure(exc) from None
            return self._map(map_size)

    def _map(self, map_size: int) -> tuple[lmdb.Environment, dict]:
        """Open the environment, check its data file is whole, and open the tables."""
        try:
            env = lmdb.open(str(self.path), map_size=map_size, max_dbs=len(ENGINE_TABLES) + 1)
        except (OSError, lmdb.Error) as exc:
            raise self._open_failure(exc) from None
        try:
            self._check_whole(env)
            return env, {name: env.open_db(name.encode()) for name in ENGINE_TABLES}
        except (OSError, lmdb.Error) as exc:
            env.close()
            raise self._open_failure(exc) from None
        except BaseException:
            env.close()
            raise

    def _check_whole(self, env: lmdb.Environment) -> None:
        """Refuse a truncated data file: touching a page past its end kills the process with SIGBUS."""
        needed = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        size = _file_size(self.path / "data.mdb")  # read after the meta page: the file only grows meanwhile
        if size < needed:
            raise StoreDamaged(
                f"{self.path}: store damaged: its data file is truncated ({size:,} bytes, {needed:,} expected); "
                "restore the store folder from a backup, or import an export into a new store")

    def _open_failure(self, exc: BaseException) -> Exception:
        """The cortex error for a store that cannot be opened."""
        if isinstance(exc, lmdb.InvalidError):
            return StoreDamaged(f"{self.path}: store damaged: its data file is not an LMDB file or is too short "
                                f"({_file_size(self.path / 'data.mdb'):,} bytes); restore the store folder "
                                "from a backup, or import an export into a new store")
        failure = self._failure(exc, "nothing was written")
        if failure is not exc:
            return failure
        return StoreLocked(f"{self.path}: cannot open the store: {exc}")

    # --- errors --------------------------------------------------------------------------

    def _failure(self, exc: BaseException, outcome: str = ROLLED_BACK, read: bool = False) -> BaseException:
        """The cortex error an lmdb or OS error stands for (damage, a full disk), else `exc` itself."""
        if isinstance(exc, READ_DAMAGE_ERRORS if read else DAMAGE_ERRORS):
            return StoreDamaged(f"{self.path}: store damaged ({exc}); run `cortex fsck`, or restore the store "
                                "from a backup or an export")
        code = exc.errno if isinstance(exc, OSError) else getattr(exc, "code", None)
        if isinstance(exc, lmdb.DiskError) or code in DISK_ERRNOS:
            return _full(self.path, code, outcome)
        return exc

    # --- reading and writing -------------------------------------------------------------

    @property
    def _txn(self) -> lmdb.Transaction | None:
        return getattr(self._local, "txn", None)

    def _begin(self, write: bool) -> lmdb.Transaction:
        try:
            try:
                return self.env.begin(write=write)
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)  # another process grew the map: adopt its size
                return self.env.begin(write=write)
        except lmdb.Error as exc:
            raise self._failure(exc, read=not write) from None

    @contextmanager
    def _reader(self):
        txn = self._txn
        if txn is not None:
            yield txn
            return
        txn = self._begin(write=False)
        try:
            yield txn
        finally:
            txn.abort()

    def get(self, table: str, key: bytes) -> bytes | None:
        try:  # free in 3.11 when nothing is raised
            txn = self._txn
            if txn is not None:  # the hot path: inside reading() or transact()
                return txn.get(key, db=self._dbs[table])
            txn = self._begin(write=False)
            try:
                return txn.get(key, db=self._dbs[table])
            finally:
                txn.abort()
        except lmdb.Error as exc:
            raise self._failure(exc, read=True) from None

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self._in_write(lambda txn: txn.put(key, value, db=self._dbs[table]))

    def delete(self, table: str, key: bytes) -> bool:
        return self._in_write(lambda txn: txn.delete(key, db=self._dbs[table]))

    def _in_write(self, op: Callable[[lmdb.Transaction], T]) -> T:
        if getattr(self._local, "writing", False):
            return op(self._txn)  # an error here reaches transact(), which rolls back and translates it
        return self.transact(lambda: op(self._txn))

    def scan(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        try:
            with self._reader() as txn:
                cursor = txn.cursor(db=self._dbs[table])
                if not cursor.set_range(prefix):
                    return
                for key, value in cursor:
                    if not key.startswith(prefix):
                        return
                    yield key, value
        except lmdb.Error as exc:
            raise self._failure(exc, read=True) from None

    def count(self, table: str) -> int:
        try:
            with self._reader() as txn:
                return txn.stat(self._dbs[table])["entries"]
        except lmdb.Error as exc:
            raise self._failure(exc, read=True) from None

    def put_new(self, table: str, items: list[tuple[bytes, bytes]]) -> int:
        db = self._dbs[table]
        return self._in_write(lambda txn: sum(txn.put(key, value, db=db, overwrite=False) for key, value in items))

    def transact(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a write transaction, grouped with those other threads start meanwhile (one fsync for all)."""
        if getattr(self._local, "writing", False):
            return fn()
        self.check_writable()
        if self._txn is not None:
            raise RuntimeError("cannot write inside a reading() block")
        return self._group.run(fn)

    def _commit_group(self, members: list[Member]) -> None:
        """Run each member in a child of one write transaction and commit it once (see `group`)."""
        while True:
            txn = self._begin(write=True)
            try:
                if len(members) == 1:  # alone: no child transaction needed
                    members[0].reset()
                    members[0].succeed(self._within(txn, members[0].fn))
                else:
                    for member in members:
                        self._run_member(txn, member)
                txn.commit()
                return
            except lmdb.MapFullError:
                txn.abort()
                self._grow()
            except lmdb.Error as exc:
                txn.abort()
                raise self._failure(exc) from None
            except BaseException:
                txn.abort()
                raise

    def _run_member(self, parent: lmdb.Transaction, member: Member) -> None:
        """Run one member in a child transaction: its error undoes its own writes only."""
        member.reset()
        child = self.env.begin(write=True, parent=parent)
        try:
            member.succeed(self._within(child, member.fn))
            child.commit()
        except lmdb.MapFullError:
            child.abort()
            raise  # the whole group runs again in a larger map
        except Exception as exc:  # noqa: BLE001 - the member's own error, raised in its own thread
            child.abort()
            member.fail(self._failure(exc) if isinstance(exc, lmdb.Error) else exc)

    def _within(self, txn: lmdb.Transaction, fn: Callable[[], T]) -> T:
        """Run `fn` with `txn` as this thread's write transaction."""
        self._local.txn, self._local.writing = txn, True
        try:
            return fn()
        finally:
            self._local.txn, self._local.writing = None, False

    def _grow(self) -> None:
        try:
            self.env.set_mapsize(self.env.info()["map_size"] * 2)
        except lmdb.Error as exc:
            raise self._failure(exc) from None

    @contextmanager
    def reading(self):
        if self._txn is not None:
            yield
            return
        txn = self._begin(write=False)
        self._local.txn = txn
        try:
            yield
        finally:
            self._local.txn = None
            txn.abort()

    # --- holding the store alone ---------------------------------------------------------

    @contextmanager
    def exclusively(self) -> Iterator[None]:
        """Hold the store alone for the block: other processes wait to open it; StoreBusy if one has it open.

        Nests (an inner block, or `compact()`, runs under the outer hold); the shared hold is back after it.
        """
        with self._exclusive_lock:
            if self._exclusive == 0:
                self._hold.upgrade()
            self._exclusive += 1
        try:
            yield
        finally:
            with self._exclusive_lock:
                self._exclusive -= 1
                if self._exclusive == 0:
                    self._hold.downgrade()

    def compact(self) -> None:
        """Rewrite the data file with live pages only: LMDB's freed pages keep deleted bytes until reused.

        Holds the store alone meanwhile (see `exclusively`): StoreBusy when other processes have it open.
        """
        if self._txn is not None:
            raise RuntimeError("cannot compact inside a transaction")
        with self.exclusively():
            if self._threads_reading():
                raise RuntimeError("cannot compact while other threads of this process read the store")
            self._rewrite()

    def _threads_reading(self) -> bool:
        """Whether a read transaction of this process is open (the file would be unmapped under it)."""
        rows = (line.split() for line in self.env.readers().splitlines()[1:])
        return any(len(row) == 3 and row[0] == str(os.getpid()) and row[2] != "-" for row in rows)

    def _rewrite(self) -> None:
        """Copy the live entries to a new data file in a scratch folder, then swap it in for the data file.

        Entry by entry, onto fresh pages: a copy of the live pages (LMDB's own compacting copy) would carry
        the bytes of deleted entries left in the unused part of a page that still holds others."""
        map_size = self.env.info()["map_size"]
        try:
            scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=self.path))
        except OSError as exc:
            raise self._failure(exc, ABANDONED) from None
        try:
            # Its room taken first: LMDB reads back the pages it writes through its map, and a page the full
            # disk refused would kill the process (SIGBUS) rather than fail the write.
            page = self.env.stat()["psize"]
            used = (self.env.info()["last_pgno"] + 1) * page
            room = os.statvfs(scratch)
            if room.f_bavail * room.f_frsize < used + 4 * page:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            copy = lmdb.open(str(scratch), map_size=map_size, max_dbs=len(ENGINE_TABLES) + 1)
            try:
                with open(scratch / "data.mdb", "r+b") as data:
                    os.posix_fallocate(data.fileno(), 0, used)
                with self.env.begin() as source, copy.begin(write=True) as target:
                    for name in ENGINE_TABLES:
                        into = copy.open_db(name.encode(), txn=target)
                        target.cursor(into).putmulti(source.cursor(self._dbs[name]), append=True)
                copy.sync(True)
                live = (copy.info()["last_pgno"] + 1) * copy.stat()["psize"]
            finally:
                copy.close()
            os.truncate(scratch / "data.mdb", live)  # (what was taken and not used)
            self.env.close()
            try:
                os.replace(scratch / "data.mdb", self.path / "data.mdb")
                _fsync_folder(self.path)
            finally:
                self.env, self._dbs = self._map(map_size)
        except (OSError, lmdb.Error) as exc:
            raise self._failure(exc, ABANDONED) from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def verify(self) -> list[str]:
        """Problems in the data file's B-trees, found by reading its bytes without LMDB; [] when sound.

        Walking a damaged file through LMDB can abort the process (a failed assertion on a zeroed
        page), so check this first before reading every entry.
        """
        try:
            from lmdb.verify import VerifyError, verify
        except ImportError:  # py-lmdb before 2.0 has no verifier
            return []
        with self.reading():  # LMDB reuses no page of the newest state while a reader is open
            try:
                return verify(str(self.path))
            except VerifyError as exc:
                return [str(exc)]

    def get_many(self, table: str, keys: list[bytes]) -> list[bytes | None]:
        try:
            with self._reader() as txn:
                return [txn.get(key, db=self._dbs[table]) for key in keys]
        except lmdb.Error as exc:
            raise self._failure(exc, read=True) from None

    @property
    def local_folder(self) -> Path:
        return self.path

    def size_bytes(self) -> int:
        info, stat = self.env.info(), self.env.stat()
        return (info["last_pgno"] + 1) * stat["psize"]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.env.close()
        self._hold.release()  # only once the file is unmapped may another process replace it
        self._unregister()

    def _unregister(self) -> None:
        with _open_lock:
            if _open_envs.get(str(self.path)) is self:
                del _open_envs[str(self.path)]


class _Hold:
    """This process's flock on a store folder: shared while the store is open, exclusive while held alone."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.fd = _lock_file(folder / OPEN_LOCK)
        try:
            self._wait_shared()
        except BaseException:
            os.close(self.fd)
            raise

    def _wait_shared(self) -> None:
        """Take the shared hold, waiting while a process holds the store alone (it is compacting)."""
        deadline = time.monotonic() + OPEN_WAIT_SECONDS
        while not _try_flock(self.fd, fcntl.LOCK_SH):
            if time.monotonic() > deadline:
                pids, names = _holders(self.fd)
                raise StoreBusy(f"{self.folder}: {names} has held the store alone for over "
                                f"{OPEN_WAIT_SECONDS:g} s; try again once it is done", pids)
            time.sleep(0.02)

    @contextmanager
    def gate(self) -> Iterator[None]:
        """Hold the gate: no other process changes its hold or creates the data file meanwhile."""
        fd = _lock_file(self.folder / GATE_LOCK)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held only for moments, so waiting is fine
            yield
        finally:
            os.close(fd)  # closing the file releases its flock

    def upgrade(self) -> None:
        """Turn the shared hold exclusive, or raise StoreBusy naming the processes that have the store open."""
        with self.gate():
            if _try_flock(self.fd, fcntl.LOCK_EX):
                return
            pids, names = _holders(self.fd)
            # The failed conversion dropped our shared lock. Take it back while we hold the gate, so that
            # no other process can turn exclusive (and swap the file) in between; nothing holds it exclusive.
            fcntl.flock(self.fd, fcntl.LOCK_SH)
        raise StoreBusy(f"{self.folder}: the store is open in {names}; close them and try again", pids)

    def downgrade(self) -> None:
        """Turn the exclusive hold back into a shared one."""
        with self.gate():  # the conversion drops the lock first: let no other process turn exclusive meanwhile
            fcntl.flock(self.fd, fcntl.LOCK_SH)

    def release(self) -> None:
        """Let go of the store folder."""
        os.close(self.fd)


def _lock_file(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _try_flock(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _holders(fd: int) -> tuple[tuple[int, ...], str]:
    """The other processes holding a flock on the file open as `fd`: their pids, and pids with command lines."""
    st, me = os.fstat(fd), os.getpid()
    flocks = [(pid, where) for pid, where in _flocks() if pid not in (me, 0)]
    exact = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    # On overlay filesystems /proc/locks names the device underneath, not the one stat() reports:
    # then match the inode alone.
    pids = [pid for pid, where in flocks if where == exact] or \
        [pid for pid, where in flocks if where.rsplit(":", 1)[-1] == str(st.st_ino)]
    pids = list(dict.fromkeys(pids))
    if not pids:
        return (), "other processes"
    return tuple(pids), ", ".join(f"pid {pid}{_command(pid)}" for pid in pids)


def _flocks() -> list[tuple[int, str]]:
    """(pid, "major:minor:inode") of every flock held on this machine, from /proc/locks (Linux)."""
    found = []
    try:
        with open("/proc/locks") as locks:
            for line in locks:
                fields = line.split()  # "1: FLOCK ADVISORY READ 1234 fd:01:5678 0 EOF"; waiters show "->"
                if len(fields) >= 6 and fields[1] == "FLOCK":
                    found.append((int(fields[4]), fields[5]))
    except (OSError, ValueError):
        pass
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return ""
    line = " ".join(b" ".join(words).decode(errors="replace").split())  # one line, even for `python -c` scripts
    return f" ({line[:200]})" if line else ""


def _remove_scratch(folder: Path) -> None:
    """Remove the scratch copies of compactions that were killed (each a whole copy of the store)."""
    for scratch in folder.glob(SCRATCH_PREFIX + "*"):
        shutil.rmtree(scratch, ignore_errors=True)


def _reserve_lock_table(path: Path) -> None:
    """Give LMDB's lock file real blocks before LMDB maps it: a mapped write to a full disk is a SIGBUS."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        if os.fstat(fd).st_size < LOCK_TABLE_SIZE:  # only a new one: nobody uses it yet
            os.posix_fallocate(fd, 0, LOCK_TABLE_SIZE)
    finally:
        os.close(fd)


def _full(path: Path, code: int | None, outcome: str) -> StoreFull:
    """The error for a write the disk refused, with the free space left where the store lives."""
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        free = None
    left = "unknown space" if free is None else _bytes(free)
    if code in (errno.ENOSPC, errno.EDQUOT) or free is None or free < LOW_SPACE:
        return StoreFull(f"{path}: the disk holding the store is full ({left} free): {outcome}; "
                         "free some space and try again", free)
    return StoreFull(f"{path}: cannot write the store ({os.strerror(code or errno.EIO)}; {left} free on its "
                     f"disk): {outcome}; check the disk and try again", free)


def _bytes(n: float) -> str:
    if n < 1024:
        return f"{n:,} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024:
            break
    return f"{n:,.1f} {unit}"


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
