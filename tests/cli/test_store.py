"""The store's commands as the REPL's forms show the same things: `cortex ls FILE` and (ls FILE)."""

import io

from click.testing import CliRunner

from cortex.cli.app import cli
from cortex.repl import eval_source

PROJECTS = "notes/projects.org"


def test_ls_of_a_file_shows_the_outline_the_repl_shows(tmp_path, org):
    (org / PROJECTS).write_text((org / PROJECTS).read_text() + "* TODO [1/2] Ship [b] it [%]  :ops:\n")
    where = ["--store", str(tmp_path / "store"), "--org", str(org)]
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", *where]).exit_code == 0
    shown = runner.invoke(cli, ["ls", PROJECTS, *where])
    assert shown.exit_code == 0, shown.output
    lines = [line.rstrip() for line in shown.output.splitlines()]
    assert lines[3].split() == [f"{PROJECTS}:25", "**", "TODO", "[#A]", "Rotate", "the", "webhook", "secrets",
                                ":webhooks:security:"]
    assert lines[-1].split() == [f"{PROJECTS}:50", "*", "TODO", "[1/2]", "Ship", "[b]", "it", "[%]", ":ops:"]
    out = io.StringIO()
    assert eval_source(f'(ls "{PROJECTS}")', tmp_path / "store", org, out=out, err=io.StringIO()) == 0
    assert [line.rstrip() for line in out.getvalue().splitlines()] == lines
