"""A dict that keeps at most a given number of entries: the caches of things derived from content."""

from __future__ import annotations

from collections import OrderedDict


class BoundedDict(OrderedDict):
    """A dict of at most `limit` entries; setting a new key past it drops the entry set longest ago, in constant
    time (a plain dict's oldest key is found by stepping over every key deleted before it: quadratic once full)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def __setitem__(self, key, value) -> None:
        if key not in self and len(self) >= self.limit:
            self.popitem(last=False)
        super().__setitem__(key, value)
