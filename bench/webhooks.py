"""Webhook costs: verification per provider against a bare HMAC of the same body, the receiver over
loopback HTTP with verification on against off, and routing into a daily log against accepting only,
all measured in one run."""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from _common import REPO, percentiles, report

import cortex.api as cx
from cortex.dsl import Provider, WebhookDefinition
from cortex.webhooks import verifier_for
from cortex.webhooks.receiver import serving
from cortex.webhooks.service import WebhookService

SECRETS = {"github": "bench-github-secret", "stripe": "whsec_bench_stripe", "slack": "bench-slack-secret",
           "standard": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "custom": "bench-custom-secret",
           "jwt": "bench-jwt-hmac-secret-of-32-bytes-or-more"}
OPTIONS = {"custom": {"header": "X-Signature", "prefix": "sha256=", "encoding": "base64"}}
SIZES = {"1 KB": 1 << 10, "1 MB": 1 << 20}
ROUNDS = {"1 KB": 2000, "1 MB": 40}
PASSES = 5
REQUESTS, CONCURRENCY, TIME_LIMIT = 600, 8, 30.0  # per receiver run; the time limit bounds a slow machine


def body_of(size: int) -> bytes:
    """A JSON object of exactly `size` bytes."""
    head = b'{"action":"opened","pad":"'
    return head + b"x" * (size - len(head) - 2) + b'"}'


def per_call(fn, rounds: int) -> float:
    """Seconds per call of fn(i) over `rounds` calls, best of PASSES passes."""
    best = float("inf")
    for _ in range(PASSES):
        start = time.perf_counter()
        for i in range(rounds):
            fn(i)
        best = min(best, (time.perf_counter() - start) / rounds)
    return best


def bare_hmac_cost(body: bytes, rounds: int) -> float:
    """Seconds to HMAC-SHA256 the body and compare the digest in constant time: the floor of any verifier."""
    key = SECRETS["github"].encode()
    expected = hmac.new(key, body, hashlib.sha256).digest()
    return per_call(lambda _: hmac.compare_digest(hmac.new(key, body, hashlib.sha256).digest(), expected), rounds)


def verify_cost(provider: str, body: bytes, rounds: int) -> float:
    """Seconds to verify one accepted delivery of `body` with the provider's verifier."""
    verifier = verifier_for(provider, SECRETS[provider], OPTIONS.get(provider))
    now = int(time.time())
    # One second apart, each verified at its own signing time: no delivery replays another.
    signed = [verifier.sign(body, now + i) for i in range(rounds * PASSES)]
    turn = iter(range(rounds * PASSES))

    def verify(_):
        i = next(turn)
        verdict = verifier.verify(signed[i], body, now + i)
        assert verdict.accepted, verdict

    return per_call(verify, rounds)


def verification() -> None:
    for label, size in SIZES.items():
        body, rounds = body_of(size), ROUNDS[label]
        print(f"verification of a {label} body, per delivery, vs a bare HMAC-SHA256 measured just before it")
        for provider in SECRETS:
            baseline = bare_hmac_cost(body, rounds)
            report(f"  verify {provider:8} (bare HMAC {baseline * 1e6:7.1f} us)",
                   verify_cost(provider, body, rounds) * 1e6, baseline * 1e6, "us")


def receiver_run(cortex, verify: bool, body: bytes, agent: str | None = None) -> tuple[float, float, float]:
    """Deliveries per second, p50 and p95 in ms, for REQUESTS signed deliveries from CONCURRENCY clients."""
    hook = WebhookDefinition("bench", "/hooks/bench", Provider.GITHUB, SECRETS["github"], agent=agent)
    service = WebhookService(cortex, [hook], verify=verify)
    signer = verifier_for("github", SECRETS["github"])
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "push", **signer.sign(body)}
    latencies: list[float] = []
    deadline = time.monotonic() + TIME_LIMIT
    with serving(service) as url, httpx.Client(base_url=url, timeout=30,
                                               limits=httpx.Limits(max_connections=CONCURRENCY)) as client:
        client.post("/hooks/bench", content=body, headers=headers)  # warm up the connection and the app

        def deliver(_):
            if time.monotonic() > deadline:
                return
            start = time.perf_counter()
            # Each delivery has an id of its own, as GitHub sends them.
            response = client.post("/hooks/bench", content=body,
                                   headers={**headers, "X-GitHub-Delivery": str(uuid.uuid4())})
            latencies.append(time.perf_counter() - start)
            assert response.status_code == 200, response.text

        start = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(deliver, range(REQUESTS)))
        elapsed = time.perf_counter() - start
    p50, p95 = percentiles(latencies)
    return len(latencies) / elapsed, p50, p95


def receiver() -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-webhooks-"))
    try:
        shutil.copytree(REPO / "org", work / "org")
        (work / "org" / "definitions.hy").unlink()
        with cx.open(work / "store", work / "org") as cortex:
            for label, size in SIZES.items():
                body = body_of(size)
                off_rate, off_p50, off_p95 = receiver_run(cortex, False, body)
                on_rate, _, on_p95 = receiver_run(cortex, True, body)
                print(f"receiver, {label} bodies, {CONCURRENCY} concurrent clients on loopback "
                      f"(verification off: {off_rate:.0f}/s, p50 {off_p50:.1f} ms, p95 {off_p95:.1f} ms)")
                report("  deliveries per second, verification on vs off", on_rate, off_rate, "/s")
                report("  p95 latency, verification on vs off", on_p95, off_p95, "ms")
            body = body_of(SIZES["1 KB"])
            accepted_rate, _, accepted_p95 = receiver_run(cortex, True, body)
            routed_rate, routed_p50, routed_p95 = receiver_run(cortex, True, body, agent="bench-agent")
            print(f"receiver, 1 KB bodies routed into an agent's daily log, {CONCURRENCY} concurrent clients "
                  f"(routed: {routed_rate:.0f}/s, p50 {routed_p50:.1f} ms, p95 {routed_p95:.1f} ms)")
            report("  deliveries per second, routed vs accepted only", routed_rate, accepted_rate, "/s")
            report("  p95 latency, routed vs accepted only", routed_p95, accepted_p95, "ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    print(f"{os.cpu_count()} CPUs")
    verification()
    receiver()


if __name__ == "__main__":
    main()
