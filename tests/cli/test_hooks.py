"""`cortex hook --install claude-code` and the hooks it installs, run as Claude Code runs them: the command written
into the project's settings, as a process, with the JSON Claude Code documents for each event on stdin
(tests/data/claude_code/); and `cortex brief`."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import cortex.api as cx
from tests.conftest import REPO
from tests.mcp_client import CORTEX

DATA = REPO / "tests" / "data" / "claude_code"
SESSION = "5f2c9a1e-7b3d-4e8a-9c61-2d4f8b0e1a37"
ENV = {**os.environ, "TZ": "UTC"}  # the transcript's times are UTC; its log says them in local time


def payload(event: str, **changes) -> str:
    """A documented payload of `event`, its transcript the fixture's."""
    data = json.loads((DATA / f"{event}.json").read_text())
    return json.dumps({**data, "transcript_path": str(DATA / "transcript.jsonl"), **changes})


def run(command: list[str], stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=cwd, env=ENV)


def test_the_installed_hooks_brief_and_log_the_session(tmp_path):
    project, org, store = tmp_path / "shop", tmp_path / "org", tmp_path / "store"
    (project / ".claude").mkdir(parents=True)
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo checked"}]}
    (project / ".claude" / "settings.json").write_text(json.dumps({"model": "opus", "hooks": {"PreToolUse": [theirs]}}))
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"docs": {"command": "docs-server"}}}))
    (org / "agents" / "shop").mkdir(parents=True)
    (org / "tasks.org").write_text("* TODO Price the new plans :shop:\n* DONE Ship it :shop:\n")
    with cx.open(store, org) as c:
        c.ingest()
        c.memory.add_item("shop", "fact", "Prices are kept in cents.")

    install = [CORTEX, "hook", "--install", "claude-code", "--store", str(store), "--org", str(org)]
    first = run(install, cwd=project)
    assert first.returncode == 0, first.stderr
    settings_bytes = (project / ".claude" / "settings.json").read_bytes()
    again = run(install, cwd=project)  # idempotent: nothing added, nothing rewritten
    assert again.returncode == 0 and again.stdout.count("unchanged") == 2
    assert (project / ".claude" / "settings.json").read_bytes() == settings_bytes
    settings = json.loads(settings_bytes)
    assert settings["model"] == "opus" and settings["hooks"]["PreToolUse"] == [theirs]
    commands = {event: [hook["command"] for group in settings["hooks"][event] for hook in group["hooks"]]
                for event in ("SessionStart", "PreCompact", "SessionEnd")}
    assert all(len(each) == 1 for each in commands.values())
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert servers["docs"] == {"command": "docs-server"}
    assert servers["cortex-shop"]["args"][:3] == ["mcp", "--store", str(store)]

    elsewhere = tmp_path / "elsewhere"  # Claude Code runs a hook in the session's folder, with its own PATH
    elsewhere.mkdir()
    started = run(shlex.split(commands["SessionStart"][0]), payload("session_start"), cwd=elsewhere)
    assert started.returncode == 0, started.stderr
    context = json.loads(started.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    assert "- Prices are kept in cents." in context["additionalContext"]
    assert "- TODO Price the new plans (tasks.org)" in context["additionalContext"]
    assert "Ship it" not in context["additionalContext"]

    compacting = run(shlex.split(commands["PreCompact"][0]), payload("pre_compact"), cwd=elsewhere)
    assert compacting.returncode == 0 and compacting.stdout == ""
    assert compacting.stderr.startswith(f"cortex: logged 4 turns of session {SESSION}")
    log = org / "agents" / "shop" / "logs" / "2026-11-20.org"
    logged = log.read_text()
    assert "* 14:05 — Checkout total rounding fix" in logged and f":SESSION:  {SESSION}" in logged
    assert "** User: The checkout test fails on CI, can you look?" in logged
    assert ":TOOLS:    Bash Edit" in logged and "\n,* It now rounds to cents" in logged
    assert "subagent" not in logged and "/cost" not in logged

    ended = run(shlex.split(commands["SessionEnd"][0]), payload("session_end"), cwd=elsewhere)
    assert ended.returncode == 0 and "logged 0 turns" in ended.stderr
    assert log.read_text() == logged  # what the compaction logged is not logged twice
    with cx.open(store, org) as c:
        assert c.log(1)[0].snapshot.message == f"shop: session {SESSION} ended"


def test_a_hook_never_stops_the_session(tmp_path):
    hook = [CORTEX, "hook", "claude-code", "SessionStart", "--store", str(tmp_path / "none")]
    missing = run(hook, payload("session_start"))
    assert (missing.returncode, missing.stdout) == (0, "")
    assert missing.stderr.count("\n") == 1 and "no store" in missing.stderr
    bad = run(hook, '{"session_id": ')
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("cortex: hook input on stdin, line 1 column 16: not JSON")
    wrong = run([*hook[:3], "PreCompact", *hook[4:]], payload("session_end"))
    assert wrong.returncode == 1 and "hook_event_name is 'SessionEnd'" in wrong.stderr


def test_install_refuses_a_settings_file_it_cannot_read_and_writes_nothing(tmp_path):
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text('{"hooks": [1, 2]}')
    refused = run([CORTEX, "hook", "--install", "claude-code", "--store", str(tmp_path / "store"), "--no-org"],
                  cwd=tmp_path)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert '"hooks" is not an object; nothing written' in refused.stderr
    assert (tmp_path / ".claude" / "settings.json").read_text() == '{"hooks": [1, 2]}'
    assert not (tmp_path / ".mcp.json").exists()


def test_a_briefing_loads_no_numpy(tmp_path):
    """`cortex brief` and the SessionStart hook run as every session starts: numpy (about 40 ms of import) comes
    with the embedder, which a briefing does not use."""
    org, store = tmp_path / "org", tmp_path / "store"
    (org / "agents" / "shop").mkdir(parents=True)
    (org / "tasks.org").write_text("* TODO Price the new plans :shop:\n")
    with cx.open(store, org) as c:
        c.ingest()
        c.memory.add_item("shop", "fact", "Prices are kept in cents.")
    briefed = run([sys.executable, "-c",
                   "import sys\nfrom cortex.cli import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
                   "    print('numpy' in sys.modules, file=sys.stderr)",
                   "brief", "shop", "--store", str(store), "--org", str(org)])
    assert "- TODO Price the new plans (tasks.org)" in briefed.stdout
    assert briefed.stderr.strip().splitlines()[-1] == "False"
