"""Definitions as text: well-formatted Hy forms for files, and rows for a table."""

from __future__ import annotations

import re

import hy

from cortex.dsl.definitions import (
    Definition,
    Definitions,
    Encoding,
    Fusion,
    HmacAlgorithm,
    MemoryDefinition,
    Provider,
    WebhookFilter,
)
from cortex.dsl.duration import format_duration
from cortex.dsl.interpret import NAME
from cortex.errors import UserError

ROW_HEADERS = ("kind", "name", "defined at", "settings")
_REFERENCE = re.compile(r"\w+://")


def render_definition(definition: Definition, newline: str = "\n") -> str:
    """The form that defines `definition`, one keyword per line, without a trailing newline.

    Text values are written as quoted strings; names, written bare, must be names (UserError).
    """
    if isinstance(definition, MemoryDefinition):
        head, pairs = "defmemory", _memory_pairs(definition)
    else:
        head, pairs = "defwebhook", _webhook_pairs(definition)
    lines = [f"({head} {_name(definition.name, f'{head[3:]} name')}"] + [f"  :{key} {value}" for key, value in pairs]
    return newline.join(lines) + ")"


def definition_rows(definitions: Definitions) -> list[tuple[str, str, str, str]]:
    """One row per definition for `dsl show`, in the order of `ROW_HEADERS`; secrets stay hidden."""
    rows = []
    for m in definitions.memories:
        search = m.search
        settings = (f"store {m.store.value} · path {m.path} · retention {format_duration(m.retention)} · "
                    f"search {search.vector_weight:g} vector + {search.keyword_weight:g} keyword "
                    f"({search.fusion.value})")
        rows.append(("memory", m.name, str(m.location or ""), settings))
    for w in definitions.webhooks:
        parts = [f"POST {w.path}", f"provider {w.provider.value}"]
        if w.secret is not None:
            parts.append(f"secret {w.secret}" if _REFERENCE.match(w.secret) else "secret (inline)")
        if w.jwt and w.jwt.public_key is not None:
            parts.append(f"{'/'.join(w.jwt.algorithms)} public key")
        if w.signature:
            parts.append(f"signature in {w.signature.header}")
        if w.agent:
            parts.append(f"agent {w.agent}")
        if w.filter:
            parts.append(f"only if {_filter_text(w.filter)}")
        rows.append(("webhook", w.name, str(w.location or ""), " · ".join(parts)))
    return rows


def _memory_pairs(m: MemoryDefinition) -> list[tuple[str, str]]:
    pairs = [("store", m.store.value), ("path", _string(m.path)), ("retention", _string(format_duration(m.retention)))]
    search = [("vector-weight", hy.repr(m.search.vector_weight)), ("keyword-weight", hy.repr(m.search.keyword_weight))]
    if m.search.fusion is not Fusion.WEIGHTED:
        search.append(("fusion", m.search.fusion.value))
    return pairs + [("search", _map(search))]


def _webhook_pairs(w) -> list[tuple[str, str]]:
    pairs = [("path", _string(w.path)), ("provider", w.provider.value)]
    if w.secret is not None:
        pairs.append(("secret", _string(w.secret)))
    if w.provider is Provider.CUSTOM and w.signature:
        pairs.append(("header", _string(w.signature.header)))
        if w.signature.prefix:
            pairs.append(("prefix", _string(w.signature.prefix)))
        if w.signature.encoding is not Encoding.HEX:
            pairs.append(("encoding", w.signature.encoding.value))
        if w.signature.algorithm is not HmacAlgorithm.SHA256:
            pairs.append(("algorithm", w.signature.algorithm.value))
    if w.provider is Provider.JWT and w.jwt:
        if w.jwt.public_key is not None:
            pairs.append(("public-key", _string(w.jwt.public_key)))
        pairs.append(("algorithms", "[" + " ".join(map(_string, w.jwt.algorithms)) + "]"))
        pairs += [(key, _string(value)) for key, value in
                  (("issuer", w.jwt.issuer), ("audience", w.jwt.audience), ("body-hash-claim", w.jwt.body_hash_claim))
                  if value is not None]
        if w.jwt.max_lifetime is not None:
            pairs.append(("max-lifetime", _string(format_duration(w.jwt.max_lifetime))))
    if w.agent is not None:
        pairs.append(("agent", _name(w.agent, "agent")))
    if w.filter is not None:
        test = "equals" if w.filter.equals is not None else "contains"
        value = getattr(w.filter, test)
        pairs.append(("filter", _map([("json-path", _string(w.filter.json_path)), (test, hy.repr(value))])))
    return pairs


def _filter_text(f: WebhookFilter) -> str:
    if f.equals is not None:
        return f"{f.json_path} == {f.equals!r}"
    return f"{f.json_path} contains {f.contains!r}"


def _string(value: str) -> str:
    return hy.repr(value)


def _name(value: str, what: str) -> str:
    """A name, written bare as the DSL reads it; anything else could end the form and start another."""
    if not isinstance(value, str) or not NAME.match(value):
        raise UserError(f"{what} {value!r} must be a letter, then letters, digits, - or _ (like code-review-agent)")
    return value


def _map(pairs: list[tuple[str, str]]) -> str:
    return "{" + " ".join(f":{key} {value}" for key, value in pairs) + "}"
