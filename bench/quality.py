"""Search quality with the real MiniLM model: R@1/5/10/20 and MRR of each ranking on four query sets.

- paraphrase: ../shared/eval/paraphrase.json, queries that share meaning and few words with their memory;
- keyword: tests/data/keyword_eval.json, error codes, versions, tickets, snake_case and CamelCase names;
- exact: tests/data/exact_eval.json, paths, slash lists, flags, personal names, versions, exact titles;
- dated: tests/data/dated_eval.json, an agent's daily logs where each subject comes up on three days in like
  words, and each query names the period of one of them ("in May 2026", "last week"): asked through
  `Cortex.search` over a real store, as the dates come from the logs' file names.

Rankings: the cosine alone, BM25 alone, and every fusion method at its default weights; with the model the
embedder derives, then with the bundled model as shipped. A query's own memory is its target; an item scoring
the same as the target counts as ranked before it (the targets come first in the sets: a tie must not favour
them). LoCoMo's conversations are measured by bench/locomo.py.

    .venv/bin/python bench/quality.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections import defaultdict
from datetime import date
from pathlib import Path

from _common import REPO

import numpy as np

import cortex.api as cx
import cortex.search.embeddings as embeddings
from cortex.search.embedders import CachedEmbedder, MiniLMEmbedder
from cortex.search.fusion import METHODS, hybrid_search
from cortex.search.keyword import KeywordIndex
from cortex.search.index import Filters
from cortex.search.vector import VectorIndex

SETS = {
    "paraphrase": REPO.parent / "shared" / "eval" / "paraphrase.json",
    "keyword": REPO / "tests" / "data" / "keyword_eval.json",
    "exact": REPO / "tests" / "data" / "exact_eval.json",
    "dated": REPO / "tests" / "data" / "dated_eval.json",
}
DEPTHS = (1, 5, 10, 20)
RANKINGS = ("cosine", "bm25", *METHODS)


def rank(scored: list[tuple[int, float]], target: int) -> int:
    """The target's rank among (key, score) pairs, an equal score counting as before it; 0 if absent."""
    scores = dict(scored)
    return sum(score >= scores[target] for score in scores.values()) if target in scores else 0


def quality(ranks: list[int]) -> list[float]:
    """Recall at each depth, then MRR."""
    found = np.array(ranks)
    return [float(np.mean((found > 0) & (found <= depth))) for depth in DEPTHS] + \
        [float(np.mean(np.where(found > 0, 1.0 / np.maximum(found, 1), 0.0)))]


def measure_texts(path: Path, embedder) -> dict[str, list[float]]:
    """Each ranking's quality on a set of texts, ranked by the engine itself (no store)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = [pair["memory"] for pair in data["pairs"]] + data["distractors"]
    queries = [pair["query"] for pair in data["pairs"]]
    n = len(texts)
    keyword = KeywordIndex.build(enumerate(texts))
    vector = VectorIndex(embedder.dim)
    vector.add(np.arange(n), embedder.embed(texts))
    ranks = defaultdict(list)
    for target, query in enumerate(queries):
        query_vector = embedder.embed([query])[0]
        ranks["cosine"].append(rank(vector.search(query_vector, n), target))
        ranks["bm25"].append(rank(keyword.search(query, n), target))
        for method in METHODS:
            hits = hybrid_search(query, embedder, keyword, vector, limit=n, method=method, query_vector=query_vector)
            ranks[method].append(rank([(hit.key, hit.score) for hit in hits], target))
    return {name: quality(found) for name, found in ranks.items()}


def measure_logs(path: Path, embedder) -> dict[str, list[float]]:
    """Each ranking's quality on dated notes kept as an agent's daily logs, asked through `Cortex.search`."""
    data = json.loads(path.read_text(encoding="utf-8"))
    today = date.fromisoformat(data["today"])
    work = Path(tempfile.mkdtemp(prefix="cortex-quality-"))
    shared, embeddings.shared_embedder = embeddings.shared_embedder, lambda: embedder
    try:
        days: dict[str, list[str]] = defaultdict(list)
        for note in data["notes"]:
            days[note["day"]].append(f"* 10:{len(days[note['day']]):02d} — {note['text']}\n")
        for day, entries in days.items():
            log = work / "org" / "agents" / "eval" / "logs" / f"{day}.org"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("".join(entries), encoding="utf-8")
        with cx.open(work / "store", work / "org") as c:
            c.ingest()
            c.build_search()
            index = c._search_index
            key = {(item.date, item.text.split(" — ", 1)[1]): item.key for item in index.items.values()}
            mask = index._filter_mask(Filters(agent="eval"))  # None: every item is the agent's
            every = len(index.items) if mask is None else len(mask)
            ranks = defaultdict(list)
            for question in data["queries"]:
                note = data["notes"][question["note"]]
                target, query = key[note["day"], note["text"]], question["query"]
                ranks["cosine"].append(rank(index.vector.search(index.queries(query), every, mask), target))
                ranks["bm25"].append(rank(index.keyword.search(query, every, mask), target))
                for method in METHODS:
                    found = c.search(query, agent="eval", limit=every, fusion=method, today=today)
                    ranks[method].append(rank([(r.item.key, r.score) for r in found], target))
    finally:
        embeddings.shared_embedder = shared
        shutil.rmtree(work, ignore_errors=True)
    return {name: quality(found) for name, found in ranks.items()}


def main() -> None:
    missing = [str(path) for path in SETS.values() if not path.exists()]
    if missing:
        print(f"skipped, not found: {', '.join(missing)}", file=sys.stderr)
    for quantize in (True, False):
        embedder = CachedEmbedder(MiniLMEmbedder(quantize=quantize), {})
        measured = {name: (measure_logs if name == "dated" else measure_texts)(path, embedder)
                    for name, path in SETS.items() if path.exists()}
        print(f"\n{embedder.name}\n{'set':12}{'ranking':10}" + "".join(f"{f'R@{d}':>7}" for d in DEPTHS) + f"{'MRR':>7}")
        for name, found in measured.items():
            for n, ranking in enumerate(RANKINGS):
                print(f"{name if n == 0 else '':12}{ranking:10}" + "".join(f"{v:7.3f}" for v in found[ranking]))


if __name__ == "__main__":
    main()
