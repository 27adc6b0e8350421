"""The error hierarchy: user mistakes versus a damaged store."""

from __future__ import annotations


class CortexError(Exception):
    """Base of every error cortex raises on purpose."""


class UserError(CortexError):
    """Bad input: the message says what is wrong and where."""


class IntegrityError(CortexError):
    """The store is damaged or inconsistent."""


class ChecksumMismatch(IntegrityError):
    """An object's bytes do not hash to the oid it is stored under."""

    def __init__(self, expected: str, got: str):
        super().__init__(f"object {expected} hashes to {got}")
        self.expected = expected
        self.got = got


class NotFound(UserError):
    """A named thing (object, ref, headline, snapshot) does not exist."""


class RefConflict(CortexError):
    """A compare-and-swap on a ref lost a race: the ref moved meanwhile."""

    def __init__(self, name: str, expected, actual):
        super().__init__(
            f"ref {name!r} moved: expected {_short(expected)}, found {_short(actual)}; "
            "another process changed it, try again"
        )
        self.name = name
        self.expected = expected
        self.actual = actual


class FormatError(UserError):
    """Data written in a format this version cannot read."""


def located(path, line: int | None, message: str, column: int | None = None) -> str:
    """Format a message as `file:line[:column]: message`."""
    where = str(path)
    if line is not None:
        where += f":{line}"
        if column is not None:
            where += f":{column}"
    return f"{where}: {message}"


def _short(oid) -> str:
    return "nothing" if oid is None else str(oid)[:12]
