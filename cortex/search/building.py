"""Embedding what an index holds without a vector: within a budget when a search or an ingest asks, or in a
daemon thread that follows the working state in long-lived sessions (the REPL, `cortex serve`, `cortex mcp`).

Following a tree never embeds: an item whose vector is not cached waits in the index's `pending`, is found by
its words meanwhile, and gets its vector here. Each batch's vectors go to the store's cache as soon as they
exist, so an interrupted build loses at most a batch, and the next one starts where it stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..objects import Tree
from ..words import counted
from .results import VectorStatus

if TYPE_CHECKING:
    from .index import SearchIndex

__all__ = ["BACKGROUND_WAIT", "BATCH", "Builder", "BuildNotices", "Progress"]

BATCH = 128  # texts embedded, then added and cached, at a time: about a second of MiniLM on 2 cores
FOLLOW_INTERVAL = 1.0  # seconds between a background build's looks at the working state
BACKGROUND_WAIT = 0.25  # seconds a search waits for a background build before answering without it

Progress = Callable[[int, int], None]  # told (items embedded, items to embed) as a build goes


class Builder:
    """Embeds the pending items of one index; one build runs at a time."""

    def __init__(self, index: SearchIndex):
        self.index = index
        self.running = False  # whether a background build runs
        self._one = threading.Lock()  # held by the build under way
        self._built = threading.Condition(index.lock)  # told when vectors are added or the background build ends
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()  # tells the background build to stop
        self._wake = threading.Event()  # tells it that items are pending

    def wake(self) -> None:
        """Items are pending: a background build embeds them now rather than at its next look."""
        self._wake.set()

    def build(self, budget: float | None = None, progress: Progress | None = None,
              stop: threading.Event | None = None) -> VectorStatus:
        """Embed the pending items, BATCH at a time and shortest texts first, until none is left, `stop` is
        set, or `budget` seconds would pass (a batch starts only if the last one's time fits); return the status.

        While a background build runs, or another caller builds, a caller waits for it within its budget instead.
        """
        index = self.index
        if self.running and threading.current_thread() is not self._thread:
            with self._built:
                self._built.wait_for(lambda: not index.pending or not self.running, budget)
            return index.status()
        deadline = None if budget is None else time.monotonic() + budget
        if not self._one.acquire(timeout=-1 if budget is None else budget):
            return index.status()
        try:
            done, last = 0, 0.0  # items embedded, seconds the last batch took
            for keys, texts in self._batches():
                started = time.monotonic()
                if (stop is not None and stop.is_set()) or (deadline is not None and started + last >= deadline):
                    break
                if progress is not None:
                    progress(done, done + len(index.pending))
                vectors = index.embedder.embed(texts)
                last = time.monotonic() - started
                with index.lock:
                    kept = [n for n, key in enumerate(keys) if key in index.pending]  # others left meanwhile
                    index.vector.add([keys[n] for n in kept], vectors[kept])
                    index.pending.difference_update(keys)
                    index.dirty = True
                    self._built.notify_all()
                done += len(keys)
            if progress is not None and done:
                progress(done, done + len(index.pending))
        finally:
            self._one.release()
        return index.status()

    def _batches(self) -> Iterator[tuple[list[int], list[str]]]:
        """The pending items, BATCH at a time, shortest texts first (batches of like lengths pad least)."""
        index = self.index
        while True:
            with index.lock:
                order = sorted(index.pending, key=lambda key: len(index.items[key].text))
            if not order:
                return
            for start in range(0, len(order), BATCH):
                with index.lock:
                    keys = [key for key in order[start:start + BATCH] if key in index.pending]
                    texts = [index.items[key].text for key in keys]
                if keys:
                    yield keys, texts

    def start(self, working: Callable[[], Tree], progress: Progress | None = None,
              failed: Callable[[Exception], None] | None = None) -> None:
        """Keep embedding pending items in a daemon thread that follows `working()` (the working state) as it
        changes, until `stop`; `failed(error)` hears why it stopped if it failed."""
        if self._thread is not None:
            return
        self._stop.clear()
        self.running = True
        self._thread = threading.Thread(target=self._keep_building, args=(working, progress, failed),
                                        name="cortex-vectors", daemon=True)
        self._thread.start()

    def _keep_building(self, working: Callable[[], Tree], progress: Progress | None,
                       failed: Callable[[Exception], None] | None) -> None:
        """Follow and build every FOLLOW_INTERVAL, or at once when a search leaves items pending; the first
        time a moment after the start, which leaves a session's start-up the machine to itself."""
        try:
            while True:
                self._wake.wait(FOLLOW_INTERVAL)
                self._wake.clear()
                if self._stop.is_set():
                    return
                self.index.follow(working())
                self.build(progress=progress, stop=self._stop)
        except Exception as exc:  # noqa: BLE001 - a session goes on without it; searches build within their budget
            if failed is not None:
                failed(exc)
        finally:
            with self._built:
                self.running = False
                self._built.notify_all()

    def stop(self) -> None:
        """Stop the background build once the batch under way is added (its vectors are kept)."""
        thread = self._thread
        if thread is not None:
            self._stop.set()
            self._wake.set()
            thread.join()
            self._thread = None


class BuildNotices:
    """A build's progress told to `notify` in two lines, when a build of more than a batch starts and ends;
    and why it stopped, if it `failed`."""

    def __init__(self, notify: Callable[[str], None]):
        self.notify = notify
        self._started: float | None = None

    def failed(self, error: Exception) -> None:
        self.notify(f"search: building vectors stopped: {error}")

    def __call__(self, done: int, total: int) -> None:
        if done == 0 and total > BATCH and self._started is None:
            self._started = time.monotonic()
            self.notify(f"search: embedding {counted(total, 'item')} in the background; "
                        "until then, items without a vector are found by their words")
        elif done >= total and self._started is not None:
            self.notify(f"search: {counted(total, 'item')} embedded in {time.monotonic() - self._started:.0f} s")
            self._started = None
