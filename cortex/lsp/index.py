"""The :ID:s the server knows, file by file: the store's working state, with open buffers over their files.

Replacing one file's entries costs what that file holds, so an edit updates it in time proportional to the
change's file, never to the store. Built in the background at start (`ready` is set when whole).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["Entry", "Ids"]


@dataclass(frozen=True)
class Entry:
    """One :ID: where it stands: its file, the 0-based line of its headline (or the file's first), its title."""

    id: str
    path: str
    line: int
    title: str


class Ids:
    """Entries by file and by :ID:, kept in step file by file; `lock` makes a read or a change whole."""

    def __init__(self):
        self.lock = threading.RLock()
        self._files: dict[str, tuple[Entry, ...]] = {}
        self._ids: dict[str, dict[str, Entry]] = {}  # :ID: -> path -> its first entry there
        self._counts: dict[tuple[str, str], int] = {}  # (:ID:, path) -> how many headlines of the file carry it
        self.ready = threading.Event()

    def set_file(self, path: str, entries: list[Entry]) -> None:
        """What `path` holds now (no entries: a file removed)."""
        with self.lock:
            self._set(path, entries)

    def _set(self, path: str, entries: list[Entry]) -> None:
        for old in self._files.pop(path, ()):
            self._ids.get(old.id, {}).pop(path, None)
            self._counts.pop((old.id, path), None)
            if not self._ids.get(old.id, True):
                del self._ids[old.id]
        if entries:
            self._files[path] = tuple(entries)
        for entry in entries:
            self._ids.setdefault(entry.id, {}).setdefault(path, entry)
            self._counts[entry.id, path] = self._counts.get((entry.id, path), 0) + 1

    def where(self, org_id: str) -> list[Entry]:
        """The headlines (or files) carrying `org_id`, one entry per file."""
        with self.lock:
            return list(self._ids.get(org_id, {}).values())

    def count(self, org_id: str) -> int:
        """How many headlines and files carry `org_id` in every file."""
        with self.lock:
            return sum(self._counts.get((org_id, path), 0) for path in self._ids.get(org_id, {}))

    def entries(self) -> list[Entry]:
        """Every entry, by file."""
        with self.lock:
            return [entry for entries in self._files.values() for entry in entries]
