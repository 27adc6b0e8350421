"""`cortex lsp`'s entry: plain options start the server without click; any other goes through click's command,
which says what is wrong in one line."""

import json
import subprocess
import sys

import cortex.api as cx

MAIN = "import sys; from cortex.cli import main; main(sys.argv[1:]); print(sorted({'click', 'rich'} & set(sys.modules)), file=sys.stderr)"


def message(**fields) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **fields}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_plain_options_serve_without_loading_click(tmp_path):
    store, org = tmp_path / "store", tmp_path / "org"
    org.mkdir()
    (org / "a.org").write_text("* A\n")
    with cx.open(store, org) as c:
        c.ingest()
    asked = message(id=1, method="initialize", params={"capabilities": {}, "processId": None, "rootUri": None})
    served = subprocess.run([sys.executable, "-c", MAIN, "lsp", "--stdio", "--store", str(store), "--org", str(org)],
                            input=asked, capture_output=True, timeout=120)  # stdin ends after it: so does the server
    assert b'"id": 1' in served.stdout and b'"workspaceSymbolProvider"' in served.stdout, served.stderr
    assert served.stderr.decode().splitlines()[-1] == "[]"


def test_other_options_and_a_store_that_does_not_open_are_told_by_click_s_command(tmp_path):
    afile = tmp_path / "notes.org"
    afile.write_text("* A\n")
    store, org = tmp_path / "store", tmp_path / "org"
    org.mkdir()
    (org / "a.org").write_text("* A\n")
    with cx.open(store, org) as c:
        c.ingest()
    for args, status, said in [(["--org", str(afile)], 2, "Invalid value for '--org'"),
                               (["--store", str(store), "--bogus"], 2, "No such option '--bogus'"),
                               (["--store", str(store), "--org", str(tmp_path / "elsewhere")], 1, "this store tracks the Org folder")]:
        told = subprocess.run([sys.executable, "-c", MAIN, "lsp", *args], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120)
        assert told.returncode == status and said in told.stderr and len(told.stderr.strip().splitlines()) == 1, told.stderr
