"""Benchmark of the search engine's parts: embedding, query latency, index updates.

    .venv/bin/python bench/search_engine.py [SIZE ...]      (default sizes: 10000 100000)

Items are made of lines of the shared Org corpus (two lines each, so BM25 sees real term statistics).
Their vectors are synthetic: mixtures of real MiniLM embeddings of corpus lines plus noise, because
embedding 100k texts would take minutes and the latency of the index does not depend on where a
vector came from. Queries are real: corpus fragments and identifiers, embedded by the model.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import numpy as np

from _common import timed

from cortex.search import (
    CachedEmbedder,
    HashingEmbedder,
    KeywordIndex,
    MiniLMEmbedder,
    VectorIndex,
    hybrid_search,
)

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
QUERIES = 200


def corpus_lines() -> list[str]:
    lines = []
    for path in sorted(CORPUS.rglob("*.org")):
        if "oracle" in path.parts:
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if len(line) > 30 and line[0] not in "#:|":
                lines.append(line)
    return lines


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ms = np.array(seconds) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def best_of_3(function, argument) -> float:
    return min(timed(function, [argument] * 3))


def short_sentences(lines: list[str]) -> list[str]:
    prose = [line for line in lines if 6 <= len(line.split()) <= 16 and not set(line) & set("[]=~/*<>{}")]
    return random.sample(prose, 1000)


def bench_embedding(model: MiniLMEmbedder, lines: list[str]) -> None:
    sentences = short_sentences(lines)
    model.embed(["warm up"])
    cached = CachedEmbedder(model, {})
    cached.embed(sentences)
    embedders = {"feature hashing (fallback)": HashingEmbedder(), model.name: model,
                 "cached MiniLM, second pass": cached}
    rates = {name: len(sentences) / best_of_3(embedder.embed, sentences)
             for name, embedder in embedders.items()}
    words = np.mean([len(sentence.split()) for sentence in sentences])
    print(f"embedding 1000 short sentences ({words:.1f} words on average; MiniLM on 2 threads;"
          " best of 3 runs)")
    base = rates[model.name]
    for name, rate in rates.items():
        print(f"  {name:36s} {rate:10.0f} sentences/s  ({rate / base:.2f}x MiniLM)")


def synthetic_vectors(model: MiniLMEmbedder, lines: list[str], n: int) -> np.ndarray:
    seeds = model.embed(random.sample(lines, 2000))
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(seeds), n), rng.integers(0, len(seeds), n)
    vectors = seeds[a] + 0.5 * seeds[b] + 0.05 * rng.standard_normal((n, seeds.shape[1]))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def bench_size(model: MiniLMEmbedder, lines: list[str], n: int) -> None:
    rng = random.Random(n)
    texts = [f"{rng.choice(lines)} {rng.choice(lines)}" for _ in range(n)]
    items = list(enumerate(texts))

    start = time.perf_counter()
    keyword = KeywordIndex.build(items)
    keyword_build = time.perf_counter() - start
    vectors = synthetic_vectors(model, lines, n)
    start = time.perf_counter()
    vector = VectorIndex(model.dim)
    vector.add(np.arange(n), vectors)
    vector_build = time.perf_counter() - start

    queries = [" ".join(rng.choice(texts).split()[:rng.randint(2, 6)]) for _ in range(QUERIES)]
    query_vectors = model.embed(queries)
    keyword_alone = percentiles(timed(lambda q: keyword.search(q, 10), queries))
    vector_alone = percentiles(timed(lambda v: vector.search(v, 10), query_vectors))
    embedding = percentiles(timed(lambda q: model.embed([q]), queries))
    hybrid = percentiles(timed(lambda q: hybrid_search(q, model, keyword, vector, limit=10), queries))

    filters = bench_filters(model, keyword, vector, queries, query_vectors, n)

    edits = [(key, texts[key] + f" edited E{key}") for key in rng.sample(range(n), 20)]
    edit_vectors = [model.embed([text]) for _, text in edits]
    embed_one = percentiles(timed(lambda item: model.embed([item[1]]), edits))[0] / 1000
    keyword_edit = percentiles(timed(lambda item: keyword.add([item]), edits))[0] / 1000
    vector_edit = percentiles(timed(lambda edit: vector.add([edit[0][0]], edit[1]),
                                    list(zip(edits, edit_vectors))))[0] / 1000
    key = edits[0][0]
    assert keyword.search(f"E{key}", 1)[0][0] == key and vector.search(edit_vectors[0][0], 1)[0][0] == key

    print(f"\n{n:,} items")
    print(f"  query p50 / p95 ms        bm25s {keyword_alone[0]:6.2f} / {keyword_alone[1]:6.2f}"
          f"   usearch {vector_alone[0]:6.2f} / {vector_alone[1]:6.2f}"
          f"   query embedding {embedding[0]:6.2f} / {embedding[1]:6.2f}")
    print(f"  hybrid (with embedding)   {hybrid[0]:6.2f} / {hybrid[1]:6.2f}"
          f"   = {hybrid[0] / keyword_alone[0]:.1f}x bm25s, {hybrid[0] / vector_alone[0]:.1f}x usearch,"
          f" {hybrid[0] / (keyword_alone[0] + vector_alone[0] + embedding[0]):.2f}x their sum (p50)")
    print(f"  filtered, p50 ms          unfiltered {filters['none']:6.2f}   one agent's filter"
          f" {filters['one']:6.2f} ({filters['one'] / filters['none']:.2f}x)   two agents' alternating"
          f" {filters['two']:6.2f} ({filters['two'] / filters['none']:.2f}x)   (query vectors given)")
    print(f"  one-edit update ms (p50)  bm25s {keyword_edit * 1000:.2f} (overlay)"
          f"   usearch {vector_edit * 1000:.2f}   embedding the text {embed_one * 1000:.2f}")
    print(f"  full rebuild s            bm25s {keyword_build:.2f}   usearch {vector_build:.2f}"
          f"   = {keyword_build / keyword_edit:,.0f}x / {vector_build / vector_edit:,.0f}x an edit")


def bench_filters(model, keyword: KeywordIndex, vector: VectorIndex, queries: list[str],
                  query_vectors: np.ndarray, n: int) -> dict[str, float]:
    """Hybrid query p50 (ms) unfiltered, under one agent's filter, and under two agents' filters in turn.

    Each agent owns 5% of the items; a filter is the same set object each time, as SearchIndex keeps it.
    """
    agents = [set(range(start, n, 20)) for start in (0, 1)]
    pairs = list(zip(queries, query_vectors))

    def p50(masks) -> float:
        return percentiles(timed(lambda job: hybrid_search(job[0][0], model, keyword, vector, limit=10,
                                                           mask=job[1], query_vector=job[0][1]),
                                 [(pair, masks[i % len(masks)]) for i, pair in enumerate(pairs)]))[0]

    return {"none": p50([None]), "one": p50(agents[:1]), "two": p50(agents)}


def main(sizes: list[int]) -> None:
    random.seed(0)
    lines = corpus_lines()
    model = MiniLMEmbedder()
    bench_embedding(model, lines)
    for n in sizes:
        bench_size(model, lines, n)


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [10_000, 100_000])
