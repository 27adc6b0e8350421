"""Hard purge and hard forget leave no trace: not in the store file, the saved search indexes or the embedding
cache; a tombstone records them; the rest of history, HEAD@{N} included, is intact. On real LMDB and files."""

import re
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from datetime import datetime

import pytest
from click.testing import CliRunner

import cortex.api as cx
from cortex.backends.base import StoreBusy
from cortex.cli.app import cli
from cortex.errors import NotFound
from cortex.hashing import hash_text
from cortex.memory.agents import MemoryContext
from cortex.repl.render import Renderer
from cortex.search.embeddings import EMBEDDINGS

SECRET = "The vault passphrase is correct-horse-battery-staple-42."
KEPT = "Unrelated knowledge stays."
REVIEWER = "agents/reviewer/memory.org"
MEMORY = "agents/assistant/memory.org"
LOG = "agents/assistant/logs/2026-11-21.org"
NOW = datetime(2026, 11, 21, 10, 5)


def traces(folder, text: str) -> list[str]:
    """The files under `folder` whose raw bytes hold `text`."""
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes())


def cached(cortex, text: str) -> list[bytes]:
    """The embedding cache keys of `text`, under any embedder."""
    return [key for key in cortex.store.table(EMBEDDINGS) if key.endswith(hash_text(text))]


def history_with_secret(c):
    """Three snapshots, the secret in the reviewer's memory in the last two; a rollback and back, so HEAD's
    reflog holds more than snapshots; a search, so the index and the embedding cache hold the secret too."""
    c.snapshot("before")
    c.memory.add_item("reviewer", "fact", SECRET)
    c.snapshot("with the secret")
    c.memory.add_item("assistant", "fact", KEPT)
    c.snapshot("after")
    c.rollback("HEAD~1")
    c.rollback("HEAD@{1}")
    assert [r.text for r in c.search("vault passphrase", agent="reviewer", limit=1)] == [SECRET]
    assert cached(c, SECRET)


def moments(c) -> list[tuple[str, int]]:
    """Where HEAD was at each of its moves, by message and time (they survive a rewrite, oids do not)."""
    found = [c.resolve(f"HEAD@{{{n}}}") for n in range(1, len(c.store.refs.reflog("HEAD")))]
    return [(s.message, s.time_ns) for s in found]


def others(c) -> list[dict]:
    """Every snapshot's files that are not the reviewer's, with their documents."""
    return [{p: o for p, o in c.state(s.oid.hex()).entries.items() if not p.startswith("agents/reviewer/")}
            for s in c.snapshots()]


def test_hard_purge_leaves_no_trace_in_store_file_saved_indexes_or_embedding_cache(tmp_path, org):
    store = tmp_path / "store"
    with cx.open(store, org) as c:
        c.ingest()
        history_with_secret(c)
    assert "items.records" in traces(store, SECRET)  # the saved index holds it: the test can see a leak
    with cx.open(store, org) as c:
        report = c.memory.purge("reviewer", hard=True)
        assert report.files == [REVIEWER] and report.history.snapshots == 3
        assert cached(c, SECRET) == []
        assert traces(store, SECRET) == []
        assert [r.path for r in c.search("vault passphrase", limit=20) if r.path == REVIEWER] == []
    assert traces(store, SECRET) == [] and traces(store, KEPT)  # the index saved at close is the rebuilt one


def test_hard_purge_after_a_search_in_the_same_session_does_not_save_the_old_index_back(cortex, tmp_path):
    history_with_secret(cortex)
    cortex.memory.purge("reviewer", hard=True)
    cortex.close()
    assert traces(tmp_path / "store", SECRET) == []


def test_hard_purge_keeps_the_rest_of_history_and_records_a_tombstone(cortex, org):
    history_with_secret(cortex)
    before, kept = moments(cortex), others(cortex)
    report = cortex.memory.purge("reviewer", hard=True)
    assert moments(cortex) == before  # HEAD@{N} names the same moments, rewritten
    assert others(cortex) == kept
    assert all(REVIEWER not in cortex.state(s.oid.hex()).entries for s in cortex.snapshots())
    assert KEPT in cortex.show(MEMORY)
    [tombstone] = cortex.purges()
    assert (tombstone.what, tombstone.paths, tombstone.snapshots) == ("agent reviewer", (REVIEWER,), 3)
    assert tombstone.objects == report.history.objects > 0 and re.fullmatch(r"[^@]+@[^@]+", tombstone.by)
    assert "vault" not in repr(tombstone)
    assert cortex.fsck() == []


def test_hard_forget_of_one_item_removes_it_from_memory_logs_and_every_snapshot(cortex, org, tmp_path):
    summary = f"Talked about the vault.\n** {SECRET}   :fact:"
    cortex.memory.save_context("assistant", MemoryContext(summary=summary, title="Vault chat"), now=NOW)
    cortex.snapshot("logged")
    cortex.memory.compact("assistant", now=NOW)  # the item is now in memory.org and in the log, compacted
    cortex.memory.add_item("assistant", "fact", KEPT)
    cortex.snapshot("after")
    assert [r.text for r in cortex.search("vault passphrase", agent="assistant", type="fact", limit=1)] == [SECRET]
    before = moments(cortex)
    unrelated = {s.message: cortex.state(s.oid.hex()).entries["notes/projects.org"] for s in cortex.snapshots()}

    report = cortex.memory.forget("assistant", SECRET, hard=True)

    assert report.files == [LOG, MEMORY]
    assert report.history.snapshots == len(cortex.snapshots()) == 3  # the log held it from the first on
    for path in (org / MEMORY, org / LOG):
        assert "vault passphrase" not in path.read_text()
    assert "Talked about the vault." in (org / LOG).read_text()
    assert KEPT in cortex.show(MEMORY) and "User prefers dark mode" in cortex.show(MEMORY)
    assert moments(cortex) == before
    assert {s.message: cortex.state(s.oid.hex()).entries["notes/projects.org"] for s in cortex.snapshots()} == unrelated
    assert cached(cortex, SECRET) == []
    [tombstone] = cortex.purges()
    assert tombstone.what == "1 memory item of agent assistant"  # not its :ID:, made of the item's first words
    assert cortex.fsck() == []
    cortex.close()
    assert traces(tmp_path / "store", SECRET) == []


def test_hard_forget_by_id_removes_every_version_of_the_item(cortex, org, tmp_path):
    cortex.memory.add_item("assistant", "fact", SECRET, id="mem-vault")
    cortex.snapshot("first version")
    memory = org / MEMORY
    memory.write_text(memory.read_text().replace(SECRET, "The vault passphrase changed to rosebud-99."))
    cortex.ingest()
    cortex.snapshot("second version")
    report = cortex.memory.forget("assistant", "mem-vault", hard=True)
    assert report.ids == ["mem-vault"] and report.history.snapshots == 2
    assert cortex.purges()[0].what == "1 memory item of agent assistant"
    cortex.close()
    assert traces(tmp_path / "store", SECRET) == [] and traces(tmp_path / "store", "rosebud-99") == []


def test_hard_forget_of_a_hand_written_list_item(cortex, org, tmp_path):
    memory = org / MEMORY
    memory.write_text(memory.read_text().replace("* Facts\n", f"* Facts\n- {SECRET}\n", 1))
    cortex.ingest()
    cortex.snapshot("by hand")
    report = cortex.memory.forget("assistant", SECRET.upper(), hard=True)  # text compares as items do
    assert report.ids == [] and cortex.purges()[0].what == "1 memory item of agent assistant"
    assert "- The staging cluster lives in eu-west-1." in memory.read_text()
    cortex.close()
    assert traces(tmp_path / "store", SECRET) == []


def test_soft_forget_snapshots_first_and_rollback_brings_the_item_back(cortex, org):
    original = (org / MEMORY).read_text()
    report = cortex.memory.forget("assistant", "mem-assistant-dark-mode")
    assert report.ids == ["mem-assistant-dark-mode"] and report.history is None and cortex.purges() == []
    assert "dark mode" not in (org / MEMORY).read_text() and "dark mode" not in cortex.show(MEMORY)
    cortex.rollback(report.before.oid.hex())
    assert (org / MEMORY).read_text() == original
    with pytest.raises(NotFound, match="agent 'assistant' has no memory item 'nothing like it'"):
        cortex.memory.forget("assistant", "nothing like it")
    with pytest.raises(NotFound, match="here or in any kept snapshot"):
        cortex.memory.forget("assistant", "nothing like it", hard=True)
    assert cortex.purges() == []


@contextmanager
def another_process(store, org):
    """Another process holding the store open for the block."""
    script = textwrap.dedent(f"""
        import sys
        import cortex.api as cx
        with cx.open({str(store)!r}, {str(org)!r}):
            print("open", flush=True)
            sys.stdin.readline()
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"open\n"
        yield
    finally:
        holder.communicate(b"\n", timeout=60)


def test_hard_purge_and_gc_compact_are_refused_while_another_process_has_the_store_open(cortex, org, tmp_path):
    history_with_secret(cortex)
    listed = cortex.snapshots()
    with another_process(tmp_path / "store", org):
        for erase in (lambda: cortex.memory.purge("reviewer", hard=True),
                      lambda: cortex.memory.forget("reviewer", SECRET, hard=True),
                      lambda: cortex.gc(keep_last=1, compact=True)):
            with pytest.raises(StoreBusy):
                erase()
    assert cortex.snapshots() == listed and (org / REVIEWER).exists() and cortex.purges() == []
    assert cached(cortex, SECRET)


def test_cli_forget_purge_log_and_gc_compact(tmp_path, org):
    def run(*args):
        result = CliRunner().invoke(cli, [*args, "--store", str(tmp_path / "store"), "--org", str(org)])
        assert result.exit_code == 0, result.output + str(result.exception)
        return result.output

    run("ingest")
    run("snapshot", "-m", "first")
    assert "undo with `cortex rollback" in run("memory", "forget", "assistant", "mem-assistant-rate-limit")
    assert re.search(r"rewrote \d+ snapshots, collected \d+ objects",
                     run("memory", "forget", "assistant", "mem-assistant-dark-mode", "--hard", "--yes"))
    run("memory", "purge", "reviewer", "--hard", "--yes")
    log = " ".join(run("log").split())
    assert "purged agent reviewer (agents/reviewer/memory.org) by" in log
    assert "purged 1 memory item of agent assistant" in log
    assert log.index("agent reviewer") < log.index("1 memory item")  # newest first
    assert "compacted" in run("gc", "--keep-last", "1", "--compact")
    shown = " ".join(run("gc", "--help").split())
    assert "reflog entries within that retention" in shown and "--compact" in shown


def test_repl_views_of_forget_and_purge(cortex):
    def shown(report) -> str:
        return Renderer(None).render(report).plain

    cortex.snapshot("first")
    forgot = shown(cortex.memory.forget("assistant", "mem-assistant-dark-mode", hard=True))
    assert forgot.startswith("forgot mem-assistant-dark-mode; rewrote 1 file: agents/assistant/memory.org\n"
                             "rewrote 1 snapshot, collected ")
    assert shown(cortex.memory.forget("assistant", "mem-assistant-rate-limit")).endswith("undoes it")
    purged = shown(cortex.memory.purge("reviewer", hard=True))
    assert purged.startswith("removed 1 file: agents/reviewer/memory.org\nrewrote ")
