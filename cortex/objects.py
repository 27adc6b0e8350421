"""Immutable object kinds: headline, document, folder, tree, snapshot.

An object's oid is the blake3 of its canonical encoding; it is derived, never stored
beside the object. Children are referenced by oid, so a change to a headline changes
the oid of every ancestor up to the root and nothing else (a Merkle tree).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from collections.abc import Callable, Iterator, Mapping
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

    def parts(self) -> list["OrgObject"]:
        """Objects made with this one that are stored with it (a tree's new folders)."""
        return []

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
class Folder(OrgObject):
    """The files of one folder of a tree: file name -> document oid."""

    kind: ClassVar[str] = "folder"
    files: dict[str, Oid] = field(default_factory=dict)

    def __hash__(self):
        return hash(self.oid)

    @property
    def references(self) -> list[Oid]:
        return list(self.files.values())

    @classmethod
    def from_fields(cls, data: dict) -> "Folder":
        files = data["files"]
        return cls(files=dict(zip(files, Oid.many(files.values()))))


Loader = Callable[[Oid], "Folder"]


class Tree(OrgObject):
    """A set of files: relative POSIX path -> document oid (like a git tree), kept as one `Folder` per folder
    (the root names each folder's path and oid): a tree made from another with a few files changed encodes
    only their folders, and two trees are compared folder by folder, opening only the folders that differ.
    `entries` is the flat view, path -> oid. A tree stored by an older cortex names every path itself (one
    flat map): it reads the same, keeps its oid, and the trees made from it are kept by folder."""

    kind: ClassVar[str] = "tree"

    def __init__(self, entries: Mapping[str, Oid] | None = None):
        grouped: dict[str, dict[str, Oid]] = {}
        for path, oid in (entries or {}).items():
            folder, _, name = path.rpartition("/")
            grouped.setdefault(folder, {})[name] = oid
        made = {folder: Folder(dict(sorted(files.items()))) for folder, files in sorted(grouped.items())}
        self._set({folder: obj.oid for folder, obj in made.items()}, made, None, set(made))

    def _set(self, folders: dict[str, Oid], at_hand: dict[str, Folder], load: Loader | None, fresh: set[str],
             legacy: dict[str, Oid] | None = None) -> None:
        self._folders = folders  # folder path ("" at the top) -> its Folder's oid
        self._at_hand = at_hand  # the Folder objects made or read so far
        self._load = load  # reads a Folder this tree has not at hand
        self._fresh = fresh  # the folders made here, not read from a store: stored with the tree
        self._legacy = legacy  # the entries of a tree stored by an older cortex (its encoding), else None

    @classmethod
    def _made(cls, folders: dict[str, Oid], at_hand: dict[str, Folder], load: Loader | None,
              fresh: set[str]) -> "Tree":
        tree = cls.__new__(cls)
        tree._set(folders, at_hand, load, fresh)
        return tree

    def __eq__(self, other) -> bool:
        return isinstance(other, Tree) and self.oid == other.oid

    def __hash__(self):
        return hash(self.oid)

    def __repr__(self) -> str:
        return f"Tree({len(self._folders)} folders, {self.oid.hex()[:12]})"

    def to_fields(self) -> dict:
        return {"entries": self._legacy} if self._legacy is not None else {"folders": self._folders}

    @property
    def references(self) -> list[Oid]:
        return list(self._legacy.values()) if self._legacy is not None else list(self._folders.values())

    @classmethod
    def from_fields(cls, data: dict) -> "Tree":
        if "folders" in data:
            folders = data["folders"]
            return cls._made(dict(zip(folders, Oid.many(folders.values()))), {}, None, set())
        entries = data["entries"]
        flat = dict(zip(entries, Oid.many(entries.values())))
        tree = cls(flat)
        tree._legacy = flat
        return tree

    @property
    def stored_flat(self) -> bool:
        """Whether this tree was stored by an older cortex, naming every path itself."""
        return self._legacy is not None

    def bind(self, load: Loader) -> "Tree":
        """Read the folders this tree has not at hand with `load` (a store binds the trees it decodes)."""
        if self._load is None:
            self._load = load
        return self

    def parts(self) -> list["Folder"]:
        """The folders made with this tree, not read from a store: stored with it."""
        return [] if self._legacy is not None else [self._at_hand[f] for f in self._fresh if f in self._folders]

    def mark_stored(self) -> None:
        """Its folders are stored (committed): the trees made from it from now on store only their own."""
        self._fresh = set()

    @property
    def folders(self) -> Mapping[str, Oid]:
        """Folder path ("" at the top) -> the oid of its files."""
        return self._folders

    def folder(self, path: str) -> "Folder | None":
        """The files of one folder (None: the tree has none there)."""
        found = self._at_hand.get(path)
        if found is None and (oid := self._folders.get(path)) is not None:
            if self._load is None:
                raise LookupError(f"a tree's folder {oid.hex()[:12]} is not at hand")
            found = self._load(oid)
            if not isinstance(found, Folder):
                raise FormatError(f"a tree names a {found.kind} {oid.hex()[:12]} where a folder belongs")
            self._at_hand[path] = found
        return found

    @cached_property
    def entries(self) -> "Entries":
        """Path -> document oid, for every file (looking one path up opens only its folder)."""
        return Entries(self)

    def with_changes(self, changes: Mapping[str, Oid | None]) -> "Tree":
        """This tree with the files `changes` names set to another document (None: removed); only the folders
        they lie in are made again."""
        if not changes:
            return self
        grouped: dict[str, dict[str, Oid | None]] = {}
        for path, oid in changes.items():
            folder, _, name = path.rpartition("/")
            grouped.setdefault(folder, {})[name] = oid
        folders, at_hand = dict(self._folders), dict(self._at_hand)
        fresh = set(self._folders) if self._legacy is not None else set(self._fresh)
        for path, edits in grouped.items():
            old = self.folder(path)
            files = dict(old.files) if old is not None else {}
            for name, oid in edits.items():
                if oid is None:
                    files.pop(name, None)
                else:
                    files[name] = oid
            if old is not None and files == old.files:
                continue
            fresh.add(path)
            if files:
                made = at_hand[path] = Folder(dict(sorted(files.items())))
                folders[path] = made.oid
            else:
                folders.pop(path, None)
                at_hand.pop(path, None)
        return Tree._made(dict(sorted(folders.items())), at_hand, self._load, fresh)

    def differing(self, other: "Tree") -> set[str]:
        """The paths whose documents the two trees do not share; a folder both hold alike is not opened."""
        if self is other or self.oid == other.oid:
            return set()
        mine, theirs = self._folders, other._folders
        found: set[str] = set()
        for path in mine.keys() | theirs.keys():
            if mine.get(path) == theirs.get(path):
                continue
            a, b = self.folder(path), other.folder(path)
            prefix = path + "/" if path else ""
            found.update(prefix + name for name, _ in
                         (a.files.items() if a else {}.items()) ^ (b.files.items() if b else {}.items()))
        return found

    def flat(self) -> dict[str, Oid]:
        """Every path -> document oid, in path order (made once per tree: it opens every folder)."""
        flat = self.__dict__.get("_all")
        if flat is None:
            flat = self._legacy if self._legacy is not None else dict(sorted(
                (f"{path}/{name}" if path else name, oid)
                for path in self._folders for name, oid in self.folder(path).files.items()))
            self.__dict__["_all"] = flat
        return flat


class Entries(Mapping):
    """A tree's files, path -> document oid: a lookup opens one folder; walking them all, every folder."""

    __slots__ = ("_tree",)

    def __init__(self, tree: Tree):
        self._tree = tree

    def __getitem__(self, path: str) -> Oid:
        folder, _, name = path.rpartition("/") if isinstance(path, str) else ("", "", path)
        found = self._tree.folder(folder)
        if found is None:
            raise KeyError(path)
        return found.files[name]

    def get(self, path, default=None):
        try:
            return self[path]
        except KeyError:
            return default

    def __contains__(self, path) -> bool:
        return self.get(path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._tree.flat())

    def __len__(self) -> int:
        return len(self._tree.flat())

    def keys(self):
        return self._tree.flat().keys()

    def items(self):
        return self._tree.flat().items()

    def values(self):
        return self._tree.flat().values()

    def __eq__(self, other) -> bool:
        if isinstance(other, Entries) and self._tree.oid == other._tree.oid:
            return True
        return self._tree.flat() == (other._tree.flat() if isinstance(other, Entries) else other)

    def __repr__(self) -> str:
        return f"Entries({self._tree.flat()!r})"


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
