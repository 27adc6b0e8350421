"""Object ids: 32-byte blake3 digests."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

import blake3

OID_SIZE = 32


class Oid(bytes):
    """A 32-byte blake3 digest naming an object; prints as hex."""

    def __new__(cls, digest: bytes):
        if len(digest) != OID_SIZE:
            raise ValueError(f"an oid is {OID_SIZE} bytes, got {len(digest)}")
        return super().__new__(cls, digest)

    @classmethod
    def from_hex(cls, text: str) -> "Oid":
        """Parse the 64-character hex form."""
        return cls(bytes.fromhex(text))

    @classmethod
    def many(cls, digests: Iterable[bytes]) -> tuple["Oid", ...]:
        """Oids of many digests at C speed (a document may list thousands of children)."""
        digests = tuple(digests)
        if not set(map(len, digests)) <= {OID_SIZE}:
            raise ValueError(f"an oid is {OID_SIZE} bytes, got {sorted(set(map(len, digests)) - {OID_SIZE})[0]}")
        return tuple(map(_unchecked, digests))

    def __str__(self) -> str:
        return self.hex()

    def __repr__(self) -> str:
        return f"Oid({self.hex()[:12]})"


_unchecked = partial(bytes.__new__, Oid)  # an Oid without `__new__`'s check, for digests `many` checked

THREADED_BYTES = 1 << 21  # from this size, hashing on every core is faster than on one


def hash_bytes(data: bytes) -> Oid:
    """The oid of a byte string."""
    threads = blake3.blake3.AUTO if len(data) >= THREADED_BYTES else 1
    return _unchecked(blake3.blake3(data, max_threads=threads).digest())  # (a digest is 32 bytes)


def hash_text(text: str) -> Oid:
    """The oid of a text's UTF-8 bytes (used as a cache key for derived data)."""
    return hash_bytes(text.encode("utf-8"))
