"""Search over a real store, ratios measured in one run (the engine's latency at 10k/100k items
is in bench/search_engine.py; what to embed of a section, in bench/embed_quality.py):

- the corpus index build (every headline embedded, cold cache) vs orgparse parsing the same files, in
  wall-clock time and in CPU time (the build's spread over 2 cores: on a quiet machine its wall-clock ratio
  is about half its CPU one; on a shared one the CPU ratio is the steadier figure);
- its texts embedded per second vs the raw ONNX model on the same texts: onnxruntime sessions of the model
  the embedder runs called directly on each text tokenized beforehand, no cortex code; and what running each
  text alone (its vector never depends on its batch) costs against batches of like lengths;
- a re-ingest of the unchanged corpus followed by a search: texts embedded (must be 0);
- the index update after a one-headline edit vs a full rebuild of the index;
- hybrid query latency p50/p95 over the corpus vs a bare usearch query of the same vectors.

    .venv/bin/python bench/search.py
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime
import orgparse
from tokenizers import Tokenizer

from _common import best_of, corpus_copy, corpus_files, percentiles, report

import cortex.api as cx
from cortex.search.embeddings import shared_embedder
from cortex.search.index import SearchIndex


class Counting:
    """The default embedder, keeping what it embeds."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.degraded = inner, inner.name, inner.dim, inner.degraded
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)


def raw_onnx(model, texts: list[str], alone: bool = True) -> tuple[float, float]:
    """Seconds (wall-clock, CPU) the bare model takes over `texts`: tokenized first (untimed), then run by a
    one-thread session per core from a thread pool, each text alone as the embedder runs it (`alone`), or in
    batches of like lengths padded to 1024 tokens, as it ran them before each text's vector was made its own."""
    tokenizer = Tokenizer.from_file(str(model.files()[1]))
    tokenizer.no_padding()
    tokenizer.enable_truncation(model.max_tokens)
    batches = [[]]
    for ids in sorted((encoding.ids for encoding in tokenizer.encode_batch(texts)), key=len):
        if batches[-1] and (alone or (len(batches[-1]) + 1) * len(ids) > 1024):
            batches.append([])
        batches[-1].append(ids)
    feeds = []
    for batch in batches:
        padded = np.zeros((len(batch), len(batch[-1])), dtype=np.int64)
        for row, row_ids in enumerate(batch):
            padded[row, :len(row_ids)] = row_ids
        feeds.append({"input_ids": padded, "attention_mask": (padded != 0).astype(np.int64),
                      "token_type_ids": np.zeros_like(padded)})
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.model(), sess_options=options, providers=["CPUExecutionProvider"])
    session.run(None, feeds[0])
    with ThreadPoolExecutor(2) as pool:
        started, used = time.perf_counter(), time.process_time()
        for _ in pool.map(lambda feed: session.run(None, feed), feeds):
            pass
        return time.perf_counter() - started, time.process_time() - used


def main() -> None:
    import cortex.search.embeddings as embeddings

    counting = Counting(shared_embedder())
    embeddings.shared_embedder = lambda: counting
    files = corpus_files()
    used = time.process_time()
    parse = best_of(lambda: [orgparse.load(str(path)) for path in files])
    parse_cpu = (time.process_time() - used) / 3
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-"))
    org = work / "org"
    corpus_copy(org)
    with cx.open(work / "store", org) as c:
        c.ingest()
        counting.embed(["warm up"])
        counting.texts.clear()
        started, used = time.perf_counter(), time.process_time()
        c.build_search()
        build, build_cpu = time.perf_counter() - started, time.process_time() - used
        texts = counting.texts
        raw, raw_cpu = raw_onnx(counting.inner, texts)
        batched, batched_cpu = raw_onnx(counting.inner, texts, alone=False)
        print(f"corpus: {len(files)} files, {len(c._search_index.items):,} items, {len(texts):,} distinct texts "
              f"embedded at {len(texts) / build:,.0f} texts/s ({counting.name})")
        report("corpus index build (cold) vs orgparse parsing the same files", build, parse,
               target="(bar < 60, goal 30)")
        report("  the same in CPU time (what other programs take does not count)", build_cpu, parse_cpu)
        report("texts/s: index build vs raw ONNX on the same texts", len(texts) / build, len(texts) / raw,
               unit="/s")
        report("  the same per CPU-second", len(texts) / build_cpu, len(texts) / raw_cpu, unit="/s")
        report("raw ONNX per CPU-second: each text alone vs batches of like lengths", len(texts) / raw_cpu,
               len(texts) / batched_cpu, unit="/s")

        counting.texts.clear()
        c.ingest()
        c.search("unchanged")
        print(f"re-ingest of the unchanged corpus, then a search: {len(counting.texts) - 1} texts embedded (bar: 0)")

        path = org / "worg" / "org-faq.org"
        text = path.read_text()
        path.write_text(text.replace("\n", " (edited)\n", 1))
        c.ingest(path)
        index = c._search_index
        started = time.perf_counter()
        index.follow(c.working())
        index.build()
        update = time.perf_counter() - started
        started = time.perf_counter()
        rebuilt = SearchIndex(c.store, index.embedder)
        rebuilt.follow(c.working())
        rebuilt.build()
        rebuild = time.perf_counter() - started
        report("index update after a one-headline edit vs full rebuild (cached vectors)", update, rebuild,
               target="(update bar < 50 ms)")

        queries = ["how do I export to html", "org-agenda custom commands", "E1042", "capture templates",
                   "tangle source blocks", "latex preview", "spacemacs layer", "keybinding for refile"] * 12
        hybrid, bare = [], []
        for q in queries:
            started = time.perf_counter()
            c.search(q)
            hybrid.append(time.perf_counter() - started)
            vector = index.embedder.embed([q])[0]
            started = time.perf_counter()
            index.vector.search(vector, 10)
            bare.append(time.perf_counter() - started)
        h50, h95 = percentiles(hybrid)
        b50, b95 = percentiles(bare)
        report("hybrid search p50 (with query embedding) vs usearch alone", h50 / 1e3, b50 / 1e3)
        report("hybrid search p95 (with query embedding) vs usearch alone", h95 / 1e3, b95 / 1e3)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
