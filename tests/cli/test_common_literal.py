"""Every printer of the CLI shows user text as it is: Org that looks like Rich markup (`[/]`, `[b]`, a link) is
printed letter for letter, and an escape sequence is shown, not obeyed by the terminal."""

import subprocess
import sys

import pytest

ESC = "\x1b"
HOSTILE = ["TODO [/] Project", "[[https://gnu.org][embedded link]] and [b] and [i]", "[bold red]x[/] done",
           f"colour {ESC}[31mred{ESC}[0m here", "[link] ends [/b]"]
ORG = "".join(f"* {title}\n:PROPERTIES:\n:ID: hostile-{n}\n:END:\n" for n, title in enumerate(HOSTILE))
SHOWN = ["[/] Project", "[[https://gnu.org][embedded link]] and [b] and [i]", "[bold red]x[/] done",
         "colour \\x1b[31mred\\x1b[0m here", "[link] ends [/b]"]


def cortex(folder, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from cortex.cli import main; main(sys.argv[1:])",
                           *args, "--store", str(folder / "store"), "--org", str(folder / "org")],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "org").mkdir()
    (folder / "org" / "notes.org").write_text(ORG)
    assert cortex(folder, "ingest").returncode == 0
    return folder


@pytest.mark.parametrize("args", [("query", "(level 1)"), ("find",), ("ls", "notes.org"),
                                  ("search", "embedded link project colour here done ends", "--fusion", "keyword")])
def test_titles_that_look_like_markup_or_escapes_are_printed_as_they_are(folder, args):
    done = cortex(folder, *args)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert ESC not in done.stdout + done.stderr
    for title in SHOWN:
        assert title in done.stdout, (title, done.stdout)


def test_messages_quoting_user_text_show_it_as_it_is(folder):
    added = cortex(folder, "memory", "add", "bot", f"Odd {ESC}[31mred{ESC}[0m [b] fact")
    assert added.returncode == 0 and "Odd \\x1b[31mred\\x1b[0m [b] fact" in added.stdout and ESC not in added.stdout
    assert cortex(folder, "snapshot", "-m", "[bold]release[/] [/]").returncode == 0
    log = cortex(folder, "log")
    assert log.returncode == 0 and "[bold]release[/] [/]" in log.stdout
    missing = cortex(folder, "show", "[/]nothing")
    assert missing.returncode == 1 and "[/]nothing" in missing.stderr and "Traceback" not in missing.stderr
