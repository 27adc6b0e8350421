"""Safe writes to an agent's files: one writer per agent folder, and compare-before-replace.

Processes that save the same agent take an advisory lock (flock) on a file named after the
agent folder, kept outside the Org folder (it is no note: it must not show in a person's `git
status`), so their read-merge-write steps never interleave. A person editing the file
by hand takes no lock: the bytes a new version was computed from are compared with the file
just before the atomic replace, and the step starts over when they differ.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import UserError
from ..files import ChangedMeanwhile, confined, file_holds, folder_lock, write_under
from ..paths import agent_folder_of
from ..reads import ORG_FILE, read_bounded

LOCK_TIMEOUT = 60.0
ATTEMPTS = 5


class MemoryBusy(UserError):
    """Another process holds an agent's memory, or a file kept changing while it was being saved."""


@contextmanager
def agent_lock(folder: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the advisory lock of an agent folder (the folder is made if missing) for the block."""
    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder, timeout, lambda: MemoryBusy(
            f"{folder}: another process has held this agent's memory for too long")):
        yield


def read_or_none(path: Path) -> bytes | None:
    """A file's bytes (at most the bound of an Org file), or None when it does not exist."""
    try:
        return read_bounded(path, ORG_FILE, "an Org file")
    except FileNotFoundError:
        return None


def holds(path: Path, data: bytes | None) -> bool:
    """Whether the file holds exactly `data` (None: the file does not exist)."""
    return not os.path.exists(path) if data is None else file_holds(path, data)


def _in_its_agent_folder(root: Path, rel: str) -> None:
    """Refuse a file of an agent's folder that is a symbolic link out of that folder: an agent's memory is written
    in its folder only, never through its name into another agent's file (ingest does not follow such a link).
    A link out of the Org root is refused where the path is confined, as for any write."""
    agent = agent_folder_of(rel)
    if agent is None or not os.path.islink(root / rel):
        return
    real, folder = os.path.realpath(root / rel), os.path.realpath(root / agent)
    if real.startswith(os.path.join(os.path.realpath(root), "")) and not real.startswith(os.path.join(folder, "")):
        raise UserError(f"{root / rel}: a symbolic link out of the agent's folder {agent} (to {real}); an agent's "
                        "memory is written in its own folder only")


def replace_file(root: Path, rel: str, compute: Callable[[bytes | None], bytes | None],
                 expected: bytes | None = None) -> bool:
    """Write `compute(current bytes)` over the Org file `rel` under `root` atomically, unless the file changes
    meanwhile; True if written. Nothing is read or written outside the root.

    `compute` returns None (or the same bytes) when there is nothing to write. The bytes it was
    given are compared with the file right before the new version is renamed over it; when they
    differ, the step is repeated on the file's new bytes. `expected` is what the caller last read
    or wrote there: the first step computes from it, so the file is read only when it has changed.
    """
    _in_its_agent_folder(root, rel)
    # Resolved only when read here: `write_under` confines the path it writes itself.
    path = None if expected is not None else confined(root, rel)
    old = expected if expected is not None else read_or_none(path)
    for _ in range(ATTEMPTS):
        try:
            new = compute(old)
        except UserError:
            path = path or confined(root, rel)
            if holds(path, old):
                raise
            old = read_or_none(path)  # the error came from bytes the file no longer holds
            continue
        if new is None or new == old:
            path = path or confined(root, rel)
            if holds(path, old):
                return False
        else:
            try:
                write_under(root, rel, new, unchanged=lambda real: holds(real, old))
                return True
            except ChangedMeanwhile:
                pass
        path = path or confined(root, rel)
        old = read_or_none(path)
    raise MemoryBusy(f"{path}: changed {ATTEMPTS} times while it was being saved; nothing was written")
