"""The receiver over real HTTP on loopback: answers, the streaming size cap, concurrency, `cortex serve`."""

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from cortex.webhooks.receiver import serving
from cortex.webhooks.simulate import simulate

SECRET = "gh-s3cr3t-6f1d0c"
ENV = {"GITHUB_WEBHOOK_SECRET": SECRET, "STRIPE_WEBHOOK_SECRET": "whsec_c3RyaXBlLXMzY3IzdA=="}


@pytest.fixture
def service(cortex, monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    return cortex.webhook_service(max_body=100_000)


@pytest.fixture
def receiver(service):
    with serving(service) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def github(service, payload, event="pull_request"):
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": event,
               **service.endpoint("github-events").verifier.sign(body)}
    return headers, body


def test_a_signed_delivery_gets_200_with_its_delivery_id(receiver, service, org):
    headers, body = github(service, {"action": "opened", "number": 1})
    response = receiver.post("/hooks/github", content=body, headers=headers)
    assert response.status_code == 200
    answer = response.json()
    assert answer["outcome"] == "routed" and answer["agent"] == "assistant"
    logged = service.log.get(answer["delivery"])
    assert logged.trigger == "live" and logged.headers["x-hub-signature-256"] == "***"
    assert logged.headers["x-github-event"] == "pull_request"


def test_failed_verification_is_401_with_the_reason_code(receiver, service):
    headers, body = github(service, {"action": "opened"})
    tampered = receiver.post("/hooks/github", content=body.replace(b"opened", b"closed"), headers=headers)
    assert tampered.status_code == 401 and tampered.json()["reason"] == "signature_mismatch"
    unsigned = receiver.post("/hooks/github", content=body, headers={"Content-Type": "application/json"})
    assert unsigned.status_code == 401 and unsigned.json()["reason"] == "missing_header"
    assert SECRET not in tampered.text + unsigned.text


def test_a_body_that_is_not_json_is_400(receiver, service):
    body = b"action=opened"
    headers = service.endpoint("github-events").verifier.sign(body)
    response = receiver.post("/hooks/github", content=body, headers=headers)
    assert response.status_code == 400 and response.json()["outcome"] == "invalid"


def test_unknown_paths_are_404_and_other_methods_405(receiver):
    assert receiver.post("/hooks/unknown", content=b"{}").status_code == 404
    assert receiver.get("/hooks/github").status_code == 405


def test_a_path_with_a_trailing_slash_is_404_not_a_redirect_built_from_the_host_header(receiver):
    response = receiver.post("/hooks/github/", content=b"{}", headers={"Host": "evil.example"})
    assert response.status_code == 404 and "location" not in response.headers


def test_the_size_cap_holds_while_the_body_streams_in(receiver, service):
    def chunks():  # no Content-Length: the cap must be enforced while reading
        for _ in range(64):
            yield b"x" * 16_384

    response = receiver.post("/hooks/github", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["outcome"] == "too_large"
    declared = receiver.post("/hooks/github", content=b"[" + b"1," * 60_000 + b"1]")
    assert declared.status_code == 413
    logged = service.log.deliveries("github-events")
    # Reading stops at the first piece past the cap, well before the 1 MiB sent. A piece is what has
    # arrived: uvicorn gathers reads until 64 KiB wait, and asyncio reads up to 256 KiB at once.
    assert [d.status for d in logged] == [413, 413] and 100_000 < logged[0].size <= 100_000 + 65_536 + 262_144


def test_concurrent_deliveries_lose_nothing(receiver, service, org):
    count = 80
    requests = [github(service, {"action": "opened" if n % 4 else "closed", "number": n}) for n in range(count)]
    requests += [({**h, "X-Hub-Signature-256": "sha256=" + "0" * 64}, b) for h, b in requests[:8]]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        responses = list(pool.map(lambda hb: receiver.post("/hooks/github", content=hb[1], headers=hb[0]), requests))
    assert time.monotonic() - started < 30
    answers = [r.json() for r in responses]
    assert [r.status_code for r in responses] == [200] * count + [401] * 8
    routed = {a["delivery"] for a in answers if a["outcome"] == "routed"}
    assert len(routed) == count - count // 4
    logged = {d.id: d for d in service.log.deliveries()}
    assert {a["delivery"] for a in answers} == set(logged)  # every answered delivery is in the log
    assert {i for i, d in logged.items() if d.outcome == "routed"} == routed
    text = "".join(p.read_text() for p in (org / "agents" / "assistant" / "logs").glob("*.org"))
    assert set(re.findall(r":SESSION:  ([0-9a-f]{24})\n", text)) == routed
    numbers = sorted(json.loads(b)["number"] for (_, b), a in zip(requests, answers) if a["outcome"] == "routed")
    assert numbers == [n for n in range(count) if n % 4]


def test_simulation_over_http_is_logged_as_a_test(cortex, service):
    with serving(service) as url:
        result = simulate(service, "stripe-payments", {"type": "payment_intent.succeeded", "amount": 2000}, url=url)
        stale = simulate(service, "stripe-payments", {"type": "payment_intent.failed"}, url=url, stale=True)
    assert (result.status, result.outcome, result.verified, result.agent) == (200, "routed", True, "assistant")
    assert result.url == url + "/hooks/stripe" and result.latency_ms > 0
    assert service.log.get(result.delivery).trigger == "test"
    assert (stale.status, stale.reason, stale.verified) == (401, "timestamp_too_old", False)


def test_cortex_serve_runs_the_receiver_until_interrupted(tmp_path, org):
    code = "from cortex.cli.webhooks import serve_command; serve_command()"
    process = subprocess.Popen([sys.executable, "-c", code, "--store", str(tmp_path / "s"), "--org", str(org),
                                "--port", "0"], env={**os.environ, **ENV}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line)
            port = found and int(found[1])
        assert port, "the receiver did not start"
        response = httpx.post(f"http://127.0.0.1:{port}/hooks/stripe", content=b"{}", timeout=10)
        assert response.status_code == 401 and response.json()["reason"] == "missing_header"
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert "POST /hooks/github -> github-events (github, agent assistant)" in out
    assert SECRET not in out + err
