"""Webhook secrets: where they come from, and keeping them out of logs, errors and the REPL."""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from cortex.errors import UserError
from cortex.reads import TooLarge, read_bounded

__all__ = ["MAX_SECRET", "REDACTED", "SECRET_SCHEME", "MissingSecret", "ResolvedSecret", "Secret",
           "is_sensitive_header", "redact_headers", "resolve_secret"]

SECRET_SCHEME = "secret://"
REDACTED = "***"
MAX_SECRET = 1 << 20  # bytes of a secret or key file

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Header names whose values authenticate a request; any name containing one of these is redacted.
_SENSITIVE_PARTS = ("authorization", "signature", "token", "secret", "cookie", "api-key", "apikey",
                    "password", "hmac")


class Secret:
    """A secret value whose repr and str are redacted, so it never reaches a log or the REPL."""

    __slots__ = ("_value",)

    def __init__(self, value: str | bytes):
        if not isinstance(value, (str, bytes)):
            raise TypeError(f"a Secret holds str or bytes, not {type(value).__name__}")
        self._value = value

    def reveal(self) -> str | bytes:
        """The secret value itself; call it only where the value is used, never to display it."""
        return self._value

    def as_bytes(self) -> bytes:
        """The secret as bytes (UTF-8 for a text secret), ready for an HMAC key."""
        value = self._value
        return value.encode("utf-8") if isinstance(value, str) else value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self.as_bytes(), other.as_bytes())

    def __hash__(self) -> int:
        return hash(self.as_bytes())

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    __str__ = __repr__


class MissingSecret(UserError):
    """A webhook's secret reference points at nothing usable."""

    def __init__(self, webhook: str, source: str, problem: str):
        super().__init__(f"webhook {webhook!r}: secret {source} {problem}")
        self.webhook = webhook
        self.source = source


class ResolvedSecret(NamedTuple):
    """A resolved secret and, for a literal written in the definitions, a warning to show."""

    secret: Secret
    warning: str | None


def resolve_secret(spec: str, webhook_name: str, *, environ: Mapping[str, str] | None = None,
                   base_dir: str | Path | None = None) -> ResolvedSecret:
    """Resolve a literal, `secret://env/NAME` or `secret://file/PATH` into a Secret."""
    if not isinstance(spec, str) or spec == "":
        raise UserError(f"webhook {webhook_name!r}: the secret is empty")
    if not spec.startswith(SECRET_SCHEME):
        warning = (f"webhook {webhook_name!r}: the secret is written literally in the definitions; "
                   f"use {SECRET_SCHEME}env/NAME or {SECRET_SCHEME}file/PATH instead")
        return ResolvedSecret(Secret(spec), warning)
    kind, _, name = spec[len(SECRET_SCHEME):].partition("/")
    if kind == "env":
        return ResolvedSecret(_from_env(name, webhook_name, os.environ if environ is None else environ), None)
    if kind == "file":
        return ResolvedSecret(_from_file(name, webhook_name, base_dir), None)
    raise UserError(f"webhook {webhook_name!r}: unknown secret source {kind!r} in {spec!r}; "
                    f"use {SECRET_SCHEME}env/NAME or {SECRET_SCHEME}file/PATH")


def _from_env(name: str, webhook: str, environ: Mapping[str, str]) -> Secret:
    source = f"environment variable {name!r}"
    if not _ENV_NAME.match(name):
        raise UserError(f"webhook {webhook!r}: {name!r} is not an environment variable name "
                        f"(in {SECRET_SCHEME}env/{name})")
    value = environ.get(name)
    if value is None:
        raise MissingSecret(webhook, source, "is not set")
    if value == "":
        raise MissingSecret(webhook, source, "is empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 arrive as lone surrogates (surrogateescape)
        raise MissingSecret(webhook, source, "is not UTF-8 text; put a binary key in a file "
                                             f"and use {SECRET_SCHEME}file/PATH") from None
    return Secret(value)


def _from_file(name: str, webhook: str, base_dir: str | Path | None) -> Secret:
    if name == "":
        raise UserError(f"webhook {webhook!r}: {SECRET_SCHEME}file/ needs a path")
    path = Path(name).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    source = f"file {str(path)!r}"
    try:
        data = read_bounded(path, MAX_SECRET, "a secret")
    except FileNotFoundError:
        raise MissingSecret(webhook, source, "does not exist") from None
    except OSError as err:
        raise MissingSecret(webhook, source, f"cannot be read: {err.strerror}") from None
    except TooLarge as err:
        raise MissingSecret(webhook, source, f"cannot be read: {err.reason}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # a binary key: every byte of it is the key, a last 0x0a too
        secret: str | bytes = data
    else:
        # Editors and `echo` end text files with a newline that is not part of the secret; strip exactly one.
        secret = text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
    if not secret:
        raise MissingSecret(webhook, source, "is empty")
    return Secret(secret)


def is_sensitive_header(name: str) -> bool:
    """True for a header whose value authenticates a request (signatures, tokens, cookies)."""
    lowered = name.lower()
    return any(part in lowered for part in _SENSITIVE_PARTS)


def redact_headers(headers: Mapping[str, str], extra: tuple[str, ...] | list[str] = ()) -> dict[str, str]:
    """A copy of headers with signature, token and authorization values replaced by `***`."""
    also = {name.lower() for name in extra}
    return {name: REDACTED if is_sensitive_header(name) or name.lower() in also else value
            for name, value in headers.items()}
