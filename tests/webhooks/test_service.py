"""The delivery handler on a real LMDB store and real Org files: verify, filter, route, log, redeliver."""

import json
import time
from datetime import timedelta

import pytest

from cortex.dsl import JwtSettings, Provider, WebhookDefinition, WebhookFilter
from cortex.errors import NotFound
from cortex.webhooks import MissingSecret
from cortex.webhooks.deliveries import BODIES, DELIVERIES, Outcome

SECRET = "gh-s3cr3t-6f1d0c"
STRIPE_SECRET = "whsec_c3RyaXBlLXMzY3IzdA=="
OPENED = {"action": "opened", "pull_request": {"number": 482, "title": "Fix E1042"}}


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", STRIPE_SECRET)


@pytest.fixture
def service(cortex, env):
    """The bundled definitions: github-events (opened PRs) and stripe-payments, both to the assistant."""
    return cortex.webhook_service()


def signed(service, name, payload, event=None, **extra):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    endpoint = service.endpoint(name)
    headers = {"Content-Type": "application/json", **endpoint.verifier.sign(body), **extra}
    if event:
        headers["X-GitHub-Event"] = event
    return endpoint, headers, body


def agent_log(org, agent="assistant") -> str:
    return "".join(p.read_text() for p in sorted((org / "agents" / agent / "logs").glob("*.org")))


def test_a_verified_matching_delivery_lands_in_the_agents_daily_log(cortex, org, service):
    delivery = service.deliver(*signed(service, "github-events", OPENED, event="pull_request"))
    assert (delivery.status, delivery.outcome, delivery.agent) == (200, Outcome.ROUTED, "assistant")
    assert delivery.verified is True and delivery.event == "pull_request"
    text = agent_log(org)
    assert f":SESSION:  {delivery.id}\n" in text and f"- Delivery :: {delivery.id}" in text
    assert '"title": "Fix E1042"' in text
    # It is memory now: ingested, so found by the store's own queries.
    found = cortex.find(text="pull_request via github-events")
    assert len(found) == 1 and found[0].path.startswith("agents/assistant/logs/")
    assert service.log.get(delivery.id) == delivery
    assert json.loads(service.log.body(delivery.id)) == OPENED


def test_a_delivery_the_filter_refuses_is_acknowledged_and_logged_as_filtered(org, service):
    before = agent_log(org)
    delivery = service.deliver(*signed(service, "github-events", {"action": "closed"}))
    assert (delivery.status, delivery.outcome, delivery.filter_matched) == (200, Outcome.FILTERED, False)
    assert delivery.filter_reason == '$.action found "closed", not equal to "opened"'
    assert agent_log(org) == before
    assert service.log.body(delivery.id) == b'{"action": "closed"}'


def test_a_rejected_delivery_is_logged_without_its_body_or_secrets(cortex, org, service):
    endpoint, headers, body = signed(service, "github-events", OPENED)
    before = agent_log(org)
    delivery = service.deliver(endpoint, headers, body + b" ")
    assert (delivery.status, delivery.outcome, delivery.reason) == (401, Outcome.REJECTED, "signature_mismatch")
    assert delivery.headers["X-Hub-Signature-256"] == "***" and delivery.size == len(body) + 1
    assert agent_log(org) == before
    with pytest.raises(NotFound, match="kept no body"):
        service.log.body(delivery.id)
    stored = b"".join(v for t in (DELIVERIES, BODIES) for _, v in cortex.store.table(t).items())
    assert SECRET.encode() not in stored and headers["X-Hub-Signature-256"].encode() not in stored


def test_a_replayed_stripe_delivery_is_refused(service):
    endpoint, headers, body = signed(service, "stripe-payments", {"type": "payment_intent.succeeded"})
    assert service.deliver(endpoint, headers, body).outcome == Outcome.ROUTED
    again = service.deliver(endpoint, headers, body)
    assert (again.status, again.reason) == (401, "replay")


def test_a_body_over_the_cap_is_refused_before_verification(cortex, env):
    service = cortex.webhook_service(max_body=64)
    endpoint, headers, body = signed(service, "github-events", {"action": "opened", "pad": "x" * 100})
    delivery = service.deliver(endpoint, headers, body)
    assert (delivery.status, delivery.outcome, delivery.verified) == (413, Outcome.TOO_LARGE, None)
    assert delivery.sha256 == "" and "64 byte cap" in delivery.detail


def custom_service(cortex, **fields):
    hook = WebhookDefinition(**{"name": "ci", "path": "/hooks/ci", "provider": Provider.STANDARD,
                                "secret": STRIPE_SECRET, **fields})
    return cortex.webhook_service([hook])


def test_a_body_that_is_not_json_gets_400_where_the_filter_needs_json(cortex):
    service = custom_service(cortex, agent="assistant", filter=WebhookFilter("$.status", equals="failed"))
    delivery = service.deliver(*signed(service, "ci", b"status=failed"))
    assert (delivery.status, delivery.outcome, delivery.verified) == (400, Outcome.INVALID, True)
    assert "not JSON" in delivery.detail and service.log.body(delivery.id) == b"status=failed"


def test_a_form_body_without_a_filter_is_routed_as_text(cortex, org):
    service = custom_service(cortex, agent="reviewer")
    endpoint, headers, body = signed(service, "ci", b"text=* build failed&user=ann")
    delivery = service.deliver(endpoint, {**headers, "Content-Type": "application/x-www-form-urlencoded"}, body)
    assert delivery.outcome == Outcome.ROUTED
    assert "#+begin_example\ntext=* build failed&user=ann\n#+end_example" in agent_log(org, "reviewer")


def test_a_webhook_without_an_agent_accepts_and_logs(cortex):
    service = custom_service(cortex)
    delivery = service.deliver(*signed(service, "ci", {"type": "build.finished"}))
    assert (delivery.status, delivery.outcome, delivery.agent, delivery.event) == (200, "accepted", None,
                                                                                   "build.finished")


def test_a_failed_memory_write_is_a_500_and_redelivery_routes_it_later(cortex, org):
    service = custom_service(cortex, agent="blocked")
    (org / "agents" / "blocked").write_text("a file where the agent's folder should be")
    failed = service.deliver(*signed(service, "ci", {"type": "build.failed"}))
    assert (failed.status, failed.outcome) == (500, Outcome.FAILED)
    assert "memory of agent 'blocked'" in failed.detail
    (org / "agents" / "blocked").unlink()
    again = service.redeliver(failed.id)
    assert (again.status, again.outcome, again.trigger, again.redelivery_of) == (200, "routed", "redeliver",
                                                                                 failed.id)
    assert again.verified is None and "not verified: a redelivery" in again.detail
    assert f"- Delivery :: {again.id}" in agent_log(org, "blocked")


def test_redelivery_needs_no_secret_and_skips_a_stale_signature(cortex, org, env, monkeypatch):
    first = cortex.webhook_service().deliver(*signed(cortex.webhook_service(), "stripe-payments",
                                                   {"type": "payment_intent.created"}))
    monkeypatch.delenv("STRIPE_WEBHOOK_SECRET")
    monkeypatch.delenv("GITHUB_WEBHOOK_SECRET")
    again = cortex.webhook_service(verify=False).redeliver(first.id)
    assert again.outcome == Outcome.ROUTED and again.event == "payment_intent.created"
    assert agent_log(org).count("payment_intent.created via stripe-payments") == 2


def test_a_rejected_delivery_cannot_be_redelivered(service):
    endpoint, headers, body = signed(service, "github-events", OPENED)
    rejected = service.deliver(endpoint, {**headers, "X-Hub-Signature-256": "sha256=" + "0" * 64}, body)
    with pytest.raises(NotFound, match="kept no body"):
        service.redeliver(rejected.id)


def test_a_missing_secret_stops_startup_naming_the_webhook(cortex, monkeypatch):
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", SECRET)
    monkeypatch.delenv("STRIPE_WEBHOOK_SECRET", raising=False)
    with pytest.raises(MissingSecret, match="'stripe-payments'.*STRIPE_WEBHOOK_SECRET.*not set") as caught:
        cortex.webhook_service()
    assert SECRET not in str(caught.value)


def test_a_literal_secret_warns_without_showing_it(cortex):
    service = custom_service(cortex, provider=Provider.GITHUB, secret=SECRET)
    assert len(service.warnings) == 1 and "'ci'" in service.warnings[0] and SECRET not in service.warnings[0]


def test_a_file_secret_is_read_relative_to_the_org_root(cortex, org):
    (org / "ci.secret").write_text(SECRET + "\n")
    service = custom_service(cortex, provider=Provider.GITHUB, secret="secret://file/ci.secret")
    endpoint = service.endpoint("ci")
    assert service.deliver(endpoint, endpoint.verifier.sign(b"{}"), b"{}").verified is True
    assert SECRET not in repr(service.endpoints)


def test_unknown_webhooks_are_named(cortex, service):
    with pytest.raises(NotFound, match="no webhook named 'nope'.*github-events, stripe-payments"):
        cortex.webhook("nope")
    with pytest.raises(NotFound, match="served: github-events, stripe-payments"):
        service.endpoint("nope")


def test_an_unexpected_routing_error_is_still_logged_as_failed(cortex, service, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cortex.memory, "save_contexts", broken)
    delivery = service.deliver(*signed(service, "github-events", OPENED))
    assert (delivery.status, delivery.outcome) == (500, Outcome.FAILED) and delivery.detail.endswith("RuntimeError")
    assert service.log.get(delivery.id).outcome == Outcome.FAILED and service.log.body(delivery.id)
    assert "routing delivery" in caplog.text


def test_a_standard_webhooks_retry_re_signed_later_is_a_duplicate_not_a_replay(cortex, org):
    service = custom_service(cortex, agent="assistant")
    endpoint = service.endpoint("ci")
    body = b'{"type": "build.failed"}'
    before = agent_log(org).count("- Delivery :: ")
    first = service.deliver(endpoint, endpoint.verifier.sign(body, int(time.time()) - 60, message_id="msg_1"), body)
    retry = service.deliver(endpoint, endpoint.verifier.sign(body, message_id="msg_1"), body)
    assert (first.status, first.outcome) == (200, "routed")
    assert (retry.status, retry.outcome, retry.duplicate_of) == (200, "duplicate", first.id)
    assert retry.answer()["duplicate_of"] == first.id
    assert agent_log(org).count("- Delivery :: ") == before + 1


def test_a_delivery_that_failed_may_be_retried_and_is_routed_then(cortex, org):
    service = custom_service(cortex, agent="blocked")
    endpoint = service.endpoint("ci")
    (org / "agents" / "blocked").write_text("a file where the agent's folder should be")
    body = b'{"type": "build.failed"}'
    failed = service.deliver(endpoint, endpoint.verifier.sign(body, message_id="msg_2"), body)
    assert (failed.status, failed.outcome, failed.reason) == (500, "failed", "routing_failed")
    (org / "agents" / "blocked").unlink()
    retried = service.deliver(endpoint, endpoint.verifier.sign(body, message_id="msg_2"), body)
    assert (retried.status, retried.outcome) == (200, "routed")
    again = service.deliver(endpoint, endpoint.verifier.sign(body, message_id="msg_2"), body)
    assert (again.outcome, again.duplicate_of) == ("duplicate", retried.id)


def test_a_duplicate_of_a_filtered_delivery_is_acknowledged_and_not_routed(cortex, org, service):
    endpoint, headers, body = signed(service, "github-events", {"action": "closed"},
                                     **{"X-GitHub-Delivery": "d-1"})
    assert service.deliver(endpoint, headers, body).outcome == "filtered"
    assert service.deliver(endpoint, headers, body).outcome == "duplicate"
    # GitHub does not sign the delivery id: bound to the body, it cannot pass for another delivery.
    _, headers2, body2 = signed(service, "github-events", OPENED, **{"X-GitHub-Delivery": "d-1"})
    assert service.deliver(endpoint, headers2, body2).outcome == "routed"


def test_an_entry_written_but_not_ingested_stays_pending_and_a_retry_completes_it_once(cortex, org, service,
                                                                                       monkeypatch):
    endpoint, headers, body = signed(service, "github-events", OPENED, **{"X-GitHub-Delivery": "d-2"})
    synced = cortex.workspace._synced

    def full_disk(scope, progress=None, written=None, *args, **kwargs):  # the sync of what the delivery wrote
        if scope.startswith("agents/assistant/logs"):
            raise OSError(28, "No space left on device")
        return synced(scope, progress, written, *args, **kwargs)

    monkeypatch.setattr(cortex.workspace, "_synced", full_disk)
    cut = service.deliver(endpoint, headers, body)
    assert (cut.status, cut.outcome, cut.reason) == (500, "pending", "routing_failed")
    assert agent_log(org).count(f":SESSION:  {cut.id}\n") == 1 and cortex.find(prop=("SESSION", cut.id)) == []
    monkeypatch.setattr(cortex.workspace, "_synced", synced)
    retry = service.deliver(endpoint, headers, body)  # the provider's retry, as after any 5xx
    assert (retry.status, retry.outcome, retry.duplicate_of) == (200, "duplicate", cut.id)
    assert service.log.get(cut.id).outcome == "routed"
    assert agent_log(org).count(f":SESSION:  {cut.id}\n") == 1
    assert len(cortex.find(prop=("SESSION", cut.id))) == 1  # and in the store


def test_replay_and_duplicate_records_are_logged_without_a_body(service):
    endpoint, headers, body = signed(service, "stripe-payments", {"id": "evt_9", "type": "payment_intent.created"})
    first = service.deliver(endpoint, headers, body)
    replay = service.deliver(endpoint, headers, body)
    assert (replay.status, replay.reason, replay.verified) == (401, "replay", False)
    assert first.id in replay.detail and "filter_matched" not in replay.answer()
    with pytest.raises(NotFound, match="kept no body"):
        service.log.body(replay.id)
    # Stripe's retry: the same event signed anew, so not a replay, but a duplicate of the event.
    resigned = {**headers, **endpoint.verifier.sign(body, int(time.time()) + 1)}
    assert service.deliver(endpoint, resigned, body).outcome == "duplicate"


def test_a_body_bound_jwt_used_twice_is_a_replay_even_after_a_restart(cortex):
    hook = WebhookDefinition("ci", "/hooks/ci", Provider.JWT, "a-jwt-hmac-secret-of-at-least-32-bytes!",
                             jwt=JwtSettings(("HS256",), body_hash_claim="body_sha256",
                                             max_lifetime=timedelta(minutes=5)))
    endpoint = cortex.webhook_service([hook]).endpoint("ci")
    body = b'{"build": 7}'
    headers = endpoint.verifier.sign(body)
    assert cortex.webhook_service([hook]).deliver(endpoint, headers, body).outcome == "accepted"
    again = cortex.webhook_service([hook]).deliver(endpoint, headers, body)
    assert (again.status, again.reason) == (401, "replay")
    other = cortex.webhook_service([hook]).deliver(endpoint, headers, b'{"build": 8}')
    assert (other.status, other.reason) == (401, "body_mismatch")


def test_a_delivery_routed_under_review_is_acknowledged_logged_and_waits_as_a_proposal(tmp_path, org, env):
    import cortex.api as cx

    with cx.open(tmp_path / "reviewed", org, review=True) as reviewed:
        reviewed.ingest()
        before = agent_log(org)
        service = reviewed.webhook_service()
        delivery = service.deliver(*signed(service, "github-events", OPENED, event="pull_request"))
        assert (delivery.status, delivery.outcome) == (200, Outcome.ROUTED) and service.log.get(delivery.id) == delivery
        [proposal] = reviewed.proposals()
        assert proposal.operation == "delivery" and proposal.agent == "assistant" and agent_log(org) == before
        reviewed.accept_proposal(proposal.id)
        assert f"- Delivery :: {delivery.id}" in agent_log(org)
