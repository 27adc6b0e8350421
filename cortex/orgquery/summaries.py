"""What each document holds that lets a reader skip it: the tags it names (its #+FILETAGS and every headline's own)
and whether a headline of it may be listed on the agenda. Kept by document oid in a file beside the store, so that
the headlines tagged X anywhere, and the agenda, read only the files that may hold them.

A headline's tags are its own and those it inherits from the headings above it and #+FILETAGS, so a file holds a
headline tagged X only if it names X. A document's oid names its content, so what it holds never goes stale; the
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
from ..objects import Document, Headline, Tree
from ..org import file_tags

__all__ = ["SUMMARIES_FILE", "files_dated", "files_naming", "may_list"]

SUMMARIES_FILE = "documents.msgpack"
VERSION = 1
Summary = tuple[frozenset[str], bool]  # the tags a document names, whether it may hold an agenda entry


def may_list(headline: Headline) -> bool:
    """Whether the agenda may list a headline: its text holds an active timestamp, a planning date or a diary sexp
    (`<...>`, or a line `%%(...)`)."""
    return "<" in headline.raw or "%%(" in headline.raw


def files_naming(store: Store, read_tree: Callable[[], Tree], tag: str, folder: Path | None) -> Tree:
    """The files of the state `read_tree` gives that name `tag`, as a tree."""
    return _files(store, read_tree, folder, lambda summary: tag in summary[0])


def files_dated(store: Store, read_tree: Callable[[], Tree], folder: Path | None) -> Tree:
    """The files of the state `read_tree` gives that may hold an agenda entry (`may_list`), as a tree."""
    return _files(store, read_tree, folder, lambda summary: summary[1])


def _files(store: Store, read_tree: Callable[[], Tree], folder: Path | None,
           keep: Callable[[Summary], bool]) -> Tree:
    """The files whose document's summary `keep` keeps; each document is read once and its summary kept in
    `folder`."""
    purged = newest_purge(store)  # read before the state: a purge after it leaves what is kept untrusted
    entries = dict(read_tree().entries.items())
    known = _load(folder, purged)
    unread = {oid for oid in entries.values() if oid not in known}
    if unread:
        store.objects.preload(unread)
        known.update((oid, _summary(store, store.objects[oid])) for oid in unread)
        if folder is not None:
            kept = [[bytes(oid), sorted(known[oid][0]), known[oid][1]] for oid in set(entries.values())]
            try:
                write_atomically(folder / SUMMARIES_FILE, encode([VERSION, purged, kept]), durable=False)
            except OSError:  # derived data (a full disk, a folder it cannot write): read again next time
                pass
    return Tree({path: oid for path, oid in entries.items() if keep(known[oid])})


def _summary(store: Store, document: Document) -> Summary:
    """The tags a document names (#+FILETAGS and every headline's own), and whether a headline may be listed."""
    tags, dated = set(file_tags(document.preamble)), False
    below: list[Iterable[Oid]] = [document.children]
    while below:
        for oid in below.pop():
            headline = store.objects[oid]
            tags.update(headline.tags)
            dated = dated or may_list(headline)
            if headline.children:
                below.append(headline.children)
    return frozenset(tags), dated


def _load(folder: Path | None, purged: bytes) -> dict[Oid, Summary]:
    """What `folder` keeps, if it was made after the newest purge (`purged`); else nothing."""
    path = None if folder is None else folder / SUMMARIES_FILE
    if path is None or not path.exists():
        return {}
    try:
        version, made_after, kept = decode(path.read_bytes())
        if version != VERSION or made_after != purged:
            return {}
        return {Oid(oid): (frozenset(tags), bool(dated)) for oid, tags, dated in kept}
    except Exception:  # noqa: BLE001 - derived data: unreadable is as good as absent
        return {}
