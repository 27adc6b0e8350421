"""Every file or stdin a command reads whole has a bound: a device that never ends (/dev/zero) or a file larger than
the bound is refused in one line naming it and the bound, after reading no more than the bound."""

import io
import os

import pytest

import cortex.api as cx
from cortex.cli import main
from cortex.reads import ORG_FILE


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bounded")
    org = folder / "org"
    org.mkdir()
    (org / "notes.org").write_text("* A note\n")
    (org / "definitions.hy").write_text(
        '(defwebhook w :path "/hooks/w" :provider standard :secret "secret://file//dev/zero")\n'
        '(defwebhook k :path "/hooks/k" :provider jwt :public-key "secret://file//dev/zero" :algorithms ["RS256"])\n')
    with cx.open(folder / "store", org) as c:
        c.ingest()
    return folder


def cortex(capsys, monkeypatch, *args, stdin=None):
    """`cortex ARGS` in this process (stdin read from `stdin`): its exit status and its stderr."""
    monkeypatch.setattr("sys.stdin", stdin or io.StringIO(""))
    capsys.readouterr()
    try:
        main(list(args))
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize("args, name, bound", [
    (["webhook", "test", "w", "--payload", "@/dev/zero"], "/dev/zero", "16.0 MiB, the most a payload may hold"),
    (["webhook", "test", "w", "--payload", "{}", "--private-key", "/dev/zero"], "/dev/zero",
     "1.0 MiB, the most a private key may hold"),
    (["webhook", "test", "w", "--payload", "{}"], "'/dev/zero'", "1.0 MiB, the most a secret may hold"),
    (["dsl", "check", "/dev/zero"], "/dev/zero", "256.0 KiB, the most a definitions file may hold"),
    (["dsl", "convert", "/dev/zero"], "/dev/zero", "256.0 KiB, the most a definitions file may hold"),
    (["eval"], "stdin", "16.0 MiB, the most forms piped in may hold"),
    (["memory", "turn", "assistant", "--session", "s", "--file", "/dev/zero"], "/dev/zero",
     "64.0 MiB, the most a turns file may hold"),
    (["repl"], "stdin", "16.0 MiB, the most forms piped in may hold"),
])
def test_a_reader_stops_at_its_bound_and_says_so(store, capsys, monkeypatch, args, name, bound):
    where = ["--store", str(store / "store"), "--org", str(store / "org")] if args[0] not in ("dsl", "repl") else \
        ["--store", str(store / "store")] if args[0] == "repl" else []
    with open("/dev/zero") as zeros:
        status, err = cortex(capsys, monkeypatch, *args[:2], *where, *args[2:], stdin=zeros)
    assert status == 1 and name in err and f"more than {bound}" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_an_export_that_is_no_export_is_not_read_past_its_first_bytes(store, capsys, monkeypatch):
    status, err = cortex(capsys, monkeypatch, "import", "/dev/zero", "--store", str(store / "store"))
    assert status == 1 and err.strip() == "cortex: /dev/zero: not a cortex snapshot export"


def test_an_org_file_larger_than_the_bound_is_not_ingested_and_keeps_its_last_version(store):
    big = store / "org" / "notes.org"
    with big.open("r+b") as file:
        file.truncate(ORG_FILE + 1)  # sparse: nothing is written, and nothing of it is read
    try:
        with cx.open(store / "store", store / "org") as c:
            report = c.ingest()
            assert [str(p) for p in report.problems] == [
                "notes.org: more than 256.0 MiB, the most an Org file may hold: not ingested"]
            assert c.show("notes.org") == "* A note\n"
    finally:
        os.truncate(big, len("* A note\n"))
