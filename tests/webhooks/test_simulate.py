"""Simulation: every provider signs with its real scheme and secret; tampered and stale deliveries are caught."""

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from cortex.errors import NotFound, UserError
from cortex.webhooks.deliveries import DeliveryLog
from cortex.webhooks.simulate import payload_bytes

SECRETS = {"GITHUB_WEBHOOK_SECRET": "gh-s3cr3t", "STRIPE_WEBHOOK_SECRET": "whsec_stripe_s3cr3t",
           "SLACK_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
           "STANDARD_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
           "CUSTOM_SECRET": "custom-s3cr3t", "JWT_SECRET": "a-jwt-hmac-secret-of-at-least-32-bytes!"}

HOOKS = """
(defwebhook slack-events :path "/hooks/slack" :provider slack :secret "secret://env/SLACK_SECRET" :agent reviewer)
(defwebhook ci :path "/hooks/ci" :provider standard :secret "secret://env/STANDARD_SECRET")
(defwebhook shop :path "/hooks/shop" :provider custom :secret "secret://env/CUSTOM_SECRET"
  :header "X-Shop-Hmac" :prefix "sig=" :encoding base64 :algorithm sha512)
(defwebhook sso :path "/hooks/sso" :provider jwt :secret "secret://env/JWT_SECRET" :algorithms ["HS256"]
  :issuer "https://sso.example" :audience "cortex")
(defwebhook keyed :path "/hooks/keyed" :provider jwt :public-key "secret://file/sso.pem" :algorithms ["ES256"])
"""


def private_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@pytest.fixture
def cx(cortex, org, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    with open(org / "definitions.hy", "a") as definitions:
        definitions.write(HOOKS)
    key = ec.generate_private_key(ec.SECP256R1())
    (org / "sso.pem").write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                serialization.PublicFormat.SubjectPublicKeyInfo))
    (org / "sso-private.pem").write_bytes(private_pem(key))
    return cortex


@pytest.mark.parametrize("name, payload, outcome", [
    ("github-events", {"action": "opened"}, "routed"),
    ("stripe-payments", {"type": "payment_intent.succeeded"}, "routed"),
    ("slack-events", {"type": "event_callback"}, "routed"),
    ("ci", {"type": "build.finished"}, "accepted"),
    ("shop", {"order": 1}, "accepted"),
    ("sso", {"user": "ann"}, "accepted"),
])
def test_each_provider_signs_what_its_verifier_accepts(cx, name, payload, outcome):
    result = cx.webhook_test(name, payload)
    assert (result.status, result.outcome, result.verified, result.url) == (200, outcome, True, None)
    assert DeliveryLog(cx.store).get(result.delivery).trigger == "test"


@pytest.mark.parametrize("name, reason", [
    ("github-events", "signature_mismatch"), ("stripe-payments", "signature_mismatch"),
    ("slack-events", "signature_mismatch"), ("ci", "signature_mismatch"), ("shop", "signature_mismatch"),
    ("sso", "invalid_token"),
])
def test_a_tampered_delivery_is_rejected(cx, name, reason):
    result = cx.webhook_test(name, '{"action": "opened", "type": "payment_intent.created"}', tamper=True)
    assert (result.status, result.outcome, result.verified, result.reason) == (401, "rejected", False, reason)
    assert result.filter_matched is None and result.agent is None


@pytest.mark.parametrize("name, reason", [
    ("stripe-payments", "timestamp_too_old"), ("slack-events", "timestamp_too_old"),
    ("ci", "timestamp_too_old"), ("sso", "token_expired"),
])
def test_a_stale_delivery_is_rejected_by_timestamped_schemes(cx, name, reason):
    result = cx.webhook_test(name, {"type": "payment_intent.created"}, stale=True)
    assert (result.status, result.reason) == (401, reason)


def test_a_scheme_without_a_timestamp_cannot_tell_a_stale_delivery(cx):
    assert cx.webhook_test("github-events", {"action": "opened"}, stale=True).verified is True


def test_the_filter_decision_and_event_are_reported(cx):
    result = cx.webhook_test("github-events", {"action": "closed"}, event="pull_request")
    assert (result.outcome, result.filter_matched, result.event) == ("filtered", False, "pull_request")
    assert result.filter_reason == '$.action found "closed", not equal to "opened"'
    stripe = cx.webhook_test("stripe-payments", {"type": "payment_intent.created"}, event="custom.event")
    assert stripe.event == "custom.event" and stripe.latency_ms > 0


def test_simulating_a_webhook_resolves_only_its_own_secret(cx, monkeypatch):
    monkeypatch.delenv("STRIPE_WEBHOOK_SECRET")
    assert cx.webhook_test("github-events", {"action": "opened"}).verified is True
    with pytest.raises(UserError, match="'stripe-payments'.*STRIPE_WEBHOOK_SECRET"):
        cx.webhook_test("stripe-payments", {})


def test_a_public_key_webhook_cannot_be_signed_without_its_private_key(cx):
    with pytest.raises(UserError, match="needs the webhook's private key"):
        cx.webhook_test("keyed", {})


def test_a_public_key_webhook_is_signed_with_the_private_key_given(cx, org):
    private = (org / "sso-private.pem").read_bytes()
    signed = cx.webhook_test("keyed", {"user": "ann"}, private_key=private)
    assert (signed.status, signed.outcome, signed.verified) == (200, "accepted", True)
    tampered = cx.webhook_test("keyed", {"user": "ann"}, private_key=private, tamper=True)
    assert (tampered.status, tampered.reason) == (401, "invalid_token")
    with pytest.raises(UserError, match="'keyed': the private key does not sign ES256 tokens"):
        cx.webhook_test("keyed", {}, private_key=private_pem(ec.generate_private_key(ec.SECP256R1())))
    with pytest.raises(UserError, match="'keyed': private_key is not an unencrypted PEM private key"):
        cx.webhook_test("keyed", {}, private_key=b"not a key")
    with pytest.raises(UserError, match="'github-events': github deliveries are signed with the secret"):
        cx.webhook_test("github-events", {}, private_key=private)
    with pytest.raises(UserError, match="'sso': HS256 tokens are signed with the webhook's secret"):
        cx.webhook_test("sso", {}, private_key=private)


def test_a_simulated_github_delivery_is_named_as_github_names_it(cx):
    first = cx.webhook_test("github-events", {"action": "opened"})
    again = cx.webhook_test("github-events", {"action": "opened"})
    assert first.outcome == again.outcome == "routed"  # each is a new delivery, with an id of its own
    logged = DeliveryLog(cx.store).get(first.delivery)
    assert len(logged.headers["X-GitHub-Delivery"]) == 36


def test_bad_requests_say_what_is_wrong(cx):
    with pytest.raises(UserError, match="not both"):
        cx.webhook_test("github-events", {}, tamper=True, stale=True)
    with pytest.raises(UserError, match="the payload is not JSON: Expecting value: line 1 column 1"):
        cx.webhook_test("github-events", "action=opened")
    with pytest.raises(NotFound, match="no webhook named 'nope'"):
        cx.webhook_test("nope", {})
    with pytest.raises(UserError, match="expected http://HOST:PORT"):
        cx.webhook_test("github-events", {}, url="localhost:8787")


def test_payload_bytes_keeps_json_text_as_written():
    assert payload_bytes('{ "a" : 1 }') == b'{ "a" : 1 }'
    assert payload_bytes({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert payload_bytes(b"\xff") == b"\xff"
    with pytest.raises(UserError, match="cannot be sent as JSON"):
        payload_bytes({"a": object()})
