"""Verifiers against the providers' published examples, and against the usual attacks."""

import base64
import hashlib
import hmac
import json
import random

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from cortex.errors import UserError
from cortex.webhooks import Reason, Secret, verifier_for

# docs.github.com, "Validating webhook deliveries".
GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_BODY = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

# api.slack.com, "Verifying requests from Slack".
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TS = 1531420618
SLACK_BODY = (b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
              b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
              b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554"
              b"%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

# The Standard Webhooks reference libraries' test vector.
STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
STANDARD_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
STANDARD_TS = 1614265330
STANDARD_BODY = b'{"test": 2432232314}'
STANDARD_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

# RFC 7515 appendix A.1: an HS256 JWS whose claims are iss "joe" and exp 1300819380.
RFC7515_TOKEN = ("eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
                 ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
                 ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
RFC7515_KEY = base64.urlsafe_b64decode(
    "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow==")
RFC7515_EXP = 1300819380

STRIPE_SECRET = "whsec_test_stripe_signing_secret"
NOW = 1_700_000_000
NON_UTF8_BODY = b"\xff\xfe\x00caf\xe9 \x80"


def reason(verdict):
    assert not verdict.accepted
    return verdict.reason


def stripe_header(body, t, secret=STRIPE_SECRET, extra=""):
    """Stripe's scheme computed here from its documentation, independently of the signer under test."""
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return {"Stripe-Signature": f"t={t},v1={mac}{extra}"}


# --- GitHub ---

def test_github_documentation_example_verifies_and_signs():
    github = verifier_for("github", GITHUB_SECRET)
    assert github.verify({"X-Hub-Signature-256": GITHUB_SIGNATURE}, GITHUB_BODY).accepted
    assert github.sign(GITHUB_BODY) == {"X-Hub-Signature-256": GITHUB_SIGNATURE}


def test_github_headers_are_case_insensitive():
    github = verifier_for("github", GITHUB_SECRET)
    assert github.verify({"x-hub-signature-256": GITHUB_SIGNATURE}, GITHUB_BODY).accepted
    assert github.verify({"X-HUB-SIGNATURE-256": GITHUB_SIGNATURE}, GITHUB_BODY).accepted


@pytest.mark.parametrize("headers, expected", [
    ({}, Reason.MISSING_HEADER),
    ({"X-Hub-Signature": "sha1=" + "0" * 40}, Reason.MISSING_HEADER),
    ({"X-Hub-Signature-256": "sha1=" + GITHUB_SIGNATURE[7:]}, Reason.BAD_SCHEME),
    ({"X-Hub-Signature-256": GITHUB_SIGNATURE[7:]}, Reason.BAD_SCHEME),
    ({"X-Hub-Signature-256": GITHUB_SIGNATURE[:-2]}, Reason.BAD_FORMAT),
    ({"X-Hub-Signature-256": "sha256=" + GITHUB_SIGNATURE[7:].upper()}, Reason.BAD_FORMAT),
    ({"X-Hub-Signature-256": GITHUB_SIGNATURE + "00"}, Reason.BAD_FORMAT),
    ({"X-Hub-Signature-256": "sha256=" + "0" * 64}, Reason.SIGNATURE_MISMATCH),
])
def test_github_attacks_are_rejected_with_their_reason(headers, expected):
    assert reason(verifier_for("github", GITHUB_SECRET).verify(headers, GITHUB_BODY)) == expected


def test_github_tampered_and_reserialised_bodies_do_not_verify():
    github = verifier_for("github", "a webhook secret")
    body = b'{"action": "opened", "number": 7}'
    headers = github.sign(body)
    assert github.verify(headers, body).accepted
    assert reason(github.verify(headers, body.replace(b"7", b"8"))) == Reason.SIGNATURE_MISMATCH
    reserialised = json.dumps(json.loads(body), separators=(",", ":")).encode()
    assert reason(github.verify(headers, reserialised)) == Reason.SIGNATURE_MISMATCH
    assert reason(verifier_for("github", "another secret").verify(headers, body)) == Reason.SIGNATURE_MISMATCH


# --- Slack ---

def test_slack_documentation_example_verifies_and_signs():
    slack = verifier_for("slack", SLACK_SECRET)
    headers = {"X-Slack-Signature": SLACK_SIGNATURE, "X-Slack-Request-Timestamp": str(SLACK_TS)}
    assert slack.verify(headers, SLACK_BODY, now=SLACK_TS + 60).accepted
    assert slack.sign(SLACK_BODY, now=SLACK_TS) == headers


def test_slack_window_is_five_minutes_both_ways():
    headers = {"X-Slack-Signature": SLACK_SIGNATURE, "X-Slack-Request-Timestamp": str(SLACK_TS)}
    assert verifier_for("slack", SLACK_SECRET).verify(headers, SLACK_BODY, now=SLACK_TS + 300).accepted
    assert verifier_for("slack", SLACK_SECRET).verify(headers, SLACK_BODY, now=SLACK_TS - 300).accepted
    slack = verifier_for("slack", SLACK_SECRET)
    assert reason(slack.verify(headers, SLACK_BODY, now=SLACK_TS + 301)) == Reason.TIMESTAMP_TOO_OLD
    assert reason(slack.verify(headers, SLACK_BODY, now=SLACK_TS - 301)) == Reason.TIMESTAMP_TOO_NEW


@pytest.mark.parametrize("headers, expected", [
    ({"X-Slack-Request-Timestamp": str(SLACK_TS)}, Reason.MISSING_HEADER),
    ({"X-Slack-Signature": SLACK_SIGNATURE}, Reason.MISSING_HEADER),
    ({"X-Slack-Signature": "v1=" + SLACK_SIGNATURE[3:], "X-Slack-Request-Timestamp": str(SLACK_TS)},
     Reason.BAD_SCHEME),
    ({"X-Slack-Signature": SLACK_SIGNATURE[:40], "X-Slack-Request-Timestamp": str(SLACK_TS)}, Reason.BAD_FORMAT),
    ({"X-Slack-Signature": SLACK_SIGNATURE, "X-Slack-Request-Timestamp": "yesterday"}, Reason.BAD_FORMAT),
    ({"X-Slack-Signature": SLACK_SIGNATURE, "X-Slack-Request-Timestamp": str(SLACK_TS + 1)},
     Reason.SIGNATURE_MISMATCH),
])
def test_slack_attacks_are_rejected_with_their_reason(headers, expected):
    assert reason(verifier_for("slack", SLACK_SECRET).verify(headers, SLACK_BODY, now=SLACK_TS)) == expected


def test_slack_names_a_request_by_its_signature_until_the_window_closes():
    slack = verifier_for("slack", SLACK_SECRET)
    headers = {"X-Slack-Signature": SLACK_SIGNATURE, "X-Slack-Request-Timestamp": str(SLACK_TS)}
    first, copy = slack.verify(headers, SLACK_BODY, now=SLACK_TS), slack.verify(headers, SLACK_BODY, now=SLACK_TS + 10)
    assert first.replay_key == copy.replay_key == SLACK_SIGNATURE[3:]
    assert first.replay_until == SLACK_TS + 300


# --- Stripe ---

def test_stripe_signature_computed_from_the_documented_scheme_verifies():
    stripe = verifier_for("stripe", STRIPE_SECRET)
    body = b'{"id": "evt_1", "type": "payment_intent.succeeded"}'
    assert stripe.verify(stripe_header(body, NOW), body, now=NOW).accepted
    assert stripe.sign(body, now=NOW) == stripe_header(body, NOW)


def test_stripe_accepts_any_valid_v1_among_several():
    body = b'{"id": "evt_2"}'
    header = stripe_header(body, NOW)["Stripe-Signature"]
    t, good = header.split(",")
    rotated = {"Stripe-Signature": f"{t},v1={'ab' * 32},{good},v0={'cd' * 32}"}
    assert verifier_for("stripe", STRIPE_SECRET).verify(rotated, body, now=NOW).accepted
    only_wrong = {"Stripe-Signature": f"{t},v1={'ab' * 32},v1={'12' * 32}"}
    assert reason(verifier_for("stripe", STRIPE_SECRET).verify(only_wrong, body, now=NOW)) == \
        Reason.SIGNATURE_MISMATCH


def test_stripe_tolerance_is_300_seconds_both_ways():
    body = b"{}"
    for t, expected in [(NOW - 300, None), (NOW + 300, None),
                        (NOW - 301, Reason.TIMESTAMP_TOO_OLD), (NOW + 301, Reason.TIMESTAMP_TOO_NEW)]:
        verdict = verifier_for("stripe", STRIPE_SECRET).verify(stripe_header(body, t), body, now=NOW)
        assert verdict.reason == expected, t


@pytest.mark.parametrize("value, expected", [
    (f"v1={'ab' * 32}", Reason.BAD_FORMAT),
    (f"t={NOW},t={NOW},v1={'ab' * 32}", Reason.BAD_FORMAT),
    (f"t=soon,v1={'ab' * 32}", Reason.BAD_FORMAT),
    (f"t={NOW},v0={'ab' * 32}", Reason.BAD_SCHEME),
    (f"t={NOW},v1=abc", Reason.BAD_FORMAT),
    (f"t={NOW},v1={'AB' * 32}", Reason.BAD_FORMAT),
])
def test_stripe_malformed_headers_are_rejected(value, expected):
    verdict = verifier_for("stripe", STRIPE_SECRET).verify({"Stripe-Signature": value}, b"{}", now=NOW)
    assert reason(verdict) == expected


def test_stripe_tampered_body_is_rejected_and_a_copy_carries_the_same_replay_key():
    stripe = verifier_for("stripe", STRIPE_SECRET)
    body = b'{"amount": 100}'
    headers = stripe_header(body, NOW)
    assert reason(stripe.verify(headers, b'{"amount": 900}', now=NOW)) == Reason.SIGNATURE_MISMATCH
    first, copy = stripe.verify(headers, body, now=NOW), stripe.verify(headers, body, now=NOW + 299)
    assert first.accepted and (first.replay_key, first.replay_until) == (copy.replay_key, NOW + 300)
    resigned = stripe.verify(stripe_header(body, NOW + 1), body, now=NOW + 1)
    assert resigned.replay_key != first.replay_key  # a retry is a new request: its event id names the event


# --- Standard Webhooks ---

def standard_headers(signature=STANDARD_SIGNATURE, **changes):
    headers = {"webhook-id": STANDARD_ID, "webhook-timestamp": str(STANDARD_TS), "webhook-signature": signature}
    headers.update(changes)
    return headers


@pytest.mark.parametrize("secret", [STANDARD_SECRET, STANDARD_SECRET.removeprefix("whsec_")])
def test_standard_webhooks_reference_vector_signs_and_verifies(secret):
    standard = verifier_for("standard", secret)
    assert standard.sign(STANDARD_BODY, now=STANDARD_TS, message_id=STANDARD_ID) == standard_headers()
    assert standard.verify(standard_headers(), STANDARD_BODY, now=STANDARD_TS).accepted


def test_standard_webhooks_accepts_a_valid_signature_among_several():
    others = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
    headers = standard_headers(f"{others} {STANDARD_SIGNATURE} v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
    assert verifier_for("standard", STANDARD_SECRET).verify(headers, STANDARD_BODY, now=STANDARD_TS).accepted


@pytest.mark.parametrize("headers, expected", [
    ({"webhook-timestamp": str(STANDARD_TS), "webhook-signature": STANDARD_SIGNATURE}, Reason.MISSING_HEADER),
    ({"webhook-id": STANDARD_ID, "webhook-signature": STANDARD_SIGNATURE}, Reason.MISSING_HEADER),
    ({"webhook-id": STANDARD_ID, "webhook-timestamp": str(STANDARD_TS)}, Reason.MISSING_HEADER),
    (standard_headers(**{"webhook-timestamp": "hello"}), Reason.BAD_FORMAT),
    (standard_headers("v1,dawfeoifkpqwoekfpqoekf"), Reason.BAD_FORMAT),
    (standard_headers(STANDARD_SIGNATURE[:8]), Reason.BAD_FORMAT),
    (standard_headers("v1,"), Reason.BAD_FORMAT),
    (standard_headers("v2," + STANDARD_SIGNATURE[3:]), Reason.BAD_SCHEME),
    (standard_headers("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="), Reason.SIGNATURE_MISMATCH),
    (standard_headers(**{"webhook-id": "msg_other"}), Reason.SIGNATURE_MISMATCH),
])
def test_standard_webhooks_reference_failures(headers, expected):
    verdict = verifier_for("standard", STANDARD_SECRET).verify(headers, STANDARD_BODY, now=STANDARD_TS)
    assert reason(verdict) == expected


def test_standard_webhooks_window_and_no_replay_key():
    assert reason(verifier_for("standard", STANDARD_SECRET).verify(
        standard_headers(), STANDARD_BODY, now=STANDARD_TS + 301)) == Reason.TIMESTAMP_TOO_OLD
    assert reason(verifier_for("standard", STANDARD_SECRET).verify(
        standard_headers(), STANDARD_BODY, now=STANDARD_TS - 301)) == Reason.TIMESTAMP_TOO_NEW
    # The signed message id, not the signature, names a message: the service keeps the ids it took.
    accepted = verifier_for("standard", STANDARD_SECRET).verify(standard_headers(), STANDARD_BODY, now=STANDARD_TS)
    assert accepted.accepted and accepted.replay_key == ""


def test_standard_webhooks_secret_must_be_base64_and_is_not_echoed():
    with pytest.raises(UserError, match="whsec_") as caught:
        verifier_for("standard", "whsec_not*base64!", webhook="billing")
    assert "not*base64" not in str(caught.value)
    assert "'billing'" in str(caught.value)


# --- custom HMAC ---

@pytest.mark.parametrize("encoding, algorithm", [("hex", "sha256"), ("base64", "sha256"), ("hex", "sha1"),
                                                 ("base64", "sha512")])
def test_custom_hmac_matches_an_independent_computation(encoding, algorithm):
    body = b'{"order": 42}'
    digest = hmac.new(b"shop-secret", body, algorithm).digest()
    text = digest.hex() if encoding == "hex" else base64.b64encode(digest).decode()
    custom = verifier_for("custom", "shop-secret", {"header": "X-Shop-Hmac", "prefix": "hmac=",
                                                      "encoding": encoding, "algorithm": algorithm})
    assert custom.verify({"x-shop-hmac": "hmac=" + text}, body).accepted
    assert custom.sign(body) == {"X-Shop-Hmac": "hmac=" + text}
    assert reason(custom.verify({"X-Shop-Hmac": text}, body)) == Reason.BAD_SCHEME
    assert reason(custom.verify({"X-Shop-Hmac": "hmac=" + text[:-4]}, body)) == Reason.BAD_FORMAT
    assert reason(custom.verify({"X-Shop-Hmac": "hmac=" + text}, body + b" ")) == Reason.SIGNATURE_MISMATCH
    assert reason(custom.verify({"X-Other": "hmac=" + text}, body)) == Reason.MISSING_HEADER


def test_custom_hmac_options_come_in_dsl_spelling_and_are_checked():
    custom = verifier_for("custom", "k" * 8, {"header": "X-Sig", "encoding": "base64"})
    assert custom.verify(custom.sign(b"x"), b"x").accepted
    with pytest.raises(UserError, match="header"):
        verifier_for("custom", "k", {})
    with pytest.raises(UserError, match="encoding"):
        verifier_for("custom", "k", {"header": "X-Sig", "encoding": "hexadecimal"})
    with pytest.raises(UserError, match="md5"):
        verifier_for("custom", "k", {"header": "X-Sig", "algorithm": "md5"})


# --- every HMAC scheme ---

def hmac_verifiers():
    return [verifier_for("github", GITHUB_SECRET), verifier_for("stripe", STRIPE_SECRET),
            verifier_for("slack", SLACK_SECRET), verifier_for("standard", STANDARD_SECRET),
            verifier_for("custom", "s3cret", {"header": "X-Sig", "encoding": "base64"})]


@pytest.mark.parametrize("verifier", hmac_verifiers(), ids=lambda v: v.scheme)
def test_non_utf8_bodies_sign_and_verify(verifier):
    headers = verifier.sign(NON_UTF8_BODY, now=NOW)
    assert verifier.verify(headers, NON_UTF8_BODY, now=NOW).accepted
    assert reason(verifier.verify(headers, NON_UTF8_BODY[:-1], now=NOW)) == Reason.SIGNATURE_MISMATCH


@pytest.mark.parametrize("verifier", hmac_verifiers(), ids=lambda v: v.scheme)
def test_stale_and_tampered_simulations_are_rejected(verifier):
    body = b'{"event": "ping"}'
    tampered = verifier.verify(verifier.sign(body, now=NOW), b'{"event": "pong"}', now=NOW)
    assert reason(tampered) == Reason.SIGNATURE_MISMATCH
    if verifier.scheme in ("stripe", "slack", "standard"):
        stale = verifier.verify(verifier.sign(body, now=NOW - 3600), body, now=NOW)
        assert reason(stale) == Reason.TIMESTAMP_TOO_OLD


def test_garbage_headers_are_rejected_never_raised():
    rng = random.Random(20240601)
    alphabet = "abcdefv01=,. tT+/_-\x00\xff\u20ac"
    verifiers = hmac_verifiers() + [verifier_for("jwt", "k" * 32)]
    for _ in range(400):
        for verifier in verifiers:
            headers = {name: "".join(rng.choices(alphabet, k=rng.randrange(0, 90)))
                       for name in verifier.header_names + ("Authorization",)}
            if rng.random() < 0.5:
                headers[verifier.header_names[0]] = rng.choice(["v1,", "t=1,v1=", "sha256=", "Bearer a.b.c",
                                                                "v0=", "Bearer .."]) + headers[verifier.header_names[0]]
            verdict = verifier.verify(headers, bytes(rng.randrange(256) for _ in range(20)), now=NOW)
            assert not verdict.accepted and isinstance(verdict.reason, Reason)


# --- JWT ---

def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade_token(header: dict, claims: dict, sign=lambda signing_input: b"") -> str:
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64url(sign(signing_input.encode()))}"


@pytest.fixture(scope="module")
def rsa_pair():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def test_rfc7515_a1_signature_verifies_with_pyjwt():
    claims = jwt.decode(RFC7515_TOKEN, RFC7515_KEY, algorithms=["HS256"], options={"verify_exp": False})
    assert claims == {"iss": "joe", "exp": RFC7515_EXP, "http://example.com/is_root": True}


def test_rfc7515_a1_passes_our_verifier_only_before_it_expires():
    joe = verifier_for("jwt", RFC7515_KEY, {"algorithms": ["HS256"], "issuer": "joe"})
    assert joe.verify(bearer(RFC7515_TOKEN), b"", now=RFC7515_EXP - 60).accepted
    assert reason(joe.verify(bearer(RFC7515_TOKEN), b"", now=NOW)) == Reason.TOKEN_EXPIRED
    other_issuer = verifier_for("jwt", RFC7515_KEY, {"issuer": "ann"})
    assert reason(other_issuer.verify(bearer(RFC7515_TOKEN), b"", now=RFC7515_EXP - 60)) == Reason.INVALID_TOKEN


def test_jwt_without_exp_is_rejected():
    token = jwt.encode({"iss": "joe", "http://example.com/is_root": True}, RFC7515_KEY, algorithm="HS256")
    verdict = verifier_for("jwt", RFC7515_KEY).verify(bearer(token), b"", now=NOW)
    assert reason(verdict) == Reason.INVALID_TOKEN
    assert "exp" in verdict.detail


def test_jwt_signs_what_it_verifies_and_checks_audience():
    key = "k" * 48
    hook = verifier_for("jwt", key, {"algorithms": ["HS384"], "issuer": "ci", "audience": "cortex"})
    headers = hook.sign(b"", now=NOW)
    assert hook.verify(headers, b"", now=NOW + 299).accepted
    assert reason(hook.verify(headers, b"", now=NOW + 301)) == Reason.TOKEN_EXPIRED
    elsewhere = jwt.encode({"exp": NOW + 60, "iss": "ci", "aud": "someone-else"}, key, algorithm="HS384")
    assert reason(hook.verify(bearer(elsewhere), b"", now=NOW)) == Reason.INVALID_TOKEN
    no_audience = jwt.encode({"exp": NOW + 60, "iss": "ci"}, key, algorithm="HS384")
    assert reason(hook.verify(bearer(no_audience), b"", now=NOW)) == Reason.INVALID_TOKEN


def test_jwt_not_before_in_the_future_is_rejected():
    key = "k" * 32
    token = jwt.encode({"exp": NOW + 600, "nbf": NOW + 120}, key, algorithm="HS256")
    assert reason(verifier_for("jwt", key).verify(bearer(token), b"", now=NOW)) == Reason.TOKEN_NOT_YET_VALID


def test_jwt_header_and_scheme():
    key = "k" * 32
    token = jwt.encode({"exp": NOW + 60}, key, algorithm="HS256")
    hook = verifier_for("jwt", key)
    assert reason(hook.verify({}, b"", now=NOW)) == Reason.MISSING_HEADER
    assert reason(hook.verify({"Authorization": f"Basic {token}"}, b"", now=NOW)) == Reason.BAD_SCHEME
    assert reason(hook.verify({"Authorization": "Bearer "}, b"", now=NOW)) == Reason.BAD_FORMAT
    assert reason(hook.verify(bearer("not.a.jwt"), b"", now=NOW)) == Reason.INVALID_TOKEN
    custom = verifier_for("jwt", key, {"header": "X-Webhook-Token"})
    assert custom.verify({"x-webhook-token": token}, b"", now=NOW).accepted
    assert custom.sign(b"", now=NOW)["X-Webhook-Token"].startswith("Bearer ")


def test_jwt_alg_none_is_rejected():
    key = "k" * 32
    token = handmade_token({"alg": "none", "typ": "JWT"}, {"exp": NOW + 60})
    assert reason(verifier_for("jwt", key).verify(bearer(token), b"", now=NOW)) == Reason.INVALID_TOKEN
    with pytest.raises(UserError, match="none"):
        verifier_for("jwt", key, {"algorithms": ["none"]})


def test_jwt_rs256_verifies_and_rejects_hs256_forged_with_the_public_key(rsa_pair):
    private, public = rsa_pair
    hook = verifier_for("jwt", None, {"algorithms": ["RS256"], "public_key": public, "private_key": private})
    assert hook.verify(hook.sign(b"", now=NOW), b"", now=NOW).accepted
    # The classic confusion: HMAC the token with the public key as if it were a shared secret.
    forged = handmade_token({"alg": "HS256", "typ": "JWT"}, {"exp": NOW + 60},
                            lambda data: hmac.new(public.encode(), data, hashlib.sha256).digest())
    assert reason(hook.verify(bearer(forged), b"", now=NOW)) == Reason.INVALID_TOKEN
    # The public key may also come as the webhook's secret.
    assert verifier_for("jwt", public, {"algorithms": "RS256"}).verify(hook.sign(b"", now=NOW), b"", now=NOW).accepted


def test_jwt_configurations_that_allow_confusion_are_refused(rsa_pair):
    private, public = rsa_pair
    with pytest.raises(UserError, match="mix"):
        verifier_for("jwt", "k" * 32, {"algorithms": ["HS256", "RS256"]})
    with pytest.raises(UserError, match="asymmetric"):
        verifier_for("jwt", public, {"algorithms": ["HS256"]})
    with pytest.raises(UserError, match="RS256"):
        verifier_for("jwt", "k" * 32, {"algorithms": ["HS256"], "public_key": public})
    with pytest.raises(UserError, match="PEM public key"):
        verifier_for("jwt", private, {"algorithms": ["RS256"]})
    ec_public = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(UserError, match="RS256"):
        verifier_for("jwt", None, {"algorithms": ["RS256"], "public_key": ec_public})


@pytest.mark.parametrize("algorithm, size", [("HS256", 31), ("HS384", 47), ("HS512", 63)])
def test_jwt_hmac_keys_shorter_than_the_hash_are_refused(algorithm, size):
    with pytest.raises(UserError, match=f"{size} bytes"):
        verifier_for("jwt", "k" * size, {"algorithms": [algorithm]}, webhook="ci")
    assert verifier_for("jwt", "k" * (size + 1), {"algorithms": [algorithm]}).scheme == "jwt"


def test_a_jwt_bound_to_the_body_verifies_only_with_that_body_and_names_a_replay():
    key = "k" * 32
    hook = verifier_for("jwt", key, {"body_hash_claim": "body_sha256"})
    body = b'{"build": 7}'
    headers = hook.sign(body, now=NOW)
    claims = jwt.decode(headers["Authorization"][7:], key, algorithms=["HS256"], options={"verify_exp": False})
    assert claims["body_sha256"] == hashlib.sha256(body).hexdigest()
    verdict = hook.verify(headers, body, now=NOW)
    assert verdict.accepted and verdict.replay_key and verdict.replay_until == claims["exp"]
    assert hook.verify(headers, body, now=NOW + 1).replay_key == verdict.replay_key
    assert reason(hook.verify(headers, b'{"build": 8}', now=NOW)) == Reason.BODY_MISMATCH
    base64url = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
    other = jwt.encode({"exp": NOW + 60, "body_sha256": base64url}, key, algorithm="HS256")
    assert hook.verify(bearer(other), body, now=NOW).accepted
    unbound = jwt.encode({"exp": NOW + 60}, key, algorithm="HS256")
    assert reason(hook.verify(bearer(unbound), body, now=NOW)) == Reason.INVALID_TOKEN
    assert verifier_for("jwt", key).verify(bearer(unbound), body, now=NOW).replay_key == ""


def test_a_jwt_living_longer_than_allowed_is_rejected():
    key = "k" * 32
    hook = verifier_for("jwt", key, {"max_lifetime": 60})
    assert hook.verify(hook.sign(b"", now=NOW), b"", now=NOW).accepted
    long_lived = jwt.encode({"iat": NOW, "exp": NOW + 3600}, key, algorithm="HS256")
    assert reason(hook.verify(bearer(long_lived), b"", now=NOW)) == Reason.TOKEN_TOO_LONG_LIVED
    no_iat = jwt.encode({"exp": NOW + 30}, key, algorithm="HS256")
    assert reason(hook.verify(bearer(no_iat), b"", now=NOW)) == Reason.INVALID_TOKEN
    issued_later = jwt.encode({"iat": NOW + 60, "exp": NOW + 90}, key, algorithm="HS256")
    assert reason(hook.verify(bearer(issued_later), b"", now=NOW)) == Reason.TOKEN_NOT_YET_VALID
    with pytest.raises(UserError, match="max_lifetime"):
        verifier_for("jwt", key, {"max_lifetime": 0})
    with pytest.raises(UserError, match="body_hash_claim"):
        verifier_for("jwt", key, {"body_hash_claim": " "})


def test_jwt_signing_without_a_private_key_is_a_user_error(rsa_pair):
    hook = verifier_for("jwt", None, {"algorithms": ["RS256"], "public_key": rsa_pair[1]})
    with pytest.raises(UserError, match="private key"):
        hook.sign(b"", now=NOW)


# --- the factory ---

def test_factory_rejects_unknown_providers_and_options_naming_the_webhook():
    with pytest.raises(UserError, match="'orders'.*unknown provider 'gitlab'"):
        verifier_for("gitlab", "s", webhook="orders")
    with pytest.raises(UserError, match="'orders'.*'prefix'.*github"):
        verifier_for("github", "s", {"prefix": "x"}, webhook="orders")
    with pytest.raises(UserError, match="tolerance"):
        verifier_for("stripe", "s", {"tolerance": 0})
    with pytest.raises(UserError, match="empty"):
        verifier_for("github", "")


def test_factory_takes_kebab_case_options_and_secret_objects():
    verifier = verifier_for("stripe", Secret(STRIPE_SECRET), {"tolerance": 10})
    body = b"{}"
    assert verifier.verify(stripe_header(body, NOW - 10), body, now=NOW).accepted
    assert reason(verifier.verify(stripe_header(body, NOW - 11), body, now=NOW)) == Reason.TIMESTAMP_TOO_OLD
    assert verifier_for("jwt", "k" * 32, {"public-key": None, "algorithms": ["HS256"]}) is not None


@pytest.mark.parametrize("verifier", hmac_verifiers(), ids=lambda v: v.scheme)
def test_verifiers_do_not_show_their_secret(verifier):
    for secret in (GITHUB_SECRET, STRIPE_SECRET, SLACK_SECRET, STANDARD_SECRET, "s3cret"):
        assert secret not in repr(verifier) and secret not in str(vars(verifier))
