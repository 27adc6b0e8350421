"""The error a query, a match string or a date in one raises: a user mistake, said in one line."""

from __future__ import annotations

from ..errors import UserError

__all__ = ["QueryError"]


class QueryError(UserError):
    """A query that cannot be read: the message says what is wrong and where (the form or the offset)."""
