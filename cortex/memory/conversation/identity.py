"""Who a conversation belongs to: tenant, user, session and an optional run."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ...codec import encode
from ...errors import UserError
from ...hashing import Oid, hash_bytes
from .events import IDENTITY_PARTS, EventBus, IdentityRejected

__all__ = ["Identity", "IdentityRequired", "require_identity"]


@dataclass(frozen=True)
class Identity:
    """The scope of a conversation; tenant, user and session are required, run may be empty."""

    tenant: str
    user: str
    session: str
    run: str = ""

    @cached_property
    def missing(self) -> tuple[str, ...]:
        """The required parts that are absent or blank, in order."""
        return tuple(part for part in IDENTITY_PARTS if not _present(getattr(self, part)))

    @cached_property
    def key(self) -> Oid:
        """A fixed-size hashed key for storage and events; it does not reveal the parts."""
        return hash_bytes(encode(["identity", self.tenant, self.user, self.session, self.run or ""]))


class IdentityRequired(UserError):
    """A memory call came without tenant, user or session."""

    def __init__(self, operation: str, missing: tuple[str, ...]):
        super().__init__(f"{operation}: identity is missing {', '.join(missing)} (tenant, user and session are "
                         "required at every call; run may be empty)")
        self.operation = operation
        self.missing = missing


def require_identity(identity: Identity | None, bus: EventBus, operation: str) -> Oid:
    """Return the identity's key, or publish `memory.identity_rejected` and raise IdentityRequired."""
    missing = identity.missing if isinstance(identity, Identity) else IDENTITY_PARTS
    if missing:
        bus.publish(IdentityRejected(operation=operation, missing=missing))
        raise IdentityRequired(operation, missing)
    return identity.key


def _present(part) -> bool:
    return isinstance(part, str) and part.strip() != ""
