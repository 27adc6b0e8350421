"""The prompt-toolkit REPL: through pipe input, the prompt drawn before it loads, and the real program in
a pseudo-terminal and in a real terminal (tmux)."""

import io
import os
import re
import select
import signal
import shutil
import subprocess
import sys
import termios
import threading
import time
import uuid
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.input.vt100 import raw_mode
from prompt_toolkit.output import DummyOutput

import cortex.api
import cortex.repl
from cortex.repl.early import BANNER, PROMPT, EarlyPrompt
from cortex.workspace import AnotherFolder

REPO = Path(__file__).resolve().parents[2]
PROJECTS = "notes/projects.org"
ENTER, CTRL_C, CTRL_D, TAB = "\r", "\x03", "\x04", "\t"


class Until(str):
    """A step of `drive`: wait until the output shows this text."""


def drive(store, org, *steps: str, pause: float = 0.0) -> tuple[int, str]:
    """Run the REPL on a pipe, typing `steps` in order (`Until` steps wait for output, `pause`
    waits before every step); return the exit status and what was printed."""
    out = io.StringIO()
    with create_pipe_input() as pipe:
        def type_keys():
            for step in steps:
                time.sleep(pause)
                if isinstance(step, Until):
                    deadline = time.monotonic() + 20
                    while step not in out.getvalue() and time.monotonic() < deadline:
                        time.sleep(0.01)
                else:
                    pipe.send_text(step)

        typist = threading.Thread(target=type_keys, daemon=True)
        typist.start()
        status = cortex.repl.run(store, org, input=pipe, output=DummyOutput(), out=out)
        typist.join(5)
    return status, out.getvalue()


def test_the_store_is_ready_for_the_first_form_and_ctrl_d_leaves(tmp_path, org):
    status, shown = drive(tmp_path / "store", org, '(get (stats) "files")' + ENTER + CTRL_D)
    assert status == 0
    banner, files = shown.splitlines()
    assert "(help)" in banner and "Ctrl-D" in banner
    assert files == "5"


def test_a_slow_close_says_why_the_repl_is_still_there(tmp_path, org, monkeypatch):
    from cortex import api

    close = api.Cortex.close
    monkeypatch.setattr(api.Cortex, "close", lambda self: (time.sleep(1.5), close(self)))  # a batch being embedded
    status, shown = drive(tmp_path / "store", org, '(get (stats) "files")' + ENTER + CTRL_D)
    assert status == 0 and shown.splitlines()[-1] == cortex.repl.app.CLOSING


def test_a_multi_line_form_is_read_until_complete_and_kept_in_history(tmp_path, org):
    status, shown = drive(tmp_path / "store", org, "(+ 1" + ENTER + "   2)" + ENTER + CTRL_D)
    assert status == 0 and shown.splitlines()[1:] == ["3"]
    history = (tmp_path / "store" / "repl_history").read_text()
    assert "+(+ 1\n+   2)\n" in history
    # pasted at once with no paste marks, an indented form keeps its own indentation, not a pile of margins
    status, shown = drive(tmp_path / "store", org, "(+ 1" + ENTER + "   2" + ENTER + "   3)" + ENTER + CTRL_D)
    assert status == 0 and shown.splitlines()[1:] == ["6"]
    assert "+(+ 1\n+   2\n+   3)\n" in (tmp_path / "store" / "repl_history").read_text()



def test_a_pasted_document_is_recalled_in_the_session_but_not_kept_in_the_history_file(tmp_path, org):
    from cortex.repl.app import HISTORY_ENTRY_CHARS, Startup, StoreHistory
    from cortex.repl.core import Session

    startup = Startup(lambda: Session(tmp_path / "store", org, ingest=False))
    startup.made.set_result(startup.make_session())
    history = StoreHistory(startup)
    pasted = '(len "' + "x" * HISTORY_ENTRY_CHARS + '")'
    history.append_string(pasted)
    history.append_string("(+ 2 2)")
    assert list(history.get_strings()) == [pasted, "(+ 2 2)"]
    kept = (tmp_path / "store" / "repl_history").read_text()
    assert "xxxx" not in kept and "+(+ 2 2)\n" in kept
    startup.session.close()


def test_ctrl_c_cancels_the_entry_and_the_session_goes_on(tmp_path, org):
    status, shown = drive(tmp_path / "store", org, "(setv x 10" + ENTER + "(/ x" + CTRL_C, "(+ 2 3)" + ENTER,
                          "(undefined)" + ENTER + "(* 2 4)" + ENTER + CTRL_D)
    assert status == 0
    assert shown.splitlines()[1:] == ["5", "<input>:1:2: NameError: 'undefined' is not defined", "8"]


def test_tab_completes_an_id(tmp_path, org):
    status, shown = drive(tmp_path / "store", org, '(get (stats) "ids")' + ENTER, Until("14\n"),
                          '(lookup "task-pa', TAB, '")' + ENTER, CTRL_D, pause=0.2)
    assert status == 0
    assert "** DONE Parse Org files into headline objects" in shown


def test_a_store_that_cannot_open_is_explained_and_hy_still_works(tmp_path, org):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "data.mdb").write_bytes(b"")  # lost its contents
    status, shown = drive(tmp_path / "store", org, "(stats)" + ENTER + "(+ 1 2)" + ENTER + CTRL_D)
    assert status == 0
    assert shown.splitlines()[1].startswith(f"error: {tmp_path / 'store'}: store damaged: its data file")
    assert shown.splitlines()[2:] == ["3"]


def test_a_store_tracking_another_folder_is_refused_before_the_prompt(tmp_path, org):
    other = tmp_path / "other"
    shutil.copytree(org, other)
    assert drive(tmp_path / "store", org, CTRL_D)[0] == 0
    with pytest.raises(AnotherFolder, match=f"tracks the Org folder {org}, not {other}; open that folder, or give"):
        drive(tmp_path / "store", other, "(stats)" + ENTER + CTRL_D)
    assert drive(tmp_path / "store", org, CTRL_D)[0] == 0  # its own folder opens at once: its copy names the store


# --- the prompt drawn before prompt-toolkit loads ---------------------------------------------------

ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\r")


@pytest.fixture
def terminal():
    """A pseudo-terminal: (the side a program uses, the side that types and reads the screen)."""
    program, typist = os.openpty()[::-1]
    yield program, typist
    os.close(program)
    os.close(typist)


def pending(fd: int, seconds: float = 0.2) -> bytes:
    """What can be read from `fd` within `seconds` (nothing when nothing comes)."""
    return os.read(fd, 65536) if select.select([fd], [], [], seconds)[0] else b""


def test_the_early_prompt_echoes_text_until_another_key_and_hands_over_every_key_read(terminal):
    program, typist = terminal
    before = termios.tcgetattr(program)
    with EarlyPrompt(program, program) as early:
        assert pending(typist).decode().replace("\r", "") == f"{BANNER}\n{PROMPT}"
        os.write(typist, "(+ 1 é".encode())
        screen_until(typist, lambda text: text.endswith(f"{PROMPT}(+ 1 é"), seconds=5)
        os.write(typist, b"\x7f\x7f")  # rub-outs edit the line
        screen_until(typist, lambda text: text.endswith(f"{PROMPT}(+ 1"), seconds=5)
        os.write(typist, b" 2\r)\x03")  # Enter: the text before it is echoed, nothing after it is acted on
        screen_until(typist, lambda text: text.endswith(f"{PROMPT}(+ 1 2"), seconds=5)
        os.write(typist, b"3\r")  # no longer read: left for prompt-toolkit
        assert pending(typist) == b""
        assert early.hand_over() == "(+ 1 é\x7f\x7f 2\r)\x03".encode()
        assert termios.tcgetattr(program) == before  # what prompt-toolkit saves and restores between entries
        assert pending(typist) == b"\r"  # the cursor back at the start of the prompt line, to draw over it
        with raw_mode(program):
            assert pending(program) == b"3\r"
    assert termios.tcgetattr(program) == before


def test_the_prompt_path_loads_no_store_no_hy_and_no_typing(tmp_path, org):
    """What runs before the prompt (the command line, the folder check, the early prompt) is the REPL's first
    impression: a second start, on a store that knows the working copy, loads none of these."""
    with cortex.api.open(tmp_path / "store", org) as cx:
        cx.sync()  # the folder becomes the store's working copy, as at the REPL's first start
    code = ("import sys, cortex.repl.__main__ as main, cortex.repl.early; "
            f"main.check_folder({str(tmp_path / 'store')!r}, {str(org)!r}); print(*sorted(sys.modules))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                cwd=tmp_path).stdout.split())
    assert {"cortex.location", "cortex.repl.early", "json"} <= loaded  # the record was read
    assert not loaded & {"cortex.backends.base", "lmdb", "hy", "prompt_toolkit", "typing", "dataclasses", "inspect",
                         "datetime"}


def test_leaving_the_early_prompt_restores_the_terminal(terminal):
    program, _ = terminal
    before = termios.tcgetattr(program)
    with EarlyPrompt(program, program):
        assert termios.tcgetattr(program) != before
    assert termios.tcgetattr(program) == before


def screen_until(typist: int, done, seconds: float = 20) -> str:
    """The text a program wrote to its terminal, without control sequences, once `done(text)` holds;
    cursor-position queries are answered as a terminal would."""
    seen, deadline = b"", time.monotonic() + seconds
    while not done(ESCAPES.sub("", seen.decode(errors="replace"))) and time.monotonic() < deadline:
        chunk = pending(typist, 0.05)
        seen += chunk
        for _ in range(chunk.count(b"\x1b[6n")):
            os.write(typist, b"\x1b[1;1R")
    text = ESCAPES.sub("", seen.decode(errors="replace"))
    assert done(text), f"the terminal shows:\n{text}"
    return text


def test_keys_typed_at_the_early_prompt_are_evaluated_and_the_terminal_is_left_as_it_was(tmp_path, org, terminal):
    program, typist = terminal
    before = termios.tcgetattr(program)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "PYTHONFAULTHANDLER": "1"}  # a REPL that does not end is made to say where each thread stands
    repl = subprocess.Popen([sys.executable, "-m", "cortex.repl", "--store", str(tmp_path / "store"), str(org)],
                            stdin=program, stdout=program, stderr=program, env=env)
    try:
        screen_until(typist, lambda text: text.endswith(PROMPT))
        os.write(typist, b"(+ 1\r 2)\r")  # at once: before prompt-toolkit is up to read keys
        # Ctrl-D once the ingest line is out, so that it does not meet the terminal while the line is printed.
        screen = screen_until(typist, lambda text: "\n3\n" in text and "ingested" in text
                              and "cortex=>" in text.rpartition("ingested")[2])
        assert "cortex=> (+ 1\n      ..  2)\n" in screen
        os.write(typist, b"\x04")
        try:
            assert repl.wait(20) == 0
        except subprocess.TimeoutExpired:
            repl.send_signal(signal.SIGABRT)
            shown = b"".join(iter(lambda: pending(typist, 1.0), b"")).decode(errors="replace")
            pytest.fail(f"the REPL did not end after Ctrl-D; its threads then:\n{shown[-6000:]}")
    finally:
        repl.kill()
    assert termios.tcgetattr(program) == before


# --- the real program in a real terminal -------------------------------------------------------------

class Tmux:
    """One tmux server of our own (a socket named for this test alone: a server a killed run left behind, or
    another test's, is never the one typed into), with one window running a command."""

    def __init__(self, command: str, env: dict):
        self.socket = f"cortex-test-{uuid.uuid4().hex}"
        self.env = env
        made = self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "repl", "-x", "120", "-y", "50", command)
        assert made.returncode == 0, made.stderr

    def tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], env=self.env, capture_output=True, text=True,
                              timeout=20)

    def type(self, text: str, *keys: str) -> None:
        if text:
            self.tmux("send-keys", "-t", "repl", "-l", text)
        for key in keys:
            self.tmux("send-keys", "-t", "repl", key)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "repl", "-S", "-500").stdout

    def wait_for(self, text: str, seconds: float = 60) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{text!r} did not appear; the screen shows:\n{self.screen()}")

    def running(self) -> bool:
        return self.tmux("has-session", "-t", "repl").returncode == 0

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)")
def test_a_session_in_a_real_terminal(tmp_path, org):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "TERM": "xterm-256color"}
    command = f"cd {REPO} && exec {sys.executable} -m cortex.repl --store {tmp_path / 'store'} {org}"
    term = Tmux(command, env)
    try:
        screen = term.wait_for("cortex=>")
        term.wait_for("ingested 5 Org files from")  # above the prompt, once the background open is done

        term.type("(setv todo (find", "Enter")
        term.wait_for("cortex=> (setv todo (find\n      ..")  # still open: Enter gave a continuation line
        term.type(':todo "TODO"))', "Enter")
        term.type("todo", "Enter")
        screen = term.wait_for("task-rotate-secrets")
        assert "0  notes/projects.org:25  Memory store / Rotate the webhook secrets" in screen

        term.type('(show "task-pa', "Tab")
        term.wait_for('(show "task-parse-org')
        term.type('")', "Enter")
        term.wait_for("** DONE Parse Org files into headline objects")

        term.type("(+ 1 (foo))", "Enter")
        term.wait_for("<input>:1:7: NameError: 'foo' is not defined")

        term.type('(snapshot "first")', "Enter")
        term.wait_for("message    first")
        projects = org / PROJECTS
        original = projects.read_text()
        projects.write_text(original.replace("Rotate the webhook secrets", "Rotate nothing"))
        term.type('(rollback "HEAD")', "Enter")
        term.wait_for("snapshot them first (:keep True) or discard them (:force True)")
        term.type('(rollback "HEAD" :force True)', "Enter")
        term.wait_for("wrote 1 file: notes/projects.org")
        assert projects.read_text() == original

        term.type("", "C-d")
        deadline = time.monotonic() + 10
        while term.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not term.running(), "Ctrl-D did not leave the REPL"
    finally:
        term.close()
