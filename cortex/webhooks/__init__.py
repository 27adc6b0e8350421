"""Webhooks: verify deliveries as providers sign them, resolve secrets, filter payloads."""

from cortex.webhooks.filters import UNSET, FilterResult, JsonPathFilter, matches
from cortex.webhooks.secrets import (
    MissingSecret,
    ResolvedSecret,
    Secret,
    redact_headers,
    resolve_secret,
)
from cortex.webhooks.verify import (
    PROVIDERS,
    Reason,
    Verdict,
    Verifier,
    verifier_for,
)

__all__ = [
    "PROVIDERS", "UNSET", "FilterResult", "JsonPathFilter", "MissingSecret", "Reason", "ResolvedSecret", "Secret",
    "Verdict", "Verifier", "matches", "redact_headers", "resolve_secret", "verifier_for",
]
