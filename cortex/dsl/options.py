"""A webhook definition from command-line options (`cortex webhook add`): every value is checked before
anything is written, and a mistake names its option, so that what is written reads back as this one
definition and nothing else (names and agents are names, paths URL paths, JSONPath filters valid).
"""

from __future__ import annotations

import json
import re

import jsonpath_rfc9535

from cortex.dsl.definitions import (
    Encoding,
    HmacAlgorithm,
    JwtSettings,
    Provider,
    SignatureScheme,
    WebhookDefinition,
    WebhookFilter,
)
from cortex.dsl.duration import DurationError, parse_duration
from cortex.dsl.interpret import JWT_ALGORITHMS, NAME
from cortex.dsl.jsonpath import compile_query
from cortex.errors import UserError
from cortex.words import quoted

__all__ = ["MAX_NAME", "OptionError", "webhook_from_options"]

MAX_NAME = 64  # characters of a webhook's or an agent's name written into the definitions file
_URL_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*\Z")  # RFC 3986 path characters, no { } for Starlette
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # an RFC 9110 token


class OptionError(UserError):
    """A value its option does not take (`option` names it: `--path`, or `NAME` for the name), or options that
    do not go together (`option` is None)."""

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.message = message
        self.option = option


def webhook_from_options(name: str, *, path: str, provider: str, secret: str | None = None,
                         agent: str | None = None, json_path: str | None = None, equals: str | None = None,
                         contains: str | None = None, header: str | None = None, prefix: str = "",
                         encoding: str = "hex", hmac: str = "sha256", algorithms: tuple[str, ...] = (),
                         issuer: str | None = None, audience: str | None = None, public_key: str | None = None,
                         body_hash_claim: str | None = None, max_lifetime: str | None = None) -> WebhookDefinition:
    """The webhook the options describe, as `cortex webhook add` takes them (`equals` and `contains` are read
    as JSON when they are a number or true/false, else as text); an OptionError for the first mistake."""
    _name(name, "NAME")
    _url_path(path)
    for option, value in (("--secret", secret), ("--issuer", issuer), ("--audience", audience),
                          ("--public-key", public_key), ("--body-hash-claim", body_hash_claim)):
        _text(value, option)
    _name(agent, "--agent")
    _json_path(json_path)
    _header_name(header)
    _jwt_algorithms(algorithms)
    if (equals is not None or contains is not None) and not json_path:
        raise OptionError("--equals and --contains test the value --json-path finds; give --json-path")
    if json_path and (equals is None) == (contains is None):
        raise OptionError("--json-path needs one of --equals or --contains")
    kind = Provider(provider)
    _check_keys(kind, secret, header, algorithms, public_key)
    return WebhookDefinition(
        name=name, path=path, provider=kind, secret=secret, agent=agent,
        filter=WebhookFilter(json_path, equals=_scalar(equals), contains=_scalar(contains)) if json_path else None,
        signature=SignatureScheme(header, prefix, Encoding(encoding), HmacAlgorithm(hmac))
        if kind is Provider.CUSTOM and header else None,
        jwt=JwtSettings(algorithms or (("HS256",) if public_key is None else ("RS256",)), issuer, audience,
                        public_key, body_hash_claim, _duration(max_lifetime, "--max-lifetime"))
        if kind is Provider.JWT else None)


def _name(value: str | None, option: str) -> None:
    if value is not None and not (NAME.match(value) and len(value) <= MAX_NAME):
        raise OptionError(f"{quoted(value)} is not a name: a letter, then letters, digits, - or _ "
                          f"(like code-review-agent), at most {MAX_NAME} of them", option)


def _url_path(value: str) -> None:
    if not _URL_PATH.match(value):
        raise OptionError(f"{value!r} is not a URL path like /hooks/github: it starts with / and holds only what "
                          'RFC 3986 allows in a path (no spaces, ", {, } or ?)', "--path")


def _text(value: str | None, option: str) -> None:
    if value is not None and not value.strip():
        raise OptionError("must not be empty", option)


def _json_path(value: str | None) -> None:
    if value:
        try:
            compile_query(value)
        except jsonpath_rfc9535.JSONPathError as err:
            raise OptionError(f"bad JSONPath {value!r}: {err}", "--json-path") from None


def _header_name(value: str | None) -> None:
    if value is not None and not _HEADER.match(value):
        raise OptionError(f"{value!r} is not an HTTP header name (like X-Signature)", "--header")


def _jwt_algorithms(names: tuple[str, ...]) -> None:
    unknown = [name for name in names if name not in JWT_ALGORITHMS]
    if unknown:
        raise OptionError(f"{unknown[0]!r} is not one of {', '.join(JWT_ALGORITHMS)}", "--algorithm")


def _check_keys(provider: Provider, secret, header, algorithms, public_key) -> None:
    """Refuse, naming the options, what the provider cannot verify with."""
    if provider is Provider.CUSTOM and not header:
        raise OptionError("--provider custom needs --header, the request header that carries the signature")
    if provider is not Provider.JWT:
        if not secret:
            raise OptionError(f"--provider {provider.value} needs --secret to verify signatures")
        return
    if (secret is None) == (public_key is None):
        raise OptionError("--provider jwt needs --secret (HS256 tokens) or --public-key, not both")
    wrong = [a for a in algorithms if a.startswith("HS") != (secret is not None)]
    if wrong:
        needs, given = ("--secret", "--public-key") if public_key else ("--public-key", "--secret")
        raise OptionError(f"--algorithm {wrong[0]} verifies with {needs}, but {given} is given")


def _duration(text: str | None, option: str):
    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError as err:
        raise OptionError(str(err), option) from None


def _scalar(text: str | None):
    """A number or true/false when the text is one in JSON, else the text itself."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (str, int, float, bool)) else text
