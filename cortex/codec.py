"""Canonical msgpack: one byte string per value, so equal content hashes equal.

Maps are written with sorted keys, tuples as arrays, and floats are refused
(1, 1.0 and True would otherwise be three encodings of "one").
Every object carries a kind tag and a format version.
"""

from __future__ import annotations

from typing import Any

import msgpack

from .errors import FormatError
from .hashing import Oid

FORMAT_VERSION = 1
KIND = "kind"
VERSION = "v"


_LEAVES = (str, bytes, int, type(None))  # bool is an int
_LEAF_TYPES = frozenset((str, bytes, int, type(None), bool, Oid))  # their exact types, checked faster


def canonical(value: Any) -> Any:
    """Return `value` with maps key-sorted and tuples as lists; refuse floats."""
    if isinstance(value, _LEAVES):
        return value
    # Leaves are returned inline: a tree or a document may hold thousands of oids.
    if isinstance(value, dict):
        return {k: v if isinstance(v := value[k], _LEAVES) else canonical(v) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        if _LEAF_TYPES.issuperset(map(type, value)):  # msgpack writes tuples as arrays too
            return value
        return [v if isinstance(v, _LEAVES) else canonical(v) for v in value]
    if isinstance(value, float):
        raise TypeError(f"floats are not allowed in hashed data: {value!r}")
    raise TypeError(f"cannot encode {type(value).__name__} canonically")


def encode(value: Any) -> bytes:
    """Encode a value canonically."""
    return msgpack.packb(canonical(value), use_bin_type=True)


def decode(data: bytes) -> Any:
    """Decode bytes written by `encode` (arrays come back as lists)."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def encode_object(kind: str, fields: dict) -> bytes:
    """Encode an object's fields with its kind tag and the current format version."""
    return encode({**fields, KIND: kind, VERSION: FORMAT_VERSION})


def decode_object(data: bytes) -> tuple[str, dict]:
    """Decode an object into (kind, fields), refusing versions newer than ours."""
    fields = decode(data)
    if not isinstance(fields, dict) or KIND not in fields:
        raise FormatError("not a cortex object")
    version = fields.pop(VERSION, None)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise FormatError(
            f"object written by format version {version}; this cortex reads up to "
            f"{FORMAT_VERSION}: upgrade cortex"
        )
    return fields.pop(KIND), fields
