"""README.org is a test: the tour's Hy forms and every command line it shows run, in order, against a copy of
the bundled org/ with the example secrets `make run` sets, and none fails; every command has help text and
is shown in README.org. A block marked `:eval no` (Org Babel's own header) is shown, not run: it needs a
server, a file or an id the reader brings; one marked `:tangle FILE` is written to FILE first."""

import io
import inspect
import re
import shlex
import shutil
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cortex.cli import main
from cortex.cli.app import cli
from cortex.dsl import load_definitions
from cortex.repl.core import Session

from tests.conftest import EXAMPLES

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.org").read_text()
BLOCK = re.compile(r"^#\+begin_src (\w+)([^\n]*)\n(.*?)^#\+end_src", re.M | re.S)
SECTION = re.compile(r"^\* (.+)$", re.M)


def blocks(language: str, section: str | None = None) -> list[str]:
    """The runnable source blocks of `language` (in one section, if named), in README order."""
    found = []
    for match in BLOCK.finditer(README):
        heading = SECTION.findall(README, 0, match.start())[-1]
        if match[1] == language and ":eval no" not in match[2] and section in (None, heading):
            found.append(match[3])
    return found


def tangle(folder: Path) -> None:
    """Write the blocks marked `:tangle FILE` into `folder`, as Org Babel's tangle would."""
    for match in BLOCK.finditer(README):
        if found := re.search(r":tangle (\S+)", match[2]):
            (folder / found[1]).write_text(match[3])


def command_lines(block: str) -> list[str]:
    """The command lines of a shell block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line for line in (shlex.split(raw, comments=True) for raw in joined.splitlines()) if line]


def example_secrets() -> dict[str, str]:
    """The example secrets `make run` gives the bundled webhooks."""
    return dict(re.findall(r"(\w+)=\$\$\{\1:-([^}]+)\}", (REPO / "Makefile").read_text()))


@pytest.fixture
def walk(tmp_path, monkeypatch):
    """A folder as a newcomer's: a copy of org/, a store, a home, and the example secrets."""
    shutil.copytree(EXAMPLES, tmp_path / "org")
    tangle(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CORTEX_STORE", str(tmp_path / "store"))
    for name, value in example_secrets().items():
        monkeypatch.setenv(name, value)
    return tmp_path


def tour(walk: Path) -> str:
    """Run the tour's Hy forms in order, making the edit it asks for; what they printed."""
    out, err = io.StringIO(), io.StringIO()
    session = Session(str(walk / "store"), str(walk / "org"), out=out, err=err)
    try:
        for block in blocks("hy", "A tour"):
            assert session.execute(block), err.getvalue()
            if "(snapshot " in block:  # the edit the tour asks for
                with (walk / "org" / "notes" / "projects.org").open("a") as file:
                    file.write("* An idea from the tour\n")
    finally:
        session.close()
    return out.getvalue()


def test_the_tour_runs_form_by_form_and_again_where_it_ran(walk):
    for turns in ("1 turn", "2 turns"):  # the tour leaves the folder and the store able to take it again
        shown = tour(walk)
        assert "Rotate the webhook secrets" in shown and "signature_mismatch" in shown
        assert "** assistant: Tuesday, after the standup." in shown  # (memory-turn ...) showed the session's entry
        assert len(re.findall(rf"truncation: {turns}, .*\n.*\n0 .*Is the fix for E1042 out\?", shown)) == 2
        assert re.search(r"added\s+notes/projects\.org\s+An idea from the tour", shown)  # (diff) showed the edit
        assert (walk / "org" / "notes" / "projects.org").read_text().endswith("* An idea from the tour\n")


def test_every_command_line_runs_and_again_where_it_ran(walk, capsys, monkeypatch):
    lines = [line for block in blocks("sh") for line in command_lines(block)]
    assert len(lines) > 30 and {line[0] for line in lines} == {"cortex", "export"}
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n" * len(lines) * 2))  # a newcomer answers yes
    for line in lines * 2:
        if line[0] == "export":
            monkeypatch.setenv(*line[1].split("=", 1))
            continue
        try:
            main(line[1:])
        except SystemExit as exit_:
            assert exit_.code in (0, None), f"{shlex.join(line)} exited {exit_.code}: {capsys.readouterr().err}"


def test_the_python_and_definition_examples_run(walk):
    for block in blocks("python"):
        exec(compile(block, "README.org", "exec"), {})
    for block in blocks("hy", "Definitions: =defmemory= and =defwebhook="):
        (walk / "defs.hy").write_text(block)
        assert load_definitions(walk / "defs.hy")


def test_every_command_has_help_and_is_shown():
    def subcommands(group: click.Group):  # (name, command), each module loaded as a run would
        context = click.Context(group)
        return [(name, group.get_command(context, name)) for name in group.list_commands(context)]

    def commands(group: click.Group, path: str):
        for name, command in subcommands(group):
            yield f"{path} {name}", command
            if isinstance(command, click.Group):
                yield from commands(command, f"{path} {name}")

    for path, command in commands(cli, "cortex"):
        assert (command.help or "").strip(), f"{path} has no help"
        assert path in README, f"README.org never shows `{path}`"
    for path, group in [("cortex", cli), *((p, c) for p, c in commands(cli, "cortex") if isinstance(c, click.Group))]:
        def words(text: str) -> str:  # a wrapped line may break after a hyphen
            return re.sub(r"-\s+", "-", " ".join(text.split()))

        listed = words(CliRunner().invoke(group, ["--help"], terminal_width=80).output)
        for name, command in subcommands(group):  # each first paragraph whole, wrapped, never cut mid-phrase
            first = inspect.cleandoc(command.help).split("\n\n")[0]
            assert words(first) in listed, f"{path} {name}"


def test_make_run_gives_every_secret_the_bundled_definitions_and_the_tour_name():
    named = set(re.findall(r"secret://env/(\w+)", (EXAMPLES / "definitions.hy").read_text() + README))
    exported = {line[1].partition("=")[0] for block in blocks("sh") for line in command_lines(block)
                if line[0] == "export"}
    assert named - {"NAME"} <= example_secrets().keys() | exported
