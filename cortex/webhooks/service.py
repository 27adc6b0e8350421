"""A session's webhooks, ready to receive: secrets resolved, verifiers built, and one delivery handler.

`WebhookService.deliver` is the whole life of a delivery after its body was read: size cap,
verification, JSON, filter, the claim of its keys, routing to the agent's daily log, and the
delivery log. The HTTP receiver and in-process simulation both call it, from many threads.
Nothing serialises deliveries: the writes of concurrent ones are grouped instead (group
commit). The deliveries to route queue, and one thread routes all those queued: their claims
in one transaction (made meanwhile, while the group before is routed, by a delivery waiting
CLAIM_AHEAD), then per agent, one write of each daily log and one ingest for all their
entries, whose commit records how each ended. Others claim alone, their transactions grouped
by the store. A delivery to route is recorded pending (with its keys and body) before its
entry is written, so a receiver cut off in between leaves it for `recover`. Each delivery is answered once durable: its records, or, in an Org folder
(not under review) while other deliveries are on their way, its entry whole on disk after its pending record; the
ingest is then put off (for at most INGEST_EVERY seconds), and a later group, or the last
delivery of the burst, ingests the entries of several groups and records how they ended.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from cortex.backends.group import GroupCommit, Member
from cortex.dsl.definitions import Provider, WebhookDefinition
from cortex.errors import CortexError, NotFound, UserError
from cortex.locks import alive
from cortex.memory.agents import AgentMemory
from cortex.memory.changes import log_entry
from cortex.memory.layout import log_path
from cortex.memory.logs import torn_tail
from cortex.webhooks.deliveries import KEEP_FOR, Delivery, DeliveryLog, Outcome, id_time_ns, new_id, span_ns
from cortex.webhooks.filters import FilterFailed, FilterResult, JsonPathFilter, matches
from cortex.webhooks.routing import (
    NOT_JSON,
    PayloadRefused,
    event_type,
    json_filter,
    memory_context,
    needs_json,
    parse_payload,
    provider_delivery_id,
)
from cortex.webhooks.secrets import SECRET_SCHEME, MissingSecret, redact_headers, resolve_secret
from cortex.webhooks.seen import DELIVERY, REPLAY, SeenKey
from cortex.webhooks.verify import Reason, Verifier, verifier_for
from cortex.words import brief, quoted
from cortex.workspace import UNCHANGED, Current, FolderWorkspace, Workspace

__all__ = ["LEASE", "MAX_BODY", "SHOWN", "Endpoint", "WebhookService", "build_endpoint", "find_webhook"]

MAX_BODY = 1 << 20  # bytes; a larger body is refused with 413
SHOWN = 10  # webhooks a message lists by name
# A pending delivery older than this is taken over whoever marked it: routing one takes seconds.
LEASE = timedelta(minutes=5)
# Seconds a delivery waits in the routing queue before it claims those queued, while a group is being routed: the
# next group's claims are then made meanwhile, in one transaction, and a group held up (a folder held) keeps none
# of those queued behind it unclaimed.
CLAIM_AHEAD = 0.005
# Seconds at most an entry appended to an agent's daily log waits for its ingest while deliveries to route keep
# coming (in an Org folder): the groups routed meanwhile are appended and synced to disk, one ingest takes them all.
INGEST_EVERY = 0.5
# Seconds the last delivery on its way waits for another to come before it ingests what groups left waiting.
SETTLE_AFTER = 0.01

_log = logging.getLogger(__name__)


class _InFlight:
    """The deliveries this process is routing, whatever the number of services: one thread at a time routes
    a delivery, and this process's pending mark on one no thread holds was left by an earlier run."""

    def __init__(self):
        self._held: set[str] = set()
        self._changed = threading.Condition(threading.Lock())

    @contextmanager
    def hold(self, delivery_id: str) -> Iterator[None]:
        """Hold `delivery_id` for the block, once the thread routing it (if any) is done."""
        with self._changed:
            while delivery_id in self._held:
                self._changed.wait()
            self._held.add(delivery_id)
        try:
            yield
        finally:
            with self._changed:
                self._held.discard(delivery_id)
                self._changed.notify_all()


_IN_FLIGHT = _InFlight()


@dataclass(frozen=True)
class Endpoint:
    """One webhook as the receiver runs it: its definition, its verifier (None: not verifying), its filter."""

    definition: WebhookDefinition
    verifier: Verifier | None
    filter: JsonPathFilter | None


@dataclass(frozen=True)
class _Assessed:
    """What verification, parsing and filtering decided for the writing part to do."""

    keep: bool = False  # keep the body in the log
    keys: list[SeenKey] | None = None  # None: the answer is final, nothing to claim
    route: bool = False
    payload: object = field(default=NOT_JSON, repr=False)


@dataclass
class _ToRoute:
    """A delivery waiting in the routing queue: its pending record, body and payload, when it started; the keys
    to claim for it (None: claimed before it was queued) with the body the log keeps, and how its claim went
    (`_UNSET` until it is made; None: claimed; else the key held and its holder, or `_UNCLAIMED`)."""

    pending: Delivery
    body: bytes = field(repr=False)
    payload: object = field(repr=False)
    started: float | None
    keys: list[SeenKey] | None = None
    kept: bytes | None = field(default=None, repr=False)
    claim: object = None


_UNSET = object()
# How the claim of a delivery went when the transaction of its batch failed: it is claimed again on its own.
_UNCLAIMED = object()


def build_endpoint(definition: WebhookDefinition, *, base_dir: str | Path | None = None,
                   environ: Mapping[str, str] | None = None, verify: bool = True) -> tuple[Endpoint, list[str]]:
    """An endpoint with its secret resolved (MissingSecret names the webhook), and warnings to show."""
    if not verify:
        return Endpoint(definition, None, _filter(definition)), []
    warnings: list[str] = []
    secret = None
    if definition.secret is not None:
        resolved = resolve_secret(definition.secret, definition.name, environ=environ, base_dir=base_dir)
        secret = resolved.secret
        warnings += [resolved.warning] if resolved.warning else []
    verifier = verifier_for(definition.provider.value, secret, _options(definition, base_dir, environ),
                            webhook=definition.name)
    return Endpoint(definition, verifier, _filter(definition)), warnings


def find_webhook(webhooks: list[WebhookDefinition], name: str, defined_in: str) -> WebhookDefinition:
    """The webhook called `name` among `webhooks` (NotFound lists the known ones, or says where one is added:
    `defined_in`)."""
    for definition in webhooks:
        if definition.name == name:
            return definition
    if webhooks:
        known = ", ".join(brief(d.name) for d in webhooks[:SHOWN]) + \
            (f" and {len(webhooks) - SHOWN} more" if len(webhooks) > SHOWN else "")
    else:
        known = f"none; add one with `cortex webhook add` or in {defined_in}"
    raise NotFound(f"no webhook named {quoted(name)} (defined: {known})")


class WebhookService:
    """Webhooks by path, their delivery log, and the handler every delivery goes through; deliveries are routed
    into the agents' `memory` of a `workspace`."""

    def __init__(self, workspace: Workspace, memory: AgentMemory, webhooks: Iterable[WebhookDefinition], *,
                 verify: bool = True, max_body: int = MAX_BODY, environ: Mapping[str, str] | None = None,
                 keep_logs: timedelta | None = KEEP_FOR):
        if max_body < 1:
            raise UserError(f"the body size cap must be at least 1 byte, not {max_body}")
        self.workspace, self.memory = workspace, memory
        self.log = DeliveryLog(workspace.store, keep_logs)
        self._routing = GroupCommit(self._route_group, meanwhile=lambda: self._claim_queued(wait=False),
                                    every=CLAIM_AHEAD)
        self._unclaimed: list[_ToRoute] = []  # queued to route, not claimed yet
        self._claims, self._claiming = threading.Condition(threading.Lock()), False  # one thread claims at a time
        # agent -> since when its logs hold entries appended and not ingested yet
        self._unsettled: dict[str, float] = {}
        self._late: dict[str, dict[str, Delivery]] = {}  # agent -> the deliveries answered, by id, not recorded yet
        # deliveries to route, from before their claim to their answer (notified as one comes)
        self._on_way, self._counting = 0, threading.Condition(threading.Lock())
        self.max_body = max_body
        self.warnings: list[str] = []
        self.endpoints: dict[str, Endpoint] = {}
        # Secrets are resolved here, at startup: missing ones stop everything, all named at once.
        missing: list[MissingSecret] = []
        for definition in webhooks:
            try:
                endpoint, warnings = build_endpoint(definition, base_dir=workspace.root, environ=environ,
                                                    verify=verify)
            except MissingSecret as exc:
                missing.append(exc)
                continue
            self.endpoints[definition.path] = endpoint
            self.warnings += warnings
        if len(missing) == 1:
            raise missing[0]
        if missing:
            raise UserError(f"{len(missing)} webhooks have no secret:\n  " + "\n  ".join(map(str, missing)))

    def endpoint(self, name: str) -> Endpoint:
        """The endpoint of the webhook called `name`."""
        for endpoint in self.endpoints.values():
            if endpoint.definition.name == name:
                return endpoint
        raise NotFound(f"no webhook named {quoted(name)} (served: {', '.join(self.names()) or 'none'})")

    def names(self) -> list[str]:
        """The served webhooks' names, in definition order."""
        return [endpoint.definition.name for endpoint in self.endpoints.values()]

    def deliver(self, endpoint: Endpoint, headers: Mapping[str, str], body: bytes, *, trigger: str = "live",
                started: float | None = None, redelivery_of: str | None = None) -> Delivery:
        """Handle one delivery to `endpoint` from its headers and raw body; log it and return the record."""
        started = time.perf_counter() if started is None else started
        headers, body = dict(headers), bytes(body)
        definition = endpoint.definition
        delivery_id = new_id()
        verifier = None if redelivery_of else endpoint.verifier
        record: dict[str, object] = {
            "id": delivery_id, "webhook": definition.name, "path": definition.path, "trigger": trigger,
            "time_ns": id_time_ns(delivery_id), "size": len(body),
            "sha256": hashlib.sha256(body).hexdigest() if len(body) <= self.max_body else "",
            "headers": redact_headers(headers, verifier.header_names if verifier else ()),
            "redelivery_of": redelivery_of}
        try:
            assessed = self._assess(endpoint, verifier, headers, body, record)
        except Exception:  # a bug, not the payload: the delivery is answered and logged all the same
            _log.exception("webhook %s: delivery %s failed before routing", definition.name, delivery_id)
            record.update(status=500, outcome=Outcome.FAILED, reason=Reason.INTERNAL_ERROR.value,
                          detail="the receiver failed on this delivery; its log has the traceback")
            assessed = _Assessed()
        record["duration_us"] = _since(started)
        kept = body if assessed.keep else None
        if assessed.keys is None:
            return self.log.record(Delivery(**record), kept)
        if assessed.route:
            record.update(status=202, outcome=Outcome.PENDING, agent=definition.agent)
        claimed = Delivery(**record)
        with _IN_FLIGHT.hold(claimed.id), self._on_its_way(assessed.route):  # from before its pending mark is written
            conflict = self._route(_ToRoute(claimed, body, assessed.payload, started, assessed.keys, kept, _UNSET)) \
                if assessed.route else _UNCLAIMED
            if isinstance(conflict, Delivery):
                return conflict
            if conflict is _UNCLAIMED:
                conflict = self.log.claim(claimed, kept, assessed.keys)
            if conflict is not None and conflict[1].outcome == Outcome.PENDING:
                self._finish_abandoned(conflict[1])
                conflict = self.log.claim(claimed, kept, assessed.keys)  # the holder may have ended meanwhile
            if conflict is not None:
                key, holder = conflict
                return self.log.record(_copy(record, key, self._answered(holder.id) or holder))
            if not assessed.route:
                return claimed
            routed = _ToRoute(claimed, body, assessed.payload, started)
            return self._routing.run(lambda: routed)

    def redeliver(self, delivery_id: str) -> Delivery:
        """Run a logged delivery's body through filtering and routing again, as trigger `redeliver`.

        Verification is skipped: the signature may have gone stale since (and the log keeps
        headers redacted), and the delivery was verified when it first arrived. The webhook's
        current definition decides the filter and the agent.
        """
        original = self.log.get(delivery_id)  # its id, or a unique prefix of it
        body = self.log.body(original.id)
        return self.deliver(self.endpoint(original.webhook), original.headers, body, trigger="redeliver",
                            redelivery_of=original.id)

    def recover(self) -> list[Delivery]:
        """Finish the deliveries that receivers stopped while routing (a kill, a crash); return them as they ended.
        An entry an append left cut off is cut away first; then those whole in a log are ingested, the others
        written again, and the agents' logs ingested (a receiver stopped under load may have left entries
        appended and not ingested yet: `INGEST_EVERY`)."""
        pending = [delivery for delivery, _, _ in self.log.pending()]
        for agent, path in sorted({(d.agent, _log_file(d)) for d in pending if d.agent}):
            self._cut_torn(agent, path)  # first: an ingest must never read an entry cut off
        done = [done for delivery in pending if (done := self._finish_abandoned(delivery))]
        for agent in sorted({e.definition.agent for e in self.endpoints.values() if e.definition.agent}):
            self.memory.ingest_logs(agent)
        return done

    def _finish_abandoned(self, pending: Delivery) -> Delivery | None:
        """Route a pending delivery whose receiver stopped and return it as it ended; None when it is not one.

        A delivery this process is routing is waited for, so the caller then sees how it ended.
        """
        with _IN_FLIGHT.hold(pending.id):
            if self._answered(pending.id):  # routed here, its record waiting for the ingest
                return None
            try:
                current = self.log.get(pending.id)
            except NotFound:  # dropped with the log's retention meanwhile
                return None
            if current.outcome != Outcome.PENDING or not _abandoned(current, self.log.owner(current.id)):
                return None
            return self._resume(current)

    def _resume(self, pending: Delivery) -> Delivery:
        """Route a delivery left pending: ingest its entry if it reached the daily log whole, else write it (after
        cutting off what an append stopped partway left at the log's end)."""
        body = self.log.body(pending.id)
        if not self._entry_written(pending):
            self._cut_torn(pending.agent, _log_file(pending))
            done = self._routing.run(lambda: _ToRoute(pending, body, parse_payload(body), None))
        else:
            try:
                with self.workspace.held(self.memory.folder(pending.agent)):  # (no append half made meanwhile)
                    self.workspace.refresh(posixpath.dirname(_log_file(pending)))
                error = None
            except Exception as err:  # noqa: BLE001 - whatever failed, the delivery is still logged
                error = err
            [done] = self._end([(pending, error, None)])
        _log.warning("webhook %s: delivery %s, left pending by a receiver that stopped, is now %s",
                     pending.webhook, pending.id, done.outcome)
        return done

    def _route(self, routed: _ToRoute) -> Delivery | tuple[SeenKey, Delivery] | object:
        """Route a delivery in a group; its record, or, when it could not be claimed, how its claim went."""
        if routed.claim is _UNSET:
            with self._claims:
                self._unclaimed.append(routed)
        return self._routing.run(lambda: routed)

    def _claim_queued(self, wait: bool) -> None:
        """Claim the deliveries queued to route and not claimed yet, in one transaction a batch, until none is left.
        One thread claims at a time: another one that is claiming takes those queued meanwhile too, so a thread
        that finds one claiming returns at once, unless `wait`: then it returns once every delivery queued before
        it came is claimed."""
        with self._claims:
            if self._claiming and not wait:
                return
            while self._claiming:
                self._claims.wait()
            self._claiming = True
        batch: list[_ToRoute] = []
        try:
            while True:
                with self._claims:
                    batch, self._unclaimed = self._unclaimed, []
                if not batch:
                    return
                try:
                    claims = self.log.claim_all([(routed.pending, routed.kept, routed.keys) for routed in batch])
                except Exception:  # noqa: BLE001 - each is claimed again on its own, so that an error is its own
                    claims = [_UNCLAIMED] * len(batch)
                for routed, claim in zip(batch, claims):
                    routed.claim = claim
                batch = []
        finally:
            with self._claims:
                self._unclaimed[:0] = batch  # (a batch interrupted before its claims: claimed later)
                self._claiming = False
                self._claims.notify_all()

    def _route_group(self, members: list[Member]) -> None:
        """Route the queued deliveries (each member's function gives its `_ToRoute`) once claimed: those still to
        claim are claimed in one transaction (`_claim_queued`; one that could not be is answered with how its
        claim went); per agent, their entries in one save, how each ended recorded in the transaction that
        ingests them; then answer each member with its record. (What a failed save leaves unrecorded is
        recorded after it, in one transaction.)"""
        self._claim_queued(wait=True)
        queued: list[_ToRoute] = [member.fn() for member in members]
        for member, routed in zip(members, queued):
            if routed.claim is not None:
                member.succeed(routed.claim)
        left = [n for n, routed in enumerate(queued) if routed.claim is None]
        members, queued = [members[n] for n in left], [queued[n] for n in left]
        errors: list[Exception | None] = [None] * len(queued)
        ended: dict[int, Delivery] = {}
        by_agent: dict[str, list[int]] = {}
        for n, routed in enumerate(queued):
            by_agent.setdefault(routed.pending.agent, []).append(n)
        for agent, group in by_agent.items():
            contexts = {}
            for n in group:
                pending = queued[n].pending
                try:
                    # Dated by the delivery, not the clock, so a delivery routed after a restart lands in the same file.
                    contexts[n] = (memory_context(pending, queued[n].body, queued[n].payload), _moment(pending))
                except Exception as err:  # noqa: BLE001 - a bug, not the store: this delivery alone fails
                    errors[n] = err
            recorded: dict[int, Delivery] = {}

            def record(saved: list[Exception | None], group=group, contexts=contexts, recorded=recorded) -> None:
                # In the ingest's transaction: the group's records land with its entries, in one commit.
                outcome = {**{n: errors[n] for n in group}, **dict(zip(contexts, saved))}
                done = self._ended([(queued[n].pending, outcome[n], queued[n].started) for n in group])
                self.log.finish(done)
                recorded.clear()
                recorded.update(zip(group, done))

            ingested = True
            try:
                saved, ingested = self._save(agent, list(contexts.values()), record, len(members))
            except Exception as err:  # noqa: BLE001 - whatever failed, the deliveries are still logged
                saved = [err] * len(contexts)
                # `record` ran, but its records landed only if the ingest's transaction committed.
                recorded = {n: done for n, done in recorded.items() if self._landed(done)}
            ended.update(recorded)
            for n, result in zip(contexts, saved):
                if isinstance(result, Exception):
                    errors[n] = result
            if not ingested:  # their entries are on disk: answered now, recorded by the ingest that takes them
                answered = [n for n in contexts if errors[n] is None]
                late = dict(zip(answered, self._ended([(queued[n].pending, None, queued[n].started)
                                                       for n in answered])))
                with self._counting:
                    self._late.setdefault(agent, {}).update((done.id, done) for done in late.values())
                ended.update(late)
        rest = [n for n in range(len(queued)) if n not in ended]
        if rest:
            ended.update(zip(rest, self._end([(queued[n].pending, errors[n], queued[n].started) for n in rest])))
        for n, member in enumerate(members):
            member.succeed(ended[n])

    def _save(self, agent: str, contexts: list, record: Callable[[list[Exception | None]], None],
              group: int) -> tuple[list, bool]:
        """Save a group's entries in the agent's logs, `record(errors)` running in the commit that ingests them;
        return what `save_contexts` does, and whether they were ingested. In an Org folder the entries are
        appended and synced to disk first, and the ingest may be put off (`_ingest_now`): then `record` does
        not run. With no folder the write is the commit; under review, the proposal's."""
        if not isinstance(self.workspace, FolderWorkspace):
            return self.memory.save_contexts(agent, contexts, then=record, operation="delivery"), True
        with self.workspace.held(self.memory.folder(agent)):
            saved = self.memory.save_contexts(agent, contexts, operation="delivery", ingest=False)
            errors = [result if isinstance(result, Exception) else None for result in saved]
            if any(error is None for error in errors) and not self._ingest_now(agent, group):
                return saved, False
            self._ingest(agent, lambda: record(errors))
        return saved, True

    def _ingest(self, agent: str, record: Callable[[], None] | None = None) -> None:
        """Ingest the agent's logs; the records of the deliveries answered before their entries were ingested
        (and `record()`) land in its commit. Those that did not land wait for the next ingest (or, if the
        receiver stops first, for `recover`)."""
        with self._counting:
            late = list(self._late.pop(agent, {}).values())
        landed = []

        def then() -> None:
            if record is not None:
                record()
            if late:
                self.log.finish(late)
            landed.append(True)

        try:
            self.memory.ingest_logs(agent, then=then)
        except BaseException:
            landed.clear()
            raise
        finally:
            if late and not landed:
                with self._counting:
                    self._late.setdefault(agent, {}).update((done.id, done) for done in late)
                    self._unsettled.setdefault(agent, time.monotonic())

    def _answered(self, delivery_id: str) -> Delivery | None:
        """The record this process answered a delivery with, while the one in the store waits for its ingest."""
        with self._counting:
            return next((late[delivery_id] for late in self._late.values() if delivery_id in late), None)

    @contextmanager
    def _on_its_way(self, route: bool) -> Iterator[None]:
        """Count a delivery to route from its claim to its answer; the last one of a burst to end (routed or not)
        ingests what groups appended without ingesting it (`_ingest_now`), unless another one comes within
        SETTLE_AFTER seconds."""
        if not route:
            yield
            return
        with self._counting:
            self._on_way += 1
            self._counting.notify_all()
        try:
            yield
        finally:
            with self._counting:
                self._on_way -= 1
                # The last one of a burst waits a moment for another to come, which would leave it to later.
                if self._on_way == 0 and self._unsettled:
                    self._counting.wait_for(lambda: self._on_way > 0, SETTLE_AFTER)
                unsettled = sorted(self._unsettled) if self._on_way == 0 else []
            for agent in unsettled:
                self._settle(agent)

    def _ingest_now(self, agent: str, group: int) -> bool:
        """Whether the `group` deliveries just appended to the agent's logs are ingested now, their records
        landing in that commit; if not, they are answered at once (their entries and pending records durable),
        and a later group, or the last delivery of the burst to end, ingests their entries and records them.
        It is put off only while other deliveries to route are on their way or entries of earlier groups wait
        (a burst whose deliveries come a few at a time), and for at most INGEST_EVERY seconds since the first
        entry it leaves waiting."""
        now = time.monotonic()
        with self._counting:
            waiting = self._on_way > group or agent in self._unsettled
            if waiting and now - self._unsettled.get(agent, now) < INGEST_EVERY:
                self._unsettled.setdefault(agent, now)
                return False
            self._unsettled.pop(agent, None)
        return True

    def _settle(self, agent: str) -> None:
        """Ingest what groups appended to the agent's logs without ingesting it, and record those deliveries
        (when this fails, the next ingest does it, or, if the receiver stops first, `recover`)."""
        try:
            with self.workspace.held(self.memory.folder(agent)):
                with self._counting:
                    if self._unsettled.pop(agent, None) is None:
                        return
                self._ingest(agent)
        except Exception:  # noqa: BLE001 - nothing is lost: the next sync of the folder ingests them
            _log.exception("ingesting the daily logs of agent %s failed", agent)

    def _landed(self, done: Delivery) -> bool:
        """Whether the log holds the record `done` of a delivery (False when it cannot tell)."""
        try:
            held = self.log.get(done.id)
        except Exception:  # noqa: BLE001 - cannot tell: record it again
            return False
        return (held.outcome, held.status, held.duration_us) == (done.outcome, done.status, done.duration_us)

    def _end(self, routed: list[tuple[Delivery, Exception | None, float | None]]) -> list[Delivery]:
        """Record, in one transaction, how pending deliveries ended, given the error of each routing (None: it
        was routed) and when each started (None: keep its duration)."""
        ended = self._ended(routed)
        self.log.finish(ended)
        return ended

    def _ended(self, routed: list[tuple[Delivery, Exception | None, float | None]]) -> list[Delivery]:
        """How pending deliveries ended, given the error of each routing (None: it was routed) and when each
        started (None: keep its duration)."""
        ended = []
        for pending, error, started in routed:
            duration = pending.duration_us if started is None else _since(started)
            if error is None:
                ended.append(replace(pending, status=200, outcome=Outcome.ROUTED, duration_us=duration))
                continue
            if isinstance(error, (CortexError, OSError)):
                cause = str(error)
            else:
                cause = type(error).__name__
                _log.error("webhook %s: routing delivery %s failed", pending.webhook, pending.id, exc_info=error)
            failed = replace(pending, status=500, reason=Reason.ROUTING_FAILED.value, duration_us=duration,
                             detail=f"writing to the memory of agent {pending.agent!r} failed: {cause}")
            # Only the ingest failed: it stays pending, so that a retry ingests the entry, not writes it twice.
            # Else it failed, and keeps its body, so that `redeliver` can route it once the cause is fixed.
            ended.append(failed if self._entry_written(failed) else replace(failed, outcome=Outcome.FAILED))
        return ended

    def _entry_written(self, delivery: Delivery) -> bool:
        """Whether the agent's daily log holds the whole entry of `delivery` (True when that cannot be read): one
        an append left cut off is not. (Without its body, an entry naming it is taken for it.)"""
        text = self._daily_log(_log_file(delivery))
        if text is None:
            return True
        entry = self._entry(delivery) or f":SESSION:  {delivery.id}\n"
        return entry in text or entry.replace("\n", "\r\n") in text

    def _entry(self, delivery: Delivery) -> str | None:
        """The daily-log entry routing `delivery` writes (None when its body is not kept)."""
        try:
            body = self.log.body(delivery.id)
        except NotFound:
            return None
        return log_entry(memory_context(delivery, body, parse_payload(body)), _moment(delivery))

    def _cut_torn(self, agent: str, path: str) -> None:
        """Cut off the start of an entry that an append stopped partway left at the end of the agent's daily log
        `path` (an entry of a delivery still pending there): it is written again whole. (A store's working
        state has no such entry: a commit lands whole.)"""
        if self.workspace.root is None:
            return
        entries = [entry for delivery, _, _ in self.log.pending()
                   if delivery.agent and _log_file(delivery) == path and (entry := self._entry(delivery))]

        def cut(current: Current) -> bytes | object:
            torn = torn_tail(current.data, entries) if current.exists and entries else 0
            return current.data[:-torn] if torn else UNCHANGED

        with self.workspace.held(self.memory.folder(agent)):
            self.workspace.change_files(f"cut off an entry a stopped receiver left partly written in {path}",
                                        {path: cut}, operation="delivery")

    def _daily_log(self, path: str) -> str | None:
        """The text of a daily log as this machine has it ("" when there is no such log; None when it cannot be
        read, so that staying pending wins over writing twice)."""
        try:
            data = self.workspace.read(path)
        except Exception:  # noqa: BLE001 - cannot tell
            return None
        return "" if data is None else data.decode("utf-8", errors="replace")

    def _assess(self, endpoint: Endpoint, verifier: Verifier | None, headers: dict[str, str], body: bytes,
                record: dict[str, object]) -> _Assessed:
        """Fill in the record up to routing; say what the writing part has to do."""
        definition = endpoint.definition
        if len(body) > self.max_body:
            # Reading stopped past the cap, so the size is a lower bound and no digest is kept.
            record.update(status=413, outcome=Outcome.TOO_LARGE, event=event_type(headers),
                          reason=Reason.BODY_TOO_LARGE.value, detail=f"the body is over the {self.max_body} byte cap")
            return _Assessed()
        keys: list[SeenKey] = []
        if verifier is not None:
            verdict = verifier.verify(headers, body)
            if not verdict.accepted:
                record.update(status=401, outcome=Outcome.REJECTED, verified=False, event=event_type(headers),
                              reason=verdict.reason.value, detail=verdict.detail)
                return _Assessed()
            record["verified"] = True
            if verdict.replay_key:
                # The verifier's clock counts whole seconds: a copy passes it until the end of the last one.
                keys.append(SeenKey(REPLAY, verdict.replay_key, (verdict.replay_until + 1) * 1_000_000_000))
        else:
            record["detail"] = (f"not verified: a redelivery of {record['redelivery_of']}"
                                if record["redelivery_of"] else "not verified: verification is off")
        try:
            payload = parse_payload(body)
            record["event"] = event_type(headers, payload)
            if payload is NOT_JSON and needs_json(definition, headers):
                raise PayloadRefused(Reason.NOT_JSON, "the body is not JSON"
                                     + (", which the filter needs to read" if endpoint.filter else ""))
            result = matches(endpoint.filter, payload) if payload is not NOT_JSON else FilterResult(True, "no filter")
        except FilterFailed as failed:
            return _invalid(record, headers, Reason.FILTER_FAILED, str(failed))
        except PayloadRefused as refused:
            return _invalid(record, headers, refused.reason, str(refused))
        record.update(filter_matched=result.matched, filter_reason=result.reason)
        if verifier is not None and (given := provider_delivery_id(definition.provider, headers, payload, body)):
            keys.append(SeenKey(DELIVERY, given, record["time_ns"] + span_ns(self.log.keep_for or KEEP_FOR)))
        if not result.matched:
            record.update(status=200, outcome=Outcome.FILTERED)
        elif definition.agent is None:
            record.update(status=200, outcome=Outcome.ACCEPTED)
        return _Assessed(keep=True, keys=keys, route=result.matched and definition.agent is not None,
                         payload=payload)


def _invalid(record: dict[str, object], headers: dict[str, str], reason: Reason, detail: str) -> _Assessed:
    """A verified body the receiver will not process: 400 with the reason code, the body kept."""
    record.setdefault("event", event_type(headers))
    record.update(status=400, outcome=Outcome.INVALID, reason=reason.value, detail=detail)
    return _Assessed(keep=True)


def _copy(record: dict[str, object], key: SeenKey, holder: Delivery) -> Delivery:
    """The record of a delivery whose key another one holds: a replay, a duplicate, or one still in progress."""
    if key.kind == REPLAY:
        record.update(status=401, outcome=Outcome.REJECTED, verified=False, reason=Reason.REPLAY.value,
                      detail=f"a copy of delivery {holder.id}, within the time its signature is good for")
    elif holder.outcome == Outcome.PENDING:
        record.update(status=409, outcome=Outcome.IN_PROGRESS, reason=Reason.IN_PROGRESS.value,
                      duplicate_of=holder.id, detail=f"delivery {holder.id} has this id and is being routed; "
                                                     "try again later")
    else:
        record.update(status=200, outcome=Outcome.DUPLICATE, duplicate_of=holder.id,
                      detail=f"the provider's id names delivery {holder.id}, already {holder.outcome}")
    return Delivery(**record)


def _abandoned(delivery: Delivery, owner: tuple[str, int] | None) -> bool:
    """Whether no live process is routing a pending delivery (none of this process's threads is: the caller
    holds it)."""
    if owner is None or time.time_ns() - delivery.time_ns > span_ns(LEASE):
        return True
    host, pid = owner
    if host != socket.gethostname():
        return False  # another machine's process: only the lease tells
    return pid == os.getpid() or not alive(pid)


def _filter(definition: WebhookDefinition) -> JsonPathFilter | None:
    try:
        return json_filter(definition.filter)
    except UserError as err:
        raise UserError(f"webhook {definition.name!r}: {err}") from None


def _log_file(delivery: Delivery) -> str:
    return log_path(delivery.agent, _moment(delivery).date())


def _moment(delivery: Delivery) -> datetime:
    return datetime.fromtimestamp(delivery.time_ns / 1e9)


def _since(started: float) -> int:
    return round((time.perf_counter() - started) * 1e6)


def _options(definition: WebhookDefinition, base_dir, environ) -> dict[str, object]:
    """The verifier options a definition sets, by provider."""
    if definition.provider is Provider.CUSTOM and definition.signature:
        s = definition.signature
        return {"header": s.header, "prefix": s.prefix, "encoding": s.encoding.value, "algorithm": s.algorithm.value}
    if definition.provider is Provider.JWT and definition.jwt:
        j = definition.jwt
        options: dict[str, object] = {"algorithms": j.algorithms, "issuer": j.issuer, "audience": j.audience,
                                      "body_hash_claim": j.body_hash_claim}
        if j.max_lifetime is not None:
            options["max_lifetime"] = max(1, round(j.max_lifetime.total_seconds()))
        if j.public_key is not None:
            # A public key is no secret, but it may live where secrets do: in a file or the environment.
            options["public_key"] = (resolve_secret(j.public_key, definition.name, environ=environ,
                                                    base_dir=base_dir).secret.reveal()
                                     if j.public_key.startswith(SECRET_SCHEME) else j.public_key)
        return options
    return {}
