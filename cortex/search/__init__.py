"""Hybrid memory search: offline embeddings, BM25 keyword and usearch vector indexes, fusion.

The indexes are derived data keyed by uint64 integers that the owner maps to its items; they hold no
store state of their own, so they can always be rebuilt from the store.
"""

from cortex.search.embedders import (
    CachedEmbedder,
    Embedder,
    EmbedderUnavailable,
    HashingEmbedder,
    MiniLMEmbedder,
    default_embedder,
)
from cortex.search.fusion import METHODS, Candidates, Hit, Weights, fuse, hybrid_search
from cortex.search.keyword import KeywordIndex, identifiers, tokenize
from cortex.search.vector import VectorIndex

__all__ = [
    "METHODS",
    "CachedEmbedder",
    "Candidates",
    "Embedder",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "Hit",
    "KeywordIndex",
    "MiniLMEmbedder",
    "VectorIndex",
    "Weights",
    "default_embedder",
    "fuse",
    "hybrid_search",
    "identifiers",
    "tokenize",
]
