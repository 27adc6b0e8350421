"""Which files name a tag: each document's tags (its #+FILETAGS and every headline's own), kept by document oid in
a file beside the store, so that the headlines tagged X anywhere are found by reading only the files naming X.

A headline's tags are its own and those it inherits from the headings above it and #+FILETAGS, so a file holds a
headline tagged X only if it names X. A document's oid names its content, so what it names never goes stale; the
file keeps the documents of the state last asked about, and the newest purge of history it was made after: one
made before a purge may name the purged text's tags, and is not trusted after it. With no folder (a store in
memory, or one open read-only) nothing is kept, and every document is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..backends import Store
from ..codec import decode, encode
from ..files import write_atomically
from ..hashing import Oid
from ..history.forget import newest_purge
from ..objects import Document, Tree
from ..org import file_tags

__all__ = ["TAGS_FILE", "files_naming"]

TAGS_FILE = "tags.msgpack"
VERSION = 1


def files_naming(store: Store, read_tree: Callable[[], Tree], tag: str, folder: Path | None) -> Tree:
    """The files of the state `read_tree` gives that name `tag`, as a tree; what each document names is read once
    and kept in `folder`."""
    purged = newest_purge(store)  # read before the state: a purge after it leaves what is kept untrusted
    entries = dict(read_tree().entries.items())
    named = _load(folder, purged)
    unread = {oid for oid in entries.values() if oid not in named}
    if unread:
        store.objects.preload(unread)
        named.update((oid, _named(store, store.objects[oid])) for oid in unread)
        if folder is not None:
            kept = [[bytes(oid), sorted(named[oid])] for oid in set(entries.values())]
            try:
                write_atomically(folder / TAGS_FILE, encode([VERSION, purged, kept]), durable=False)
            except OSError:  # derived data (a full disk, a folder it cannot write): read again next time
                pass
    return Tree({path: oid for path, oid in entries.items() if tag in named[oid]})


def _named(store: Store, document: Document) -> frozenset[str]:
    """The tags a document names: #+FILETAGS and every headline's own."""
    tags = set(file_tags(document.preamble))
    below: list[Iterable[Oid]] = [document.children]
    while below:
        for oid in below.pop():
            headline = store.objects[oid]
            tags.update(headline.tags)
            if headline.children:
                below.append(headline.children)
    return frozenset(tags)


def _load(folder: Path | None, purged: bytes) -> dict[Oid, frozenset[str]]:
    """What `folder` keeps, if it was made after the newest purge (`purged`); else nothing."""
    path = None if folder is None else folder / TAGS_FILE
    if path is None or not path.exists():
        return {}
    try:
        version, made_after, kept = decode(path.read_bytes())
        if version != VERSION or made_after != purged:
            return {}
        return {Oid(oid): frozenset(tags) for oid, tags in kept}
    except Exception:  # noqa: BLE001 - derived data: unreadable is as good as absent
        return {}
