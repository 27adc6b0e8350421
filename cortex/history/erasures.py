"""Hard erasures waiting for the working copies whose folders may still hold the erased text.

A hard forget or purge rewrites every kept state, the copies' bases among them; a copy whose folder
still holds the text would then read it as an addition of its own and send it back. So the erase
keeps, for each copy whose bases it changed, what those bases held before: its `sure` base's
documents as they were, by path (an overlay: the store's base keeps a stand-in there, the document
the rewrite left), its `next` base as it was, and the objects of both. All of it is sealed to the
copy's public key with HPKE (RFC 9180: X25519, HKDF-SHA256, ChaCha20-Poly1305): only the copy's
private key opens it, and that lives in the copy's folder (`.cortex/key`), never in the store, so the
store alone can neither read the text nor confirm a guess of it.

The copy's next sync opens it and merges against its bases as they were, so the erased text leaves
the folder (a headline the person changed since stays, marked as a conflict of kind `erased`). Until
the folder's files are brought up to date, the store keeps the folder's version of those files the
same way (sealed, behind the stand-in), so that a sync stopped halfway still sends nothing back; once
they are, nothing waits for the copy any more.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.hpke import AEAD, KDF, KEM, Suite

from ..backends import Store
from ..codec import decode, encode
from ..errors import UserError
from ..files import write_atomically
from ..hashing import Oid, hash_bytes
from ..objects import EMPTY_TREE, OrgObject, Tree
from ..objects import decode as decode_object
from ..reads import TooLarge, read_bounded

__all__ = ["ERASURES", "KEY", "KEY_BYTES", "ErasureUnreadable", "Getter", "Waiting", "drop", "headlines", "held",
           "new_key", "public_key", "reseal", "seal", "waiting_for"]

ERASURES = "history.erasures"  # copy id, NUL, time (8 bytes), 4 random bytes -> sealed record (b"": no key)
KEY = Path(".cortex") / "key"  # a copy's private key (raw X25519), in its folder only
KEY_BYTES = 1024  # the most a key file is read of
_SUITE = Suite(KEM.X25519, KDF.HKDF_SHA256, AEAD.CHACHA20_POLY1305)
_INFO = b"cortex: the bases of a working copy, as a hard erasure found them"

Getter = Callable[[bytes], OrgObject]


class ErasureUnreadable(UserError):
    """What a hard erasure left for a working copy cannot be opened: the copy cannot sync safely."""


def new_key(folder: Path) -> bytes:
    """Make the working copy in `folder` a key pair: the private key into its `.cortex/key` (readable by its
    owner only), the public key returned, for the store to seal what waits for the copy to."""
    private = X25519PrivateKey.generate()
    os.close(os.open(folder / KEY, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))  # its mode before its bytes
    os.chmod(folder / KEY, 0o600)
    write_atomically(folder / KEY, private.private_bytes_raw())  # (keeps the mode)
    return private.public_key().public_bytes_raw()


def public_key(folder: Path) -> bytes | None:
    """The public key of the copy in `folder` (None: it has none, or it cannot be read)."""
    try:
        return X25519PrivateKey.from_private_bytes(_key_bytes(folder)).public_key().public_bytes_raw()
    except (OSError, ValueError, TooLarge):
        return None


@dataclass
class Waiting:
    """What waits for one copy: its sure base's documents as they really are (path -> (the stand-in the
    store's base holds, the real one)), its next base as it was (after -> before), and their objects."""

    overlay: dict[str, tuple[Oid | None, Oid | None]] = field(default_factory=dict)
    bases: dict[Oid, Oid] = field(default_factory=dict)
    objects: dict[Oid, OrgObject] = field(default_factory=dict, repr=False)
    store_get: Getter | None = field(default=None, repr=False)

    def get(self, oid: bytes) -> OrgObject:
        """An object of the bases as they were, else the store's (or the folder's read's)."""
        return self.objects.get(oid) or self.store_get(oid)

    def sure(self, tree: Tree) -> Tree:
        """The sure base `tree` (as the store holds it) as it really is."""
        return tree.with_changes({path: real for path, (stand_in, real) in self.overlay.items()
                                  if tree.entries.get(path) == stand_in})

    def next(self, oid: Oid | None) -> Oid | None:
        """The next base `oid` (as the store holds it) as it was."""
        return self.bases.get(oid, oid)

    def changes(self, made: Oid | None) -> Iterator[tuple[str, Oid | None, Oid | None]]:
        """(path, document the store has, document as it was) for each file the erasures changed in the sure
        base and in the next one, `made` (as the store has it now)."""
        for path, (stand_in, real) in self.overlay.items():
            yield path, stand_in, real
        if (before := self.bases.get(made)) is not None:
            now, then = self.get(made), self.get(before)
            for path in now.differing(then):
                yield path, now.entries.get(path), then.entries.get(path)

    def erased(self, made: Oid | None) -> frozenset[Oid]:
        """The headlines (by oid) the bases held before the erasures whose own text they do not hold now
        (`made`: the next base): an item taken out, not the section that held it."""
        erased: set[Oid] = set()
        for _, now, then in self.changes(made):
            kept = {self.get(oid).raw for oid in headlines(self.get, now)}
            erased.update(oid for oid in headlines(self.get, then) if self.get(oid).raw not in kept)
        return frozenset(erased)

    def paths(self, made: Oid | None) -> set[str]:
        """The files the erasures changed (`made`: the next base, as the store has it now)."""
        return {path for path, _, _ in self.changes(made)}


def headlines(get: Getter, doc: Oid | None) -> Iterator[Oid]:
    """Every headline oid under a document (none for None)."""
    stack = [] if doc is None else list(get(doc).children)
    while stack:
        oid = stack.pop()
        yield oid
        stack.extend(get(oid).children)


def seal(store: Store, copies: Mapping[str, tuple[bytes | None, Oid | None, Oid | None]],
         rewritten: Callable[[Oid | None], Oid | None]) -> None:
    """Keep, sealed, what an erasure takes from each copy's bases: `copies` maps a copy's id to its public
    key and its sure and next bases before the erasure, `rewritten` a base to what the erasure made of it.
    Call in the erasure's transaction, while the objects it drops are still stored."""
    for copy_id, (key, sure, made) in copies.items():
        waiting = Waiting(store_get=store.objects.__getitem__)
        if sure is not None and rewritten(sure) != sure:
            before, after = _tree(store, sure), _tree(store, rewritten(sure))
            waiting.overlay = {path: (after.entries.get(path), before.entries.get(path))
                               for path in before.differing(after)}
        if made is not None and rewritten(made) != made:
            waiting.bases = {rewritten(made): made}
        if waiting.overlay or waiting.bases:
            _put(store, copy_id, key, waiting)


def reseal(store: Store, copy_id: str, key: bytes | None, overlay: dict[str, tuple[Oid | None, Oid | None]],
           get: Getter) -> None:
    """Replace what waits for a copy by `overlay` alone (its folder's files as they are, behind the stand-ins
    its sure base holds), or by nothing; call in a transaction."""
    drop(store, copy_id)
    if overlay:
        _put(store, copy_id, key, Waiting(overlay=overlay, store_get=get))


def _put(store: Store, copy_id: str, key: bytes | None, waiting: Waiting) -> None:
    entry = copy_id.encode() + b"\0" + struct.pack(">Q", time.time_ns()) + os.urandom(4)
    if key is None:  # a copy made before copies had keys: its next sync is refused, saying why
        store.table(ERASURES)[entry] = b""
        return
    raw: dict[bytes, bytes] = {}
    for after, before in waiting.bases.items():  # the base as it was, with the documents the erasure replaced
        was, now = waiting.get(before), waiting.get(after)
        raw[before] = was.encoded
        for path, oid in was.folders.items():  # the folders the erasure changed (the others are the store's)
            if now.folders.get(path) != oid:
                raw[oid] = was.folder(path).encoded
        for path in was.differing(now):
            if (doc := was.entries.get(path)) is not None:
                _gather(waiting.get, doc, raw)
    for _, real in waiting.overlay.values():
        if real is not None:
            _gather(waiting.get, real, raw)
    record = [[[path, stand_in, real] for path, (stand_in, real) in sorted(waiting.overlay.items())],
              [[after, before] for after, before in waiting.bases.items()], list(raw.values())]
    store.table(ERASURES)[entry] = _SUITE.encrypt(encode(record), X25519PublicKey.from_public_bytes(key), info=_INFO)


def _gather(get: Getter, oid: Oid, raw: dict[bytes, bytes]) -> None:
    """The encodings of the document `oid` and of every headline under it, into `raw`."""
    stack = [oid]
    while stack:
        oid = stack.pop()
        if oid not in raw:
            obj = get(oid)
            raw[oid] = obj.encoded
            stack.extend(obj.children)


def _tree(store: Store, oid: Oid) -> Tree:
    return EMPTY_TREE if oid == EMPTY_TREE.oid else store.objects[oid]


def waiting_for(store: Store, copy_id: str, folder: Path, get: Getter) -> Waiting | None:
    """What waits for a copy, opened with its folder's key (None: nothing); records made later override."""
    found = list(store.table(ERASURES).items(copy_id.encode() + b"\0"))
    if not found:
        return None
    if any(sealed == b"" for _, sealed in found):
        raise ErasureUnreadable(
            f"{folder}: a hard forget or purge erased text this working copy held, and the copy (made by an older "
            "cortex) had no key to receive the erasure; check the store out into a new folder and copy your "
            "unsynced edits over")
    key = _private_key(folder)
    waiting = Waiting(store_get=get)
    for _, sealed in found:  # oldest first
        overlay, bases, objects = _opened(key, sealed, folder)
        waiting.objects.update(objects)
        for obj in objects.values():
            if isinstance(obj, Tree):
                obj.bind(waiting.get)
        for path, entry in overlay.items():  # a later erasure's stand-in is what an earlier one's became
            earlier = waiting.overlay.get(path)
            waiting.overlay[path] = entry if earlier is None or earlier[0] != entry[1] else (entry[0], earlier[1])
        waiting.bases.update({after: waiting.bases.get(before, before) for after, before in bases.items()})
    return waiting


def _key_bytes(folder: Path) -> bytes:
    """The bytes of the copy's key file (a key is 32 bytes: a larger file is no key, and is not read whole)."""
    return read_bounded(folder / KEY, KEY_BYTES, "a working copy's key")


def _private_key(folder: Path) -> X25519PrivateKey:
    try:
        return X25519PrivateKey.from_private_bytes(_key_bytes(folder))
    except (OSError, ValueError, TooLarge) as exc:
        raise ErasureUnreadable(
            f"{folder / KEY}: unreadable ({getattr(exc, 'strerror', None) or exc}), and a hard forget or purge left "
            "this working copy what only that key opens; check the store out into a new folder and copy your "
            "unsynced edits over") from None


def _opened(key: X25519PrivateKey, sealed: bytes, folder: Path) -> tuple[dict, dict, dict]:
    try:
        overlay, bases, encodings = decode(_SUITE.decrypt(sealed, key, info=_INFO))
        objects = {hash_bytes(data): decode_object(data) for data in encodings}
        return ({path: (_oid(stand_in), _oid(real)) for path, stand_in, real in overlay},
                {Oid(after): Oid(before) for after, before in bases}, objects)
    except (InvalidTag, ValueError, TypeError) as exc:
        raise ErasureUnreadable(f"{folder}: what a hard erasure left for this working copy cannot be opened "
                                f"with {folder / KEY} ({type(exc).__name__})") from None


def _oid(value: bytes | None) -> Oid | None:
    return None if value is None else Oid(value)


def drop(store: Store, copy_id: str) -> None:
    """Forget what waits for a copy (its files are up to date, or it is forgotten); call in a transaction."""
    table = store.table(ERASURES)
    for entry, _ in list(table.items(copy_id.encode() + b"\0")):
        del table[entry]


def held(get: Getter, docs: Iterable[Oid | None], erased: frozenset[Oid]) -> bool:
    """Whether any of the documents `docs` holds one of the headlines `erased`."""
    return bool(erased) and any(oid in erased for doc in docs for oid in headlines(get, doc))
