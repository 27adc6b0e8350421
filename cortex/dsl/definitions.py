"""What the DSL declares: agent memories and webhook endpoints, as immutable values, and how each reads as
a row of a table (`cortex dsl show`, the REPL)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

from cortex.dsl.duration import format_duration

__all__ = ["OPERATIONS", "ROW_HEADERS", "SECTIONS", "Definition", "Definitions", "Encoding", "Fusion", "HmacAlgorithm",
           "JwtSettings", "MemoryDefinition", "MemorySearchConfig", "Provider", "ReviewPolicy", "Scalar",
           "SignatureScheme", "SourceLocation", "StoreKind", "WebhookDefinition", "WebhookFilter", "definition_rows"]

ROW_HEADERS = ("kind", "name", "defined at", "settings")
_REFERENCE = re.compile(r"\w+://")


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


# What a write of agent memory touches, and what it does, as a review policy names them.
SECTIONS = ("facts", "procedures", "patterns", "logs")
OPERATIONS = ("add", "supersede", "retire", "save", "turns", "delivery", "forget", "purge", "compact", "consolidate",
              "delete")


@dataclass(frozen=True)
class ReviewPolicy:
    """Which writes of agent memory wait for a person's review: those of these `agents`, touching these
    `sections`, doing these `operations` (each None: any); every other write is accepted at once."""

    agents: tuple[str, ...] | None = None
    sections: tuple[str, ...] | None = None
    operations: tuple[str, ...] | None = None

    def waits(self, agent: str, sections: set[str], operations: set[str]) -> bool:
        """Whether a write of `agent` touching `sections` and doing `operations` waits for review."""
        return ((self.agents is None or agent in self.agents)
                and (self.sections is None or not sections.isdisjoint(self.sections))
                and (self.operations is None or not operations.isdisjoint(self.operations)))

    def __str__(self) -> str:
        parts = [f"{name} {' '.join(values)}" for name, values in
                 (("agents", self.agents), ("sections", self.sections), ("operations", self.operations))
                 if values is not None]
        return ", ".join(parts) or "every write"


class _Listed:
    """How a definition reads as a row of a table: its `kind`, name, where it is defined and its `settings()`
    (secrets stay hidden)."""

    def row(self) -> tuple[str, str, str, str]:
        """The cells of its row, in the order of `ROW_HEADERS`."""
        return (self.kind, self.name, str(self.location or ""), self.settings())

    def repl_row(self, renderer, index: int) -> dict[str, str]:
        """The REPL's row: where it is defined is placed as the REPL names files (relative to the Org folder)."""
        kind, name, where, settings = self.row()
        return dict(zip(ROW_HEADERS, (kind, name, renderer.place(where), settings), strict=True))

    def repl_view(self, renderer):
        """The REPL's view: its row as key/value pairs."""
        return renderer.key_values(self.repl_row(renderer, 0).items())


@dataclass(frozen=True)
class MemoryDefinition(_Listed):
    """An agent memory: where it lives, how long it keeps logs, how it searches."""

    name: str
    store: StoreKind = StoreKind.ORG
    path: str = "org/agents"
    retention: timedelta = timedelta(days=90)
    search: MemorySearchConfig = MemorySearchConfig()
    review: ReviewPolicy | None = None  # None: no write waits for review
    location: SourceLocation | None = field(default=None, compare=False)
    kind: ClassVar[str] = "memory"

    def settings(self) -> str:
        """Store, path, retention, search and review, in a line."""
        search = self.search
        review = "" if self.review is None else f" · review {self.review}"
        return (f"store {self.store.value} · path {self.path} · retention {format_duration(self.retention)} · "
                f"search {search.vector_weight:g} vector + {search.keyword_weight:g} keyword ({search.fusion.value})"
                + review)


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
class WebhookDefinition(_Listed):
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
    kind: ClassVar[str] = "webhook"

    def settings(self) -> str:
        """Path, provider, where the secret or key comes from, agent and filter, in a line."""
        parts = [f"POST {self.path}", f"provider {self.provider.value}"]
        if self.secret is not None:
            parts.append(f"secret {self.secret}" if _REFERENCE.match(self.secret) else "secret (inline)")
        if self.jwt and self.jwt.public_key is not None:
            parts.append(f"{'/'.join(self.jwt.algorithms)} public key")
        if self.signature:
            parts.append(f"signature in {self.signature.header}")
        if self.agent:
            parts.append(f"agent {self.agent}")
        if self.filter:
            f = self.filter
            test = f"== {f.equals!r}" if f.equals is not None else f"contains {f.contains!r}"
            parts.append(f"only if {f.json_path} {test}")
        return " · ".join(parts)


Definition = MemoryDefinition | WebhookDefinition


@dataclass(frozen=True)
class Definitions:
    """Everything one source defines, in source order."""

    memories: tuple[MemoryDefinition, ...] = ()
    webhooks: tuple[WebhookDefinition, ...] = ()

    def repl_view(self, renderer):
        """The REPL's view: a table of every definition (or "no definitions")."""
        rows = [d.repl_row(renderer, n) for n, d in enumerate((*self.memories, *self.webhooks))]
        return renderer.records(rows) if rows else renderer.text("no definitions")


def definition_rows(definitions: Definitions) -> list[tuple[str, str, str, str]]:
    """One row per definition for `dsl show`, in the order of `ROW_HEADERS`; secrets stay hidden."""
    return [d.row() for d in (*definitions.memories, *definitions.webhooks)]
