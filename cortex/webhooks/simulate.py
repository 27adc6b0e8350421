"""Simulated deliveries: a payload signed with a webhook's real scheme and secret, delivered in-process or over HTTP."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from cortex.dsl.definitions import Provider
from cortex.errors import UserError
from cortex.webhooks.receiver import TEST_TRIGGER_HEADER
from cortex.webhooks.service import WebhookService
from cortex.webhooks.verify import Verifier

__all__ = ["HTTP_TIMEOUT", "STALE_BY", "Simulation", "payload_bytes", "simulate"]

STALE_BY = 3600  # seconds in the past a stale delivery is signed: beyond every provider's tolerance
HTTP_TIMEOUT = 30.0


@dataclass(frozen=True)
class Simulation:
    """What became of a simulated delivery: the receiver's answer, and how long it took."""

    webhook: str
    status: int
    outcome: str
    delivery: str
    event: str
    verified: bool | None
    reason: str
    detail: str
    filter_matched: bool | None
    filter_reason: str
    agent: str | None
    latency_ms: float
    url: str | None  # None: delivered in-process

    @classmethod
    def from_answer(cls, webhook: str, status: int, answer: Mapping[str, object], latency_ms: float,
                    url: str | None) -> Simulation:
        """A simulation from the receiver's JSON answer (any field it left out stays empty)."""
        return cls(webhook=webhook, status=status, outcome=str(answer.get("outcome", "")),
                   delivery=str(answer.get("delivery", "")), event=str(answer.get("event", "")),
                   verified=answer.get("verified", False if status == 401 else None),
                   reason=str(answer.get("reason", "")), detail=str(answer.get("detail", answer.get("error", ""))),
                   filter_matched=answer.get("filter_matched"), filter_reason=str(answer.get("filter_reason", "")),
                   agent=answer.get("agent"), latency_ms=latency_ms, url=url)

    def repl_view(self, renderer):
        """The REPL's view: the summary as key/value pairs."""
        return renderer.key_values(self.summary())

    def summary(self) -> list[tuple[str, str]]:
        """(label, text) pairs as a person checks a delivery: verified, filtered, routed, answered, how fast."""
        verified = {True: "yes", False: f"no: {self.reason} ({self.detail})", None: "not checked"}[self.verified]
        filtered = {True: "matched", False: "filtered out", None: "not reached"}[self.filter_matched]
        status = f"{self.status} {self.outcome}".strip()
        if self.detail and self.verified is not False:
            status += f": {self.detail}"
        return [("webhook", f"{self.webhook} ({self.url or 'in-process'})"),
                ("verified", verified),
                ("filter", filtered + (f": {self.filter_reason}" if self.filter_reason else "")),
                ("agent", self.agent if self.outcome == "routed" else "- (not routed)"),
                ("status", status),
                ("delivery", self.delivery or "-"),
                ("latency", f"{self.latency_ms:.1f} ms")]


def simulate(service: WebhookService, name: str, payload: object, event: str | None = None, url: str | None = None,
             tamper: bool = False, stale: bool = False, *, private_key: bytes | None = None) -> Simulation:
    """Sign `payload` as webhook `name` of `service` would be and deliver it, in-process (through `service`) or to a
    receiver at `url`.

    `payload` is JSON text, raw bytes, or a value to serialise. `tamper` changes the body after
    signing (for a JWT, which does not sign the body, the token's signature); `stale` signs it
    an hour ago. A JWT webhook verified with a public key signs with `private_key` (PEM). In-process
    deliveries go through the same handler as the receiver's and are logged with trigger `test`;
    over HTTP the receiver logs them as `test` too.
    """
    if tamper and stale:
        raise UserError("choose --tamper or --stale, not both")
    endpoint = service.endpoint(name)
    if endpoint.verifier is None:
        raise UserError(f"webhook {name!r}: cannot sign a delivery while verification is off")
    signer = endpoint.verifier if private_key is None else _signer(name, endpoint.verifier, private_key)
    body = payload_bytes(payload)
    headers = {"Content-Type": "application/json"}
    if endpoint.definition.provider is Provider.GITHUB:
        headers["X-GitHub-Delivery"] = str(uuid.uuid4())  # GitHub names each delivery so
    if event:
        headers["X-GitHub-Event" if endpoint.definition.provider is Provider.GITHUB else "X-Event-Type"] = event
    headers.update(signer.sign(body, int(time.time()) - (STALE_BY if stale else 0)))
    if tamper:
        body = _tamper(signer, headers, body)
    if url is None:
        started = time.perf_counter()
        delivery = service.deliver(endpoint, headers, body, trigger="test", started=started)
        latency = (time.perf_counter() - started) * 1e3
        return Simulation.from_answer(name, delivery.status, delivery.answer(), latency, None)
    target = _target(url, endpoint.definition.path)
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:  # made before the clock starts: it loads CA certificates
        started = time.perf_counter()
        try:
            response = client.post(target, content=body, headers={**headers, TEST_TRIGGER_HEADER: "test"})
        except httpx.HTTPError as err:
            raise UserError(f"cannot deliver to {target}: {err}") from None
        latency = (time.perf_counter() - started) * 1e3
    try:
        answer = response.json()
    except ValueError:
        answer = {"error": response.text[:200]}
    return Simulation.from_answer(name, response.status_code, answer if isinstance(answer, dict) else {},
                                  latency, target)


def payload_bytes(payload: object) -> bytes:
    """The body for a payload: JSON text checked and kept as written, bytes as they are, else compact JSON."""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        try:
            json.loads(payload)
        except ValueError as err:
            raise UserError(f"the payload is not JSON: {err}") from None
        return payload.encode("utf-8")
    try:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as err:
        raise UserError(f"the payload cannot be sent as JSON: {err}") from None


def _signer(name: str, verifier: Verifier, private_key: bytes) -> Verifier:
    """The webhook's verifier, signing with a private key (a JWT webhook verified with a public key only)."""
    if verifier.scheme != "jwt":
        raise UserError(f"webhook {name!r}: {verifier.scheme} deliveries are signed with the secret, "
                        "not a private key")
    try:
        return verifier.signing_with(private_key)
    except UserError as err:
        raise UserError(f"webhook {name!r}: {err}") from None


def _tamper(verifier: Verifier, headers: dict[str, str], body: bytes) -> bytes:
    """Change what the signature covers, after signing: the body, or a JWT's own signature."""
    if verifier.scheme != "jwt":
        return body + b" "  # still the same JSON to a parser, but not the bytes that were signed
    name = verifier.header_names[0]
    head, _, signature = headers[name].rpartition(".")
    headers[name] = f"{head}.{'B' if signature.startswith('A') else 'A'}{signature[1:]}"
    return body


def _target(url: str, path: str) -> str:
    """A receiver's base URL with the webhook's path, or the URL itself when it names a path."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"--url {url!r}: expected http://HOST:PORT of a running `cortex serve`")
    return url if parts.path not in ("", "/") else url.rstrip("/") + path
