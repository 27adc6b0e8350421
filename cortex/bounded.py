"""A dict that keeps at most a given number of entries: the caches of things derived from content."""

from __future__ import annotations


class BoundedDict(dict):
    """A dict of at most `limit` entries; setting a new key past it drops the entry set longest ago."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def __setitem__(self, key, value) -> None:
        if key not in self and len(self) >= self.limit:
            del self[next(iter(self))]
        super().__setitem__(key, value)
