"""What the DSL declares: agent memories and webhook endpoints, as immutable values."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import timedelta


class StoreKind(enum.Enum):
    """Where an agent memory keeps what it learns."""

    ORG = "org"  # Org files on disk, versioned in the store
    EPHEMERAL = "ephemeral"  # process memory only: gone when the session ends


class Fusion(enum.Enum):
    """How vector and keyword rankings are merged."""

    WEIGHTED = "weighted"  # weighted sum of normalised scores
    RRF = "rrf"  # reciprocal rank fusion, each list weighted
    KEYWORD = "keyword"  # BM25 and exact words only: no vectors


class Provider(enum.Enum):
    """How a webhook request proves where it comes from."""

    GITHUB = "github"
    STRIPE = "stripe"
    SLACK = "slack"
    STANDARD = "standard"  # the Standard Webhooks specification
    CUSTOM = "custom"  # an HMAC signature in a header of your choosing
    JWT = "jwt"  # a signed bearer token


class Encoding(enum.Enum):
    """How a custom provider writes its signature digest."""

    HEX = "hex"
    BASE64 = "base64"


class HmacAlgorithm(enum.Enum):
    """The hash a custom provider signs with (hashlib names)."""

    SHA1 = "sha1"  # only for senders that offer nothing better
    SHA256 = "sha256"
    SHA384 = "sha384"
    SHA512 = "sha512"


@dataclass(frozen=True)
class SourceLocation:
    """Where a definition starts: file, line and column, all 1-based."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class MemorySearchConfig:
    """How an agent memory ranks what it recalls."""

    vector_weight: float = 0.5
    keyword_weight: float = 0.5
    fusion: Fusion = Fusion.WEIGHTED


@dataclass(frozen=True)
class MemoryDefinition:
    """An agent memory: where it lives, how long it keeps logs, how it searches."""

    name: str
    store: StoreKind = StoreKind.ORG
    path: str = "org/agents"
    retention: timedelta = timedelta(days=90)
    search: MemorySearchConfig = MemorySearchConfig()
    location: SourceLocation | None = field(default=None, compare=False)


Scalar = str | int | float | bool


@dataclass(frozen=True)
class WebhookFilter:
    """Accept a delivery only when the value at `json_path` equals or contains a value."""

    json_path: str
    equals: Scalar | None = None
    contains: Scalar | None = None


@dataclass(frozen=True)
class SignatureScheme:
    """Where a custom provider puts its HMAC signature, and how it computes and writes it."""

    header: str
    prefix: str = ""
    encoding: Encoding = Encoding.HEX
    algorithm: HmacAlgorithm = HmacAlgorithm.SHA256


@dataclass(frozen=True)
class JwtSettings:
    """What a JWT provider's bearer token must satisfy."""

    algorithms: tuple[str, ...]
    issuer: str | None = None
    audience: str | None = None
    public_key: str | None = None  # None: tokens are signed with the webhook's secret
    body_hash_claim: str | None = None  # the claim holding the SHA-256 of the raw body, binding a token to it
    max_lifetime: timedelta | None = None  # the longest a token may live, from its iat to its exp


@dataclass(frozen=True)
class WebhookDefinition:
    """A webhook endpoint: its path, how deliveries are verified, filtered and routed."""

    name: str
    path: str
    provider: Provider
    secret: str | None = None
    agent: str | None = None
    filter: WebhookFilter | None = None
    signature: SignatureScheme | None = None  # only for Provider.CUSTOM
    jwt: JwtSettings | None = None  # only for Provider.JWT
    location: SourceLocation | None = field(default=None, compare=False)


Definition = MemoryDefinition | WebhookDefinition


@dataclass(frozen=True)
class Definitions:
    """Everything one source defines, in source order."""

    memories: tuple[MemoryDefinition, ...] = ()
    webhooks: tuple[WebhookDefinition, ...] = ()
