"""Ids given back by a prefix: the one rule for every id the tools print, whole or shortened (snapshot oids,
proposal ids, webhook delivery ids, working copies): the whole id, or a prefix that only one id starts with."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import NotFound, UserError
from .words import brief

__all__ = ["unique"]

LISTED = 5  # ids an ambiguous prefix names
SHOWN = 24  # characters of each


def unique(prefix: str, ids: Iterable[str], what: str, listing: str = "") -> str:
    """The one of `ids` that is `prefix` or starts with it. NotFound when none does, a UserError naming them when
    several do, each said of `what` (`snapshot`) and ending with `listing`, where to see them (`; cortex review
    lists them`)."""
    if not prefix:
        raise UserError(f"no {what} given: name one by its id or a prefix of it{listing}")
    found = sorted({name for name in ids if name.startswith(prefix)})
    if prefix in found:
        return prefix
    if not found:
        raise NotFound(f"no {what} {brief(prefix)}{listing}")
    if len(found) > 1:
        more = f" and {len(found) - LISTED} more" if len(found) > LISTED else ""
        named = ", ".join(name[:SHOWN] for name in found[:LISTED])
        raise UserError(f"{what} prefix {brief(prefix)} is ambiguous, {len(found)} start with it: {named}{more}"
                        f"{listing}")
    return found[0]
