"""Group commit of deliveries over real HTTP on loopback and a real LMDB store: concurrent deliveries share
their writes, each is answered with its own outcome, and one bad delivery leaves its group-mates alone.

Holding the agent's lock (as another process would) keeps the first group routing while the next one
queues, so which deliveries share a group is decided by the test, not by timing.
"""

import json
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import cortex.workspace as workspace
from cortex.dsl import Provider, WebhookDefinition
from tests.conftest import held_folder
from cortex.webhooks.deliveries import Outcome
from cortex.webhooks.receiver import serving

SECRET = "gh-s3cr3t-6f1d0c"
STRIPE_SECRET = "whsec_c3RyaXBlLXMzY3IzdA=="
SESSION = re.compile(r"^:SESSION:\s+([0-9a-f]{24})\s*$", re.MULTILINE)


@pytest.fixture
def service(cortex, org, monkeypatch):
    """The bundled webhooks, and one routing to agent `blocked`, whose folder a file stands in the way of."""
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", STRIPE_SECRET)
    (org / "agents" / "blocked").write_text("a file where the agent's folder should be")
    blocked = WebhookDefinition("blocked", "/hooks/blocked", Provider.GITHUB, SECRET, agent="blocked")
    return cortex.webhook_service([*cortex.definitions().webhooks, blocked])


class Counted:
    """Calls of the group's writes: daily-log appends, ingests, and the transactions that end deliveries."""

    def __init__(self, cortex, service, monkeypatch):
        self.appends, self.ingests, self.finished = [], [], []
        edit, synced, finish = workspace.edit_file, cortex.workspace._synced, service.log.finish

        def syncing(scope, progress=None, written=None, *args, **kwargs):  # the sync of what a write wrote
            if written:
                self.ingests.append(scope)
            return synced(scope, progress, written, *args, **kwargs)

        monkeypatch.setattr(workspace, "edit_file", lambda *a, **k: self.appends.append(a[1]) or edit(*a, **k))
        monkeypatch.setattr(cortex.workspace, "_synced", syncing)
        monkeypatch.setattr(service.log, "finish", lambda ended: self.finished.append(ended) or finish(ended))


def github(service, number: int, delivery: str | None = None, path: str = "/hooks/github"):
    body = json.dumps({"action": "opened", "number": number}).encode()
    return path, {"Content-Type": "application/json", "X-GitHub-Event": "pull_request",
                  "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
                  **service.endpoint("github-events").verifier.sign(body)}, body


def stripe(service, event: str):
    body = json.dumps({"id": event, "type": "payment_intent.succeeded"}).encode()
    return "/hooks/stripe", {"Content-Type": "application/json",
                             **service.endpoint("stripe-payments").verifier.sign(body)}, body


def logged_sessions(org, agent="assistant") -> list[str]:
    return [found for path in sorted((org / "agents" / agent / "logs").glob("*.org"))
            for found in SESSION.findall(path.read_text())]


def wait_for_pending(service, count: int) -> None:
    """Wait until `count` deliveries are claimed and waiting to be routed."""
    deadline = time.monotonic() + 30
    while len(service.log.pending()) < count:
        assert time.monotonic() < deadline, f"{len(service.log.pending())} deliveries pending, not {count}"
        time.sleep(0.01)


def wait_for_queued(service, count: int) -> None:
    """Wait until `count` deliveries are queued behind the group being routed: a claimed delivery (pending)
    joins the routing queue a moment later, which on a busy machine can be after the next group was taken."""
    deadline = time.monotonic() + 30
    while len(service._routing._queue) < count:
        assert time.monotonic() < deadline, f"{len(service._routing._queue)} deliveries queued, not {count}"
        time.sleep(0.01)


def test_concurrent_deliveries_are_routed_in_groups_each_logged_once(cortex, org, service, monkeypatch):
    counted = Counted(cortex, service, monkeypatch)
    requests = [github(service, n) for n in range(50)]
    with serving(service) as url, httpx.Client(base_url=url, timeout=60) as client, \
            ThreadPoolExecutor(20) as pool:
        post = lambda request: client.post(request[0], content=request[2], headers=request[1])  # noqa: E731
        with held_folder(org / "agents" / "assistant"):
            first = pool.submit(post, requests[0])
            wait_for_pending(service, 1)  # its group is being routed, and waits for the lock
            rest = [pool.submit(post, request) for request in requests[1:]]
            wait_for_pending(service, 20)
            wait_for_queued(service, 19)  # 19 more queued behind it: all the clients can send
        answers = [first.result(), *(future.result() for future in rest)]
    assert {(a.status_code, a.json()["outcome"]) for a in answers} == {(200, "routed")}
    ids = [a.json()["delivery"] for a in answers]
    assert len(set(ids)) == 50 and sorted(logged_sessions(org)) == sorted(ids)
    assert {d.id: d.outcome for d in service.log.deliveries()} == dict.fromkeys(ids, Outcome.ROUTED)
    assert service.log.pending() == []
    # The 19 queued behind the first group were routed as one: one append. A group routed while others are on
    # their way puts its ingest off, and is answered once its entries are on disk; a later ingest takes them and
    # records how they ended, each delivery once.
    assert len(counted.appends) <= 50 - 18
    assert 1 <= len(counted.ingests) < len(counted.appends) and len(counted.finished) <= len(counted.appends)
    assert sum(map(len, counted.finished)) == 50 and max(map(len, counted.finished)) >= 19
    assert all(path.startswith("agents/assistant/logs/") for path in counted.appends)
    assert all(cortex.workspace.rendered(path).encode() == (org / path).read_bytes() for path in set(counted.appends))


def test_a_replay_a_duplicate_and_a_failure_in_a_group_leave_their_group_mates_routed(cortex, org, service,
                                                                                       monkeypatch):
    counted = Counted(cortex, service, monkeypatch)
    good = [github(service, n) for n in range(5)]
    twice = github(service, 100, delivery="retried-by-github")  # the provider's retry: same id, same body
    replayed = stripe(service, "evt_1")  # the very same signed request, twice
    failing = github(service, 200, path="/hooks/blocked")
    with serving(service) as url, httpx.Client(base_url=url, timeout=60) as client, \
            ThreadPoolExecutor(12) as pool:
        post = lambda request: client.post(request[0], content=request[2], headers=request[1])  # noqa: E731
        with held_folder(org / "agents" / "assistant"):
            first = pool.submit(post, good[0])
            wait_for_pending(service, 1)
            group = {name: pool.submit(post, request) for name, request in [
                *((f"good {n}", request) for n, request in enumerate(good[1:], 1)),
                ("twice", twice), ("twice again", twice), ("replayed", replayed), ("replayed again", replayed),
                ("failing", failing)]}
            wait_for_pending(service, 1 + 4 + 3)  # each copy waits for its original, which is queued
            wait_for_queued(service, 4 + 3)
        answers = {name: future.result() for name, future in group.items()}
    assert first.result().json()["outcome"] == "routed"
    outcome = {name: (a.status_code, a.json()["outcome"], a.json().get("reason")) for name, a in answers.items()}
    assert all(outcome[f"good {n}"] == (200, "routed", None) for n in range(1, 5))
    assert sorted([outcome["twice"], outcome["twice again"]]) == [(200, "duplicate", None), (200, "routed", None)]
    assert sorted([outcome["replayed"], outcome["replayed again"]]) == [(200, "routed", None),
                                                                        (401, "rejected", "replay")]
    assert outcome["failing"] == (500, "failed", "routing_failed")
    assert "memory of agent 'blocked'" in answers["failing"].json()["detail"]
    # The failure was routed in the same group as the others, which it did not hold back: their records
    # landed in one transaction (the first delivery's too, when its group's ingest was put off while they were
    # on their way), its own in one of its own.
    [shared] = [ended for ended in counted.finished if len(ended) > 1]
    mates = {answers[name].json()["delivery"] for name, (_, result, _) in outcome.items() if result == "routed"}
    assert {d.outcome for d in shared} == {Outcome.ROUTED} and mates <= {d.id for d in shared} and len(mates) == 6
    assert [[d.outcome for d in ended] for ended in counted.finished if Outcome.FAILED in {d.outcome for d in ended}
            ] == [[Outcome.FAILED]]
    routed = {a.json()["delivery"] for a in [first.result(), *answers.values()] if a.json()["outcome"] == "routed"}
    assert len(routed) == 7 and sorted(logged_sessions(org)) == sorted(routed)
    duplicate = next(a.json() for a in (answers["twice"], answers["twice again"]) if a.json()["outcome"] == "duplicate")
    assert duplicate["duplicate_of"] in routed
    assert service.log.pending() == []


def test_a_provider_retry_of_a_delivery_being_routed_waits_for_it_and_is_a_duplicate(cortex, org, service):
    path, headers, body = github(service, 1, delivery="d-1")
    endpoint = service.endpoint("github-events")
    answers = {}
    with held_folder(org / "agents" / "assistant"):
        original = threading.Thread(target=lambda: answers.update(first=service.deliver(endpoint, headers, body)))
        original.start()
        wait_for_pending(service, 1)
        retry = threading.Thread(target=lambda: answers.update(retry=service.deliver(endpoint, headers, body)))
        retry.start()
        retry.join(0.3)
        assert retry.is_alive()  # not answered "in progress" while this process routes the original
    original.join()
    retry.join()
    assert answers["first"].outcome == Outcome.ROUTED
    assert (answers["retry"].outcome, answers["retry"].duplicate_of) == (Outcome.DUPLICATE, answers["first"].id)
    assert logged_sessions(org) == [answers["first"].id]


def test_deliveries_queued_behind_a_group_are_claimed_while_they_wait(cortex, org, service, monkeypatch):
    endpoint, batches = service.endpoint("github-events"), []
    claim_all = service.log.claim_all
    monkeypatch.setattr(service.log, "claim_all", lambda claims: batches.append(len(claims)) or claim_all(claims))
    answers = []

    def deliver(n: int) -> None:
        _, headers, body = github(service, n)
        answers.append(service.deliver(endpoint, headers, body))

    with held_folder(org / "agents" / "assistant"):
        threads = [threading.Thread(target=deliver, args=(n,)) for n in range(6)]
        threads[0].start()
        wait_for_pending(service, 1)  # its group is being routed, and waits for the lock
        for thread in threads[1:]:
            thread.start()
        wait_for_queued(service, 5)
        wait_for_pending(service, 6)  # claimed while they wait for their group, in batches
        assert len(service._routing._queue) == 5 and sum(batches) == 6 and len(batches) <= 6
    for thread in threads:
        thread.join()
    assert [a.outcome for a in answers] == [Outcome.ROUTED] * 6 and service.log.pending() == []
    assert sorted(logged_sessions(org)) == sorted(a.id for a in answers)


def test_when_the_claims_of_a_batch_fail_together_each_is_claimed_alone(cortex, org, service, monkeypatch):
    endpoint, claimed_alone = service.endpoint("github-events"), []
    claim = service.log.claim

    def failing(claims):
        raise OSError("the batch's transaction failed")

    monkeypatch.setattr(service.log, "claim_all", failing)
    monkeypatch.setattr(service.log, "claim", lambda *a: claimed_alone.append(a[0].id) or claim(*a))
    twice = github(service, 1, delivery="retried-by-github")
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda request: service.deliver(endpoint, request[1], request[2]),
                                [github(service, 0), twice, twice]))
    assert sorted(a.outcome for a in answers) == [Outcome.DUPLICATE, Outcome.ROUTED, Outcome.ROUTED]
    routed = [a.id for a in answers if a.outcome == Outcome.ROUTED]
    assert set(routed) <= set(claimed_alone) and sorted(logged_sessions(org)) == sorted(routed)
    assert service.log.pending() == []
