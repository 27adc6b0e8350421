"""Search indexes shared through a PostgreSQL store: a new machine answers from the copy another one built, brought
up to date from its tree; a copy made before a purge, damaged or partial is never trusted; sharers race safely."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cortex.api as cx
from cortex.history.forget import newest_purge
from cortex.search import saving, sharing
from tests.conftest import REPO

QUERY = "credentials that leaked must be replaced"

# A new machine (its own cache folder, given): the first search, and what its index was loaded with.
MACHINE = """
import json, sys
import cortex.api as cx
import cortex.search.embeddings as embeddings

store, org = sys.argv[1], sys.argv[2]
asked = []
model = embeddings.shared_embedder()
class Counting:
    name, dim, degraded = model.name, model.dim, model.degraded
    def embed(self, texts):
        asked.extend(texts)
        return model.embed(texts)
embeddings.shared_embedder = Counting
with cx.open(store, org) as c:
    index = c._search_index
    loaded = [len(index.items), index.root.hex()]
    hits = [[h.item.key, round(h.score, 5)] for h in c.search(sys.argv[3], limit=5)]
    print(json.dumps({"loaded": loaded, "hits": hits, "embedded": asked, "changed": index.changed}))
"""

# A sharer: shares the index files of its folder under one label, again and again, once both are ready.
SHARER = """
import sys, time
from pathlib import Path
import cortex.api as cx
from cortex.search import sharing

store, folder, root, go = sys.argv[1], Path(sys.argv[2]), bytes.fromhex(sys.argv[3]), Path(sys.argv[4])
with cx.open(store, folder=False) as c:
    (folder.parent / (folder.name + ".ready")).touch()
    while not go.exists():
        time.sleep(0.005)
    for _ in range(3):
        sharing.share(c.store, folder, "race", root, b"")
"""


def new_machine(where: Path) -> Path:
    """`where` as a machine's cache folder, sharing the session's derived model."""
    if not (where / "cortex" / "models").exists():
        (where / "cortex").mkdir(parents=True)
        (where / "cortex" / "models").symlink_to(Path(os.environ["XDG_CACHE_HOME"]) / "cortex" / "models",
                                                 target_is_directory=True)
    return where


def machine(where: Path, store: str, org: Path, query: str = QUERY) -> dict:
    """Run MACHINE as a process of a machine whose cache folder is `where`."""
    new_machine(where)
    ran = subprocess.run([sys.executable, "-c", MACHINE, store, str(org), query], capture_output=True, text=True,
                         cwd=REPO, timeout=120, env={**os.environ, "XDG_CACHE_HOME": str(where)})
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def hits(results) -> list:
    return [[h.item.key, round(h.score, 5)] for h in results]


def rebuilt(store: str, org: Path, where: Path, monkeypatch, query: str = QUERY) -> list:
    """The first hits of a session on a machine whose cache folder is `where`, its index built afresh."""
    with monkeypatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(new_machine(where)))
        patch.setattr(saving, "restore", lambda index: None)
        with cx.open(store, org) as c:
            return hits(c.search(query, limit=5))


def shared_copy(store: str, label: str) -> list | None:
    with cx.open(store, folder=False) as c:
        return sharing.manifest(c.store, label)


def manifests(c) -> list:
    return [key for key, _ in c.store.table(sharing.SHARED).items(sharing.MANIFEST)]


def index_files(where: Path) -> list[Path]:
    """The files of the search indexes a machine whose cache folder is `where` saved."""
    return [f for folder in where.glob("cortex/*/index") for f in folder.rglob("*") if f.is_file()]


def test_a_new_machine_answers_from_the_shared_index_and_follows_changes(pg_url, org, tmp_path, monkeypatch):
    with cx.open(pg_url, org) as c:  # the first machine builds, and shares as it closes
        c.ingest()
        c.search(QUERY)
    shared_root = shared_copy(pg_url, saving._label(c._search_index))[0]
    first = machine(tmp_path / "second", pg_url, org)
    assert first["loaded"] == [len(c._search_index.items), shared_root.hex()]  # fetched, not built
    assert first["embedded"] == [QUERY]  # every item's vector came with the index: only the query is embedded
    assert first["hits"] == rebuilt(pg_url, org, tmp_path / "rebuilt", monkeypatch)
    with cx.open(pg_url, org) as c:
        c.memory.add_item("assistant", "fact", "Leaked credentials are replaced within the hour by the on-call.")
        c.search(QUERY)  # the new item embedded here: its vector is in the store
    again = machine(tmp_path / "second", pg_url, org)  # its own saved index, brought up to date from its tree
    assert again["loaded"][1] == shared_root.hex()
    assert 0 < again["changed"] < first["loaded"][0]  # the items the memory add changed (a build adds them all)
    assert again["hits"] == rebuilt(pg_url, org, tmp_path / "rebuilt-again", monkeypatch)
    assert again["embedded"] == [QUERY]


def test_a_purge_leaves_no_shared_index_trusted_on_any_machine(pg_url, org, tmp_path, monkeypatch):
    secret = "The vault passphrase is tangerine-47."
    with cx.open(pg_url, org) as c:
        c.ingest()
        c.memory.add_item("assistant", "fact", secret)
        c.search("vault passphrase")
    label = saving._label(c._search_index)
    stale = shared_copy(pg_url, label)
    assert stale is not None
    second = machine(tmp_path / "second", pg_url, org, "vault passphrase")
    assert second["hits"][0][0] in {k for k, i in c._search_index.items.items() if i.text == secret}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "third"))  # a third machine purges the agent
    with cx.open(pg_url, org) as c:
        assert manifests(c)
        c.memory.purge("assistant", hard=True)
        assert manifests(c) == [] and not list(c.store.table(sharing.SHARED).keys_in_order())
        # a sharer that raced the purge put back a copy made before it: no machine trusts it
        c.store.table(sharing.SHARED)[sharing.MANIFEST + label.encode()] = sharing.encode(stale)
        assert not sharing.fetch(c.store, tmp_path / "fourth", label, newest_purge(c.store))
        assert manifests(c) == []
    after = machine(tmp_path / "second", pg_url, org, "vault passphrase")
    assert after["loaded"][0] == 0  # its own index, made before the purge, was not trusted either
    assert index_files(tmp_path / "second")
    assert not any(b"tangerine-47" in f.read_bytes() for f in index_files(tmp_path / "second"))


@pytest.mark.parametrize("damage", ["changed", "missing"])
def test_a_damaged_or_partial_shared_index_is_rebuilt_not_trusted(pg_url, org, tmp_path, monkeypatch, damage):
    monkeypatch.setattr(sharing, "CHUNK", 4096)  # files of many chunks, read at once in any order
    with cx.open(pg_url, org) as c:
        c.ingest()
        expected = hits(c.search(QUERY, limit=5))
    label, saved = saving._label(c._search_index), c.store_folder() / "index"
    with cx.open(pg_url, folder=False) as c:
        assert sharing.fetch(c.store, tmp_path / "whole", label, b"")
        assert all((tmp_path / "whole" / name).read_bytes() == (saved / name).read_bytes()
                   for name in ("state.msgpack", "vectors.usearch"))
        found = sharing.manifest(c.store, label)
        assert sharing._count(found) > 10
        table, last = c.store.table(sharing.SHARED), sharing._piece(found[2], sharing._count(found) - 1)
        if damage == "missing":
            del table[last]
        else:
            table[last] = table[last][:-1] + bytes([table[last][-1] ^ 1])
    monkeypatch.setenv("XDG_CACHE_HOME", str(new_machine(tmp_path / "second")))
    with cx.open(pg_url, org) as c:
        assert len(c._search_index.items) == 0 and manifests(c) == []  # not trusted, and deleted
        assert hits(c.search(QUERY, limit=5)) == expected
    assert shared_copy(pg_url, label) is not None  # the rebuilt index is shared in its place


def test_concurrent_sharers_leave_one_whole_copy(pg_url, org, tmp_path):
    with cx.open(pg_url, org) as c:
        c.ingest()
        c.search(QUERY)
    saved, root = c.store_folder() / "index", bytes(c._search_index.root)
    go = tmp_path / "go"
    procs = []
    for n in range(2):
        folder = tmp_path / f"sharer-{n}"
        subprocess.run(["cp", "-r", str(saved), str(folder)], check=True)
        procs.append(subprocess.Popen([sys.executable, "-c", SHARER, pg_url, str(folder), root.hex(), str(go)],
                                      cwd=REPO, stderr=subprocess.PIPE, text=True))
    while not all((tmp_path / f"sharer-{n}.ready").exists() for n in range(2)):
        assert all(p.poll() is None for p in procs), [p.stderr.read() for p in procs]
        time.sleep(0.01)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0], [p.stderr.read() for p in procs]
    with cx.open(pg_url, org) as c:
        table = c.store.table(sharing.SHARED)
        named = {sharing._piece(found[2], n) for key in manifests(c)
                 for found in [sharing.decode(table[key])] for n in range(sharing._count(found))}
        assert {k for k, _ in table.items(sharing.PIECE)} == named  # every chunk of a manifest there, no orphan
        assert not list(c.store.table(sharing.SHARED).items(sharing.UPLOAD))
        assert sharing.fetch(c.store, tmp_path / "fetched", "race", b"")
        assert (tmp_path / "fetched" / "state.msgpack").read_bytes() == (saved / "state.msgpack").read_bytes()


def test_a_copy_shared_under_a_newer_state_version_deletes_the_older_ones_of_its_embedder(pg_url, tmp_path):
    from cortex.backends import open_store

    files = tmp_path / "index"
    files.mkdir()
    (files / "state.msgpack").write_bytes(os.urandom(3 * sharing.CHUNK // 2))  # two chunks
    store = open_store(pg_url)
    try:
        table = store.table(sharing.SHARED)
        for label in ("9/minilm", "7/minilm", "7/other"):  # an older version shared later deletes no newer one
            sharing.share(store, files, label, b"root", b"")
        chunks = lambda: sum(1 for _ in table.items(sharing.PIECE))  # noqa: E731
        assert chunks() == 6
        sharing.share(store, files, "8/minilm", b"root", b"")
        labels = sorted(key[len(sharing.MANIFEST):].decode() for key, _ in table.items(sharing.MANIFEST))
        assert labels == ["7/other", "8/minilm", "9/minilm"] and chunks() == 6  # 7/minilm's two chunks went with it
    finally:
        store.close()
