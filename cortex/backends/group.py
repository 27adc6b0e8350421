"""Group commit: concurrent write transactions of one process share one durable commit.

Each caller queues its transaction function and waits. One of the waiting threads leads: it
takes every function queued so far and hands them to the engine, which runs each in a nested
scope of one transaction (a child transaction, a savepoint), so a function that raises undoes
only its own writes, and commits once. Every caller is answered after that commit, with its own
result or error. Nothing waits on a timer: the functions that queue while one group commits
form the next group, so a lone writer commits at once and many writers share each commit.

Each waiting thread sleeps on an event of its own, woken once: when its group has committed,
or when it is the first in the queue and the leader has finished, to lead the next group. (A
`meanwhile` function, if given, is run by waiting threads every `every` seconds until then.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Member(Generic[T]):
    """One queued transaction function and its outcome, final once its group committed (or failed)."""

    __slots__ = ("fn", "value", "error", "settled", "wake")

    def __init__(self, fn: Callable[[], T]):
        self.fn = fn
        self.value: Any = None
        self.error: BaseException | None = None
        self.settled = False  # set by the leader after the commit: only then may the caller return
        self.wake = threading.Event()

    def succeed(self, value: T) -> None:
        """Record the function's result (it is returned once the group commits)."""
        self.value, self.error = value, None

    def fail(self, error: BaseException) -> None:
        """Record the error to raise in the caller."""
        self.value, self.error = None, error

    def reset(self) -> None:
        """Forget an outcome whose group did not commit: the function runs again."""
        self.value, self.error = None, None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value


class GroupCommit:
    """Runs transaction functions from many threads in groups; `run_group` commits one group.

    `run_group(members)` runs every member's function in its own nested scope of one
    transaction, records each outcome with `succeed` / `fail`, and commits. If it raises
    instead, no member of the group committed: each gets that error, except that a group
    interrupted by a BaseException (Ctrl-C in the leading thread) goes back in the queue for
    another thread to lead, and only the leader's own call is interrupted.
    """

    def __init__(self, run_group: Callable[[list[Member]], None], max_members: int = 256, *,
                 meanwhile: Callable[[], None] | None = None, every: float = 0.05):
        """`meanwhile()`: what a thread waiting in the queue does every `every` seconds."""
        self._run_group = run_group
        self._max = max_members
        self._meanwhile, self._every = meanwhile, every
        self._queue: list[Member] = []
        self._leading = False
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a group transaction; return its result (or raise its error) once the group committed."""
        member = Member(fn)
        with self._lock:
            self._queue.append(member)
            waiting = self._leading
            self._leading = True
        while waiting:
            while not member.wake.wait(self._every if self._meanwhile else None):
                self._meanwhile()
            if member.settled:
                return member.outcome()
            member.wake.clear()  # woken to lead: the leadership was handed over, `_leading` stayed set
            waiting = False
        with self._lock:
            self._queue.remove(member)
            group = [member, *self._queue[:self._max - 1]]
            del self._queue[:self._max - 1]
        try:
            self._lead(group)
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].wake.set()  # the first waiter leads the next group
                else:
                    self._leading = False
        return member.outcome()

    def _lead(self, group: list[Member]) -> None:
        """Run and commit `group`, whose first member is the leading thread's own; then settle every member."""
        try:
            self._run_group(group)
        except Exception as error:  # noqa: BLE001 - the commit failed: every member learns why
            for m in group:
                m.fail(error)
        except BaseException:
            for m in group:
                m.reset()
            with self._lock:
                self._queue[:0] = group[1:]  # the first member is the leader's own call
            raise
        for m in group:
            m.settled = True
            m.wake.set()
