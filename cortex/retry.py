"""Writers that lose a compare-and-swap race try again: each try re-reads whatever it moves.

Many processes (or machines) write one store; only refs move, by compare-and-swap, so a loser
never overwrites: it applies its change again to what won. Tries are spread by random waits
that grow, so that eight writers racing for one ref do not collide again in lockstep, and are
bounded by time, not by count: a writer keeps its turn for as long as a person would wait.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from .errors import RefConflict

T = TypeVar("T")

RETRY_SECONDS = 30.0
FIRST_WAIT = 0.002  # seconds; each loss doubles the longest wait, up to MAX_WAIT
MAX_WAIT = 0.5


def retrying(operation: Callable[[], T], within: float = RETRY_SECONDS) -> T:
    """Run `operation` until it does not raise RefConflict, for up to `within` seconds; then raise the last one."""
    deadline = time.monotonic() + within
    longest = FIRST_WAIT
    while True:
        try:
            return operation()
        except RefConflict:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
        time.sleep(min(random.uniform(0, longest), left))
        longest = min(2 * longest, MAX_WAIT)
