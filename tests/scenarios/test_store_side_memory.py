"""Agent memory and webhook routing with no Org folder on this machine: writes commit to the store's working state."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import replace
from datetime import datetime

import httpx
import pytest

import cortex.api as cx
from cortex.cli import main
from cortex.errors import NotFound, UserError
from cortex.ingest import working_tree
from cortex.memory.agents import MemoryContext
from cortex.query import render_file
from cortex.webhooks import verifier_for
from cortex.webhooks.deliveries import DeliveryLog

MAIN = "import sys; from cortex.cli import main; main(sys.argv[1:])"
SECRET = "whsec_c3RyaXBlLXMzY3IzdA=="
NOW = datetime(2026, 11, 20, 16, 45)


@pytest.fixture
def bare(store_at, tmp_path, monkeypatch):
    """A cortex on a store with no Org folder on this machine (run from an empty folder)."""
    monkeypatch.chdir(tmp_path)
    with cx.open(store_at, folder=False) as c:
        yield c
    assert not (tmp_path / "org").exists()


def text_of(c, path: str) -> str:
    return render_file(c.store, working_tree(c.store), path)


def test_no_folder_mode_refuses_what_needs_a_folder(bare, tmp_path):
    assert bare.root is None
    for call in (bare.ingest, bare.org_files, lambda: bare.sync()):
        with pytest.raises(UserError, match="needs an Org folder, and this session has none"):
            call()
    with pytest.raises(UserError, match="choose one"):
        cx.open(in_memory=True, org_root=tmp_path / "org", folder=False)


def test_add_save_and_forget_commit_to_the_working_state(bare):
    memory = bare.memory
    fact = memory.add_item("assistant", "fact", "Release 2.3.1 contains the fix for E1042.", now=NOW)
    memory.add_item("assistant", "procedure", "Run the migration twice.", now=NOW)
    context = memory.load_context("assistant")
    assert [i.text for i in context.facts] == [fact.text] and len(context.procedures) == 1
    context.patterns.append("Staging breaks on Fridays.")
    context.summary, context.title, context.session = "Looked at E1042.", "Review", "s-1"
    saved = memory.save_context("assistant", context, now=NOW)
    assert [i.text for i in saved.patterns] == ["Staging breaks on Fridays."]
    org = text_of(bare, "agents/assistant/memory.org")
    assert "Release 2.3.1" in org and "Run the migration twice." in org and "Staging breaks" in org
    log = text_of(bare, "agents/assistant/logs/2026-11-20.org")
    assert log.startswith("#+TITLE: assistant — 2026-11-20\n") and "* 16:45 — Review\n" in log
    assert ":SESSION:  s-1\n" in log
    assert memory.list_agent_contexts() == ["assistant"] and memory.get_storage_stats()["assistant"].logs == 1
    assert "Release 2.3.1" in memory.show("assistant")

    report = memory.forget("assistant", "Run the migration twice.")
    assert report.files == ["agents/assistant/memory.org"] and report.before is not None
    assert "Run the migration" not in text_of(bare, "agents/assistant/memory.org")
    assert memory.load_context("assistant").procedures == []
    with pytest.raises(NotFound):
        memory.forget("assistant", "never said")


def test_a_save_in_conflict_is_refused_alone(bare):
    memory = bare.memory
    memory.add_item("a", "fact", "The sky is blue.", id="sky", now=NOW)
    first, second = memory.load_context("a"), memory.load_context("a")
    first.facts[0] = replace(first.facts[0], text="The sky is grey.")
    memory.save_context("a", first, now=NOW)
    second.facts[0] = replace(second.facts[0], text="The sky is green.")
    with pytest.raises(UserError):
        memory.save_context("a", second, now=NOW)
    assert [i.text for i in memory.load_context("a").facts] == ["The sky is grey."]


def test_compact_purge_and_delete_without_a_folder(bare):
    memory = bare.memory
    context = MemoryContext(title="Review", summary="** Release 2.3.1 fixes E1042.                 :fact:")
    memory.save_context("assistant", context, now=NOW)
    report = memory.compact("assistant", now=datetime(2026, 11, 21, 9, 0))
    assert [item.text for _, item in report.moved] == ["Release 2.3.1 fixes E1042."] and report.deleted_logs == []
    assert ":COMPACTED:" in text_of(bare, "agents/assistant/logs/2026-11-20.org")
    assert memory.compact("assistant", now=datetime(2026, 11, 21, 9, 0)).moved == []  # not again
    assert memory.delete_context("assistant") and "agents/assistant/memory.org" not in bare.working().entries
    assert not memory.delete_context("assistant")
    purged = memory.purge("assistant")
    assert purged.files == ["agents/assistant/logs/2026-11-20.org"] and memory.list_agent_contexts() == []
    with pytest.raises(NotFound, match="in the store's working state"):
        memory.compact("assistant")


def test_processes_adding_at_once_lose_nothing_and_a_checkout_shows_them(store_at, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = f"""
import sys
import cortex.api as cx
with cx.open({store_at!r}, folder=False) as c:
    for k in range(8):
        c.memory.add_item("shared", "fact", f"Worker {{sys.argv[1]}} learned fact {{k}}.")
"""
    workers = [subprocess.Popen([sys.executable, "-c", script, str(n)]) for n in range(3)]
    assert [w.wait(timeout=180) for w in workers] == [0, 0, 0]
    expected = sorted(f"Worker {n} learned fact {k}." for n in range(3) for k in range(8))
    with cx.open(store_at, folder=False) as c:
        threads = [threading.Thread(target=c.memory.add_item, args=("shared", "fact", f"Thread {n} fact."))
                   for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        expected = sorted(expected + [f"Thread {n} fact." for n in range(4)])
        assert sorted(i.text for i in c.memory.load_context("shared").facts) == expected
    main(["checkout", str(tmp_path / "copy"), "--store", store_at])
    text = (tmp_path / "copy" / "agents" / "shared" / "memory.org").read_text()
    assert all(fact in text for fact in expected)
    assert not (tmp_path / "org").exists()


def test_the_memory_cli_works_with_no_org(store_at, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main(["memory", "add", "bot", "Tea is served at four.", "--store", store_at, "--no-org"])
    main(["memory", "inspect", "bot", "--store", store_at, "--no-org"])
    assert "Tea is served at four." in capsys.readouterr().out
    assert not (tmp_path / "org").exists()


def test_the_repl_with_no_org_writes_memory_store_side_and_refuses_ingest_in_one_line(store_at, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    cortex = [sys.executable, "-c", MAIN]
    added = subprocess.run([*cortex, "--store", store_at, "--no-org", "-e",
                            '(memory-add "bot" "fact" "Tea is served at four.")'], cwd=run, capture_output=True, text=True)
    assert added.returncode == 0, added.stderr
    piped = subprocess.run([*cortex, "repl", "--store", store_at], input='(memory-inspect "bot")\n(ingest)\n', cwd=run,
                           env={**os.environ, "CORTEX_NO_ORG": "1"}, capture_output=True, text=True)
    assert "Tea is served at four." in piped.stdout and piped.returncode == 1
    assert "ingest needs an Org folder" in piped.stderr and "Traceback" not in piped.stderr
    assert list(run.iterdir()) == []


def test_cortex_serve_with_no_org_routes_into_the_working_state(store_at, tmp_path, monkeypatch):
    seed = tmp_path / "seed"  # the Org folder of another machine: it defines the webhook, then is gone
    (seed / "notes").mkdir(parents=True)
    (seed / "notes" / "hooks.org").write_text(
        '* Hooks\n#+begin_src hy :cortex yes\n(defwebhook stripe-payments :path "/hooks/stripe" :provider stripe '
        ':secret "secret://env/STRIPE_WEBHOOK_SECRET" :agent assistant)\n#+end_src\n')
    with cx.open(store_at, seed) as c:
        c.ingest()
    shutil.rmtree(seed)
    run = tmp_path / "run"
    run.mkdir()
    process = subprocess.Popen([sys.executable, "-c", MAIN, "serve", "--store", store_at, "--no-org", "--port", "0"],
                               cwd=run, env={**os.environ, "STRIPE_WEBHOOK_SECRET": SECRET},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, port = [], None
    try:
        for line in process.stdout:
            output.append(line)
            if found := re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line):
                port = int(found[1])
                break
        assert port is not None, "".join(output)
        body = json.dumps({"id": "evt_1", "type": "payment_intent.succeeded"}).encode()
        headers = {"Content-Type": "application/json", **verifier_for("stripe", SECRET).sign(body)}
        answer = httpx.post(f"http://127.0.0.1:{port}/hooks/stripe", content=body, headers=headers, timeout=30)
        assert answer.status_code == 200 and answer.json()["outcome"] == "routed", answer.text
    finally:
        process.terminate()
        process.wait(30)
    assert not seed.exists() and list(run.iterdir()) == []
    # The other webhook commands on that machine: a test delivery is routed store-side too, logs list both,
    # a redelivery routes again; editing definitions needs the Org folder, and says so.
    command = [sys.executable, "-c", MAIN, "webhook"]
    where = ["--store", store_at, "--no-org"]
    env = {**os.environ, "STRIPE_WEBHOOK_SECRET": SECRET}
    tested = subprocess.run([*command, "test", "stripe-payments", "--event", "payment_intent.succeeded",
                             "--payload", '{"id": "evt_2", "type": "payment_intent.succeeded"}', *where],
                            cwd=run, env=env, capture_output=True, text=True)
    assert tested.returncode == 0 and "routed" in tested.stdout, tested.stdout + tested.stderr
    logged = subprocess.run([*command, "logs", *where], cwd=run, env=env, capture_output=True, text=True).stdout
    first = re.search(r"[0-9a-f]{24}", logged)[0]
    again = subprocess.run([*command, "redeliver", first, *where], cwd=run, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "routed to agent assistant" in again.stdout, again.stdout + again.stderr
    refused = subprocess.run([*command, "remove", "stripe-payments", *where], cwd=run, env=env,
                             capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "needs an Org folder" in refused.stderr
    assert list(run.iterdir()) == []
    with cx.open(store_at, folder=False) as c:
        delivery = DeliveryLog(c.store).deliveries()[0]
        logs = [p for p in c.working().entries if p.startswith("agents/assistant/logs/")]
        assert len(logs) == 1 and f":SESSION:  {delivery.id}\n" in text_of(c, logs[0])
        assert len(DeliveryLog(c.store).deliveries()) == 3 and text_of(c, logs[0]).count(":SESSION:") == 3
        assert delivery.outcome == "routed"
        monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", SECRET)
        service = c.webhook_service()  # recovery reads the log from the working state
        assert service._entry_written(delivery) and not service._entry_written(replace(delivery, id="0" * 24))


def test_rollback_without_a_folder_moves_the_refs_and_copies_receive_it(bare, tmp_path):
    from cortex.history import DirtyWorkingFiles

    memory = bare.memory
    memory.add_item("assistant", "fact", "Keep this one.", now=NOW)
    first = bare.snapshot("one fact")
    memory.add_item("assistant", "fact", "An agent's mistake.", now=NOW)
    copy = tmp_path / "copy"
    bare.checkout(copy)
    with pytest.raises(DirtyWorkingFiles) as err:  # the mistake is in no snapshot
        bare.rollback(first.oid.hex())
    assert err.value.paths == ["agents/assistant/memory.org"]
    report = bare.rollback(first.oid.hex(), keep=True)
    assert report.kept is not None and bare.resolve("HEAD") == first
    assert "mistake" not in text_of(bare, "agents/assistant/memory.org")
    bare.sync(copy)
    assert "mistake" not in (copy / "agents/assistant/memory.org").read_text()
    bare.rollback(report.kept.oid.hex())  # the state it kept is one rollback away
    assert "mistake" in text_of(bare, "agents/assistant/memory.org")


def test_hard_forget_and_purge_without_a_folder_leave_no_trace_in_history(bare):
    from cortex.history import reach

    memory = bare.memory
    secret = memory.add_item("assistant", "fact", "The vault code is 4471.", now=NOW)
    memory.add_item("assistant", "fact", "Deploys happen on Tuesdays.", now=NOW)
    memory.add_item("ops", "fact", "The pager rotates weekly.", now=NOW)
    bare.snapshot("with the secret")
    memory.forget("assistant", secret.id, hard=True)

    def anywhere(text: str) -> bool:
        roots = [snap.root for snap in bare.snapshots()] + [bare.store.refs.get("working")]
        return any(text.encode() in bare.store.objects[oid].encoded for oid in reach(bare.store, roots))

    assert not anywhere("vault code") and anywhere("Deploys happen on Tuesdays.")
    memory.purge("ops", hard=True)
    assert not anywhere("pager rotates") and anywhere("Deploys happen on Tuesdays.")
    assert bare.fsck() == []
