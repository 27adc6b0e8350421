"""Definitions as text: well-formatted Hy forms for files."""

from __future__ import annotations

import hy

from cortex.dsl.definitions import Definition, Encoding, Fusion, HmacAlgorithm, MemoryDefinition, Provider
from cortex.dsl.duration import format_duration
from cortex.dsl.interpret import NAME
from cortex.errors import UserError

__all__ = ["render_definition"]


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


def _memory_pairs(m: MemoryDefinition) -> list[tuple[str, str]]:
    pairs = [("store", m.store.value), ("path", _string(m.path)), ("retention", _string(format_duration(m.retention)))]
    search = [("vector-weight", hy.repr(m.search.vector_weight)), ("keyword-weight", hy.repr(m.search.keyword_weight))]
    if m.search.fusion is not Fusion.WEIGHTED:
        search.append(("fusion", m.search.fusion.value))
    pairs.append(("search", _map(search)))
    if m.review is not None:
        review = [(key, "[" + " ".join(values) + "]") for key, values in
                  (("agents", m.review.agents), ("sections", m.review.sections), ("operations", m.review.operations))
                  if values is not None]
        pairs.append(("review", _map(review) if review else "True"))
    return pairs


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


def _string(value: str) -> str:
    return hy.repr(value)


def _name(value: str, what: str) -> str:
    """A name, written bare as the DSL reads it; anything else could end the form and start another."""
    if not isinstance(value, str) or not NAME.match(value):
        raise UserError(f"{what} {value!r} must be a letter, then letters, digits, - or _ (like code-review-agent)")
    return value


def _map(pairs: list[tuple[str, str]]) -> str:
    return "{" + " ".join(f":{key} {value}" for key, value in pairs) + "}"
