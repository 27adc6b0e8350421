"""Hybrid memory search: offline embeddings, BM25 keyword and usearch vector indexes, fusion.

    items.py       what search sees of a tree: items (a headline's own text, a memory list item), keys, dates
    index.py       SearchIndex: the indexes of one tree, kept in line with it, and the query that fuses them
    fusion.py      how the meaning side and the words side make one ranking that explains itself
    results.py     what a search answers: results and the status of the vectors (light: no engine loaded)
    building.py    embedding what has no vector yet, within a budget or in a background thread
    lines.py       where each item stands in its file now (a result's file:line)
    saving.py      the indexes saved beside the store and trusted on load only when whole
    sharing.py     saved indexes shared through a store other machines open, fetched by a new machine
    embeddings.py  the store's cache of embeddings, the process's embedder, forgetting purged text's vectors
    embedders.py   the sentence embedders (MiniLM int8 on onnxruntime, feature hashing) and their cache
    keyword.py     BM25 (bm25s) with exact terms;  vector.py  usearch;  dates.py  the period a query names

The indexes are derived data keyed by uint64 integers that the owner maps to its items; they hold no
store state of their own, so they can always be rebuilt from the store. Names load from their modules on
first use, so that the light modules (results, items) are had without the engine.
"""

import sys
import warnings
from cortex.lazy import lazy_names

# usearch's Linux wheel carries its own C++ runtime, whose locale tables the system's then adopts:
# onnxruntime loaded after usearch crashes the process (a segfault), and nothing done after usearch
# is loaded undoes it. vector.py loads onnxruntime first; a program that imported usearch before
# cortex gets search without onnxruntime (the hashing embedder) instead of a crash.
if sys.platform.startswith("linux") and "usearch.compiled" in sys.modules and "onnxruntime" not in sys.modules:
    sys.modules["onnxruntime"] = None  # any later `import onnxruntime` fails cleanly
    warnings.warn("usearch was imported before cortex, and onnxruntime cannot load after it (their C++ "
                  "runtimes clash and would crash the process): search runs without the MiniLM model; "
                  "import cortex (or onnxruntime) before usearch to keep it", RuntimeWarning, stacklevel=2)

_NAMES = {
    ".embedders": ("CachedEmbedder", "Embedder", "EmbedderUnavailable", "HashingEmbedder", "MiniLMEmbedder",
                   "default_embedder"),
    ".fusion": ("METHODS", "Candidates", "Hit", "Weights", "fuse", "hybrid_search"),
    ".keyword": ("KeywordIndex", "exact_terms", "tokenize"),
    ".vector": ("VectorIndex",),
}

__all__, __getattr__, __dir__ = lazy_names(__name__, _NAMES)
