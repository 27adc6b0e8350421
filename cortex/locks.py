"""Advisory locks between processes of this machine, and whether a process still runs.

A lock is an flock on a file: closing the descriptor (or the process dying) releases it, so a killed
holder never leaves a folder locked.
"""

from __future__ import annotations

import fcntl
import os
import stat as stats
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import UserError
from .hashing import hash_text

__all__ = ["alive", "folder_lock", "locked"]


@contextmanager
def folder_lock(folder: Path, timeout: float, busy: Callable[[], Exception]) -> Iterator[None]:
    """Hold the advisory lock (flock) of `folder` for the block, waiting at most `timeout` seconds (then
    raise `busy()`). The lock file lives in this user's runtime folder (else a private one in the temporary
    folder), named by the folder's real path: every process of the user finds the same one, and no lock
    file shows among a person's notes."""
    fd = os.open(_lock_file(folder), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise busy() from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _lock_file(folder: Path) -> Path:
    locks = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"cortex-locks-{os.getuid()}"
    locks.mkdir(mode=0o700, exist_ok=True)
    found = os.lstat(locks)
    if not stats.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise UserError(f"{locks}: not a folder of this user's; remove it and try again")
    return locks / (hash_text(os.path.realpath(folder)).hex()[:32] + ".lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock (flock) on the file `path` (created if missing) for the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def alive(pid: int) -> bool:
    """Whether process `pid` runs on this machine (this one included)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True
