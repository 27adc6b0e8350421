"""Real `cortex serve` processes on one store: restarts, SIGTERM and kill -9 (under load, and mid-append) lose and
double no delivery, and route none whose entry was cut off."""

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from datetime import datetime
from pathlib import Path

import httpx
import pytest

import cortex.api as cx
from tests.conftest import held_folder
from cortex.memory.changes import log_entry
from cortex.memory.layout import log_path
from cortex.memory.logs import log_addition, torn_tail
from cortex.webhooks import verifier_for
from cortex.webhooks.deliveries import DeliveryLog, Outcome
from cortex.webhooks.routing import memory_context, parse_payload

GITHUB_SECRET = "gh-s3cr3t-6f1d0c"
STRIPE_SECRET = "whsec_c3RyaXBlLXMzY3IzdA=="
ENV = {"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET, "STRIPE_WEBHOOK_SECRET": STRIPE_SECRET}
MAIN = "import sys; from cortex.cli import main; main(sys.argv[1:])"
SESSION = re.compile(r"^:SESSION:\s+([0-9a-f]{24})\s*$", re.MULTILINE)


class Receiver:
    """A `cortex serve` process on a free loopback port, its output gathered as it comes."""

    def __init__(self, store: Path, org: Path, *options: str):
        self.process = subprocess.Popen(
            [sys.executable, "-c", MAIN, "serve", "--store", str(store), "--org", str(org), "--port", "0", *options],
            env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        self.port: int | None = None
        started = threading.Event()
        threading.Thread(target=self._read, args=(started,), daemon=True).start()
        if not started.wait(60) or self.port is None:
            self.process.kill()
            raise AssertionError("cortex serve did not start:\n" + "".join(self.output))
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(timeout=30)  # one for every request: making a client costs milliseconds

    def _read(self, started: threading.Event) -> None:
        for line in self.process.stdout:
            self.output.append(line)
            if found := re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line):
                self.port = int(found[1])
                started.set()
        started.set()

    def post(self, path: str, body: bytes, headers: dict[str, str], timeout: float = 30) -> httpx.Response:
        return self.client.post(self.url + path, content=body, headers=headers, timeout=timeout)

    def stop(self, sig: int = signal.SIGTERM, within: float = 15) -> float:
        """Send `sig` and wait for the process to end; return how long that took."""
        started = time.monotonic()
        self.process.send_signal(sig)
        try:
            self.process.wait(within)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"cortex serve still ran {within} s after signal {sig}:\n" + "".join(self.output))
        return time.monotonic() - started


@pytest.fixture
def receivers(tmp_path, org):
    """Start receivers on one store and Org folder; every one still running at the end is killed."""
    started: list[Receiver] = []

    def start(*options: str, store: str | Path = tmp_path / "store") -> Receiver:
        started.append(Receiver(store, org, *options))
        return started[-1]

    yield start
    for receiver in started:
        receiver.client.close()
        if receiver.process.poll() is None:
            receiver.process.kill()
            receiver.process.wait()


def github(payload: dict, delivery: str | None = None) -> tuple[dict[str, str], bytes]:
    body = json.dumps(payload).encode()
    return {"Content-Type": "application/json", "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            **verifier_for("github", GITHUB_SECRET).sign(body)}, body


def stripe(payload: dict) -> tuple[dict[str, str], bytes]:
    body = json.dumps(payload).encode()
    return {"Content-Type": "application/json", **verifier_for("stripe", STRIPE_SECRET).sign(body)}, body


def logged_sessions(org: Path) -> list[str]:
    """The delivery ids the assistant's daily logs hold, once per entry."""
    return [found for path in sorted((org / "agents" / "assistant" / "logs").glob("*.org"))
            for found in SESSION.findall(path.read_text())]


def opened(tmp_path: Path, org: Path):
    return cx.open(tmp_path / "store", org)


def test_a_replayed_stripe_delivery_is_refused_after_a_restart(receivers, tmp_path, org):
    headers, body = stripe({"id": "evt_1", "type": "payment_intent.succeeded"})
    first = receivers()
    assert first.post("/hooks/stripe", body, headers).json()["outcome"] == "routed"
    first.stop()
    again = receivers().post("/hooks/stripe", body, headers)
    assert again.status_code == 401 and again.json()["reason"] == "replay"
    with opened(tmp_path, org) as c:
        assert [d.outcome for d in DeliveryLog(c.store).deliveries()] == ["routed", "rejected"]


def test_receivers_on_one_store_share_the_replay_guard_and_the_idempotency_record(receivers, store_at, org):
    one, two = receivers(store=store_at), receivers(store=store_at)
    headers, body = github({"action": "opened", "number": 7})
    first = one.post("/hooks/github", body, headers).json()
    redelivered = two.post("/hooks/github", body, headers)  # GitHub's redelivery: same id, body and signature
    assert redelivered.status_code == 200
    assert redelivered.json()["outcome"] == "duplicate" and redelivered.json()["duplicate_of"] == first["delivery"]
    payment = {"id": "evt_7", "type": "payment_intent.succeeded"}
    headers, body = stripe(payment)
    paid = one.post("/hooks/stripe", body, headers).json()
    replayed = two.post("/hooks/stripe", body, headers)  # a captured request sent again, to the other receiver
    assert replayed.status_code == 401 and replayed.json()["reason"] == "replay"
    resigned = {**headers, **verifier_for("stripe", STRIPE_SECRET).sign(body, int(time.time()) + 1)}
    retried = two.post("/hooks/stripe", body, resigned)  # Stripe's retry: the same event, signed anew
    assert retried.status_code == 200
    assert retried.json()["outcome"] == "duplicate" and retried.json()["duplicate_of"] == paid["delivery"]
    assert logged_sessions(org) == [first["delivery"], paid["delivery"]]
    with cx.open(store_at, org) as c:
        assert [d.outcome for d in DeliveryLog(c.store).deliveries()] == [
            "routed", "duplicate", "routed", "rejected", "duplicate"]


def test_sigterm_stops_the_receiver_while_a_body_is_still_arriving(receivers):
    receiver = receivers()
    with socket.create_connection(("127.0.0.1", receiver.port)) as slow:
        slow.sendall(b"POST /hooks/github HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"action\": ")
        time.sleep(0.5)
        assert receiver.stop(within=15) < 10


def test_a_delivery_cut_off_before_its_log_entry_is_routed_on_the_next_start(receivers, tmp_path, org):
    receiver = receivers()
    headers, body = github({"action": "opened", "number": 1})
    answers = []

    def send() -> None:
        try:
            answers.append(receiver.post("/hooks/github", body, headers))
        except httpx.HTTPError:
            pass  # the receiver stopped before it answered

    # Holding the agent's lock stops the receiver between accepting the delivery and writing its entry.
    with held_folder(org / "agents" / "assistant"):
        sender = threading.Thread(target=send)
        sender.start()
        with opened(tmp_path, org) as c:
            log = DeliveryLog(c.store)
            deadline = time.monotonic() + 20
            while not log.deliveries() and time.monotonic() < deadline:
                time.sleep(0.05)
            [pending] = log.deliveries()
        assert pending.outcome == Outcome.PENDING
        assert receiver.stop(signal.SIGTERM, within=15) < 10
        sender.join()
    assert not answers or answers[0].status_code != 200  # never acknowledged
    restarted = receivers()  # starting completes what was cut off, and says so
    restarted.stop()
    assert any(pending.id in line and "is now routed" in line for line in restarted.output)
    with opened(tmp_path, org) as c:
        assert [(d.id, d.outcome) for d in DeliveryLog(c.store).deliveries()] == [(pending.id, "routed")]
        assert c.fsck() == []
    assert logged_sessions(org) == [pending.id]
    retried = receivers().post("/hooks/github", body, headers)  # the provider's retry of the unanswered delivery
    assert retried.status_code == 200 and retried.json()["outcome"] == "duplicate"
    assert logged_sessions(org) == [pending.id]


def test_kill_9_mid_burst_loses_and_doubles_nothing(receivers, tmp_path, org):
    count = 100
    requests = [github({"action": "opened", "number": n}) for n in range(count)]
    receiver = receivers()
    answers: dict[int, httpx.Response] = {}

    def send(n: int) -> None:
        try:
            answers[n] = receiver.post("/hooks/github", requests[n][1], requests[n][0], timeout=20)
        except httpx.HTTPError:
            pass  # the receiver died before answering: the provider will retry

    def wait(ready, what: str) -> None:
        deadline = time.monotonic() + 30
        while not ready():
            assert time.monotonic() < deadline, f"waited in vain for {what}"
            time.sleep(0.01)

    with ThreadPoolExecutor(20) as pool:
        for n in range(10):
            pool.submit(send, n)
        wait(lambda: len(answers) >= 10, "the first answers")
        # Holding the agent's lock lets a group of deliveries queue; the kill comes while it is being written.
        with held_folder(org / "agents" / "assistant"), opened(tmp_path, org) as c:
            for n in range(10, count):  # sent once the lock is held, however slow the machine: they queue
                pool.submit(send, n)
            log = DeliveryLog(c.store)
            wait(lambda: len(log.pending()) >= 20, "a group to queue")
        time.sleep(random.uniform(0, 0.02))
        receiver.process.kill()
        receiver.process.wait()
        pool.shutdown(cancel_futures=True)  # the provider sends no more to a receiver that is gone
    acknowledged = {n: r.json()["delivery"] for n, r in answers.items() if r.status_code == 200}
    assert acknowledged and len(acknowledged) < count, "the kill came before or after the burst"

    retry = receivers()  # starting completes what the kill cut off
    with opened(tmp_path, org) as c:
        logged = {d.id: d for d in DeliveryLog(c.store).deliveries()}
        assert set(acknowledged.values()) <= set(logged)
        assert all(logged[i].outcome == "routed" for i in acknowledged.values())
        assert Outcome.PENDING not in {d.outcome for d in logged.values()}
        routed = {i for i, d in logged.items() if d.outcome == "routed"}
    assert sorted(logged_sessions(org)) == sorted(routed)
    # The provider retries every delivery it saw no 2xx for; each is then routed exactly once.
    with ThreadPoolExecutor(20) as pool:
        retried = pool.map(lambda n: retry.post("/hooks/github", requests[n][1], requests[n][0]),
                           [n for n in range(count) if n not in acknowledged])
        assert {response.status_code for response in retried} == {200}
    retry.stop()
    numbers = [int(m) for path in (org / "agents" / "assistant" / "logs").glob("*.org")
               for m in re.findall(r'^\{\n  "action": "opened",\n  "number": (\d+)\n\}', path.read_text(), re.M)]
    assert sorted(numbers) == list(range(count))
    with opened(tmp_path, org) as c:
        assert c.fsck() == []
        assert sorted(logged_sessions(org)) == sorted(d.id for d in DeliveryLog(c.store).deliveries()
                                                      if d.outcome == "routed")


def entry_of(c, delivery) -> str:
    """The daily-log entry routing `delivery` writes, from its kept body."""
    body = DeliveryLog(c.store).body(delivery.id)
    moment = datetime.fromtimestamp(delivery.time_ns / 1e9)
    return log_entry(memory_context(delivery, body, parse_payload(body)), moment)


def assistant_logs(org: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted((org / "agents" / "assistant" / "logs").glob("*.org"))}


def check_routed_whole_once(c, org: Path) -> set[str]:
    """Every delivery ended, each routed one's entry whole in a log once, no entry cut off at a log's end, the
    logs as the store has them; the routed ids."""
    deliveries = DeliveryLog(c.store).deliveries()
    assert Outcome.PENDING not in {d.outcome for d in deliveries}
    routed = [d for d in deliveries if d.outcome == "routed"]
    entries = [entry_of(c, d) for d in routed]
    logs = assistant_logs(org)
    text = "".join(data.decode() for data in logs.values())
    assert sorted(logged_sessions(org)) == sorted(d.id for d in routed)
    assert all(text.count(entry) == 1 for entry in entries)
    assert all(torn_tail(data, entries) == 0 for data in logs.values())
    assert all(c.show(str(path.relative_to(org))).encode() == data for path, data in logs.items())
    assert c.fsck() == []
    return {d.id for d in routed}


def test_an_entry_a_kill_left_cut_off_is_written_again_whole_never_taken_as_routed(receivers, store_at, org):
    receiver = receivers(store=store_at)
    headers, body = github({"action": "opened", "number": 0})
    assert receiver.post("/hooks/github", body, headers).json()["outcome"] == "routed"  # the day's log exists
    requests = [github({"action": "opened", "number": n}) for n in range(1, 5)]

    def send(n: int) -> None:
        with suppress(httpx.HTTPError):  # the receiver is killed before it answers
            receiver.post("/hooks/github", requests[n][1], requests[n][0])

    # Holding the agent's lock keeps the deliveries pending, where the kill -9 then comes.
    with held_folder(org / "agents" / "assistant"), cx.open(store_at, org) as c:
        senders = [threading.Thread(target=send, args=(n,)) for n in range(len(requests))]
        for sender in senders:
            sender.start()
        log, deadline = DeliveryLog(c.store), time.monotonic() + 30
        while len(log.pending()) < len(requests):
            assert time.monotonic() < deadline, "the deliveries did not queue"
            time.sleep(0.02)
        receiver.process.kill()
        receiver.process.wait()
        # What an append killed partway leaves: the first pending entry whole, the start of the second one.
        pending = [d for d, _, _ in log.pending()]
        path = org / log_path("assistant", datetime.fromtimestamp(pending[0].time_ns / 1e9).date())
        data = path.read_bytes()
        addition = log_addition(data, [entry_of(c, d) for d in pending[:2]], "")
        cut = len(addition) - len(entry_of(c, pending[1])) // 2
        path.write_bytes(data + addition[:cut])
    for sender in senders:
        sender.join()
    receivers(store=store_at).stop()  # starting completes what the kill cut off
    with cx.open(store_at, org) as c:
        routed = check_routed_whole_once(c, org)
    assert routed >= {d.id for d in pending} and len(routed) == 1 + len(requests)
    retried = receivers(store=store_at).post("/hooks/github", requests[1][1], requests[1][0])
    assert retried.status_code == 200 and retried.json()["outcome"] == "duplicate"


def test_a_kill_9_after_claims_made_together_routes_each_once_and_a_copy_claimed_beside_its_original_is_a_duplicate(
        receivers, store_at, org):
    """Deliveries queued behind a group being written are claimed together, in one transaction, while they wait;
    a copy claimed with them finds its original. A kill -9 before they are written leaves them pending: the next
    start routes each once, and the provider's retries, the copy's among them, are duplicates."""
    receiver = receivers(store=store_at)
    headers, body = github({"action": "opened", "number": 0})
    assert receiver.post("/hooks/github", body, headers).json()["outcome"] == "routed"  # the day's log exists
    requests = [github({"action": "opened", "number": n}) for n in range(1, 6)]

    def send(request) -> None:
        with suppress(httpx.HTTPError):  # the receiver is killed before it answers
            receiver.post("/hooks/github", request[1], request[0])

    with held_folder(org / "agents" / "assistant"), cx.open(store_at, org) as c:
        log, deadline = DeliveryLog(c.store), time.monotonic() + 30
        senders = [threading.Thread(target=send, args=(request,)) for request in [*requests, requests[2]]]
        senders[0].start()
        while len(log.pending()) < 1:  # its group waits for the folder
            assert time.monotonic() < deadline, "the first delivery was not claimed"
            time.sleep(0.02)
        for sender in senders[1:]:
            sender.start()
        while len(log.pending()) < len(requests):  # the others, claimed while they wait; the copy is not
            assert time.monotonic() < deadline, "the deliveries queued behind it were not claimed"
            time.sleep(0.02)
        receiver.process.kill()
        receiver.process.wait()
        assert len(log.pending()) == len(requests)
    for sender in senders:
        sender.join()
    receivers(store=store_at).stop()  # starting routes what the kill left pending
    with cx.open(store_at, org) as c:
        assert len(check_routed_whole_once(c, org)) == 1 + len(requests)
    retry = receivers(store=store_at)
    retried = [retry.post("/hooks/github", body, headers) for headers, body in [*requests, requests[2]]]
    assert {(r.status_code, r.json()["outcome"]) for r in retried} == {(200, "duplicate")}
    assert len(logged_sessions(org)) == 1 + len(requests)


def test_a_kill_before_the_ingest_of_a_group_answered_on_its_entries_alone_loses_and_doubles_nothing(
        receivers, store_at, org):
    """Under load a group is answered once its entries are on disk, their ingest (and the records saying routed)
    put off; a kill -9 before that ingest leaves them pending, whole in the log: the next start ingests and
    records them, each once."""
    receiver = receivers(store=store_at)
    headers, body = github({"action": "opened", "number": 0})
    assert receiver.post("/hooks/github", body, headers).json()["outcome"] == "routed"  # the day's log exists
    requests = [github({"action": "opened", "number": n}) for n in range(1, 21)]
    answers: dict[int, httpx.Response] = {}

    def send(n: int) -> None:
        with suppress(httpx.HTTPError):  # the receiver is killed before it answers
            answers[n] = receiver.post("/hooks/github", requests[n - 1][1], requests[n - 1][0])

    def wait(ready, what: str) -> None:
        deadline = time.monotonic() + 30
        while not ready():
            assert time.monotonic() < deadline, f"waited in vain for {what}"
            time.sleep(0.02)

    with ThreadPoolExecutor(20) as pool, cx.open(store_at, org) as c:
        log = DeliveryLog(c.store)
        with held_folder(org):  # the Org folder's sync waits: nothing is ingested
            with held_folder(org / "agents" / "assistant"):  # the first group waits while the next one queues
                pool.submit(send, 1)
                wait(lambda: len(log.pending()) == 1, "the first delivery's claim")
                for n in range(2, 21):
                    pool.submit(send, n)
                wait(lambda: len(log.pending()) == 20, "the others' claims")
            # The first group, with more on their way, is answered on its entry, and so may the next be, its
            # ingest put off while the first one's waits (held up here) and no later than the last of the burst.
            wait(lambda: 1 in answers and len(logged_sessions(org)) == 21, "the first answer and every entry")
            receiver.process.kill()
            receiver.process.wait()
        pool.shutdown(cancel_futures=True)
        answered = {answer.json()["delivery"] for answer in answers.values()}
        assert answered <= {d.id for d, _, _ in log.pending()}  # none of them recorded as routed yet
    assert {(a.status_code, a.json()["outcome"]) for a in answers.values()} == {(200, "routed")} and 1 in answers
    retry = receivers(store=store_at)  # starting ingests and records what the kill left pending
    with cx.open(store_at, org) as c:
        routed = check_routed_whole_once(c, org)
    assert answered <= routed and len(routed) == 21
    retried = [retry.post("/hooks/github", requests[n - 1][1], requests[n - 1][0]) for n in range(1, 21)]
    assert {(r.status_code, r.json()["outcome"]) for r in retried} == {(200, "duplicate")}
    assert len(logged_sessions(org)) == 21


def test_kill_9_under_load_loses_no_acknowledged_delivery_and_routes_none_cut_off(receivers, store_at, org):
    count = 200
    requests = [github({"action": "opened", "number": n}) for n in range(count)]
    receiver = receivers(store=store_at)
    answers: dict[int, httpx.Response] = {}

    def send(n: int) -> None:
        with suppress(httpx.HTTPError):  # the receiver died before answering: the provider will retry
            answers[n] = receiver.post("/hooks/github", requests[n][1], requests[n][0], timeout=20)

    with ThreadPoolExecutor(20) as pool:
        for n in range(count):
            pool.submit(send, n)
        deadline = time.monotonic() + 60
        while len(answers) < 40 + random.randrange(40):  # mid-load: groups are being appended
            assert time.monotonic() < deadline, "the receiver answered too few deliveries"
            time.sleep(0.005)
        receiver.process.kill()
        receiver.process.wait()
        pool.shutdown(cancel_futures=True)
    acknowledged = {n: r.json()["delivery"] for n, r in answers.items() if r.status_code == 200}
    assert acknowledged and len(acknowledged) < count, "the kill came before or after the load"
    retry = receivers(store=store_at)  # starting completes what the kill cut off
    with cx.open(store_at, org) as c:
        assert set(acknowledged.values()) <= check_routed_whole_once(c, org)
    with ThreadPoolExecutor(20) as pool:  # the provider retries every delivery it saw no 2xx for
        retried = pool.map(lambda n: retry.post("/hooks/github", requests[n][1], requests[n][0]),
                           [n for n in range(count) if n not in acknowledged])
        assert {response.status_code for response in retried} == {200}
    retry.stop()
    numbers = [int(m) for data in assistant_logs(org).values()
               for m in re.findall(r'^\{\n  "action": "opened",\n  "number": (\d+)\n\}', data.decode(), re.M)]
    assert sorted(numbers) == list(range(count))
    with cx.open(store_at, org) as c:
        check_routed_whole_once(c, org)
