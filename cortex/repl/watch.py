"""Sync the Org folder in the background when its files change on disk (re-ingest the store's own folder).

Polling file stamps costs one `stat` per file per interval and needs no platform watcher;
ingest itself then skips every file whose bytes did not change.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["Watcher"]


def stamps(paths: Iterable[Path]) -> dict[Path, tuple[int, int]]:
    """Modification time and size of each of these files."""
    found = {}
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:  # removed between listing and stat: the next poll sees it gone
            continue
        found[path] = (stat.st_mtime_ns, stat.st_size)
    return found


class Watcher:
    """A daemon thread that polls the session's Org folder and re-ingests it when something changed."""

    def __init__(self, session, interval: float = 1.0):
        self.session = session
        self.interval = interval
        self.org_files = session.cortex.org_files
        self._stamps = stamps(self.org_files())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cortex-watch", daemon=True)

    def start(self) -> None:
        """Start polling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop polling; an ingest under way finishes first."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            now = stamps(self.org_files())
            if now == self._stamps:
                continue
            self._stamps = now
            # The session lock keeps an ingest from interleaving with an entry being evaluated.
            with self.session.lock:
                if self._stop.is_set():
                    return
                cortex = self.session.cortex
                try:
                    before = cortex.working()
                    report = cortex.sync()
                    after = cortex.working()
                except Exception as exc:  # the REPL must keep running; the notice says what failed
                    self.session.notify(f"watch: error: {exc}")
                    continue
            notice = describe(before, after, report)
            if notice:
                self.session.notify(f"watch: {notice}")


def describe(before, after, report) -> str:
    """A short notice of what a re-ingest changed in the working state ("" when nothing did).

    Files are compared by document, so a rollback's own rewrites, which the store already
    knows, go unmentioned.
    """
    changed = [path for path, doc in after.entries.items() if before.entries.get(path) != doc]
    removed = [path for path in before.entries if path not in after.entries]
    parts = []
    if changed:
        parts.append("re-ingested " + ", ".join(changed))
    if removed:
        parts.append("removed " + ", ".join(removed))
    parts += [str(problem) for problem in report.problems]
    parts += [f"conflict {conflict}" for conflict in getattr(report, "conflicts", ())]
    return "; ".join(parts)
