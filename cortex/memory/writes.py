"""Safe writes to an agent's files: one writer per agent folder, and compare-before-replace.

Processes that save the same agent take an advisory lock (flock) on a file named after the
agent folder, kept outside the Org folder (it is no note: it must not show in a person's `git
status`), so their read-merge-write steps never interleave. A person editing the file
by hand takes no lock: the bytes a new version was computed from are compared with the file
just before the atomic replace, and the step starts over when they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..files import FilesBusy, edit_file, folder_lock

LOCK_TIMEOUT = 60.0
MemoryBusy = FilesBusy  # another process holds an agent's memory, or a file kept changing while it was saved


@contextmanager
def agent_lock(folder: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the advisory lock of an agent folder (the folder is made if missing) for the block."""
    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder, timeout, lambda: MemoryBusy(
            f"{folder}: another process has held this agent's memory for too long")):
        yield


def replace_file(root: Path, rel: str, compute: Callable[[bytes | None], bytes | None],
                 expected: bytes | None = None) -> bool:
    """Write `compute(current bytes)` over the Org file `rel` under `root` (None or the same bytes: nothing to
    write), as `files.edit_file` does; True if written."""
    return edit_file(root, rel, lambda old: old if (new := compute(old)) is None else new, expected)[0]
