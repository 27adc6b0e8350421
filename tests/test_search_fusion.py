import json
from pathlib import Path

import numpy as np
import pytest

from cortex.errors import UserError
from cortex.search.embedders import CachedEmbedder, MiniLMEmbedder
from cortex.search.fusion import RRF_K, Candidates, Weights, fuse, hybrid_search
from cortex.search.keyword import KeywordIndex
from cortex.search.vector import VectorIndex

EVAL_SETS = {
    "paraphrase": Path(__file__).parents[2] / "shared" / "eval" / "paraphrase.json",
    "keyword": Path(__file__).parent / "data" / "keyword_eval.json",
}


def candidates(vector, keyword, exact):
    return Candidates(np.arange(len(vector), dtype=np.uint64), np.array(vector, dtype=np.float32),
                      np.array(keyword, dtype=np.float32), np.array(exact, dtype=np.float32))


def test_weighted_fusion_explains_every_number():
    hits = fuse(candidates([0.80, 0.78, 0.20], [1.0, 6.0, 9.0], [0.0, 4.0, 2.0]))
    assert [hit.key for hit in hits] == [1, 0, 2]
    best = hits[0]
    assert (best.vector, best.keyword, best.exact) == pytest.approx((0.78, 6.0, 4.0))
    assert (best.vector_norm, best.keyword_norm) == pytest.approx((0.78, 1.0))
    assert best.score == pytest.approx(0.7 * 0.78 + 0.3 * 1.0)
    assert hits[2].keyword_norm == pytest.approx(0.5)


def test_weights_shift_the_balance():
    both = candidates([0.80, 0.60], [0.0, 3.0], [0.0, 3.0])
    assert [hit.key for hit in fuse(both)] == [1, 0]
    assert [hit.key for hit in fuse(both, weights=Weights(vector=1.0, keyword=0.0))] == [0, 1]
    with pytest.raises(UserError, match="non-negative"):
        Weights(vector=-1.0)
    with pytest.raises(UserError, match="not both zero"):
        Weights(0.0, 0.0)


def test_without_identifiers_the_cosine_decides():
    hits = fuse(candidates([0.50, 0.49], [0.0, 8.0], [0.0, 0.0]))
    assert [hit.key for hit in hits] == [0, 1]
    assert all(hit.keyword_norm == 0.0 for hit in hits)


def test_reciprocal_rank_fusion():
    hits = fuse(candidates([0.9, 0.5, 0.7], [0.0, 2.0, 1.0], [0.0, 2.0, 1.0]), method="rrf")
    by_key = {hit.key: hit for hit in hits}
    assert by_key[0].score == pytest.approx(1 / (RRF_K + 1))
    assert by_key[1].score == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1))
    assert by_key[2].score == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 2))
    assert [hit.key for hit in hits] == [1, 2, 0]


def test_missing_vector_counts_as_unrelated():
    hits = fuse(candidates([np.nan, 0.3], [0.0, 0.0], [0.0, 0.0]))
    assert [hit.key for hit in hits] == [1, 0] and np.isnan(hits[1].vector)


def test_unknown_method_is_a_user_error():
    with pytest.raises(UserError, match="unknown fusion method 'best': use one of weighted, rrf"):
        fuse(candidates([0.1], [0.0], [0.0]), method="best")


@pytest.fixture(scope="module")
def embedder():
    return CachedEmbedder(MiniLMEmbedder(), {})


def build(embedder, texts):
    keyword = KeywordIndex.build(enumerate(texts))
    vector = VectorIndex(embedder.dim)
    vector.add(np.arange(len(texts)), embedder.embed(texts))
    return keyword, vector


def test_hybrid_search_respects_limit_and_mask(embedder):
    texts = ["Error E4012 means the signed URL expired.", "Error E4013 means the checksum failed.",
             "The user prefers dark mode.", "Deployments happen on Fridays."]
    keyword, vector = build(embedder, texts)
    hits = hybrid_search("what does E4013 mean", embedder, keyword, vector, limit=2)
    assert [hit.key for hit in hits] == [1, 0]
    assert hits[0].exact > 0 and hits[1].exact == 0
    masked = hybrid_search("what does E4013 mean", embedder, keyword, vector, mask={0, 2})
    assert {hit.key for hit in masked} <= {0, 2} and masked[0].key == 0
    with pytest.raises(UserError, match="limit"):
        hybrid_search("x", embedder, keyword, vector, limit=0)
    with pytest.raises(UserError, match="unknown fusion method"):
        hybrid_search("x", embedder, keyword, vector, method="sum")


def ranks(rankings, n_queries):
    """1-based rank of query i's own memory (key i) in each ranking; 0 if absent."""
    out = []
    for i, keys in zip(range(n_queries), rankings):
        out.append(keys.index(i) + 1 if i in keys else 0)
    return np.array(out)


def quality(rank):
    reciprocal = np.where(rank > 0, 1.0 / np.maximum(rank, 1), 0.0)
    return float(np.mean(rank == 1)), float(np.mean(reciprocal))


@pytest.mark.parametrize("name", EVAL_SETS)
def test_hybrid_is_at_least_as_good_as_either_retriever(name, embedder):
    path = EVAL_SETS[name]
    if not path.exists():
        pytest.skip(f"{path} is not present")
    data = json.loads(path.read_text())
    texts = [pair["memory"] for pair in data["pairs"]] + data["distractors"]
    queries = [pair["query"] for pair in data["pairs"]]
    keyword, vector = build(embedder, texts)
    n = len(texts)
    query_vectors = embedder.embed(queries)
    by_vector = [[key for key, _ in vector.search(v, n)] for v in query_vectors]
    by_keyword = [[key for key, _ in keyword.search(q, n)] for q in queries]
    by_hybrid = [[hit.key for hit in hybrid_search(q, embedder, keyword, vector, limit=n)]
                 for q in queries]
    vector_q, keyword_q, hybrid_q = (quality(ranks(r, len(queries)))
                                     for r in (by_vector, by_keyword, by_hybrid))
    for metric in (0, 1):  # recall@1, MRR
        assert hybrid_q[metric] >= max(vector_q[metric], keyword_q[metric]), (
            f"{name}: hybrid {hybrid_q} vector {vector_q} keyword {keyword_q}")
