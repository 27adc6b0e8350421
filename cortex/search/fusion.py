"""Hybrid search: vector and keyword candidates fused into one ranking that explains itself.

What each side contributes was measured on two sets of 40 queries (tests/data/keyword_eval.json and
the shared paraphrase.json). The embedding handles words, including paraphrases, better than BM25
does: every way of adding word-level BM25 to the cosine (min-max or z-score of both sides, raw
BM25 / max) lost recall on paraphrases (0.95 -> 0.65..0.80), because a distractor sharing one word
with the query outranks the paraphrase. What the embedding blurs is identifiers: E4012 and E4013,
2.3.1 and 2.3.10 embed almost alike. So the keyword side of the fusion is the *exact* evidence: the
BM25 score of the query's identifier terms (keyword.identifiers), normalised per query by its
maximum over the candidates. The vector side is the cosine itself, already on a fixed scale (unit
vectors); stretching it per query with min-max turned near-ties into wide gaps that the exact
evidence could no longer overturn. With that, the hybrid matches the better retriever on both sets.

`weighted` sums the two with weights (0.7 vector / 0.3 keyword by default); `rrf` is reciprocal-rank
fusion (k = 60) of the same two signals.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

from cortex.errors import UserError
from cortex.search.embedders import Embedder
from cortex.search.keyword import KeywordIndex
from cortex.search.vector import VectorIndex

METHODS = ("weighted", "rrf")
RRF_K = 60


@dataclass(frozen=True)
class Weights:
    """How much the vector and keyword sides count in weighted fusion."""

    vector: float = 0.7
    keyword: float = 0.3

    def __post_init__(self):
        if self.vector < 0 or self.keyword < 0 or self.vector + self.keyword <= 0:
            raise UserError(f"search weights must be non-negative and not both zero, "
                            f"got vector {self.vector}, keyword {self.keyword}")


@dataclass(frozen=True)
class Hit:
    """One fused result and the numbers that placed it."""

    key: int
    score: float          # the fused score results are ranked by
    vector: float         # cosine similarity of query and item (NaN if the item has no vector)
    keyword: float        # BM25 score of the whole query
    exact: float          # BM25 score of the query's identifier terms only
    vector_norm: float    # the vector side as fused: the cosine, or 1/(k + rank) for rrf
    keyword_norm: float   # the keyword side as fused: exact / best exact, or 1/(k + rank) for rrf


@dataclass(frozen=True)
class Candidates:
    """Per-candidate raw scores from both retrievers, aligned by position."""

    keys: np.ndarray
    vector: np.ndarray
    keyword: np.ndarray
    exact: np.ndarray


def fuse(candidates: Candidates, method: str = "weighted", weights: Weights = Weights(),
         limit: int | None = None) -> list[Hit]:
    """Rank `candidates` by `method` ("weighted" or "rrf"), best first, the `limit` best if given."""
    cosine = np.nan_to_num(candidates.vector.astype(np.float64), nan=0.0)
    exact = candidates.exact.astype(np.float64)
    if method == "weighted":
        vector_norm = cosine
        best = exact.max(initial=0.0)
        keyword_norm = exact / best if best > 0 else np.zeros_like(exact)
        score = weights.vector * vector_norm + weights.keyword * keyword_norm
    elif method == "rrf":
        vector_norm = 1.0 / (RRF_K + _ranks(cosine))
        keyword_norm = np.where(exact > 0, 1.0 / (RRF_K + _ranks(exact)), 0.0)
        score = vector_norm + keyword_norm
    else:
        raise UserError(f"unknown fusion method {method!r}: use one of {', '.join(METHODS)}")
    order = np.lexsort((candidates.keys, -cosine, -score))[:limit]
    return [Hit(int(candidates.keys[i]), float(score[i]), float(candidates.vector[i]),
                float(candidates.keyword[i]), float(exact[i]), float(vector_norm[i]),
                float(keyword_norm[i]))
            for i in order]


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each score, highest first, ties by position."""
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return ranks


def hybrid_search(query: str, embedder: Embedder, keyword: KeywordIndex, vector: VectorIndex, *,
                  limit: int = 10, mask: AbstractSet[int] | None = None, method: str = "weighted",
                  weights: Weights = Weights(), depth: int = 50) -> list[Hit]:
    """The `limit` best items for `query`, fusing `depth` candidates from each index.

    `mask`, when given, holds the only keys that may be returned.
    """
    if limit < 1:
        raise UserError(f"search limit must be at least 1, got {limit}")
    if method not in METHODS:
        raise UserError(f"unknown fusion method {method!r}: use one of {', '.join(METHODS)}")
    query_vector = embedder.embed([query])[0]
    depth = max(depth, limit)
    near = dict(vector.search(query_vector, depth, mask))
    keyword_only = [key for key, _ in keyword.search(query, depth, mask) if key not in near]
    keys = [*near, *keyword_only]
    cosine = np.concatenate([np.fromiter(near.values(), dtype=np.float32, count=len(near)),
                             vector.similarity(query_vector, keyword_only)])
    candidates = Candidates(np.array(keys, dtype=np.uint64), cosine, keyword.scores(query, keys),
                            keyword.scores(query, keys, identifiers_only=True))
    return fuse(candidates, method, weights, limit)
