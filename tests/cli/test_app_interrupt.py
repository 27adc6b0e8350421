"""Ctrl-C at any moment of a command ends it with one line: while Python loads, while a library loads (an import
cut halfway cannot be imported again, so what runs after it must not try), while the store is written."""

import os
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import EXAMPLES


@pytest.mark.parametrize("after", [0.0, 0.15, 0.3, 0.5, 0.8, 1.2, 1.8])
def test_ctrl_c_at_any_moment_of_an_ingest_ends_in_one_line(tmp_path, after):
    shutil.copytree(EXAMPLES, tmp_path / "org")
    started, running = os.pipe()
    ingest = subprocess.Popen([sys.executable, "-c", f"import os; os.close({running}); from cortex.cli import main; main()",
                               "ingest", "--store", str(tmp_path / "store"), "--org", str(tmp_path / "org")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(running,))
    os.close(running)
    if after:  # counted from the command's first line: CPython's own start (its site module) is no moment of
        os.read(started, 1)  # the command's, and on a busy machine it alone can outlast `after`
    time.sleep(after)
    begun = bool(select.select([started], [], [], 0)[0])  # the command's first line has run
    os.close(started)
    ingest.send_signal(signal.SIGINT)
    out, err = ingest.communicate(timeout=120)
    if ingest.returncode == 0:  # it finished first
        assert err == "" and "parsed" in out
    elif ingest.returncode == -signal.SIGINT:  # before Python listens for Ctrl-C, or once the command is done
        assert err == ""
    elif not begun:  # at once, on a busy machine: while CPython starts, it ends in its own fatal error
        assert ingest.returncode == 1 and out == "" and err.rstrip().endswith("KeyboardInterrupt"), err
    else:
        assert ingest.returncode == 130 and err.startswith("interrupted") and err.count("\n") == 1, err


def test_once_ctrl_c_was_met_the_process_ends_as_its_command_does(tmp_path):
    """A pool's worker that a KeyboardInterrupt cut off from its pool as it started (concurrent.futures records it
    only after starting it) waits for work for ever, and Python's exit waits for it: here, a thread that never
    ends stands for it. After Ctrl-C, the command's end is the process's."""
    program = ("import sys, threading; from cortex.cli import interrupted, main; "
               "threading.Thread(target=threading.Event().wait).start(); interrupted.set(); "
               "sys.exit(main(sys.argv[1:]))")
    ended = subprocess.run([sys.executable, "-c", program, "--version"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "HOME": str(tmp_path)})
    assert ended.returncode == 0 and ended.stdout.strip(), ended.stderr[-400:]
