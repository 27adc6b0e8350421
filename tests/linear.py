"""Checks that a reader of untrusted text ends: a call in a thread that must return within a generous bound (a
backtracking regexp takes minutes to years on these inputs, the readers milliseconds)."""

from __future__ import annotations

import threading

BOUND = 60  # seconds: far above any machine's time for the linear readers, far below a backtracking one's


def finishes(call, *args):
    """`call(*args)`'s result (or its exception, raised here); fails the test when it has not returned or raised
    within BOUND seconds."""
    done: list = []

    def run() -> None:
        try:
            done.append((call(*args), None))
        except Exception as exc:  # noqa: BLE001 - handed to the caller
            done.append((None, exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(BOUND)
    assert done, f"{getattr(call, '__name__', call)} did not return within {BOUND} s"
    result, error = done[0]
    if error is not None:
        raise error
    return result
