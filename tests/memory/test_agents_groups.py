"""Group commit of agent memory: concurrent saves of one agent in a process share one write of each file and
one ingest, on real files and LMDB; each caller gets its own result, and a save that conflicts fails alone.

Holding the agent's lock (as another process would) keeps the first group waiting while the others queue.
"""

import threading
import time
from datetime import datetime

import pytest

import cortex.memory.agents as agents
import cortex.workspace as workspace
from cortex.memory.agents import MemoryContext
from cortex.memory.memoryfile import MemoryConflict
from tests.conftest import held_folder

NOW = datetime(2026, 11, 21, 10, 5)


@pytest.fixture
def counted(cortex, monkeypatch):
    """The saves prepared, and the writes of memory.org, the daily-log appends and the ingests made for them."""
    calls = {"prepared": [], "memory": [], "log": [], "ingest": []}
    prepared, edit, synced = agents.prepared_save, workspace.edit_file, cortex.workspace._synced

    def preparing(*args, **kwargs):
        return calls["prepared"].append(args) or prepared(*args, **kwargs)

    def editing(root, rel, *args, **kwargs):  # memory.org, or a daily log
        calls["memory" if rel.endswith("memory.org") else "log"].append(rel)
        return edit(root, rel, *args, **kwargs)

    def syncing(scope, progress=None, written=None, *args, **kwargs):  # the sync of what a write wrote
        if written:
            calls["ingest"].append(scope)
        return synced(scope, progress, written, *args, **kwargs)

    monkeypatch.setattr(agents, "prepared_save", preparing)
    monkeypatch.setattr(workspace, "edit_file", editing)
    monkeypatch.setattr(cortex.workspace, "_synced", syncing)
    return calls


def run_together(org, agent: str, calls: dict, jobs: dict) -> dict:
    """Run each job in a thread of its own while the agent's lock is held, release it once every job has queued
    its save, and return each job's result or error."""
    results = {}

    def run(name, job):
        try:
            results[name] = job()
        except Exception as error:  # noqa: BLE001 - the test looks at it
            results[name] = error

    threads = [threading.Thread(target=run, args=item) for item in jobs.items()]
    with held_folder(org / "agents" / agent):
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(calls["prepared"]) < len(jobs):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.05)  # from prepared to queued is a step without I/O
    for thread in threads:
        thread.join()
    return results


def test_concurrent_saves_of_one_agent_share_one_write_and_one_ingest(cortex, org, counted):
    memory = cortex.memory
    jobs = {f"fact {n}": (lambda n=n: memory.add_item("assistant", "fact", f"Fact number {n} of the group.", now=NOW))
            for n in range(8)}
    jobs["session"] = lambda: memory.save_context("assistant", MemoryContext(summary="Talked.", title="Chat",
                                                                             session="s-1"), now=NOW)
    jobs["conflict"] = lambda: memory.add_item("assistant", "fact", "User prefers light mode.",
                                               id="mem-assistant-dark-mode")
    results = run_together(org, "assistant", counted, jobs)

    assert isinstance(results["conflict"], MemoryConflict)  # it failed alone
    for n in range(8):
        item = results[f"fact {n}"]
        assert item.text == f"Fact number {n} of the group." and item.id.startswith("mem-assistant-fact-number")
        assert cortex.lookup(item.id).outline == ("Facts", item.text)
    saved = results["session"]
    assert {f"Fact number {n} of the group." for n in range(8)} <= {i.text for i in saved.facts}
    text = (org / "agents/assistant/memory.org").read_text()
    assert all(text.count(f"Fact number {n} of the group.") == 1 for n in range(8))
    assert "User prefers light mode." not in text
    log = (org / "agents/assistant/logs/2026-11-21.org").read_text()
    assert log.count(":SESSION:  s-1\n") == 1 and len(cortex.find(prop=("SESSION", "s-1"))) == 1
    # The first save to queue leads alone, held by the lock; the nine queued behind it share one of each.
    assert len(counted["memory"]) <= 2 and len(counted["log"]) == 1 and len(counted["ingest"]) <= 2


def test_saves_given_together_are_written_in_order_with_one_ingest(cortex, org, counted):
    contexts = [(MemoryContext(facts=[f"Batch fact {n}."], summary=f"Entry {n}.", title=f"Entry {n}"), NOW)
                for n in range(5)]
    contexts.insert(2, (MemoryContext(summary="* a summary Org would read as an entry of its own"), NOW))
    results = cortex.memory.save_contexts("assistant", contexts)
    assert "starts with '* '" in str(results[2]) and all(isinstance(r, MemoryContext) for r in results[:2])
    assert len(counted["memory"]) == len(counted["log"]) == len(counted["ingest"]) == 1
    log = (org / "agents/assistant/logs/2026-11-21.org").read_text()
    assert [line for line in log.splitlines() if line.startswith("* ")] == [
        f"* 10:05 — Entry {n}" for n in range(5)]
    assert {f"Batch fact {n}." for n in range(5)} <= {item.text for item in results[-1].facts}
