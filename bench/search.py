"""Search over a real store, ratios measured in one run (the engine's latency at 10k/100k items
is in bench/search_engine.py):

- cold embedding throughput over the whole corpus (texts per second), and the index build;
- a re-ingest of the unchanged corpus followed by a search: texts embedded (must be 0);
- the index update after a one-headline edit vs a full rebuild of the index;
- hybrid query latency p50/p95 over the corpus vs a bare usearch query of the same vectors.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from _common import CORPUS, percentiles, report

import cortex.api as cx
from cortex.search.service import SearchIndex, shared_embedder


class Counting:
    """The default embedder, counting what it embeds."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.degraded = inner, inner.name, inner.dim, inner.degraded
        self.count = 0

    def embed(self, texts):
        self.count += len(texts)
        return self.inner.embed(texts)


def main() -> None:
    import cortex.search.service as service

    counting = Counting(shared_embedder())
    service.shared_embedder = lambda: counting
    work = Path(tempfile.mkdtemp(prefix="cortex-bench-"))
    org = work / "org"
    shutil.copytree(CORPUS, org, ignore=shutil.ignore_patterns("oracle", "*.md", "*.sh", "*.py"))
    with cx.open(work / "store", org) as c:
        c.ingest()
        started = time.perf_counter()
        c.search("warm up")
        cold = time.perf_counter() - started
        items = len(c._search_index.items)
        print(f"corpus: {items:,} items; cold index build {cold:.1f} s; "
              f"{counting.count / cold:,.0f} texts embedded per second")

        counting.count = 0
        c.ingest()
        c.search("unchanged")
        print(f"re-ingest of the unchanged corpus, then a search: {counting.count - 1} texts embedded (bar: 0)")

        path = org / "worg" / "org-faq.org"
        text = path.read_text()
        path.write_text(text.replace("\n", " (edited)\n", 1))
        c.ingest(path)
        started = time.perf_counter()
        c._search_index.follow(c.working())
        update = time.perf_counter() - started
        started = time.perf_counter()
        rebuilt = SearchIndex(c.store, c._search_index.embedder)
        rebuilt.follow(c.working())
        rebuild = time.perf_counter() - started
        report("index update after a one-headline edit vs full rebuild (cached vectors)", update, rebuild,
               target="(update bar < 50 ms)")

        queries = ["how do I export to html", "org-agenda custom commands", "E1042", "capture templates",
                   "tangle source blocks", "latex preview", "spacemacs layer", "keybinding for refile"] * 12
        hybrid, bare = [], []
        index = c._search_index
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
