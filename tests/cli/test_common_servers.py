"""Ctrl-C is how a person stops a server: `cortex serve` and `cortex mcp --http`, real processes sent SIGINT once
they answer, stop cleanly with exit status 0 and say `stopped` (not `aborted`, not 130). They run as the installed
`cortex` script runs them, ending in `sys.exit(main())`."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from cortex.cli import interrupted
from cortex.cli.common import stopped_by_ctrl_c

RUN = "import sys; from cortex.cli import main; sys.exit(main(sys.argv[1:]))"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answering(port: int, process: subprocess.Popen, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


@pytest.mark.parametrize("command", [("serve",), ("mcp", "--http")])
def test_ctrl_c_stops_a_server_cleanly(tmp_path, command):
    (tmp_path / "org").mkdir()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", RUN, *command, "--port", str(port), "--store",
                               str(tmp_path / "store"), "--org", str(tmp_path / "org")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "HOME": str(tmp_path)})
    try:
        assert answering(port, server), server.stderr.read() if server.poll() is not None else "never answered"
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=60)
    finally:
        server.kill()
    assert server.returncode == 0, err[-800:]
    assert err.rstrip().endswith("stopped") and "aborted" not in err and "Traceback" not in err


@pytest.mark.parametrize("command", [("serve",), ("mcp", "--http")])
def test_a_ctrl_c_lost_while_a_server_started_stops_it_once_it_serves(tmp_path, command):
    """Python drops a KeyboardInterrupt raised in a weakref callback (importlib's module locks, as the server's
    modules load): what Ctrl-C set is still seen, and the server stops as if uvicorn had met it."""
    (tmp_path / "org").mkdir()
    lost = "import sys; from cortex.cli import interrupted, main; interrupted.set(); sys.exit(main(sys.argv[1:]))"
    server = subprocess.run([sys.executable, "-c", lost, *command, "--port", str(free_port()), "--store",
                             str(tmp_path / "store"), "--org", str(tmp_path / "org")],
                            capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert server.returncode == 0, server.stderr[-800:]
    assert server.stderr.rstrip().endswith("stopped") and "Traceback" not in server.stderr


def test_a_ctrl_c_a_library_turned_into_another_error_still_stops_a_server(capsys):
    """pybind11 turns a KeyboardInterrupt met while it loads a module (onnxruntime's) into an ImportError."""
    with pytest.raises(ImportError):
        with stopped_by_ctrl_c():
            raise ImportError("initialization failed")
    interrupted.set()
    try:
        with stopped_by_ctrl_c():
            raise ImportError("initialization failed")
    finally:
        interrupted.clear()
    assert capsys.readouterr().err.strip().endswith("stopped")
