"""RFC 9535 JSONPath as definitions write it and webhook filters run it, in time linear in the payload.

Payloads come from anyone who holds a signature, so every query is checked for that when it is compiled, before
any delivery: `match()` and `search()` run their I-Regexp (RFC 9485) on RE2, which never backtracks, and take
their pattern as a string literal (is it an I-Regexp, can RE2 run it?); a query descends (`..`) once at most,
and a `[?...]` filter reads one value at most from the root (`$`), since more would visit parts of the payload
again for every node found or tested. The DSL checks a definition's `:json-path` with it; webhooks'
filters run it.
"""

from __future__ import annotations

import functools
import re

import jsonpath_rfc9535
import re2
from jsonpath_rfc9535.filter_expressions import Expression, FilterExpressionLiteral, FilterQuery, RootFilterQuery
from jsonpath_rfc9535.function_extensions import ExpressionType, FilterFunction
from jsonpath_rfc9535.segments import JSONPathRecursiveDescentSegment
from jsonpath_rfc9535.selectors import FilterSelector

__all__ = ["compile_query"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_RE2 = re2.Options()
_RE2.log_errors = False  # a refused pattern is reported to the user, not printed by RE2

# RFC 9485 section 5.3, token by token; only parentheses nest, and they are counted as they come.
_CATEGORY = r"\\[pP]\{(?:L[lmotu]?|M[cen]?|N[dlo]?|P[c-fios]?|Z[lps]?|S[ckmo]?|C[cfno]?)\}"
_ESCAPE = r"\\[()*+\-.?\[\\\]^nrt{|}]"
_CLASS_CHAR = rf"(?:[^\-\[\\\]\ud800-\udfff]|{_ESCAPE})"
_CLASS_PART = rf"(?:{_CLASS_CHAR}(?:-{_CLASS_CHAR})?|{_CATEGORY})"
_ATOM = (rf"[^.()*+?\[\\\]{{|}}\ud800-\udfff]|\.|{_ESCAPE}|{_CATEGORY}"
         rf"|\[\^?(?:-|{_CLASS_PART}){_CLASS_PART}*-?\]")
_QUANTIFIER = r"(?:[*+?]|\{[0-9]+(?:,[0-9]*)?\})?"
_I_REGEXP_TOKEN = re.compile(rf"(?:{_ATOM}){_QUANTIFIER}|(?P<open>\()|(?P<close>\)){_QUANTIFIER}|\|")


class _BadPattern(ValueError):
    """A match()/search() pattern that is not an I-Regexp, or that RE2 cannot run."""


@functools.lru_cache(maxsize=1024)  # patterns are literals of the definitions, so few
def _regex(pattern: str):
    """An I-Regexp compiled for RE2, which matches in time linear in the text."""
    if not _is_i_regexp(pattern):
        raise _BadPattern(f"pattern {pattern!r} is not an I-Regexp (RFC 9485)")
    try:
        return re2.compile(_as_re2(pattern), _RE2)
    except re2.error as err:
        reason = err.args[0].decode() if err.args and isinstance(err.args[0], bytes) else str(err)
        raise _BadPattern(f"pattern {pattern!r} cannot run on RE2, the linear-time engine filters use: {reason}"
                          ) from None


def _is_i_regexp(pattern: str) -> bool:
    """Whether a pattern is an I-Regexp (RFC 9485)."""
    depth = position = 0
    while position < len(pattern):
        token = _I_REGEXP_TOKEN.match(pattern, position)
        if token is None:
            return False
        depth += (token["open"] is not None) - (token["close"] is not None)
        if depth < 0:
            return False
        position = token.end()
    return depth == 0


def _as_re2(pattern: str) -> str:
    """RE2 syntax for an I-Regexp: `.` excludes CR and LF, and `^` and `$` are plain characters."""
    out, in_class, escaped = [], False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"  # I-Regexp has no nested classes, and no unescaped `]` inside one
        elif char == "[":
            in_class = True
        elif char == ".":
            char = "[^\\n\\r]"
        elif char in "^$":
            char = "\\" + char
        out.append(char)
    return "".join(out)


class _Regex(FilterFunction):
    """RFC 9535 `match` (the whole string) or `search` (anywhere in it), on RE2."""

    arg_types = [ExpressionType.VALUE, ExpressionType.VALUE]
    return_type = ExpressionType.LOGICAL

    def __init__(self, whole: bool):
        self.whole = whole

    def __call__(self, value: object, pattern: str) -> bool:
        if not isinstance(value, str):
            return False
        regex = _regex(pattern)  # a literal, checked as the query compiled
        find = regex.fullmatch if self.whole else regex.search
        try:
            return find(value) is not None
        except UnicodeEncodeError:  # a lone surrogate from a JSON escape: RE2 reads UTF-8 only
            return find(_SURROGATE.sub("\ufffd", value)) is not None


class _Environment(jsonpath_rfc9535.JSONPathEnvironment):
    """RFC 9535 JSONPath with match() and search() on RE2, and queries checked to run in linear time."""

    def compile(self, query: str) -> jsonpath_rfc9535.JSONPathQuery:
        compiled = super().compile(query)
        descents = [segment for segment in _segments(compiled) if isinstance(segment, JSONPathRecursiveDescentSegment)]
        if len(descents) > 1:
            raise jsonpath_rfc9535.JSONPathTypeError(
                "a query may descend (..) once at most: each more would visit the payload again for every node "
                "found", token=descents[1].token)
        return compiled

    def setup_function_extensions(self) -> None:
        super().setup_function_extensions()
        self.function_extensions["match"] = _Regex(whole=True)
        self.function_extensions["search"] = _Regex(whole=False)

    def validate_function_extension_signature(self, token, args):
        args = super().validate_function_extension_signature(token, args)
        if isinstance(self.function_extensions[token.value], _Regex):
            pattern = args[1]
            if not isinstance(pattern, FilterExpressionLiteral) or not isinstance(pattern.value, str):
                raise jsonpath_rfc9535.JSONPathTypeError(
                    f"{token.value}() takes its pattern as a string literal, so that it is checked "
                    "before any delivery", token=token)
            try:
                _regex(pattern.value)
            except _BadPattern as err:
                raise jsonpath_rfc9535.JSONPathTypeError(str(err), token=token) from None
        return args


def _segments(query: jsonpath_rfc9535.JSONPathQuery):
    """Every segment of a query and of the queries in its filters (JSONPathTypeError: a filter reads the root)."""
    for segment in query.segments:
        yield segment
        for selector in segment.selectors:
            if isinstance(selector, FilterSelector):
                yield from _filter_segments(selector.expression)


def _filter_segments(expression: Expression):
    if isinstance(expression, RootFilterQuery) and not expression.query.singular_query():
        raise jsonpath_rfc9535.JSONPathTypeError(
            "a [?...] filter can query the root ($) only for one value (names and indexes): any more would be "
            "read again for every node tested", token=expression.token)
    if isinstance(expression, FilterQuery):
        yield from _segments(expression.query)
    for part in (getattr(expression, name, None) for name in ("expression", "left", "right")):
        if isinstance(part, Expression):
            yield from _filter_segments(part)
    for argument in getattr(expression, "args", ()):
        yield from _filter_segments(argument)


_ENVIRONMENT = _Environment()


def compile_query(json_path: str) -> jsonpath_rfc9535.JSONPathQuery:
    """An RFC 9535 query whose regex functions run on RE2 (JSONPathError when it is not a valid query)."""
    return _ENVIRONMENT.compile(json_path)
