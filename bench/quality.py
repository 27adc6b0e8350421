"""Search quality with the real MiniLM model: recall@1 and MRR of each ranking on three query sets.

- paraphrase: ../shared/eval/paraphrase.json, queries that share meaning and few words with their memory;
- keyword: tests/data/keyword_eval.json, error codes, versions, tickets, snake_case and CamelCase names;
- exact: tests/data/exact_eval.json, paths, slash lists, flags, personal names, versions, exact titles.

Rankings: the cosine alone, BM25 alone, and every fusion method at its default weights; with the model the
embedder derives, then with the bundled model as shipped.
"""

from __future__ import annotations

import json
import sys

from _common import REPO

import numpy as np

from cortex.search.embedders import CachedEmbedder, MiniLMEmbedder
from cortex.search.fusion import METHODS, hybrid_search
from cortex.search.keyword import KeywordIndex
from cortex.search.vector import VectorIndex

SETS = {
    "paraphrase": REPO.parent / "shared" / "eval" / "paraphrase.json",
    "keyword": REPO / "tests" / "data" / "keyword_eval.json",
    "exact": REPO / "tests" / "data" / "exact_eval.json",
}


def quality(rankings: list[list[int]]) -> tuple[float, float]:
    """Recall@1 and MRR when query i's own memory is key i."""
    ranks = [keys.index(i) + 1 if i in keys else 0 for i, keys in enumerate(rankings)]
    return (float(np.mean([rank == 1 for rank in ranks])),
            float(np.mean([1 / rank if rank else 0.0 for rank in ranks])))


def measure(path, embedder) -> dict[str, tuple[float, float]]:
    """R@1 and MRR of each ranking on the set at `path`."""
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = [pair["memory"] for pair in data["pairs"]] + data["distractors"]
    queries = [pair["query"] for pair in data["pairs"]]
    n = len(texts)
    keyword = KeywordIndex.build(enumerate(texts))
    vector = VectorIndex(embedder.dim)
    vector.add(np.arange(n), embedder.embed(texts))
    # one query at a time, as a search embeds it: the derived model's vectors move a little with their batch
    query_vectors = [embedder.embed([query])[0] for query in queries]
    results = {
        "vector": quality([[k for k, _ in vector.search(v, n)] for v in query_vectors]),
        "bm25": quality([[k for k, _ in keyword.search(q, n)] for q in queries]),
    }
    for method in METHODS:
        results[method] = quality([[hit.key for hit in hybrid_search(q, embedder, keyword, vector,
                                                                      limit=n, method=method)]
                                   for q in queries])
    return results


def main() -> None:
    missing = [str(path) for path in SETS.values() if not path.exists()]
    if missing:
        print(f"skipped, not found: {', '.join(missing)}", file=sys.stderr)
    for quantize in (True, False):
        embedder = CachedEmbedder(MiniLMEmbedder(quantize=quantize), {})
        measured = {name: measure(path, embedder) for name, path in SETS.items() if path.exists()}
        rankings = list(next(iter(measured.values())))
        print(f"\n{embedder.name}\n{'ranking':<10}" + "".join(f"{name + ' R@1':>17}{'MRR':>7}" for name in measured))
        for ranking in rankings:
            print(f"{ranking:<10}" + "".join(f"{measured[name][ranking][0]:>17.3f}{measured[name][ranking][1]:>7.3f}"
                                             for name in measured))


if __name__ == "__main__":
    main()
