"""A session's webhooks, ready to receive: secrets resolved, verifiers built, and one delivery handler.

`WebhookService.deliver` is the whole life of a delivery after its body was read: size cap,
verification, JSON, filter, routing to the agent's daily log, and the delivery log. The HTTP
receiver and in-process simulation both call it. Verification runs concurrently; the writing
part (agent memory, delivery log) runs one delivery at a time, because the store has a single
writer and agent memory takes a file lock.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cortex.dsl.definitions import Provider, WebhookDefinition
from cortex.errors import CortexError, NotFound, UserError
from cortex.webhooks.deliveries import KEEP_FOR, Delivery, DeliveryLog, Outcome, id_time_ns, new_id
from cortex.webhooks.filters import FilterResult, JsonPathFilter, matches
from cortex.webhooks.routing import NOT_JSON, event_type, json_filter, memory_context, needs_json, parse_payload
from cortex.webhooks.secrets import SECRET_SCHEME, redact_headers, resolve_secret
from cortex.webhooks.verify import Verifier, verifier_for

MAX_BODY = 1 << 20  # bytes; a larger body is refused with 413

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoint:
    """One webhook as the receiver runs it: its definition, its verifier (None: not verifying), its filter."""

    definition: WebhookDefinition
    verifier: Verifier | None
    filter: JsonPathFilter | None


def build_endpoint(definition: WebhookDefinition, *, base_dir: str | Path | None = None,
                   environ: Mapping[str, str] | None = None, verify: bool = True) -> tuple[Endpoint, list[str]]:
    """An endpoint with its secret resolved (MissingSecret names the webhook), and warnings to show."""
    if not verify:
        return Endpoint(definition, None, json_filter(definition.filter)), []
    warnings: list[str] = []
    secret = None
    if definition.secret is not None:
        resolved = resolve_secret(definition.secret, definition.name, environ=environ, base_dir=base_dir)
        secret = resolved.secret
        warnings += [resolved.warning] if resolved.warning else []
    verifier = verifier_for(definition.provider.value, secret, _options(definition, base_dir, environ),
                            webhook=definition.name)
    return Endpoint(definition, verifier, json_filter(definition.filter)), warnings


def find_webhook(cx, name: str) -> WebhookDefinition:
    """The webhook called `name` among the session's definitions (NotFound lists the known ones)."""
    webhooks = cx.definitions().webhooks
    for definition in webhooks:
        if definition.name == name:
            return definition
    known = (", ".join(d.name for d in webhooks)
             or f"none; add one with `cortex webhook add` or in {cx.definitions_path}")
    raise NotFound(f"no webhook named {name!r} (defined: {known})")


class WebhookService:
    """The webhooks of a session by path, their delivery log, and the handler every delivery goes through."""

    def __init__(self, cx, webhooks: Iterable[WebhookDefinition] | None = None, *, verify: bool = True,
                 max_body: int = MAX_BODY, environ: Mapping[str, str] | None = None,
                 keep_logs: timedelta | None = KEEP_FOR):
        if max_body < 1:
            raise UserError(f"the body size cap must be at least 1 byte, not {max_body}")
        self.cx = cx
        self.log = DeliveryLog(cx.store, keep_logs)
        self.max_body = max_body
        self.warnings: list[str] = []
        self.endpoints: dict[str, Endpoint] = {}
        # Secrets are resolved here, at startup: a missing one stops everything, naming its webhook.
        for definition in cx.definitions().webhooks if webhooks is None else webhooks:
            endpoint, warnings = build_endpoint(definition, base_dir=cx.root, environ=environ, verify=verify)
            self.endpoints[definition.path] = endpoint
            self.warnings += warnings
        self._writing = threading.Lock()

    def endpoint(self, name: str) -> Endpoint:
        """The endpoint of the webhook called `name`."""
        for endpoint in self.endpoints.values():
            if endpoint.definition.name == name:
                return endpoint
        raise NotFound(f"no webhook named {name!r} (served: {', '.join(self.names()) or 'none'})")

    def names(self) -> list[str]:
        """The served webhooks' names, in definition order."""
        return [endpoint.definition.name for endpoint in self.endpoints.values()]

    def deliver(self, endpoint: Endpoint, headers: Mapping[str, str], body: bytes, *, trigger: str = "live",
                started: float | None = None, redelivery_of: str | None = None) -> Delivery:
        """Handle one delivery to `endpoint` from its headers and raw body; log it and return the record."""
        started = time.perf_counter() if started is None else started
        headers = dict(headers)
        definition = endpoint.definition
        delivery_id = new_id()
        verifier = None if redelivery_of else endpoint.verifier
        record: dict[str, object] = {
            "id": delivery_id, "webhook": definition.name, "path": definition.path, "trigger": trigger,
            "time_ns": id_time_ns(delivery_id), "size": len(body),
            "sha256": hashlib.sha256(body).hexdigest() if len(body) <= self.max_body else "",
            "headers": redact_headers(headers, verifier.header_names if verifier else ()),
            "redelivery_of": redelivery_of}
        route, keep = self._assess(endpoint, verifier, headers, bytes(body), record)
        with self._writing:
            if route:
                try:
                    self.cx.memory.save_context(definition.agent, memory_context(
                        definition, delivery_id, record["event"], trigger, body, route.payload))
                    record.update(status=200, outcome=Outcome.ROUTED, agent=definition.agent)
                except Exception as err:  # noqa: BLE001 - whatever failed, the delivery is still logged
                    # With its body, so `redeliver` can route it once the cause is fixed.
                    if isinstance(err, (CortexError, OSError)):
                        reason = str(err)
                    else:
                        reason = type(err).__name__
                        _log.exception("webhook %s: routing delivery %s failed", definition.name, delivery_id)
                    record.update(status=500, outcome=Outcome.FAILED, agent=definition.agent,
                                  detail=f"writing to the memory of agent {definition.agent!r} failed: {reason}")
            record["duration_us"] = round((time.perf_counter() - started) * 1e6)
            return self.log.record(Delivery(**record), body if keep else None)

    def redeliver(self, delivery_id: str) -> Delivery:
        """Run a logged delivery's body through filtering and routing again, as trigger `redeliver`.

        Verification is skipped: the signature may have gone stale since (and the log keeps
        headers redacted), and the delivery was verified when it first arrived. The webhook's
        current definition decides the filter and the agent.
        """
        original = self.log.get(delivery_id)
        body = self.log.body(delivery_id)
        return self.deliver(self.endpoint(original.webhook), original.headers, body, trigger="redeliver",
                            redelivery_of=original.id)

    def _assess(self, endpoint: Endpoint, verifier: Verifier | None, headers: dict[str, str], body: bytes,
                record: dict[str, object]) -> tuple[_Route | None, bool]:
        """Fill in the record up to routing; return what to route (None: nothing) and whether to keep the body."""
        if len(body) > self.max_body:
            # Reading stopped past the cap, so the size is a lower bound and no digest is kept.
            record.update(status=413, outcome=Outcome.TOO_LARGE, event=event_type(headers),
                          detail=f"the body is over the {self.max_body} byte cap")
            return None, False
        if verifier is not None:
            verdict = verifier.verify(headers, body)
            if not verdict.accepted:
                record.update(status=401, outcome=Outcome.REJECTED, verified=False, event=event_type(headers),
                              reason=verdict.reason.value, detail=verdict.detail)
                return None, False
            record["verified"] = True
        else:
            record["detail"] = (f"not verified: a redelivery of {record['redelivery_of']}"
                                if record["redelivery_of"] else "not verified: verification is off")
        payload = parse_payload(body)
        record["event"] = event_type(headers, payload)
        if payload is NOT_JSON and needs_json(endpoint.definition, headers):
            record.update(status=400, outcome=Outcome.INVALID,
                          detail="the body is not JSON" + (", which the filter needs to read"
                                                           if endpoint.filter else ""))
            return None, True
        result = matches(endpoint.filter, payload) if payload is not NOT_JSON else FilterResult(True, "no filter")
        record.update(filter_matched=result.matched, filter_reason=result.reason)
        if not result.matched:
            record.update(status=200, outcome=Outcome.FILTERED)
            return None, True
        if endpoint.definition.agent is None:
            record.update(status=200, outcome=Outcome.ACCEPTED)
            return None, True
        return _Route(payload), True


@dataclass(frozen=True)
class _Route:
    """A delivery ready to append to its agent's log."""

    payload: object


def _options(definition: WebhookDefinition, base_dir, environ) -> dict[str, object]:
    """The verifier options a definition sets, by provider."""
    if definition.provider is Provider.CUSTOM and definition.signature:
        s = definition.signature
        return {"header": s.header, "prefix": s.prefix, "encoding": s.encoding.value, "algorithm": s.algorithm.value}
    if definition.provider is Provider.JWT and definition.jwt:
        j = definition.jwt
        options: dict[str, object] = {"algorithms": j.algorithms, "issuer": j.issuer, "audience": j.audience}
        if j.public_key is not None:
            # A public key is no secret, but it may live where secrets do: in a file or the environment.
            options["public_key"] = (resolve_secret(j.public_key, definition.name, environ=environ,
                                                    base_dir=base_dir).secret.reveal()
                                     if j.public_key.startswith(SECRET_SCHEME) else j.public_key)
        return options
    return {}
