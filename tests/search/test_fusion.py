import json
import re
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from cortex.errors import UserError
from cortex.search.embedders import CachedEmbedder, MiniLMEmbedder
from cortex.search.fusion import (DATE_BONUS, EXACT_SHARE, METHODS, NEIGHBOUR, RRF_K, WORDS_FLOOR, WORDS_SCALE,
                                  Candidates, Weights, fuse, hybrid_search)
from cortex.search.keyword import KeywordIndex
from cortex.search.vector import VectorIndex

EVAL_SETS = {
    "paraphrase": Path(__file__).parents[3] / "shared" / "eval" / "paraphrase.json",
    "keyword": Path(__file__).parents[1] / "data" / "keyword_eval.json",
    "exact": Path(__file__).parents[1] / "data" / "exact_eval.json",
}


def candidates(vector, keyword, exact, title=None, weight=1.9, **more):
    return Candidates(np.arange(len(vector), dtype=np.uint64), np.array(vector, dtype=np.float32),
                      np.array(keyword, dtype=np.float32), np.array(exact, dtype=np.float32),
                      np.array(title or [False] * len(vector)), weight, **more)


def test_weighted_fusion_keeps_every_number():
    # weight 1.9 = (1 + K1): a BM25 of 1 holds the whole query, one of 0.5 half of it
    hits = fuse(candidates([0.80, 0.78, 0.20], [0.1, 1.0, 0.9], [0.0, 0.5, 0.25]))
    assert [hit.key for hit in hits] == [1, 2, 0]
    best = hits[0]
    assert (best.vector, best.keyword, best.exact) == pytest.approx((0.78, 1.0, 0.5))
    assert (best.coverage, best.evidence) == pytest.approx((1.0, 0.5))
    assert best.vector_norm == pytest.approx(0.78)
    assert best.keyword_norm == pytest.approx(WORDS_SCALE * (1.0 - WORDS_FLOOR) + EXACT_SHARE * 0.5)
    assert best.score == pytest.approx(0.5 * best.vector_norm + 0.5 * best.keyword_norm)
    assert hits[1].evidence == pytest.approx(0.25)


def test_words_count_only_past_a_floor():
    # an item holding a third of the query's words (one shared word) gains nothing over a paraphrase
    hits = fuse(candidates([0.50, 0.48, 0.40], [0.0, 1 / 3, 0.8], [0.0, 0.0, 0.0]))
    assert [hit.key for hit in hits] == [2, 0, 1]
    assert hits[2].keyword_norm == 0.0 and hits[2].coverage == pytest.approx(1 / 3)


def test_weights_shift_the_balance():
    both = candidates([0.80, 0.60], [0.0, 1.0], [0.0, 3.0])
    assert [hit.key for hit in fuse(both)] == [1, 0]
    assert [hit.key for hit in fuse(both, weights=Weights(vector=1.0, keyword=0.0))] == [0, 1]
    with pytest.raises(UserError, match="non-negative"):
        Weights(vector=-1.0)
    with pytest.raises(UserError, match="not both zero"):
        Weights(0.0, 0.0)


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -float("inf"), "0.5", None, True])
def test_weights_must_be_finite_numbers(weight):
    with pytest.raises(UserError, match="search weights must be finite numbers"):
        Weights(vector=weight)
    with pytest.raises(UserError, match="finite"):
        Weights(keyword=weight)


def test_a_title_holding_every_query_word_counts_as_exact_evidence():
    hits = fuse(candidates([0.70, 0.62, 0.60], [0.1, 0.2, 0.15], [0.0, 0.0, 0.0], [False, True, False]))
    assert [hit.key for hit in hits] == [1, 0, 2]
    assert hits[0].title and hits[0].evidence == 1.0 and hits[1].evidence == 0.0


def test_neighbouring_turns_and_a_named_period_raise_an_item():
    plain = candidates([0.50, 0.49, 0.45], [0.6, 0.6, 0.6], [0.0, 0.0, 0.0])
    assert [hit.key for hit in fuse(plain)] == [0, 1, 2]
    near = fuse(candidates([0.50, 0.49, 0.45], [0.6, 0.6, 0.6], [0.0, 0.0, 0.0], near=np.array([0.0, 0.8, 0.0])))
    assert near[0].key == 1 and near[0].near == pytest.approx(NEIGHBOUR * 0.8)
    assert near[0].coverage == pytest.approx(0.6 + NEIGHBOUR * 0.8)
    dated = fuse(candidates([0.50, 0.49, 0.45], [0.6, 0.6, 0.6], [0.0, 0.0, 0.0],
                            dated=np.array([False, False, True]), period="May 2023"))
    assert dated[0].key == 2 and dated[0].date == DATE_BONUS and "date (within May 2023)" in dated[0].explain()


def test_a_container_shows_only_when_its_title_holds_the_query():
    hits = fuse(candidates([0.9, 0.5, 0.8], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [False, False, True],
                           container=np.array([True, False, True])))
    assert [hit.key for hit in hits] == [2, 1]


def test_reciprocal_rank_fusion_weighs_each_list():
    three = candidates([0.9, 0.5, 0.7], [0.0, 2.0, 1.0], [0.0, 2.0, 1.0])
    by_key = {hit.key: hit for hit in fuse(three, method="rrf", weights=Weights(0.5, 0.5))}
    assert by_key[0].score == pytest.approx(0.5 / (RRF_K + 1))
    assert by_key[1].score == pytest.approx(0.5 / (RRF_K + 3) + 0.5 / (RRF_K + 1))
    assert by_key[2].score == pytest.approx(0.5 / (RRF_K + 2) + 0.5 / (RRF_K + 2))
    assert [hit.key for hit in fuse(three, method="rrf", weights=Weights(0.5, 0.5))] == [1, 2, 0]
    assert [hit.key for hit in fuse(three, method="rrf", weights=Weights(1.0, 0.0))] == [0, 2, 1]


def test_keyword_fusion_ranks_by_bm25_and_exact_evidence_alone():
    hits = fuse(candidates([0.9, np.nan, np.nan], [0.4, 0.8, 0.6], [0.0, 0.0, 0.3]), method="keyword")
    assert [hit.key for hit in hits] == [2, 1, 0]  # 0.5 * 6/8 + 0.5 * 0.3 beats 0.5 * 8/8
    assert hits[1].vector_norm == 1.0 and hits[0].keyword_norm == pytest.approx(0.3)
    tied = fuse(candidates([0.9, 0.1], [2.0, 5.0], [1.0, 1.0]), method="keyword", weights=Weights(0.0, 1.0))
    assert [hit.key for hit in tied] == [1, 0]  # equal exact evidence: BM25, not the cosine, breaks the tie


def test_missing_vector_counts_as_unrelated():
    hits = fuse(candidates([np.nan, 0.3], [0.0, 0.0], [0.0, 0.0]))
    assert [hit.key for hit in hits] == [1, 0] and np.isnan(hits[1].vector)


def test_unknown_method_is_a_user_error():
    with pytest.raises(UserError, match="unknown fusion method 'best': use one of weighted, rrf, keyword"):
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


# The examples of issue 20, each with the distractors the cosine alone can prefer.
NAMED = [
    ("Which job produces summary-latest.json?",  # a file name inside a path
     "The report job writes /var/log/x/summary-latest.json every night.",
     ["The report job writes /var/log/latest/summary.json every night."]),
    ("What does rollout_canary.sh need before it runs?",
     "The canary rollout is started by scripts/deploy/rollout_canary.sh, which needs the cluster's kubeconfig.",
     ["The full rollout is started by scripts/deploy/rollout_all.sh once the canary has been healthy for an hour."]),
    ("What does E7302 mean?",  # a code inside a slash list
     "Errors E7301/E7302 mean the card issuer declined the payment; ask the customer for another card.",
     ["Errors E7310/E7311 mean the payment gateway timed out; retry after a minute.",
      "Error E7320 means the card has expired; the customer must update it."]),
    ("When do I need --delete-emptydir-data?",  # command-line flags
     "kubectl drain needs --delete-emptydir-data when pods on the node use emptyDir volumes.",
     ["kubectl drain needs --ignore-daemonsets when the node runs DaemonSet pods."]),
    ("when to use --no-verify", "git commit --no-verify skips the pre-commit hooks.",
     ["git commit --verify runs the hooks, the default."]),
    ("Wen-Li Zhou", "Wen-Li Zhou approved the budget.",  # personal names
     ["Wen Zhou approved the hiring plan.", "Li Wen-Zhou approved the contract."]),
    ("Who is Jean-Pierre Dubois?", "Jean-Pierre Dubois negotiates the lease for the Lyon office.",
     ["Jean Dubois runs the facilities team in Lyon."]),
    ("undo the last commit",  # a title with the query's words, against one with their meaning
     "Undo the last commit\ngit reset --soft HEAD~1 moves the branch back and keeps the changes staged.",
     ["Reverting a change you just committed\nMove the branch back one step while keeping your edits.",
      "Amend the last commit\ngit commit --amend rewrites the message or adds forgotten files."]),
]
NAMED_TEXTS = [target for _, target, _ in NAMED] + [d for _, _, distractors in NAMED for d in distractors]


@pytest.fixture(scope="module")
def named(embedder):
    return build(embedder, NAMED_TEXTS)


class Refusing:
    """An embedder that must not be called."""

    name, dim, degraded = "refusing", 384, False

    def embed(self, texts):
        raise AssertionError(f"embedded {texts!r}")


@pytest.mark.parametrize("method", ["weighted", "keyword"])  # rrf keeps ranks only: it loses the two
def test_exact_words_win_where_the_cosine_alone_errs(named, embedder, method):  # names to half-names
    keyword, vector = named
    wrong = sum(vector.search(embedder.embed([query])[0], 1)[0][0] != i for i, (query, _, _) in enumerate(NAMED))
    assert wrong >= 4  # the cosine alone ranks a distractor first on these
    for i, (query, _, _) in enumerate(NAMED):
        assert hybrid_search(query, embedder, keyword, vector, limit=3, method=method)[0].key == i, query


def test_keyword_fusion_embeds_nothing(named):
    keyword, _ = named
    hits = hybrid_search("What does E7302 mean?", Refusing(), keyword, VectorIndex(384), method="keyword")
    assert hits[0].key == 2 and all(np.isnan(hit.vector) for hit in hits)


def test_a_given_query_vector_is_not_embedded_again(named, embedder):
    keyword, vector = named
    query = "Who is Jean-Pierre Dubois?"
    given = hybrid_search(query, Refusing(), keyword, vector, query_vector=embedder.embed([query])[0])
    assert given == hybrid_search(query, embedder, keyword, vector)


_EQUATION = re.compile(r"^fused (-?[\d.]+) by (\w+) \((\w+) ([\d.]+), (\w+) ([\d.]+)\) "
                       r"= (-?[\d.]+) \w+ \(.*\) \+ ([\d.]+) \w+ \(")


@pytest.mark.parametrize("method", METHODS)
def test_explain_shows_the_method_and_weights_and_adds_up(named, embedder, method):
    keyword, vector = named
    weights = Weights(0.65, 0.35)
    for query, _, _ in NAMED:
        for hit in hybrid_search(query, embedder, keyword, vector, limit=len(NAMED_TEXTS), method=method,
                                 weights=weights):
            text = hit.explain()
            match = _EQUATION.match(text)
            assert match, text
            assert match[2] == method and (match[4], match[6]) == ("0.65", "0.35")
            total, first, second = map(Decimal, match.group(1, 7, 8))
            assert first + second == total, text
            assert float(total) == pytest.approx(hit.score, abs=1.1e-5 if method == "rrf" else 1.1e-4)


def ranks(rankings, n_queries):
    """1-based rank of query i's own memory (key i) in each ranking of (key, score) pairs, 0 if absent; an item
    scoring the same counts as ranked before it (keys list the memories first: a tie must not favour them)."""
    out = []
    for i, ranking in zip(range(n_queries), rankings):
        scores = dict(ranking)
        out.append(sum(score >= scores[i] for score in scores.values()) if i in scores else 0)
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
    by_vector = [vector.search(v, n) for v in query_vectors]
    by_keyword = [keyword.search(q, n) for q in queries]
    by_hybrid = [[(hit.key, hit.score) for hit in hybrid_search(q, embedder, keyword, vector, limit=n)]
                 for q in queries]
    vector_q, keyword_q, hybrid_q = (quality(ranks(r, len(queries)))
                                     for r in (by_vector, by_keyword, by_hybrid))
    for metric in (0, 1):  # recall@1, MRR
        assert hybrid_q[metric] >= max(vector_q[metric], keyword_q[metric]), (
            f"{name}: hybrid {hybrid_q} vector {vector_q} keyword {keyword_q}")
