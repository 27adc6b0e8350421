"""Hybrid memory search: offline embeddings, BM25 keyword and usearch vector indexes, fusion.

The indexes are derived data keyed by uint64 integers that the owner maps to its items; they hold no
store state of their own, so they can always be rebuilt from the store.
"""

import sys
import warnings

# usearch's Linux wheel carries its own C++ runtime, whose locale tables the system's then adopts:
# onnxruntime loaded after usearch crashes the process (a segfault), and nothing done after usearch
# is loaded undoes it. vector.py loads onnxruntime first; a program that imported usearch before
# cortex gets search without onnxruntime (the hashing embedder) instead of a crash.
if sys.platform.startswith("linux") and "usearch.compiled" in sys.modules and "onnxruntime" not in sys.modules:
    sys.modules["onnxruntime"] = None  # any later `import onnxruntime` fails cleanly
    warnings.warn("usearch was imported before cortex, and onnxruntime cannot load after it (their C++ "
                  "runtimes clash and would crash the process): search runs without the MiniLM model; "
                  "import cortex (or onnxruntime) before usearch to keep it", RuntimeWarning, stacklevel=2)

from cortex.search.embedders import (
    CachedEmbedder,
    Embedder,
    EmbedderUnavailable,
    HashingEmbedder,
    MiniLMEmbedder,
    default_embedder,
)
from cortex.search.fusion import METHODS, Candidates, Hit, Weights, fuse, hybrid_search
from cortex.search.keyword import KeywordIndex, exact_terms, tokenize
from cortex.search.vector import VectorIndex

__all__ = [
    "METHODS",
    "CachedEmbedder",
    "Candidates",
    "Embedder",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "Hit",
    "KeywordIndex",
    "MiniLMEmbedder",
    "VectorIndex",
    "Weights",
    "default_embedder",
    "fuse",
    "hybrid_search",
    "exact_terms",
    "tokenize",
]
