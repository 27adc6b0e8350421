"""Vector search: a usearch HNSW index of unit vectors under cosine similarity, keyed by uint64.

Vectors are held in half precision (f16): 768 MB rather than 1.5 GB for a million MiniLM vectors; int8 would
save half again but costs 4 points of recall (0.955 on LoCoMo). The graph is built with EXPANSION_ADD candidates
per insertion and searched with EXPANSION_SEARCH (usearch's defaults: 128 and 64): a build does about half the
work, and a search the more it needs to find what the build's fewer links leave further away. Recall@10 against
an exact f32 scan (LoCoMo's development half: 2,760 turns, 999 questions, MiniLM; synthetic: 64 topics plus
noise, 384 dimensions, harder than sentence embeddings) and a 300k build (2 threads, one run, load 3-6):

| add / search      | LoCoMo | synthetic 100k | synthetic 300k | build, 300k                      |
|-------------------+--------+----------------+----------------+----------------------------------|
| 128 / 64 (before) | 0.9961 | 0.950          | 0.799          | 437 s (687/s), about 370 CPU s   |
| 64 / 128          | 0.9993 | 0.982          | 0.900          | 144 s (2,090/s), about 195 CPU s |
| 64 / 256 (now)    | 0.9998 | 0.991          | 0.965          | the same build                   |

A search at 300k then takes 1.8-3.3 ms, against 0.9-1.2 ms at usearch's defaults (on a busy machine).

A loaded index is a view of its file (memory-mapped: nothing read until searched); the first change copies it
into memory (usearch cannot change a view).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Sequence, Set as AbstractSet
from pathlib import Path

import numpy as np

# onnxruntime has to be loaded before usearch: in the other order its initialisation crashes the
# process (usearch 2.26 ships its own C++ runtime; seen with onnxruntime 1.31). `cortex.search` halts its import
# when usearch came first; any other failure to load it (Ctrl-C, which pybind11 turns into an ImportError) is raised.
if "onnxruntime" not in sys.modules or sys.modules["onnxruntime"] is not None:
    import onnxruntime  # noqa: F401
from usearch.index import Index

from cortex.errors import FormatError

__all__ = ["VectorIndex"]

EXPANSION_ADD = 64  # candidates weighed per insertion (see the module's table)
EXPANSION_SEARCH = 256  # candidates weighed per search
MASKS_KEPT = 8  # masks whose keys and vectors are kept for exact scans...
ROWS_KEPT = 1 << 15  # ...holding at most this many vectors in all (48 MiB at 384 floats)


class VectorIndex:
    """Add, replace, remove and search unit vectors by uint64 key; scores are cosine similarities."""

    # Below this many candidates a brute-force scan is both exact and about as fast as the graph.
    exact_limit = 2048

    def __init__(self, dim: int, index: Index | None = None, *, viewed: bool = False):
        self.dim = dim
        self._index = index if index is not None else Index(ndim=dim, metric="cos", dtype="f16")
        self._tuned(self._index)
        self._viewed = viewed  # `index` maps a file: copied into memory on the first change
        self._changes = 0  # counts additions and removals: what is kept for a mask holds until one
        # id(mask) -> (mask, changes, its keys here, their unit vectors), the most recently used last
        self._scans: OrderedDict[int, tuple] = OrderedDict()

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: int) -> bool:
        return self._index.contains(key)

    def absent(self, keys: Sequence[int]) -> list[int]:
        """The keys of `keys` that have no vector here."""
        if not len(keys):
            return []
        keys = np.asarray(keys, dtype=np.uint64)
        return keys[~self._contains(keys)].tolist()

    def add(self, keys: Sequence[int] | np.ndarray, vectors: np.ndarray) -> None:
        """Add one vector per key, replacing the vectors of keys already present."""
        keys = np.asarray(keys, dtype=np.uint64)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (len(keys), self.dim):
            raise ValueError(f"expected {len(keys)} vectors of {self.dim} floats, got shape {vectors.shape}")
        if len(np.unique(keys)) != len(keys):
            raise ValueError("vector index additions have duplicate keys")
        if not len(keys):
            return
        self.remove(keys)
        self._writable()
        try:
            self._index.add(keys, vectors)
        except RuntimeError as exc:  # usearch stops a bulk addition on Ctrl-C with this error
            if "terminated" in str(exc):
                raise KeyboardInterrupt from None
            raise
        finally:
            self._changes += 1

    def remove(self, keys: Sequence[int] | np.ndarray) -> None:
        """Forget `keys`; unknown keys are ignored."""
        keys = np.asarray(keys, dtype=np.uint64)
        present = keys[self._contains(keys)]
        if len(present):
            self._writable()
            self._index.remove(present)
            self._changes += 1

    def _writable(self) -> None:
        """Copy a viewed index into memory before it changes."""
        if self._viewed:
            self._index = self._tuned(self._index.copy())
            self._viewed = False

    @staticmethod
    def _tuned(index: Index) -> Index:
        # usearch keeps neither setting in the file, and a copy keeps only one
        index.expansion_add, index.expansion_search = EXPANSION_ADD, EXPANSION_SEARCH
        return index

    def _contains(self, keys: np.ndarray) -> np.ndarray:
        return np.asarray(self._index.contains(keys), dtype=bool).reshape(len(keys))

    def search(self, vector: np.ndarray, k: int = 10,
               mask: AbstractSet[int] | None = None) -> list[tuple[int, float]]:
        """The `k` nearest `(key, cosine similarity)` pairs, best first.

        `mask`, when given, holds the only keys that may be returned. A narrow mask is scanned
        exactly; the keys and vectors of the MASKS_KEPT masks scanned last are kept (fetching them
        costs ten times the scan): search again with the same mask object, not changed in place,
        and they are not looked up again.
        """
        vector = np.asarray(vector, dtype=np.float32).reshape(self.dim)
        size = len(self._index)
        if k <= 0 or size == 0:
            return []
        if mask is not None:
            if len(mask) <= max(self.exact_limit, size // 8):
                return self._scan(vector, *self._masked(mask), k)
            # A wide mask: over-fetch from the graph in proportion to what the mask leaves out (twice that), then
            # twice as many while too few of them are in it, up to twice the share it keeps; then scan.
            count = min(size, k + 2 * k * (size - len(mask)) // len(mask))
            most = min(size, 2 * k * (size // len(mask) + 1))
            while True:
                found = self._graph_search(vector, count, exact=False)
                kept = [hit for hit in found if hit[0] in mask]
                if len(kept) >= k or count == size:
                    return kept[:k]
                if count >= most:
                    return self._scan(vector, *self._masked(mask), k)
                count = min(most, 2 * count)
        return self._graph_search(vector, min(k, size), exact=size <= self.exact_limit)

    def _masked(self, mask: AbstractSet[int]) -> tuple[np.ndarray, np.ndarray]:
        """The keys of `mask` in the index, sorted, and their unit vectors."""
        kept = self._scans.get(id(mask))
        if kept is not None and kept[0] is mask and kept[1] == self._changes:
            self._scans.move_to_end(id(mask))
            return kept[2], kept[3]
        allowed = np.fromiter(mask, dtype=np.uint64)
        keys = np.unique(allowed[self._contains(allowed)])
        vectors = self._vectors(keys)
        self._scans.pop(id(mask), None)
        if len(keys) <= ROWS_KEPT:
            self._scans[id(mask)] = (mask, self._changes, keys, vectors)
            while len(self._scans) > MASKS_KEPT or sum(len(k[2]) for k in self._scans.values()) > ROWS_KEPT:
                self._scans.popitem(last=False)
        return keys, vectors

    def _graph_search(self, vector: np.ndarray, count: int, exact: bool) -> list[tuple[int, float]]:
        matches = self._index.search(vector, count, exact=exact)
        return [(int(key), 1.0 - float(distance))
                for key, distance in zip(matches.keys, matches.distances)]

    def _scan(self, vector: np.ndarray, keys: np.ndarray, vectors: np.ndarray, k: int) -> list[tuple[int, float]]:
        if not len(keys):
            return []
        similarities = vectors @ vector
        best = np.argsort(-similarities, kind="stable")[:k]
        return [(int(keys[i]), float(similarities[i])) for i in best]

    def _vectors(self, keys: np.ndarray) -> np.ndarray:
        if not len(keys):
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.asarray(self._index.get(keys, dtype=np.float32), dtype=np.float32).reshape(len(keys), self.dim)
        # usearch stores vectors as given; normalise so the dot product is the cosine.
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def similarity(self, vector: np.ndarray, keys: Sequence[int]) -> np.ndarray:
        """The cosine similarity of `vector` to each of `keys` (NaN for keys not indexed)."""
        keys = np.asarray(keys, dtype=np.uint64)
        out = np.full(len(keys), np.nan, dtype=np.float32)
        present = self._contains(keys) if len(keys) else np.zeros(0, dtype=bool)
        if present.any():
            vector = np.asarray(vector, dtype=np.float32).reshape(self.dim)
            out[present] = self._vectors(keys[present]) @ vector
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write the index to the file `path`, never leaving a half-written one there."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(handle)
        try:
            self._index.save(staging)
            os.replace(staging, target)
        except BaseException:
            Path(staging).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike) -> VectorIndex:
        """View an index written by `save` (raises FormatError if missing or unreadable)."""
        source = Path(path)
        if not source.is_file():
            raise FormatError(f"{source}: vector index file is missing")
        try:
            index = Index.restore(str(source), view=True)
        except (OSError, RuntimeError, ValueError) as exc:
            raise FormatError(f"{source}: cannot read vector index: {exc}") from exc
        if index is None:
            raise FormatError(f"{source}: not a vector index file")
        return cls(index.ndim, index, viewed=True)
