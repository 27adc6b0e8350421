"""The store's embeddings: the table that caches every text's vector by the text's hash (shared by every
process and machine on the store, so no text is embedded twice), the process's embedder over it, and
forgetting the vectors of purged text (a cached vector would confirm a guess of its text).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from ..backends import Store
from ..backends.base import Overlay
from ..hashing import OID_SIZE, hash_text
from .embedders import CachedEmbedder, Embedder, default_embedder
from .items import texts

__all__ = ["EMBEDDINGS", "cached_embedder", "forget_embeddings", "preload_model", "shared_embedder"]

EMBEDDINGS = "search.embeddings"


@lru_cache(maxsize=1)
def shared_embedder() -> Embedder:
    """The default embedder, loaded once per process (the model is immutable and thread-safe)."""
    return default_embedder()


def preload_model() -> None:
    """Start loading the default embedder's model, if it has one, beside what the caller does next."""
    if (preload := getattr(shared_embedder(), "preload", None)) is not None:
        preload()


def cached_embedder(store: Store, embedder: Embedder | None = None) -> CachedEmbedder:
    """The default embedder (or `embedder`) with its vectors cached in the store (in memory over what the store
    holds, for a store open read-only)."""
    table = store.table(EMBEDDINGS)
    return CachedEmbedder(embedder or shared_embedder(), Overlay(table) if store.read_only else table)


def forget_embeddings(store: Store, replaced: Mapping[tuple[str, bytes], bytes | None]) -> int:
    """Delete the cached vectors, under every embedder, of the texts that replaced documents held and their
    replacements do not (`replaced`: (path, document) -> its replacement or None); return how many.

    Texts are the units search indexes; call this while the replaced documents are still stored.
    A cached vector would confirm a guess of the text it was computed from.
    """
    get = store.objects.__getitem__
    before: set[str] = set()
    after: set[str] = set()
    for (path, old), new in replaced.items():
        before |= texts(get, path, old)
        if new is not None:
            after |= texts(get, path, new)
    digests = {hash_text(text) for text in before - after}
    table = store.table(EMBEDDINGS)
    # a key is the embedder's name, NUL, and the text's digest: scan them all to reach every embedder's
    gone = [key for key in table.keys_in_order() if key[-OID_SIZE:] in digests]
    for key in gone:
        del table[key]
    return len(gone)
