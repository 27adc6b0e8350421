"""Immutable object kinds: headline, document, tree, snapshot.

An object's oid is the blake3 of its canonical encoding; it is derived, never stored
beside the object. Children are referenced by oid, so a change to a headline changes
the oid of every ancestor up to the root and nothing else (a Merkle tree).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from functools import cached_property
from typing import ClassVar

from .codec import decode_object, encode_object
from .errors import FormatError
from .hashing import Oid, hash_bytes

Pairs = tuple[tuple[str, str], ...]


class OrgObject:
    """Shared behaviour: canonical encoding, oid, decoding by kind."""

    kind: ClassVar[str]
    _kinds: ClassVar[dict[str, type["OrgObject"]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        OrgObject._kinds[cls.kind] = cls

    def to_fields(self) -> dict:
        """The object's fields as plain data (oids as bytes)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @cached_property
    def encoded(self) -> bytes:
        """The canonical encoding, the only thing the oid depends on."""
        return encode_object(self.kind, self.to_fields())

    @cached_property
    def oid(self) -> Oid:
        """This object's name: blake3 of its canonical encoding."""
        return hash_bytes(self.encoded)

    @property
    def references(self) -> list[Oid]:
        """The oids this object's content depends on (a snapshot's parent is history, not content)."""
        return list(getattr(self, "children", ()))

    @classmethod
    def from_fields(cls, data: dict) -> "OrgObject":
        return cls(**data)

    def with_children(self, children: tuple[Oid, ...], same: tuple[int, int]) -> "OrgObject":
        """This document or headline with other `children`, of which the first and last `same` are this
        one's. When there are as many, its encoding is this one's with the others written over (as every
        child takes the same bytes there), not made again: a document may list thousands."""
        changed = replace(self, children=children)
        found = children_in_encoding(self)
        if found is not None and children and len(children) == len(self.children):
            encoded, at = found
            head, tail = same
            lo, hi = at + CHILD_BYTES * head, at + CHILD_BYTES * (len(children) - tail)
            written = b"".join(_BIN32 + oid for oid in children[head:len(children) - tail])
            changed.__dict__["encoded"] = b"".join((encoded[:lo], written, encoded[hi:]))
        return changed


@dataclass(frozen=True, eq=True)
class Headline(OrgObject):
    """One headline: parsed fields, the raw text of its own section, child oids.

    `raw` holds the headline line and its section up to the first child, byte for
    byte (line endings included), so rendering reproduces the source exactly.
    """

    kind: ClassVar[str] = "headline"
    level: int
    title: str
    raw: str
    todo: str | None = None
    priority: str | None = None
    tags: tuple[str, ...] = ()
    properties: Pairs = ()
    planning: Pairs = ()
    children: tuple[Oid, ...] = ()

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of a property (names compare case-insensitively, as in Org)."""
        upper = name.upper()
        for key, value in self.properties:
            if key.upper() == upper:
                return value
        return default

    @property
    def id(self) -> str | None:
        """The org-id (`:ID:` property), if any."""
        return self.get("ID")

    @classmethod
    def from_fields(cls, data: dict) -> "Headline":
        return cls(
            level=data["level"],
            title=data["title"],
            raw=data["raw"],
            todo=data["todo"],
            priority=data["priority"],
            tags=tuple(data["tags"]),
            properties=tuple(tuple(p) for p in data["properties"]),
            planning=tuple(tuple(p) for p in data["planning"]),
            children=Oid.many(data["children"]),
        )


@dataclass(frozen=True, eq=True)
class Document(OrgObject):
    """One Org file's content: the text before the first headline, TODO setup, children.

    A document does not know its path; a tree names it.
    """

    kind: ClassVar[str] = "document"
    preamble: str = ""
    todo_keywords: tuple[str, ...] = ("TODO",)
    done_keywords: tuple[str, ...] = ("DONE",)
    children: tuple[Oid, ...] = ()

    @classmethod
    def from_fields(cls, data: dict) -> "Document":
        return cls(
            preamble=data["preamble"],
            todo_keywords=tuple(data["todo_keywords"]),
            done_keywords=tuple(data["done_keywords"]),
            children=Oid.many(data["children"]),
        )

_BIN32 = b"\xc4\x20"  # how msgpack writes the 32 bytes of an oid: "bin 8" of length 32
CHILD_BYTES = len(_BIN32) + 32  # what each child takes in its parent's encoding
# How every encoding with children starts (its keys are sorted, and none sorts before "children").
_CHILDREN_KEY = b"\xa8children"


def children_in_encoding(obj: OrgObject) -> tuple[bytes, int] | None:
    """`obj`'s encoding and where its children start there (CHILD_BYTES each), when that encoding is
    at hand (made or read already: it is not made for this); None otherwise."""
    encoded = obj.__dict__.get("encoded")
    if encoded is None or encoded[1:len(_CHILDREN_KEY) + 1] != _CHILDREN_KEY:
        return None
    count, at = len(obj.children), len(_CHILDREN_KEY) + 1
    header = (bytes([0x90 | count]) if count < 16 else b"\xdc" + count.to_bytes(2, "big") if count < 1 << 16
              else b"\xdd" + count.to_bytes(4, "big"))
    return (encoded, at + len(header)) if encoded.startswith(header, at) else None


@dataclass(frozen=True, eq=True)
class Tree(OrgObject):
    """A set of files: relative POSIX path -> document oid (like a git tree)."""

    kind: ClassVar[str] = "tree"
    entries: dict[str, Oid] = field(default_factory=dict)

    def __hash__(self):
        return hash(self.oid)

    @property
    def references(self) -> list[Oid]:
        return list(self.entries.values())

    @classmethod
    def from_fields(cls, data: dict) -> "Tree":
        entries = data["entries"]
        return cls(entries=dict(zip(entries, Oid.many(entries.values()))))


@dataclass(frozen=True, eq=True)
class Snapshot(OrgObject):
    """A recorded state: root tree, parent snapshot, time (unix ns), message, counts."""

    kind: ClassVar[str] = "snapshot"
    root: Oid
    parent: Oid | None
    time_ns: int
    message: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    def __hash__(self):
        return hash(self.oid)

    def __str__(self) -> str:
        when = datetime.fromtimestamp(self.time_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")
        counts = ", ".join(f"{v} {k}" for k, v in self.counts.items())
        return f"snapshot {self.oid.hex()[:12]} {when} ({counts}) {self.message}".rstrip()

    @property
    def references(self) -> list[Oid]:
        # Retention may drop the parent, so neither gc nor fsck follows it.
        return [self.root]

    @classmethod
    def from_fields(cls, data: dict) -> "Snapshot":
        parent = data["parent"]
        return cls(
            root=Oid(data["root"]),
            parent=None if parent is None else Oid(parent),
            time_ns=data["time_ns"],
            message=data["message"],
            counts=dict(data["counts"]),
        )


def decode(data: bytes) -> OrgObject:
    """Rebuild an object from its canonical encoding."""
    kind, fields_ = decode_object(data)
    cls = OrgObject._kinds.get(kind)
    if cls is None:
        raise FormatError(f"unknown object kind {kind!r}")
    return cls.from_fields(fields_)


EMPTY_TREE = Tree()
