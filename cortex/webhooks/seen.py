"""Keys that name a delivery, kept in the store so every receiver on it, before and after a restart, knows a copy.

Two kinds, both per webhook. A *delivery* key is the id the provider gives a delivery and keeps
for its retries (GitHub's `X-GitHub-Delivery`, Stripe's event id, Slack's `event_id`, Standard
Webhooks' `webhook-id`): a delivery whose id was taken is a duplicate, acknowledged and not
routed again; the key lasts as long as the delivery log keeps deliveries. A *replay* key is
what the verifier says identifies one signed request (the signature of a timestamped scheme, a
body-bound JWT): a copy of it is a replay, refused; the key lasts until the scheme itself would
refuse the copy as too old. A key points at the delivery that took it, and is free again when
that delivery failed or has left the log. The table also marks the deliveries being routed,
with their owner, so that a receiver starting up finds what a stopped one left half done.

Layout of the `webhooks.seen` table (all written inside the caller's transaction):
    b"\\0" + expiry (8 bytes, ns) + hashed key -> b""    expiry order, so forgetting stops early
    b"k" + hashed key -> [expiry ns, delivery key]
    b"p" + delivery key -> [host, pid]                pending: being routed by that process
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
from dataclasses import dataclass

from cortex.backends import Store
from cortex.codec import decode, encode

__all__ = ["SEEN", "SeenKey", "SeenKeys"]

SEEN = "webhooks.seen"
DELIVERY, REPLAY = "delivery", "replay"

_EXPIRY, _KEY, _PENDING = b"\0", b"k", b"p"


@dataclass(frozen=True)
class SeenKey:
    """A key naming a delivery: its kind (DELIVERY or REPLAY), its text, and when it may be forgotten."""

    kind: str
    text: str
    expires_ns: int


class SeenKeys:
    """The seen keys and pending marks of a store; every method runs inside the caller's transaction."""

    def __init__(self, store: Store):
        self._table = store.table(SEEN)
        # The first expiry left by the last forgetting (None: not known): until then none is due, and the keys
        # are not scanned (on a database server, a round trip).
        self._next_expiry: bytes | None = None

    def holders(self, wanted: list[tuple[str, SeenKey]]) -> list[tuple[int, bytes] | None]:
        """(expiry ns, delivery key) of the delivery that took each (webhook, key), or None, in one read."""
        values = self._table.get_many([_KEY + _hashed(webhook, key) for webhook, key in wanted])
        return [None if value is None else tuple(decode(value)) for value in values]

    def take(self, taken: list[tuple[str, SeenKey, bytes]], pending: list[bytes]) -> None:
        """Record that each delivery took its (webhook, key), until the key expires, and mark the `pending`
        deliveries as being routed by this process, in one write."""
        entries: dict[bytes, bytes] = {}
        for webhook, key, delivery in taken:
            hashed = _hashed(webhook, key)
            entries[_KEY + hashed] = encode([key.expires_ns, delivery])
            entry = _EXPIRY + struct.pack(">Q", key.expires_ns) + hashed
            entries[entry] = b""
            if self._next_expiry is not None and entry < self._next_expiry:
                self._next_expiry = entry
        owner = encode([socket.gethostname(), os.getpid()])
        entries.update((_PENDING + delivery, owner) for delivery in pending)
        if entries:
            self._table.update(entries)

    def forget_expired(self, now_ns: int) -> None:
        """Drop the keys whose expiry has passed, oldest first, stopping at the first that has not."""
        bound = _EXPIRY + struct.pack(">Q", now_ns)
        if self._next_expiry is not None and self._next_expiry >= bound:
            return
        expired, self._next_expiry = [], _KEY  # (_KEY, past every expiry: none left)
        for entry in self._table.keys_in_order():
            if entry >= bound:
                self._next_expiry = min(entry, _KEY)
                break
            expired.append(entry)
        for entry in expired:
            del self._table[entry]
            key = _KEY + entry[9:]
            value = self._table.get(key)
            # A key taken again later carries a later expiry and an index entry of its own.
            if value is not None and decode(value)[0] == struct.unpack(">Q", entry[1:9])[0]:
                del self._table[key]

    def unmark(self, deliveries: list[bytes]) -> None:
        """The `deliveries` are routed, or failed: no longer pending (one write)."""
        self._table.delete_many(_PENDING + delivery for delivery in deliveries)

    def owner(self, delivery: bytes) -> tuple[str, int] | None:
        """(host, pid) of the process routing `delivery`, or None when it is not marked pending."""
        value = self._table.get(_PENDING + delivery)
        return None if value is None else tuple(decode(value))

    def pending(self) -> list[tuple[bytes, str, int]]:
        """(delivery key, host, pid) of every delivery marked pending."""
        return [(key[len(_PENDING):], *decode(value)) for key, value in self._table.items(_PENDING)]


def _hashed(webhook: str, key: SeenKey) -> bytes:
    text = "\0".join((webhook, key.kind, key.text))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

