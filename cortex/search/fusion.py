"""Hybrid search: a meaning side and an exact side fused into one ranking that explains itself.

Measured with the real model on three sets of 40 queries (bench/quality.py: the shared paraphrase.json,
tests/data/keyword_eval.json, tests/data/exact_eval.json). The embedding handles words, paraphrases
included, better than BM25: every way of adding word-level BM25 to the cosine lost paraphrase recall
(0.95 -> 0.65..0.80), because a distractor sharing one word with the query outranks the paraphrase.
What the embedding blurs is exactness: E4012 and E4013, 2.3.1 and 2.3.10, Wen-Li Zhou and Li Zhou
embed almost alike, and a headline titled with the query's very words can lose to one that only
shares their meaning. So the exact side holds only evidence a paraphrase cannot produce: the BM25 of
the query's exact terms (keyword.exact_terms: identifiers, flags, path and list parts, personal names)
over its best among the candidates, or 1 when the item's title holds every query word
(KeywordIndex.title_matches). A query without either leaves the cosine alone in charge. The meaning
side is the cosine itself, already on a fixed scale; stretching it per query with min-max turned
near-ties into gaps the exact evidence could no longer overturn. R@1 went from 0.80 to 1.00 on the
exact set (0.86 to 0.99 on 150 real Org headlines queried by their titles) with paraphrase and keyword
sets unchanged (0.95, 0.95).

Methods: `weighted` sums the sides with weights (0.7 vector / 0.3 keyword by default); `rrf` is
reciprocal-rank fusion (k = 60) of the same two sides, each weighted: it keeps ranks only, so a bare
number or half a name outranks a better cosine (R@1 0.90 on paraphrases); `keyword` uses no vectors,
with BM25 of the whole query (over its best) as the meaning side.
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from numbers import Real

import numpy as np

from cortex.errors import UserError
from cortex.search.embedders import Embedder
from cortex.search.keyword import KeywordIndex
from cortex.search.vector import VectorIndex

METHODS = ("weighted", "rrf", "keyword")
RRF_K = 60


@dataclass(frozen=True)
class Weights:
    """How much the meaning side (vector, or BM25 in keyword mode) and the exact side count."""

    vector: float = 0.7
    keyword: float = 0.3

    def __post_init__(self):
        if not all(isinstance(w, Real) and not isinstance(w, bool) and math.isfinite(w)
                   for w in (self.vector, self.keyword)):
            raise UserError(f"search weights must be finite numbers, got vector {self.vector!r}, "
                            f"keyword {self.keyword!r}")
        if self.vector < 0 or self.keyword < 0 or self.vector + self.keyword <= 0:
            raise UserError(f"search weights must be non-negative and not both zero, "
                            f"got vector {self.vector}, keyword {self.keyword}")


@dataclass(frozen=True)
class Hit:
    """One fused result and the numbers that placed it: score = vector part + keyword part."""

    key: int
    score: float          # the fused score results are ranked by
    vector: float         # cosine similarity of query and item (NaN if not computed or no vector)
    keyword: float        # BM25 score of the whole query
    exact: float          # BM25 score of the query's exact terms (identifiers, names)
    title: bool           # the item's title holds every word of the query
    vector_norm: float    # the meaning side as fused: cosine, 1/(k + rank) (rrf), BM25 / best (keyword)
    keyword_norm: float   # the exact side as fused: 1 if title else exact / best exact; 1/(k + rank) (rrf)
    method: str = "weighted"
    weights: Weights = Weights()

    def explain(self) -> str:
        """The fused score as a sum whose printed terms add up to the printed total."""
        w, digits = self.weights, 5 if self.method == "rrf" else 4
        parts = [round(w.vector * self.vector_norm, digits), round(w.keyword * self.keyword_norm, digits)]
        cosine = "no vector" if math.isnan(self.vector) else f"vector cosine {self.vector:.4f}"
        if self.title:
            evidence = "the title holds every query word"
        elif self.exact:
            best = "" if self.method == "rrf" else f" / best {self.exact / self.keyword_norm:.3f}"
            evidence = f"exact-term bm25 {self.exact:.3f}{best}"
        else:
            evidence = "no exact match"
        if self.method == "keyword":
            best = f" / best {self.keyword / self.vector_norm:.3f}" if self.vector_norm else ""
            meaning = f"{w.vector:g} × bm25 {self.keyword:.3f}{best}"
        else:
            evidence += f"; query bm25 {self.keyword:.3f}"
            meaning = (f"{w.vector:g} / ({RRF_K} + rank {_rank(self.vector_norm)}), {cosine}"
                       if self.method == "rrf" else f"{w.vector:g} × {cosine}")
        if self.method != "rrf":
            exact = f"{w.keyword:g} × {self.keyword_norm:.4f}: {evidence}"
        elif self.keyword_norm:
            exact = f"{w.keyword:g} / ({RRF_K} + rank {_rank(self.keyword_norm)}): {evidence}"
        else:
            exact = evidence
        sides = ("bm25", "exact") if self.method == "keyword" else ("vector", "keyword")
        return (f"fused {sum(parts):.{digits}f} by {self.method} ({sides[0]} {w.vector:g}, "
                f"{sides[1]} {w.keyword:g}) = {parts[0]:.{digits}f} {sides[0]} ({meaning}) "
                f"+ {parts[1]:.{digits}f} {sides[1]} ({exact})")


@dataclass(frozen=True)
class Candidates:
    """Per-candidate raw scores from both retrievers, aligned by position."""

    keys: np.ndarray
    vector: np.ndarray
    keyword: np.ndarray
    exact: np.ndarray
    title: np.ndarray


def fuse(candidates: Candidates, method: str = "weighted", weights: Weights = Weights(),
         limit: int | None = None) -> list[Hit]:
    """Rank `candidates` by `method` (one of METHODS), best first, the `limit` best if given."""
    cosine = np.nan_to_num(candidates.vector.astype(np.float64), nan=0.0)
    bm25 = candidates.keyword.astype(np.float64)
    exact = candidates.exact.astype(np.float64)
    best = exact.max(initial=0.0)
    evidence = np.maximum(exact / best if best > 0 else np.zeros_like(exact), candidates.title)
    tie = cosine
    if method == "weighted":
        vector_norm, keyword_norm = cosine, evidence
    elif method == "rrf":
        vector_norm = 1.0 / (RRF_K + _ranks(cosine))
        keyword_norm = np.where(evidence > 0, 1.0 / (RRF_K + _ranks(evidence)), 0.0)
    elif method == "keyword":
        best_bm25 = bm25.max(initial=0.0)
        vector_norm = bm25 / best_bm25 if best_bm25 > 0 else np.zeros_like(bm25)
        keyword_norm, tie = evidence, bm25
    else:
        raise UserError(f"unknown fusion method {method!r}: use one of {', '.join(METHODS)}")
    score = weights.vector * vector_norm + weights.keyword * keyword_norm
    order = np.lexsort((candidates.keys, -tie, -score))[:limit]
    return [Hit(int(candidates.keys[i]), float(score[i]), float(candidates.vector[i]), float(bm25[i]),
                float(exact[i]), bool(candidates.title[i]), float(vector_norm[i]), float(keyword_norm[i]),
                method, weights)
            for i in order]


def _rank(reciprocal: float) -> int:
    return round(1 / reciprocal - RRF_K)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each score, highest first, ties by position."""
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return ranks


def hybrid_search(query: str, embedder: Embedder, keyword: KeywordIndex, vector: VectorIndex, *,
                  limit: int = 10, mask: AbstractSet[int] | None = None, method: str = "weighted",
                  weights: Weights = Weights(), depth: int = 50,
                  query_vector: np.ndarray | None = None) -> list[Hit]:
    """The `limit` best items for `query`, fusing `depth` candidates from each index.

    `mask`, when given, holds the only keys that may be returned; `query_vector`, when given, is
    the query's embedding (the caller's cache), used instead of embedding `query` again.
    """
    if limit < 1:
        raise UserError(f"search limit must be at least 1, got {limit}")
    if method not in METHODS:
        raise UserError(f"unknown fusion method {method!r}: use one of {', '.join(METHODS)}")
    depth = max(depth, limit)
    if method == "keyword":  # no vectors: BM25 finds the candidates, and nothing is embedded
        keys = [key for key, _ in keyword.search(query, depth, mask)]
        cosine = np.full(len(keys), np.nan, dtype=np.float32)
    else:
        if query_vector is None:
            query_vector = embedder.embed([query])[0]
        near = dict(vector.search(query_vector, depth, mask))
        keyword_only = [key for key, _ in keyword.search(query, depth, mask) if key not in near]
        keys = [*near, *keyword_only]
        cosine = np.concatenate([np.fromiter(near.values(), dtype=np.float32, count=len(near)),
                                 vector.similarity(query_vector, keyword_only)])
    candidates = Candidates(np.array(keys, dtype=np.uint64), cosine, keyword.scores(query, keys),
                            keyword.scores(query, keys, identifiers_only=True), keyword.title_matches(query, keys))
    return fuse(candidates, method, weights, limit)
