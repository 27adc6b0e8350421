"""The delivery log: every delivery a webhook received, answered and routed, kept in the store.

Records live in the `webhooks.deliveries` table under their id, whose first 8 bytes are the
time in nanoseconds, so key order is time order. The body of every delivery that passed
verification (or skipped it) is kept too, in `webhooks.bodies`, because `redeliver` runs it
again; a rejected or oversized body is not kept, only its size and sha256. Header values
that authenticate the request are redacted before anything is stored. Deliveries older than
the log's retention (`KEEP_FOR` unless told otherwise) are dropped as new ones are recorded.

A verified delivery is `claim`ed: in one transaction its keys (`seen.py`) are checked and
taken and its record written, as pending when it is still to be routed. Routing (a file write
and an ingest) comes after, then `finish` records the outcome and clears the pending mark, so
a delivery is answered 2xx only once both are in the store, and one cut off in between is
found, still pending, by the next receiver to start.
"""

from __future__ import annotations

import os
import re
import struct
import time
from dataclasses import dataclass, field, fields
from datetime import timedelta

from cortex.backends import Store
from cortex.codec import decode, encode
from cortex.errors import NotFound, UserError
from cortex.prefixes import unique
from cortex.webhooks.seen import SeenKey, SeenKeys
from cortex.words import quoted, when

__all__ = ["BODIES", "DELIVERIES", "ID_SIZE", "KEEP_FOR", "TRIGGERS", "Delivery", "DeliveryLog", "Outcome",
           "id_time_ns", "new_id", "span_ns"]

DELIVERIES = "webhooks.deliveries"
BODIES = "webhooks.bodies"
TRIGGERS = ("live", "test", "redeliver")
ID_SIZE = 12  # 8 bytes of time in ns, 4 random bytes
KEEP_FOR = timedelta(days=30)
_PREFIX = re.compile(r"[0-9a-f]{1,%d}" % (2 * ID_SIZE))


class Outcome:
    """What became of a delivery (the names the log and the receiver's answers use)."""

    ROUTED = "routed"  # verified, matched, appended to the agent's daily log
    ACCEPTED = "accepted"  # verified and matched; the webhook names no agent
    FILTERED = "filtered"  # verified, did not match the filter: acknowledged, not routed
    REJECTED = "rejected"  # failed verification
    INVALID = "invalid"  # verified, but the body is not JSON where JSON is needed
    TOO_LARGE = "too_large"  # over the body size cap
    FAILED = "failed"  # verified and matched, but writing to the agent's memory failed
    PENDING = "pending"  # verified and matched, being routed (or cut off while it was)
    DUPLICATE = "duplicate"  # the provider's id names a delivery taken before: acknowledged, not routed
    IN_PROGRESS = "in_progress"  # the provider's id names a delivery another receiver is routing now


@dataclass(frozen=True)
class Delivery:
    """One logged delivery: who sent what, how it was verified, filtered and routed, and the answer."""

    id: str
    webhook: str
    path: str
    trigger: str
    time_ns: int
    status: int
    outcome: str
    event: str = ""
    duration_us: int = 0
    verified: bool | None = None  # None: not checked (a redelivery, or verification off)
    reason: str = ""  # the reject reason code, when rejected
    detail: str = ""
    filter_matched: bool | None = None  # None: the filter was not reached
    filter_reason: str = ""
    agent: str | None = None
    size: int = 0
    sha256: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # secrets redacted
    redelivery_of: str | None = None
    duplicate_of: str | None = None

    @property
    def why(self) -> str:
        """The reason behind the outcome, if there is one: the reject reason, the filter's, or the detail."""
        return self.reason or (self.filter_reason if self.filter_matched is False else self.detail)

    def row(self) -> dict[str, str]:
        """The delivery as a line of the log shows it: when, ids, trigger, event, answer, why, agent, time taken."""
        return {"time": when(self.time_ns), "delivery": self.id, "webhook": self.webhook, "trigger": self.trigger,
                "event": self.event or "-", "answer": f"{self.status} {self.outcome}", "why": self.why or "-",
                "agent": self.agent or "-", "ms": f"{self.duration_us / 1000:.1f}"}

    def repl_view(self, renderer):
        """The REPL's view: the log's row as key/value pairs."""
        return renderer.key_values(self.row().items())

    def repl_row(self, renderer, index: int) -> dict[str, str]:
        """The REPL's row of a delivery in a table: the log's."""
        return self.row()

    def answer(self) -> dict[str, object]:
        """The JSON the receiver answers with: the id and outcome, and past verification, what happened."""
        answer: dict[str, object] = {"delivery": self.id, "webhook": self.webhook, "outcome": self.outcome}
        if self.reason:
            answer["reason"] = self.reason
        if self.detail:
            answer["detail"] = self.detail
        if self.duplicate_of:
            answer["duplicate_of"] = self.duplicate_of
        if self.verified is not False and self.outcome != Outcome.TOO_LARGE:
            answer.update(event=self.event, verified=self.verified, filter_matched=self.filter_matched,
                          filter_reason=self.filter_reason, agent=self.agent)
        return answer


def new_id(time_ns: int | None = None) -> str:
    """A fresh delivery id: hex of the time in ns and 4 random bytes, so ids sort by time."""
    return (struct.pack(">Q", time.time_ns() if time_ns is None else time_ns) + os.urandom(4)).hex()


def id_time_ns(delivery_id: str) -> int:
    """The time in ns a delivery id was made at."""
    return struct.unpack(">Q", _key(delivery_id)[:8])[0]


class DeliveryLog:
    """Delivery records and kept bodies in a store, oldest first."""

    def __init__(self, store: Store, keep_for: timedelta | None = KEEP_FOR):
        """`keep_for`: how long a delivery is kept once recorded (None: for ever)."""
        if keep_for is not None and keep_for <= timedelta(0):
            raise UserError(f"deliveries must be kept for some time, not {keep_for}")
        self.store = store
        self.keep_for = keep_for
        self.seen = SeenKeys(store)
        self._records = store.table(DELIVERIES)
        self._bodies = store.table(BODIES)
        # The oldest record left by the last drop of those past retention (None: not known): until the cutoff
        # passes it, no record is past it and the log is not scanned (on a database server, a round trip).
        self._kept_from: bytes | None = None

    def record(self, delivery: Delivery, body: bytes | None = None) -> Delivery:
        """Write a delivery (and the body to keep, if any) in one transaction, dropping those past retention."""
        self.store.transact(lambda: self._write([(delivery, body)]))
        return delivery

    def claim(self, delivery: Delivery, body: bytes | None, keys: list[SeenKey]) -> tuple[SeenKey, Delivery] | None:
        """Record `delivery` and take its keys in one transaction, unless a key is held: then return it and its holder.

        A key is held by the delivery that took it, until the key expires, unless that delivery
        failed or left the log. A pending delivery is marked as this process's to route.
        """
        return self.store.transact(lambda: self._claim_all([(delivery, body, keys)]))[0]

    def claim_all(self, claims: list[tuple[Delivery, bytes | None, list[SeenKey]]],
                  ) -> list[tuple[SeenKey, Delivery] | None]:
        """`claim` each (delivery, body, keys) in turn, all in one transaction (a later one finds the keys an
        earlier one took), reading and writing each table once; the key held and its holder for each, or None."""
        return self.store.transact(lambda: self._claim_all(claims)) if claims else []

    def _claim_all(self, claims: list[tuple[Delivery, bytes | None, list[SeenKey]]],
                   ) -> list[tuple[SeenKey, Delivery] | None]:
        self.seen.forget_expired(min(delivery.time_ns for delivery, _, _ in claims))
        wanted = list(dict.fromkeys((delivery.webhook, key) for delivery, _, keys in claims for key in keys))
        held = dict(zip(wanted, self.seen.holders(wanted)))
        holders = list({found[1] for found in held.values() if found is not None})
        records = dict(zip(holders, self._records.get_many(holders)))
        found: list[tuple[SeenKey, Delivery] | None] = []
        taken: dict[tuple[str, str, str], Delivery] = {}  # by the claims before, in this transaction
        for delivery, _, keys in claims:
            found.append(next(((key, holder) for key in keys
                               if (holder := taken.get((delivery.webhook, key.kind, key.text)) or
                                   _holder(held[delivery.webhook, key], records, delivery.time_ns))), None))
            if found[-1] is None:  # (a key's expiry is no part of what it names)
                taken.update(((delivery.webhook, key.kind, key.text), delivery) for key in keys)
        claimed = [(delivery, body, keys) for (delivery, body, keys), held_by in zip(claims, found) if held_by is None]
        self._write([(delivery, body) for delivery, body, _ in claimed])
        self.seen.take([(delivery.webhook, key, _key(delivery.id)) for delivery, _, keys in claimed for key in keys],
                       [_key(delivery.id) for delivery, _, _ in claimed if delivery.outcome == Outcome.PENDING])
        return found

    def finish(self, deliveries: list[Delivery]) -> None:
        """Record how pending deliveries ended, clearing the pending mark of those no longer pending, in one
        transaction."""
        def write() -> None:
            self._write([(delivery, None) for delivery in deliveries])
            self.seen.unmark([_key(delivery.id) for delivery in deliveries if delivery.outcome != Outcome.PENDING])

        self.store.transact(write)

    def pending(self) -> list[tuple[Delivery, str, int]]:
        """The deliveries marked pending, oldest first, with the host and pid of the process routing them."""
        found = []
        for key, host, pid in self.seen.pending():
            data = self._records.get(key)
            if data is None:  # dropped with the log's retention meanwhile: nothing left to route
                self.store.transact(lambda key=key: self.seen.unmark([key]))
            else:
                found.append((_delivery(key, data), host, pid))
        return found

    def owner(self, delivery_id: str) -> tuple[str, int] | None:
        """(host, pid) of the process routing a pending delivery (None: it is not marked pending)."""
        return self.seen.owner(_key(delivery_id))

    def _write(self, deliveries: list[tuple[Delivery, bytes | None]]) -> None:
        """Write deliveries (and the bodies to keep) in one write a table, dropping those past retention."""
        if not deliveries:
            return
        records: dict[bytes, bytes] = {}
        bodies: dict[bytes, bytes] = {}
        for delivery, body in deliveries:
            if delivery.trigger not in TRIGGERS:
                raise ValueError(f"trigger {delivery.trigger!r} is not one of {', '.join(TRIGGERS)}")
            key = _key(delivery.id)
            # The fields hold plain values, so no deep copy (asdict's) is needed to encode them.
            records[key] = encode({name: getattr(delivery, name) for name in _STORED})
            if self._kept_from is not None and key < self._kept_from:
                self._kept_from = key
            if body is not None:
                bodies[key] = bytes(body)
        self._records.update(records)
        if bodies:
            self._bodies.update(bodies)
        if self.keep_for is not None:
            self._drop_before(max(delivery.time_ns for delivery, _ in deliveries) - span_ns(self.keep_for))

    def prune(self, older_than: timedelta, now_ns: int | None = None) -> int:
        """Remove the deliveries (and their bodies) older than `older_than`; return how many."""
        cutoff = (time.time_ns() if now_ns is None else now_ns) - span_ns(older_than)
        self._kept_from = None  # (another process may have written older ones)
        return self.store.transact(lambda: self._drop_before(cutoff))

    def _drop_before(self, time_ns: int) -> int:
        # ids start with their time, so the old ones come first and the scan stops at the first newer one
        bound = struct.pack(">Q", max(time_ns, 0))
        if self._kept_from is not None and self._kept_from >= bound:
            return 0
        old, self._kept_from = [], None
        for key in self._records.keys_in_order():
            if key >= bound:
                self._kept_from = key
                break
            old.append(key)
        for key in old:
            del self._records[key]
            self._bodies.pop(key, None)
        return len(old)

    def get(self, delivery_id: str) -> Delivery:
        """The delivery with this id, or the one whose id starts with it (NotFound when none does)."""
        prefix = str(delivery_id).strip().lower()
        if not _PREFIX.fullmatch(prefix):
            raise UserError(f"{quoted(delivery_id)} is not a delivery id ({2 * ID_SIZE} hex digits, or a prefix of "
                            "them, as `cortex webhook logs` shows)")
        found = dict(self._records.items(bytes.fromhex(prefix[:len(prefix) // 2 * 2])))
        ident = unique(prefix, (key.hex() for key in found), "webhook delivery", "; `cortex webhook logs` lists them")
        return _delivery(bytes.fromhex(ident), found[bytes.fromhex(ident)])

    def body(self, delivery_id: str) -> bytes:
        """The kept body of a delivery (NotFound when it was rejected or too large, so none was kept)."""
        delivery = self.get(delivery_id)
        body = self._bodies.get(bytes.fromhex(delivery.id))
        if body is None:
            raise NotFound(f"webhook delivery {delivery.id} kept no body: it was {delivery.outcome.replace('_', ' ')}")
        return body

    def deliveries(self, webhook: str | None = None, tail: int | None = None) -> list[Delivery]:
        """Deliveries oldest first, of one webhook or all; `tail` keeps only the last ones."""
        found = [_delivery(key, data) for key, data in self._records.items()]
        if webhook is not None:
            found = [d for d in found if d.webhook == webhook]
        return found if tail is None else found[-tail:] if tail > 0 else []

    def __len__(self) -> int:
        return len(self._records)


def span_ns(span: timedelta) -> int:
    """A time span in whole nanoseconds."""
    return span // timedelta(microseconds=1) * 1000


def _holder(held: tuple[int, bytes] | None, records: dict[bytes, bytes | None], now_ns: int) -> Delivery | None:
    """The delivery holding a key, from what the key names (expiry, delivery key) and the records read: None when
    the key expired or its delivery failed or left the log."""
    if held is None or held[0] < now_ns or (data := records.get(held[1])) is None:
        return None
    holder = _delivery(held[1], data)
    return None if holder.outcome == Outcome.FAILED else holder


def _key(delivery_id: str) -> bytes:
    try:
        key = bytes.fromhex(delivery_id)
    except (ValueError, TypeError):
        key = b""
    if len(key) != ID_SIZE:
        raise UserError(f"{quoted(delivery_id)} is not a delivery id (24 hex digits, as `cortex webhook logs` shows)")
    return key


_FIELDS = {f.name for f in fields(Delivery)}
_STORED = sorted(_FIELDS - {"id"})  # the id is the record's key


def _delivery(key: bytes, data: bytes) -> Delivery:
    values = decode(data)
    return Delivery(id=key.hex(), **{name: value for name, value in values.items() if name in _FIELDS})
