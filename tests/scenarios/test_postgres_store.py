"""A store on PostgreSQL does what an LMDB store does, through the API and the CLI; what it derives stays local."""

import pytest
from click.testing import CliRunner

import cortex.api as cx
from cortex.cli import main
from cortex.cli.app import cli
from cortex.search import embeddings
from cortex.search.embeddings import EMBEDDINGS

READING = "notes/reading.org"
LATER = "* Later thoughts\nRead the paper on content-addressed stores.\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """This machine's cache folder, where a store on a server keeps what it derives."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def counting(monkeypatch):
    """The texts the embedder is asked to embed, in this process."""
    embedder = embeddings.shared_embedder()
    texts = []

    class Counting:
        name, dim, degraded = embedder.name, embedder.dim, embedder.degraded

        def embed(self, batch):
            texts.extend(batch)
            return embedder.embed(batch)

    monkeypatch.setattr(embeddings, "shared_embedder", Counting)
    return texts


def test_history_walk_and_export_into_lmdb(pg_url, org, tmp_path, cache):
    with cx.open(pg_url, org) as c:
        assert "5 files: 5 parsed" in str(c.ingest())
        first = c.snapshot("first")
        original = (org / READING).read_text()
        (org / READING).write_text(original + LATER)
        c.ingest()
        assert [str(change) for change in c.diff()] == [f"added    {READING}: Later thoughts"]
        second = c.snapshot("second")
        assert [entry.snapshot.message for entry in c.log()] == ["second", "first"]
        c.rollback("HEAD~1")
        assert (org / READING).read_text() == original and c.resolve("HEAD") == first
        c.rollback("HEAD@{1}")
        assert (org / READING).read_text() == original + LATER
        assert [v.change for v in c.history("task-rotate-secrets")] == ["added"]
        assert c.gc(keep_last=1)[0] == 1 and c.snapshots() == [second]
        exported, count = c.export()
        assert exported.parent == c.store_folder() and exported.is_relative_to(cache)  # not the current folder
        assert c.fsck() == [] and c.stats()["snapshots"] == 1
    with cx.open(tmp_path / "lmdb", tmp_path / "copy") as local:
        assert local.import_(exported) == second
        local.rollback(second.oid.hex(), force=True)
        assert (tmp_path / "copy" / READING).read_text() == original + LATER
        assert local.fsck() == [] and len(local.store.objects) == count


def test_search_indexes_stay_local_and_embeddings_are_shared(pg_url, org, tmp_path, monkeypatch, cache, counting):
    with cx.open(pg_url, org) as c:
        c.ingest()
        hits = c.search("credentials that leaked must be replaced", limit=1)
        assert hits[0].id == "task-rotate-secrets"
        cached = len(c.store.table(EMBEDDINGS))
        assert cached and not (org.parent / "index").exists()
    assert (c.store_folder() / "index" / "state.msgpack").exists()  # saved on close, on this machine
    # Another machine: its own cache folder, filled with the index the first one shared through the store.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))
    counting.clear()
    with cx.open(pg_url, org) as c:
        assert c.search("credentials that leaked must be replaced", limit=1)[0].id == "task-rotate-secrets"
        # every item's vector came from the store; only the query is embedded here (queries are never stored)
        assert counting == ["credentials that leaked must be replaced"]
        assert len(c.store.table(EMBEDDINGS)) == cached


def test_agent_memory_on_postgresql(pg_url, org, cache):
    with cx.open(pg_url, org) as c:
        c.ingest()
        item = c.memory.add_item("assistant", "fact", "The database is Postgres 18.")
        assert "The database is Postgres 18." in c.show("agents/assistant/memory.org")
        assert c.search("which database do we run?", agent="assistant", limit=1)[0].id == item.id
        report = c.memory.forget("assistant", item.id)
        assert "Postgres 18" not in c.show("agents/assistant/memory.org")
        c.rollback(report.before.oid.hex(), force=True)
        assert "Postgres 18" in c.show("agents/assistant/memory.org")
        assert c.fsck() == []


def test_the_cli_on_postgresql(pg_url, org, tmp_path, monkeypatch, cache, capsys):
    runner = CliRunner()

    def run(*args, where=("--store", pg_url, "--org", str(org))):
        result = runner.invoke(cli, [*args, *where])
        assert result.exit_code == 0, result.output + str(result.exception)
        return result.output

    assert "5 files: 5 parsed" in run("ingest")
    assert "snapshot" in run("snapshot", "-m", "first")
    assert run("memory", "add", "assistant", "The database is Postgres 18.").startswith("added  mem-assistant-")
    assert "added    agents/assistant/memory.org: Facts / The database is Postgres 18." in run("diff")
    run("snapshot", "-m", "second")
    monkeypatch.setenv("CORTEX_STORE", pg_url)  # the same store, named by the environment
    assert "dropped 1 snapshot," in run("gc", "--keep-last", "1", where=())
    snap = tmp_path / "snap.cortex"
    assert "exported" in run("export", "HEAD", str(snap), where=())
    assert run("fsck", where=()).startswith("ok:")
    copy = ("--store", str(tmp_path / "lmdb"), "--org", str(tmp_path / "copy"))
    assert "imported snapshot" in run("import", str(snap), where=copy)
    assert "second" in run("snapshots", where=copy)
    with pytest.raises(SystemExit) as exit_:  # the REPL's forms, as `cortex eval` runs them
        main(["eval", "--store", pg_url, '(len (find :todo "TODO"))'])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == "2"


def test_a_purge_on_one_machine_removes_the_index_another_saved(pg_url, org, tmp_path, monkeypatch, cache):
    secret = "The vault passphrase is tangerine-47."
    with cx.open(pg_url, org) as c:
        c.ingest()
        c.memory.add_item("assistant", "fact", secret)
        assert c.search("vault passphrase", limit=1)[0].text.startswith("The vault passphrase")
    saved = c.store_folder() / "index"
    assert any(b"tangerine-47" in f.read_bytes() for f in saved.rglob("*") if f.is_file())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))  # another machine purges the agent
    with cx.open(pg_url, org) as other:
        other.memory.purge("assistant", hard=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))  # back on the first machine
    with cx.open(pg_url, org) as c:
        assert c.search("vault passphrase", limit=1) == [] or "tangerine" not in c.search("vault passphrase")[0].text
        assert not any(b"tangerine-47" in f.read_bytes() for f in saved.rglob("*") if f.is_file())
