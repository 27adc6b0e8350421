"""Webhook verifiers and signers: GitHub, Stripe, Slack, Standard Webhooks, custom HMAC and JWT."""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import hmac
import math
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import jwt
from cryptography.hazmat.primitives import serialization

from cortex.errors import UserError
from cortex.webhooks.secrets import Secret

__all__ = ["DEFAULT_TOLERANCE", "HMAC_ALGORITHMS", "JWT_HMAC_ALGORITHMS", "JWT_PUBLIC_KEY_ALGORITHMS", "PROVIDERS",
           "HmacVerifier", "JwtVerifier", "Reason", "SlackVerifier", "StandardWebhooksVerifier", "StripeVerifier",
           "Verdict", "Verifier", "verifier_for"]

DEFAULT_TOLERANCE = 300  # seconds either side of now, as Stripe, Slack and Standard Webhooks use
HMAC_ALGORITHMS = ("sha1", "sha256", "sha384", "sha512")
JWT_HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
JWT_PUBLIC_KEY_ALGORITHMS = frozenset(jwt.algorithms.requires_cryptography)

_TIMESTAMP = re.compile(r"[0-9]{1,15}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


class Reason(StrEnum):
    """Why a delivery was not taken: the code the receiver answers with and the log records."""

    MISSING_HEADER = "missing_header"
    BAD_SCHEME = "bad_scheme"
    BAD_FORMAT = "bad_format"
    SIGNATURE_MISMATCH = "signature_mismatch"
    TIMESTAMP_TOO_OLD = "timestamp_too_old"
    TIMESTAMP_TOO_NEW = "timestamp_too_new"
    REPLAY = "replay"
    INVALID_TOKEN = "invalid_token"
    TOKEN_EXPIRED = "token_expired"
    TOKEN_NOT_YET_VALID = "token_not_yet_valid"
    TOKEN_TOO_LONG_LIVED = "token_too_long_lived"
    BODY_MISMATCH = "body_mismatch"
    # Past verification: the payload itself, and the delivery log.
    BODY_TOO_LARGE = "body_too_large"
    NOT_JSON = "not_json"
    PAYLOAD_TOO_DEEP = "payload_too_deep"
    FILTER_FAILED = "filter_failed"
    IN_PROGRESS = "in_progress"
    ROUTING_FAILED = "routing_failed"
    INTERNAL_ERROR = "internal_error"


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one delivery: accepted, or rejected with a reason code.

    An accepted delivery of a scheme that resists replay carries `replay_key`, the same for
    every copy of that signed request, and `replay_until`, the Unix time after which the
    scheme itself refuses a copy; the service records the key in the store until then.
    """

    accepted: bool
    reason: Reason | None = None
    detail: str = ""
    replay_key: str = ""
    replay_until: int = 0

    @classmethod
    def accept(cls, replay_key: str = "", replay_until: int = 0) -> Verdict:
        """An accepting verdict, with the key that tells a copy of this request apart, if any."""
        return cls(True, replay_key=replay_key, replay_until=replay_until)

    @classmethod
    def reject(cls, reason: Reason, detail: str) -> Verdict:
        """A rejecting verdict with its reason code and a human explanation."""
        return cls(False, reason, detail)


class Verifier(Protocol):
    """A provider's scheme: verify a delivery, and sign one the same way for simulation."""

    scheme: str
    header_names: tuple[str, ...]

    def verify(self, headers: Mapping[str, str], body: bytes, now: int | None = None) -> Verdict:
        """Check a delivery's headers against its raw body; never raises for bad input."""

    def sign(self, body: bytes, now: int | None = None) -> dict[str, str]:
        """The headers the provider would send with body at time now."""


class _Rejected(Exception):
    """Internal: ends a check early; verify() turns it into a Verdict."""

    def __init__(self, reason: Reason, detail: str):
        super().__init__(detail)
        self.verdict = Verdict.reject(reason, detail)


class _Scheme:
    """The shared verify(): case-insensitive headers, the clock, and rejections as verdicts."""

    scheme = ""
    header_names: tuple[str, ...] = ()

    def verify(self, headers: Mapping[str, str], body: bytes, now: int | None = None) -> Verdict:
        """Check a delivery's headers against its raw body; never raises for bad input."""
        lowered = {name.lower(): value for name, value in headers.items()}
        try:
            replay = self._check(lowered, bytes(body), _clock(now))
        except _Rejected as rejected:
            return rejected.verdict
        return Verdict.accept(*replay) if replay else Verdict.accept()

    def _check(self, headers: dict[str, str], body: bytes, now: int) -> tuple[str, int] | None:
        """Raise _Rejected, or return the replay key and until when it matters (None: no replay protection)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.scheme} verifier>"


class HmacVerifier(_Scheme):
    """An HMAC of the raw body in one header, as `<prefix><hex or base64>`; GitHub is a preset of it."""

    def __init__(self, secret: Secret | str | bytes, *, header: str | None = None, prefix: str = "",
                 encoding: str = "hex", algorithm: str = "sha256", scheme: str = "custom"):
        if encoding not in ("hex", "base64"):
            raise UserError(f"encoding must be hex or base64, not {encoding!r}")
        if algorithm not in HMAC_ALGORITHMS:
            raise UserError(f"algorithm must be one of {', '.join(HMAC_ALGORITHMS)}, not {algorithm!r}")
        if not header:
            raise UserError("a custom HMAC webhook needs the header that carries the signature")
        self.scheme = scheme
        self.header = header
        self.header_names = (header,)
        self.prefix = prefix
        self.encoding = encoding
        self.algorithm = algorithm
        self._key = _secret(secret)

    def _check(self, headers: dict[str, str], body: bytes, now: int) -> None:
        value = _header(headers, self.header)
        if not value.startswith(self.prefix):
            raise _Rejected(Reason.BAD_SCHEME, f"{self.header} does not start with {self.prefix!r}")
        expected = _mac(self._key, self.algorithm, body)
        given = _decode_digest(value[len(self.prefix):], self.encoding, len(expected))
        if given is None:
            raise _Rejected(Reason.BAD_FORMAT, f"{self.header} is not a {self.encoding} {self.algorithm} digest")
        if not hmac.compare_digest(expected, given):
            raise _Rejected(Reason.SIGNATURE_MISMATCH, f"{self.header} does not match the body")

    def sign(self, body: bytes, now: int | None = None) -> dict[str, str]:
        """The signature header for body (now is unused: this scheme has no timestamp)."""
        digest = _mac(self._key, self.algorithm, bytes(body))
        text = digest.hex() if self.encoding == "hex" else base64.b64encode(digest).decode("ascii")
        return {self.header: self.prefix + text}


class _Timestamped(_Scheme):
    """Schemes that sign a timestamp with the body: a tolerance window, and a replay key good for it."""

    def __init__(self, secret: Secret | str | bytes, *, tolerance: int = DEFAULT_TOLERANCE):
        self.tolerance = _positive_seconds(tolerance, "tolerance")
        self._key = _secret(secret)

    def _check_fresh(self, timestamp: int, now: int) -> int:
        """Until when a copy of a request signed at `timestamp` could pass; rejected outside the window."""
        if timestamp < now - self.tolerance:
            raise _Rejected(Reason.TIMESTAMP_TOO_OLD,
                            f"signed {now - timestamp} s ago, more than the {self.tolerance} s tolerance")
        if timestamp > now + self.tolerance:
            raise _Rejected(Reason.TIMESTAMP_TOO_NEW,
                            f"signed {timestamp - now} s in the future, more than the {self.tolerance} s tolerance")
        return timestamp + self.tolerance


class StripeVerifier(_Timestamped):
    """Stripe: `Stripe-Signature: t=<ts>,v1=<hex>[,v1=...]` over `{t}.{body}`; any valid v1 accepted."""

    scheme = "stripe"
    header_names = ("Stripe-Signature",)

    def _check(self, headers: dict[str, str], body: bytes, now: int) -> tuple[str, int]:
        value = _header(headers, "Stripe-Signature")
        fields = [part.strip().partition("=") for part in value.split(",")]
        stamps = [text for name, _, text in fields if name == "t"]
        if len(stamps) != 1:
            raise _Rejected(Reason.BAD_FORMAT, "Stripe-Signature needs exactly one t=<timestamp>")
        signatures = [text for name, _, text in fields if name == "v1"]
        if not signatures:
            raise _Rejected(Reason.BAD_SCHEME, "Stripe-Signature has no v1 signature")
        timestamp = _timestamp(stamps[0], "Stripe-Signature t")
        expected = _mac(self._key, "sha256", stamps[0].encode("ascii"), b".", body)
        _match_any(expected, [_decode_digest(text, "hex", len(expected)) for text in signatures],
                   "Stripe-Signature v1")
        return expected.hex(), self._check_fresh(timestamp, now)

    def sign(self, body: bytes, now: int | None = None) -> dict[str, str]:
        """The Stripe-Signature header for body signed at now."""
        stamp = str(_clock(now))
        digest = _mac(self._key, "sha256", stamp.encode("ascii"), b".", bytes(body))
        return {"Stripe-Signature": f"t={stamp},v1={digest.hex()}"}


class SlackVerifier(_Timestamped):
    """Slack: `X-Slack-Signature: v0=<hex>` over `v0:{ts}:{body}`, ts in `X-Slack-Request-Timestamp`."""

    scheme = "slack"
    header_names = ("X-Slack-Signature", "X-Slack-Request-Timestamp")

    def _check(self, headers: dict[str, str], body: bytes, now: int) -> tuple[str, int]:
        value = _header(headers, "X-Slack-Signature")
        stamp = _header(headers, "X-Slack-Request-Timestamp")
        version, _, text = value.partition("=")
        if version != "v0":
            raise _Rejected(Reason.BAD_SCHEME, "X-Slack-Signature does not start with 'v0='")
        timestamp = _timestamp(stamp, "X-Slack-Request-Timestamp")
        expected = _mac(self._key, "sha256", b"v0:", stamp.encode("ascii"), b":", body)
        _match_any(expected, [_decode_digest(text, "hex", len(expected))], "X-Slack-Signature")
        return expected.hex(), self._check_fresh(timestamp, now)

    def sign(self, body: bytes, now: int | None = None) -> dict[str, str]:
        """The Slack signature and timestamp headers for body signed at now."""
        stamp = str(_clock(now))
        digest = _mac(self._key, "sha256", b"v0:", stamp.encode("ascii"), b":", bytes(body))
        return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest.hex()}"}


class StandardWebhooksVerifier(_Timestamped):
    """Standard Webhooks: `webhook-signature: v1,<base64> ...` over `{id}.{ts}.{body}`, secret `whsec_<base64>`."""

    scheme = "standard"
    header_names = ("webhook-id", "webhook-timestamp", "webhook-signature")

    def __init__(self, secret: Secret | str | bytes, *, tolerance: int = DEFAULT_TOLERANCE):
        raw = _secret(secret).as_bytes().removeprefix(b"whsec_")
        try:
            key = base64.b64decode(raw, validate=True)
        except binascii.Error:
            key = b""
        if not key:
            raise UserError("a Standard Webhooks secret must be whsec_ followed by base64")
        super().__init__(Secret(key), tolerance=tolerance)

    def _check(self, headers: dict[str, str], body: bytes, now: int) -> None:
        message_id = _header(headers, "webhook-id")
        stamp = _header(headers, "webhook-timestamp")
        value = _header(headers, "webhook-signature")
        timestamp = _timestamp(stamp, "webhook-timestamp")
        signatures = [text for version, _, text in (part.partition(",") for part in value.split())
                      if version == "v1"]
        if not signatures:
            raise _Rejected(Reason.BAD_SCHEME, "webhook-signature has no v1 signature")
        expected = _mac(self._key, "sha256", message_id.encode("utf-8", "surrogatepass"), b".",
                        stamp.encode("ascii"), b".", body)
        _match_any(expected, [_decode_digest(text, "base64", len(expected)) for text in signatures],
                   "webhook-signature v1")
        # No replay key: the signed webhook-id names the message, and the service keeps every id it took.
        self._check_fresh(timestamp, now)

    def sign(self, body: bytes, now: int | None = None, *, message_id: str | None = None) -> dict[str, str]:
        """The three Standard Webhooks headers for body signed at now (a fresh message id by default)."""
        message_id = message_id or f"msg_{uuid.uuid4().hex}"
        stamp = str(_clock(now))
        digest = _mac(self._key, "sha256", message_id.encode("utf-8"), b".", stamp.encode("ascii"), b".",
                      bytes(body))
        return {"webhook-id": message_id, "webhook-timestamp": stamp,
                "webhook-signature": "v1," + base64.b64encode(digest).decode("ascii")}


class JwtVerifier(_Scheme):
    """A bearer JWT checked by PyJWT with pinned algorithms; `exp` required, `iss`/`aud` when configured.

    A JWT does not sign the body. With `body_hash_claim`, the token must carry the SHA-256 of the
    raw body (hex, or base64url without padding) in that claim, which binds it to one body and
    makes a second use of it a replay; `max_lifetime` refuses tokens whose `exp` is further
    than that many seconds past their `iat` (then required).
    """

    scheme = "jwt"

    def __init__(self, secret: Secret | str | bytes | None, *, algorithms: str | Sequence[str] = ("HS256",),
                 issuer: str | None = None, audience: str | Sequence[str] | None = None,
                 public_key: str | bytes | None = None, private_key: Secret | str | bytes | None = None,
                 header: str = "Authorization", leeway: int = 0, body_hash_claim: str | None = None,
                 max_lifetime: int | None = None):
        self.algorithms = _jwt_algorithms(algorithms)
        self.issuer = issuer
        self.audience = audience if audience is None or isinstance(audience, str) else list(audience)
        self.header = header
        self.header_names = (header,)
        self.leeway = _positive_seconds(leeway, "leeway", allow_zero=True)
        if body_hash_claim is not None and not (isinstance(body_hash_claim, str) and body_hash_claim.strip()):
            raise UserError(f"body_hash_claim must name a claim, not {body_hash_claim!r}")
        self.body_hash_claim = body_hash_claim
        self.max_lifetime = None if max_lifetime is None else _positive_seconds(max_lifetime, "max_lifetime")
        if self.algorithms[0] in JWT_HMAC_ALGORITHMS:
            if public_key is not None or private_key is not None:
                raise UserError(f"{', '.join(self.algorithms)} tokens are checked with the secret; "
                                "to use a key pair, pin public-key algorithms such as RS256")
            self._verify_key = self._signing_key = _secret(secret)
        else:
            self._verify_key = Secret(_public_key_pem(public_key if public_key is not None else secret))
            self._signing_key = None if private_key is None else _private_key_pem(private_key)
        self._prepared = _prepare_jwt_key(self.algorithms, self._verify_key.reveal())
        self._jwt = jwt.PyJWT({"enforce_minimum_key_length": True})

    def _check(self, headers: dict[str, str], body: bytes, now: int) -> tuple[str, int] | None:
        token = self._token(_header(headers, self.header))
        wanted = (("exp", True), ("iss", self.issuer is not None), ("aud", self.audience is not None),
                  ("iat", self.max_lifetime is not None), (self.body_hash_claim, self.body_hash_claim is not None))
        required = [name for name, needed in wanted if needed]
        try:
            # Time claims are checked below against the injected clock, so simulation can go stale.
            claims = self._jwt.decode(
                token, self._prepared, algorithms=list(self.algorithms), issuer=self.issuer,
                audience=self.audience,
                options={"require": required, "verify_exp": False, "verify_nbf": False, "verify_iat": False})
        except jwt.PyJWTError as err:
            raise _Rejected(Reason.INVALID_TOKEN, str(err)) from None
        expires = _numeric_claim(claims, "exp")
        if now > expires + self.leeway:
            raise _Rejected(Reason.TOKEN_EXPIRED, f"the token expired {now - expires:.0f} s ago")
        if "nbf" in claims and now < _numeric_claim(claims, "nbf") - self.leeway:
            raise _Rejected(Reason.TOKEN_NOT_YET_VALID, "the token's nbf is in the future")
        if self.max_lifetime is not None:
            self._check_lifetime(_numeric_claim(claims, "iat"), expires, now)
        if self.body_hash_claim is None:
            return None
        if not _same_digest(claims[self.body_hash_claim], hashlib.sha256(body).digest()):
            raise _Rejected(Reason.BODY_MISMATCH,
                            f"the token's {self.body_hash_claim} claim is not the SHA-256 of the body")
        # Bound to this body, the token is good for one delivery: a second use is a replay until it expires.
        return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest(), math.ceil(expires) + self.leeway

    def signing_with(self, private_key: Secret | str | bytes) -> JwtVerifier:
        """A copy that signs with `private_key`, checked to be the pair of this verifier's public key."""
        if self.algorithms[0] in JWT_HMAC_ALGORITHMS:
            raise UserError(f"{self.algorithms[0]} tokens are signed with the webhook's secret, not a private key")
        signer = copy.copy(self)
        signer._signing_key = _private_key_pem(private_key)
        try:
            paired = signer.verify(signer.sign(b""), b"").accepted
        except (jwt.PyJWTError, TypeError, ValueError):
            paired = False
        if not paired:
            raise UserError(f"the private key does not sign {self.algorithms[0]} tokens that the webhook's "
                            "public key verifies")
        return signer

    def _check_lifetime(self, issued: float, expires: float, now: int) -> None:
        if issued > now + self.leeway:
            raise _Rejected(Reason.TOKEN_NOT_YET_VALID, "the token's iat is in the future")
        if expires - issued > self.max_lifetime:
            raise _Rejected(Reason.TOKEN_TOO_LONG_LIVED, f"the token lives {expires - issued:.0f} s, "
                                                         f"more than the {self.max_lifetime} s allowed")

    def _token(self, value: str) -> str:
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "bearer":
            token = token.strip()
        elif self.header.lower() == "authorization":
            raise _Rejected(Reason.BAD_SCHEME, f"{self.header} is not 'Bearer <token>'")
        else:
            token = value.strip()
        if not token:
            raise _Rejected(Reason.BAD_FORMAT, f"{self.header} carries no token")
        return token

    def sign(self, body: bytes, now: int | None = None, *, ttl: int | None = None,
             claims: Mapping[str, object] | None = None) -> dict[str, str]:
        """A bearer token header valid for ttl seconds from now, bound to the body if `body_hash_claim` is set."""
        if self._signing_key is None:
            raise UserError(f"signing a {self.algorithms[0]} token needs the webhook's private key "
                            "(cortex webhook test --private-key FILE)")
        issued = _clock(now)
        ttl = ttl if ttl is not None else min(DEFAULT_TOLERANCE, self.max_lifetime or DEFAULT_TOLERANCE)
        payload: dict[str, object] = {"iat": issued, "exp": issued + ttl}
        if self.body_hash_claim is not None:
            payload[self.body_hash_claim] = hashlib.sha256(bytes(body)).hexdigest()
        if self.issuer is not None:
            payload["iss"] = self.issuer
        if self.audience is not None:
            payload["aud"] = self.audience
        payload.update(claims or {})
        token = jwt.encode(payload, self._signing_key.reveal(), algorithm=self.algorithms[0])
        return {self.header: f"Bearer {token}"}


PROVIDERS = ("github", "stripe", "slack", "standard", "custom", "jwt")

_OPTIONS = {
    "github": frozenset(),
    "stripe": frozenset({"tolerance"}),
    "slack": frozenset({"tolerance"}),
    "standard": frozenset({"tolerance"}),
    "custom": frozenset({"header", "prefix", "encoding", "algorithm"}),
    "jwt": frozenset({"algorithms", "issuer", "audience", "public_key", "private_key", "header", "leeway",
                      "body_hash_claim", "max_lifetime"}),
}


def verifier_for(provider: str, secret: Secret | str | bytes | None, options: Mapping[str, object] | None = None,
                 *, webhook: str | None = None) -> Verifier:
    """Build the verifier for a provider name from a webhook's secret and options (UserError if misconfigured)."""
    where = f"webhook {webhook!r}" if webhook else "webhook"
    if provider not in _OPTIONS:
        raise UserError(f"{where}: unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    # Options come from the DSL in kebab-case or from Python in snake_case.
    opts = {str(name).replace("-", "_"): value for name, value in (options or {}).items()}
    unknown = sorted(set(opts) - _OPTIONS[provider])
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[provider])) or "none"
        raise UserError(f"{where}: option {unknown[0]!r} does not apply to provider {provider!r} "
                        f"(its options: {allowed})")
    try:
        return _build(provider, secret, opts)
    except UserError as err:
        raise UserError(f"{where}: {err}") from None


def _build(provider: str, secret, opts: dict[str, object]) -> Verifier:
    if provider == "github":
        return HmacVerifier(secret, header="X-Hub-Signature-256", prefix="sha256=", scheme="github")
    if provider == "custom":
        return HmacVerifier(secret, **opts)
    if provider == "jwt":
        return JwtVerifier(secret, **opts)
    timestamped = {"stripe": StripeVerifier, "slack": SlackVerifier, "standard": StandardWebhooksVerifier}
    return timestamped[provider](secret, **opts)


def _clock(now: int | None) -> int:
    return int(time.time()) if now is None else int(now)


def _secret(secret: Secret | str | bytes | None) -> Secret:
    if isinstance(secret, (str, bytes)):
        secret = Secret(secret)
    if not isinstance(secret, Secret) or secret.as_bytes() == b"":
        raise UserError("the secret is empty")
    return secret


def _positive_seconds(value: object, name: str, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        raise UserError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} number of "
                        f"seconds, not {value!r}")
    return value


def _mac(key: Secret, algorithm: str, *parts: bytes) -> bytes:
    mac = hmac.new(key.as_bytes(), digestmod=algorithm)
    for part in parts:  # update piecewise: no copy of a large body
        mac.update(part)
    return mac.digest()


def _header(headers: dict[str, str], name: str) -> str:
    value = headers.get(name.lower())
    if value is None:
        raise _Rejected(Reason.MISSING_HEADER, f"no {name} header")
    return value


def _timestamp(text: str, what: str) -> int:
    if not _TIMESTAMP.fullmatch(text):
        raise _Rejected(Reason.BAD_FORMAT, f"{what} is not a Unix timestamp")
    return int(text)


def _decode_digest(text: str, encoding: str, size: int) -> bytes | None:
    """The digest bytes, or None unless text is exactly size bytes in canonical lower hex or padded base64."""
    if encoding == "hex":
        return bytes.fromhex(text) if re.fullmatch(f"[0-9a-f]{{{2 * size}}}", text) else None
    if not _BASE64.fullmatch(text):
        return None
    try:
        digest = base64.b64decode(text, validate=True)
    except binascii.Error:
        return None
    return digest if len(digest) == size else None


def _match_any(expected: bytes, candidates: list[bytes | None], what: str) -> None:
    wellformed = [digest for digest in candidates if digest is not None]
    if not wellformed:
        raise _Rejected(Reason.BAD_FORMAT, f"{what} is not a well-formed signature")
    # Compare against every candidate, matched or not, so timing does not depend on which one matched.
    if not sum(hmac.compare_digest(expected, digest) for digest in wellformed):
        raise _Rejected(Reason.SIGNATURE_MISMATCH, f"{what} does not match the body")


def _same_digest(text: object, digest: bytes) -> bool:
    """Whether a claim holds `digest` as lower-case hex or unpadded base64url, compared in constant time."""
    if not isinstance(text, str):
        return False
    given = _decode_digest(text, "hex", len(digest))
    if given is None and re.fullmatch(r"[A-Za-z0-9_-]{43}", text):
        given = base64.urlsafe_b64decode(text + "=")
    return given is not None and hmac.compare_digest(given, digest)


def _jwt_algorithms(algorithms: str | Sequence[str]) -> tuple[str, ...]:
    names = (algorithms,) if isinstance(algorithms, str) else tuple(algorithms)
    known = sorted(JWT_HMAC_ALGORITHMS | JWT_PUBLIC_KEY_ALGORITHMS)
    if not names:
        raise UserError("a JWT webhook needs at least one algorithm")
    for name in names:
        if name not in known:
            raise UserError(f"JWT algorithm {name!r} is not allowed; choose from {', '.join(known)}")
    # One family only: accepting HS* next to RS* is exactly the key-confusion hole.
    if len({name in JWT_HMAC_ALGORITHMS for name in names}) > 1:
        raise UserError(f"JWT algorithms {', '.join(names)} mix HMAC and public-key algorithms")
    return names


def _public_key_pem(key: Secret | str | bytes | None) -> bytes:
    pem = key.as_bytes() if isinstance(key, Secret) else key.encode() if isinstance(key, str) else key
    try:
        serialization.load_pem_public_key(pem or b"")
    except (ValueError, TypeError):
        raise UserError("public-key JWT algorithms need a PEM public key (public_key)") from None
    return pem


def _private_key_pem(key: Secret | str | bytes) -> Secret:
    pem = _secret(key)
    try:
        serialization.load_pem_private_key(pem.as_bytes(), password=None)
    except (ValueError, TypeError):
        raise UserError("private_key is not an unencrypted PEM private key") from None
    return pem


def _prepare_jwt_key(algorithms: tuple[str, ...], key: str | bytes) -> object:
    prepared = None
    for name in algorithms:
        algorithm = jwt.get_algorithm_by_name(name)
        try:
            prepared = algorithm.prepare_key(key)
        except jwt.InvalidKeyError as err:
            raise UserError(f"the key does not suit {name}: {err}") from None
        weakness = algorithm.check_key_length(prepared)
        if weakness:
            raise UserError(f"the key is too weak for {name}: {weakness}")
    return prepared


def _numeric_claim(claims: Mapping[str, object], name: str) -> float:
    value = claims[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Rejected(Reason.INVALID_TOKEN, f"the {name} claim is not a number")
    return value
