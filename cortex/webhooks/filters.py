"""Delivery filters: an RFC 9535 JSONPath query (`cortex.dsl.jsonpath`, linear in the payload), optionally
with an `equals` or `contains` test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import jsonpath_rfc9535

from cortex.dsl.jsonpath import compile_query
from cortex.errors import CortexError, UserError

__all__ = ["UNSET", "FilterFailed", "FilterResult", "JsonPathFilter", "matches"]

_SHOWN = 80  # characters of a found value quoted in a filter's reason


class FilterFailed(CortexError):
    """A filter could not be applied to a payload (the payload is the cause: the delivery is refused)."""


class _Unset:
    """The type of UNSET: a test that was not given (None is JSON null, a real value to compare)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()


@dataclass(frozen=True)
class JsonPathFilter:
    """`:json-path` with `:equals` or `:contains`; with neither, the path only has to find something."""

    json_path: str
    equals: object = UNSET
    contains: object = UNSET
    _query: jsonpath_rfc9535.JSONPathQuery = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.equals is not UNSET and self.contains is not UNSET:
            raise UserError(f"filter {self.json_path!r}: give :equals or :contains, not both")
        # Values read from DSL source may be str/int subclasses (Hy models) that refuse to equal plain ones.
        for name in ("json_path", "equals", "contains"):
            object.__setattr__(self, name, _plain(getattr(self, name)))
        try:
            query = compile_query(self.json_path)
        except jsonpath_rfc9535.JSONPathError as err:
            raise UserError(f"bad JSONPath {self.json_path!r}: {err}") from None
        object.__setattr__(self, "_query", query)


@dataclass(frozen=True)
class FilterResult:
    """Whether a payload passed a filter, what the path found, and why, in words."""

    matched: bool
    reason: str
    found: tuple = ()


def matches(filter: JsonPathFilter | None, payload: object) -> FilterResult:
    """Apply a filter to a parsed JSON payload; no filter matches everything (FilterFailed if it cannot run)."""
    if filter is None:
        return FilterResult(True, "no filter")
    path = filter.json_path
    try:
        found = tuple(filter._query.find(payload).values())
    except jsonpath_rfc9535.JSONPathError as err:  # e.g. nesting past the library's recursion limit
        raise FilterFailed(f"{path} cannot be applied to this payload: {err}") from None
    if not found:
        return FilterResult(False, f"{path} found nothing", found)
    shown = _show(found[0] if len(found) == 1 else list(found))
    if filter.equals is not UNSET:
        if any(_json_equal(value, filter.equals) for value in found):
            return FilterResult(True, f"{path} found {shown}, equal to {_show(filter.equals)}", found)
        return FilterResult(False, f"{path} found {shown}, not equal to {_show(filter.equals)}", found)
    if filter.contains is not UNSET:
        if any(_contains(value, filter.contains) for value in found):
            return FilterResult(True, f"{path} found {shown}, which contains {_show(filter.contains)}", found)
        return FilterResult(False, f"{path} found {shown}, which does not contain {_show(filter.contains)}",
                            found)
    return FilterResult(True, f"{path} found {shown}", found)


def _contains(value: object, wanted: object) -> bool:
    """Substring for a string, membership for a list; nothing else contains anything."""
    if isinstance(value, str):
        return isinstance(wanted, str) and wanted in value
    if isinstance(value, list):
        return any(_json_equal(item, wanted) for item in value)
    return False


def _json_equal(a: object, b: object) -> bool:
    """Equality as JSON sees it: true is not 1, 1 is 1.0, and containers compare element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[key], b[key]) for key in a)
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a is None and b is None


def _plain(value: object) -> object:
    """The value as plain Python JSON types, whatever subclasses it arrived as."""
    if value is None or value is UNSET:
        return value
    for kind in (bool, str, int, float):
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    return value


def _show(value: object) -> str:
    """A value as short JSON text, with a lone surrogate left as its escape (it cannot be stored as UTF-8)."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    text = text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
