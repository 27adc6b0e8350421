"""Hybrid search: a meaning side and a words side fused into one ranking that explains itself.

Measured with the real model on LoCoMo's development half (bench/locomo.py: long conversations, questions whose
evidence names the turns that answer them) and on four smaller sets (bench/quality.py). The cosine alone handles
paraphrases; BM25 alone finds more of LoCoMo's evidence (R@10 0.64 against 0.51) and every identifier. Fusing
them on per-query normalised scores (min-max, DBSF) or ranks (RRF) finds more evidence still, but a distractor
sharing one word with a paraphrase then outranks it (R@1 0.95 -> 0.63 on paraphrase.json). So the words side is
measured on a fixed scale: the share of the query's weight (the sum of its terms' idf) an item's BM25 holds,
1 for an item of average length holding every term once, counted only past WORDS_FLOOR: one or two shared
words add nothing, most of the query's words add much. Exact terms (identifiers, numbers, names) add the share
of the query's weight they hold, or 1 when the item's title holds every query word. The meaning side is the
cosine itself, on its own fixed scale. A turn of a conversation gains a share of its better neighbouring turn's
BM25 (an answer is read with the question it answers), and a period the query names raises what is dated
within it.

Methods: `weighted` sums the sides with weights (0.5 / 0.5 by default); `rrf` is reciprocal-rank fusion
(k = 60) of the same two sides, each weighted; `keyword` uses no vectors, with the words side (over its best)
as the meaning side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence, Set as AbstractSet
from dataclasses import dataclass
from numbers import Real

import numpy as np

from cortex.errors import UserError
from cortex.search.embedders import Embedder
from cortex.search.keyword import K1, KeywordIndex
from cortex.search.vector import VectorIndex

__all__ = ["DATE_BONUS", "EXACT_SHARE", "METHODS", "NEIGHBOUR", "RRF_K", "WORDS_FLOOR", "WORDS_SCALE", "Candidates",
           "Hit", "Layout", "Weights", "fuse", "hybrid_search"]

METHODS = ("weighted", "rrf", "keyword")
RRF_K = 60
WORDS_FLOOR = 0.4   # the share of the query's weight an item's words must hold before they count
WORDS_SCALE = 3.0   # what holding every query word once adds past the floor: 3 x (1 - 0.4) = 1.8
EXACT_SHARE = 1.0   # exact evidence on the keyword side, beside the words
NEIGHBOUR = 0.7     # the share of its better neighbouring turn's BM25 a turn's own gains
DATE_BONUS = 0.2    # for an item dated within a period the query names


@dataclass(frozen=True)
class Weights:
    """How much the meaning side (vector, or BM25 in keyword mode) and the keyword side count."""

    vector: float = 0.5
    keyword: float = 0.5

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
    """One fused result and the numbers that placed it: score = vector part + keyword part + date part."""

    key: int
    score: float          # the fused score results are ranked by
    vector: float         # cosine similarity of query and item (NaN if not computed or no vector)
    keyword: float        # BM25 score of the query's words
    exact: float          # BM25 score of the query's exact terms (identifiers, names)
    title: bool           # the item's title holds every word of the query
    vector_norm: float    # the meaning side as fused: cosine, 1/(k + rank) (rrf), words / best (keyword)
    keyword_norm: float   # the keyword side as fused: words past the floor + exact evidence; 1/(k + rank) (rrf)
    method: str = "weighted"
    weights: Weights = Weights()
    coverage: float = 0.0  # the share of the query's weight the item's words (and its neighbour's) hold
    evidence: float = 0.0  # 1 if the title holds the query, else the share of its weight the exact terms hold
    near: float = 0.0      # the BM25 its better neighbouring turn added
    date: float = 0.0      # the bonus for a date within the period the query names
    period: str = ""       # that period, as the query named it

    def explain(self) -> str:
        """The fused score as a sum whose printed terms add up to the printed total."""
        w, digits = self.weights, 5 if self.method == "rrf" else 4
        parts = [round(w.vector * self.vector_norm, digits), round(w.keyword * self.keyword_norm, digits),
                 round(self.date, digits)]
        cosine = "no vector" if math.isnan(self.vector) else f"cosine {self.vector:.4f}"
        words = f"words hold {self.coverage:.2f} of the query (bm25 {self.keyword:.3f}"
        words += f" + {NEIGHBOUR:g} × a neighbouring turn's {self.near / NEIGHBOUR:.3f})" if self.near else ")"
        if self.title:
            evidence = "the title holds every query word"
        elif self.exact:
            evidence = f"exact terms hold {self.evidence:.2f} of the query (bm25 {self.exact:.3f})"
        else:
            evidence = "no exact match"
        sides = ("bm25", "exact") if self.method == "keyword" else ("vector", "keyword")
        if self.method == "weighted":
            meaning = f"{w.vector:g} × {cosine}"
            exact = (f"{w.keyword:g} × ({WORDS_SCALE:g} × max(0, {self.coverage:.2f} - {WORDS_FLOOR:g}) "
                     f"+ {EXACT_SHARE:g} × {self.evidence:.2f}): {words}; {evidence}")
        elif self.method == "rrf":
            meaning = f"{w.vector:g} / ({RRF_K} + rank {_rank(self.vector_norm)}), {cosine}"
            exact = (f"{w.keyword:g} / ({RRF_K} + rank {_rank(self.keyword_norm)}): {words}; {evidence}"
                     if self.keyword_norm else f"{words}; {evidence}")
        else:
            best = f" / best {self.coverage / self.vector_norm:.2f}" if self.vector_norm else ""
            meaning = f"{w.vector:g} × {words}{best}"
            exact = f"{w.keyword:g} × {self.evidence:.4f}: {evidence}"
        text = (f"fused {sum(parts):.{digits}f} by {self.method} ({sides[0]} {w.vector:g}, {sides[1]} {w.keyword:g}) "
                f"= {parts[0]:.{digits}f} {sides[0]} ({meaning}) + {parts[1]:.{digits}f} {sides[1]} ({exact})")
        if self.date:
            text += f" + {parts[2]:.{digits}f} date (within {self.period})"
        return text


@dataclass(frozen=True)
class Candidates:
    """Per-candidate raw scores from both retrievers, aligned by position.

    `weight` is the query's (KeywordIndex.weight); `near` is the BM25 of each candidate's better neighbouring
    turn; `dated` tells the candidates dated within the period the query names (`period`); a `container` (a
    session entry holding turns and nothing of its own) is kept only when its title holds every query word.
    """

    keys: np.ndarray
    vector: np.ndarray
    keyword: np.ndarray
    exact: np.ndarray
    title: np.ndarray
    weight: float = 0.0
    near: np.ndarray | None = None
    dated: np.ndarray | None = None
    container: np.ndarray | None = None
    period: str = ""


def fuse(candidates: Candidates, method: str = "weighted", weights: Weights = Weights(),
         limit: int | None = None) -> list[Hit]:
    """Rank `candidates` by `method` (one of METHODS), best first, the `limit` best if given."""
    c = candidates
    n = len(c.keys)
    zeros = np.zeros(n)
    cosine = np.nan_to_num(c.vector.astype(np.float64), nan=0.0)
    near = zeros if c.near is None else NEIGHBOUR * c.near.astype(np.float64)
    bm25 = c.keyword.astype(np.float64)
    coverage = (bm25 + near) * (1 + K1) / c.weight if c.weight > 0 else zeros
    exact = c.exact.astype(np.float64)
    evidence = np.maximum(np.minimum(exact * (1 + K1) / c.weight, 1.0) if c.weight > 0 else zeros, c.title)
    keyword_side = WORDS_SCALE * np.maximum(coverage - WORDS_FLOOR, 0.0) + EXACT_SHARE * evidence
    date = zeros if c.dated is None else DATE_BONUS * c.dated
    tie = cosine
    if method == "weighted":
        vector_norm, keyword_norm = cosine, keyword_side
    elif method == "rrf":
        ranked = coverage + EXACT_SHARE * evidence
        vector_norm = 1.0 / (RRF_K + _ranks(cosine))
        keyword_norm = np.where(ranked > 0, 1.0 / (RRF_K + _ranks(ranked)), 0.0)
        date = date * (1.0 / (RRF_K + 1)) / DATE_BONUS  # as if first in a third list
    elif method == "keyword":
        best_coverage = coverage.max(initial=0.0)
        vector_norm = coverage / best_coverage if best_coverage > 0 else zeros
        keyword_norm, tie = evidence, coverage
    else:
        raise UserError(f"unknown fusion method {method!r}: use one of {', '.join(METHODS)}")
    score = weights.vector * vector_norm + weights.keyword * keyword_norm + date
    order = np.lexsort((c.keys, -tie, -score))
    if c.container is not None:
        order = order[~c.container[order] | c.title[order]]
    return [Hit(int(c.keys[i]), float(score[i]), float(c.vector[i]), float(bm25[i]), float(exact[i]),
                bool(c.title[i]), float(vector_norm[i]), float(keyword_norm[i]), method, weights,
                float(coverage[i]), float(evidence[i]), float(near[i]), float(date[i]), c.period if date[i] else "")
            for i in order[:limit]]


def _rank(reciprocal: float) -> int:
    return round(1 / reciprocal - RRF_K)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each score, highest first, ties by position."""
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return ranks


@dataclass(frozen=True)
class Layout:
    """What the owner of the items knows of them beyond their text: each item's neighbouring turns (the keys of
    the turns before and after it in its session), whether it is dated within the `period` the query names, and
    whether it is a container (a session entry with nothing of its own)."""

    neighbours: Callable[[int], Sequence[int]] = lambda key: ()
    dated: Callable[[int], bool] | None = None
    period: str = ""
    container: Callable[[int], bool] = lambda key: False


def hybrid_search(query: str, embedder: Embedder, keyword: KeywordIndex, vector: VectorIndex, *,
                  limit: int = 10, mask: AbstractSet[int] | None = None, method: str = "weighted",
                  weights: Weights = Weights(), depth: int = 50,
                  query_vector: np.ndarray | None = None, layout: Layout = Layout()) -> list[Hit]:
    """The `limit` best items for `query`, fusing `depth` candidates from each index.

    `mask`, when given, holds the only keys that may be returned; `query_vector`, when given, is
    the query's embedding (the caller's cache), used instead of embedding `query` again; `layout`
    tells the items' neighbours, dates and containers.
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
    neighbours = [layout.neighbours(key) for key in keys]
    near = None
    if any(neighbours):
        others = list(dict.fromkeys(other for found in neighbours for other in found))
        other_bm25 = dict(zip(others, keyword.scores(query, others).tolist()))
        near = np.array([max((other_bm25[o] for o in found), default=0.0) for found in neighbours])
    dated = None if layout.dated is None else np.array([layout.dated(key) for key in keys], dtype=bool)
    candidates = Candidates(np.array(keys, dtype=np.uint64), cosine, keyword.scores(query, keys),
                            keyword.scores(query, keys, identifiers_only=True), keyword.title_matches(query, keys),
                            keyword.weight(query), near, dated,
                            np.array([layout.container(key) for key in keys], dtype=bool), layout.period)
    return fuse(candidates, method, weights, limit)
