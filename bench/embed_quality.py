"""How much of a section is worth embedding: R@1 and MRR of the cosine ranking on tests/data/sections_eval.json
for each choice of text, and the texts embedded per second with it (ratio: CPU time against today's text).

    .venv/bin/python bench/embed_quality.py

Choices: the title, the outline path (titles from the top, " / " between), and either followed by the body
(the text search indexes today, property drawers and planning lines left out), read up to N tokens; and
today's text with each Org link shown as its description alone (its target, a URL or a file, not read); and
the text searched today run by the bundled model as shipped (float products) instead of the one derived from it.
Candidates: every headline of ../shared/corpus in the files holding a target, and a seeded sample of the rest.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
import time
from pathlib import Path
from collections import Counter
from collections.abc import Callable

from _common import REPO, corpus_copy, report

import numpy as np

import cortex.api as cx
from cortex.search.embedders import MAX_TOKENS, MiniLMEmbedder
from cortex.search.items import Item, changed_units

EVAL = REPO / "tests" / "data" / "sections_eval.json"
OTHERS = 3000  # headlines sampled from files without a target
TODAY = "title + body, 128 tokens"
LINK = re.compile(r"\[\[([^\]]*)\](?:\[([^\]]*)\])?\]")


def corpus_items() -> list[Item]:
    """The search items of every headline of the corpus, as the search index makes them, in file order."""
    with tempfile.TemporaryDirectory() as folder, \
            cx.open(in_memory=True, org_root=corpus_copy(Path(folder) / "org")) as c:
        c.ingest()
        tree = c.working()
        get = c.store.objects.__getitem__
        items = []
        for path in sorted(tree.entries):
            _, came = changed_units(get, path, None, get(tree.entries[path]))
            items.extend(sorted(came.values(), key=lambda item: item.position))
    return items


def outline(item: Item) -> str:
    """The titles from the top of the file down to the item's."""
    return " / ".join(item.outline)


def with_body(head: Callable[[Item], str]) -> Callable[[Item], str]:
    """`head(item)` followed by the item's body."""
    return lambda item: (head(item) + item.text[len(item.outline[-1]):]).strip()


def links_as_text(item: Item) -> str:
    """The item's text with each Org link shown as its description (its target when it has none)."""
    return LINK.sub(lambda link: link[2] or link[1], item.text)


CHOICES = {  # name: (text of an item, tokens read, whether the derived model runs it)
    "title": (lambda item: item.outline[-1], 128, True),
    "outline": (outline, 128, True),
    **{f"title + body, {n} tokens": (lambda item: item.text, n, True) for n in (32, 64, 128, 256)},
    **{f"outline + body, {n} tokens": (with_body(outline), n, True) for n in (64, 128)},
    **{f"title + body, links as text, {n} tokens": (links_as_text, n, True) for n in (64, 128)},
    f"title + body, {MAX_TOKENS} tokens, bundled model": (lambda item: item.text, MAX_TOKENS, False),
}


def ranks(query_vectors: np.ndarray, vectors: np.ndarray, targets: list[set[int]]) -> list[int]:
    """The rank of each query's best-placed target among all candidates."""
    scores = query_vectors @ vectors.T
    return [int((row > max(row[t] for t in found)).sum()) + 1 for row, found in zip(scores, targets)]


def main() -> None:
    data = json.loads(EVAL.read_text(encoding="utf-8"))
    items = corpus_items()
    wanted = {(path, tuple(outline)) for q in data["queries"] for path, outline in q["targets"]}
    files = {path for path, _ in wanted}
    rest = [item for item in items if item.path not in files]
    candidates = [item for item in items if item.path in files] + random.Random(0).sample(rest, OTHERS)
    where = {(item.path, item.outline): n for n, item in enumerate(candidates)}
    counts = Counter((item.path, item.outline) for item in candidates)
    if unclear := [target for target in wanted if counts[target] != 1]:
        raise SystemExit(f"targets not found once among the headlines: {unclear}")
    targets = [{where[(path, tuple(outline))] for path, outline in q["targets"]} for q in data["queries"]]
    groups = sorted({q["group"] for q in data["queries"]})
    print(f"{len(data['queries'])} queries ({', '.join(groups)}), {len(candidates):,} candidate headlines")
    print(f"{'text embedded':40}{'R@1':>7}{'MRR':>7}" + "".join(f"{g + ' R@1':>15}" for g in groups)
          + f"{'texts/s':>10}")
    seconds, cpu = {}, {}
    for name, (text, tokens, quantize) in CHOICES.items():
        embedder = MiniLMEmbedder(max_tokens=tokens, quantize=quantize)
        embedder.embed(["warm up"])
        texts = [text(item) for item in candidates]
        started, used = time.perf_counter(), time.process_time()
        vectors = embedder.embed(texts)
        seconds[name], cpu[name] = time.perf_counter() - started, time.process_time() - used
        # one query at a time, as a search embeds it: the derived model's vectors move a little with their batch
        found = ranks(np.vstack([embedder.embed([q["query"]]) for q in data["queries"]]), vectors, targets)
        by_group = [np.mean([r == 1 for r, q in zip(found, data["queries"]) if q["group"] == g]) for g in groups]
        print(f"{name:40}{np.mean([r == 1 for r in found]):7.3f}{np.mean([1 / r for r in found]):7.3f}"
              + "".join(f"{g:15.3f}" for g in by_group) + f"{len(texts) / seconds[name]:10.0f}")
    for name in CHOICES:  # CPU time: what other programs on the machine take of it does not count
        report(f"CPU time embedding: {name} vs {TODAY}", cpu[name], cpu[TODAY])


if __name__ == "__main__":
    main()
