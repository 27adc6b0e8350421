"""A working copy finds its own store, as git finds its repository: every command run in it (or below it) uses the
store its record names and syncs that copy by default; a command that only reads never makes a store."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


def cortex(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    """The real CLI in `cwd`, with `home` as the user's home and no store named by the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("CORTEX_STORE", "XDG_DATA_HOME", "CORTEX_NO_ORG")}
    env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-c", "import sys; from cortex.cli import main; main(sys.argv[1:])",
                           *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_commands_in_a_working_copy_use_its_store_and_sync_it(store_at, tmp_path):
    home, laptop = tmp_path / "home", tmp_path / "home" / "notes-laptop"
    (tmp_path / "org").mkdir(parents=True)
    home.mkdir()
    (tmp_path / "org" / "a.org").write_text("* One\nFirst.\n* Two\n")
    made = cortex(tmp_path, home, "checkout", str(laptop), "--store", store_at, "--org", str(tmp_path / "org"))
    assert made.returncode == 0, made.stderr
    (laptop / "a.org").write_text("* One\nFirst, edited on the laptop.\n* Two\n")
    (laptop / "deep" / "er").mkdir(parents=True)

    synced = cortex(laptop, home, "sync")  # no --store, no folder: the copy and its store
    assert synced.returncode == 0 and "1 sent" in synced.stdout, synced.stdout + synced.stderr
    assert cortex(laptop / "deep" / "er", home, "conflicts").stdout == "no conflicts\n"
    again = cortex(laptop, home, "checkout", str(laptop))  # checking out again brings it up to date
    assert again.returncode == 0 and again.stdout.startswith(f"a working copy already, synced: {laptop}: 0 sent")
    shown = cortex(laptop / "deep", home, "show", "a.org")
    assert "edited on the laptop" in shown.stdout, shown.stderr
    assert not (home / ".local").exists()  # no other store was made

    elsewhere = cortex(home, home, "show", "a.org")  # outside the copy: the default store, which there is not
    assert elsewhere.returncode == 1 and "no store here" in elsewhere.stderr


@pytest.mark.parametrize("args", [("stats",), ("conflicts",), ("log",), ("query", "(todo)"), ("find",),
                                  ("search", "anything"), ("diff",), ("review",), ("memory", "list")])
def test_a_command_that_only_reads_never_makes_a_store(tmp_path, args):
    done = cortex(tmp_path, tmp_path, *args)
    store = tmp_path / ".local" / "share" / "cortex" / "store"
    assert done.returncode == 1 and done.stderr.startswith(f"cortex: {store}: no store here; make one by ")
    assert "Traceback" not in done.stderr and not (tmp_path / ".local").exists()
