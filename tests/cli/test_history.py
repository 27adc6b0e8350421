"""History commands through the real CLI: `cortex snapshot` takes the Org folder's edits, and records nothing when
nothing changed since HEAD; `cortex gc` names its options as the REPL's (gc) does."""

from tests.cli.test_common_literal import cortex


def test_a_snapshot_holds_the_folders_edits_and_nothing_changed_takes_none(tmp_path):
    (tmp_path / "org").mkdir()
    notes = tmp_path / "org" / "a.org"
    notes.write_text("* One\n")
    first = cortex(tmp_path, "snapshot", "-m", "first")
    assert first.returncode == 0 and "1 headline" in first.stdout, first.stderr
    notes.write_text("* One\n* Two\n")  # edited in the folder, never ingested
    second = cortex(tmp_path, "snapshot", "-m", "second")
    assert second.returncode == 0 and "2 headlines  second" in second.stdout, second.stdout
    again = cortex(tmp_path, "snapshot", "-m", "again")
    assert again.returncode == 0 and again.stdout.startswith("nothing changed since HEAD (")
    log = cortex(tmp_path, "log")
    assert "second" in log.stdout and "again" not in log.stdout


def test_gc_keeps_the_newest_keep_last_as_the_repl_names_it_and_takes_keep_for_one_release(tmp_path):
    from click.testing import CliRunner

    from cortex.cli.app import cli

    (tmp_path / "org").mkdir()
    where = ["--store", str(tmp_path / "store"), "--org", str(tmp_path / "org")]
    runner = CliRunner()
    for n in range(3):
        (tmp_path / "org" / "a.org").write_text(f"* Version {n}\n")
        assert runner.invoke(cli, ["snapshot", *where]).exit_code == 0
    assert runner.invoke(cli, ["gc", "--keep-last", "2", *where]).output.startswith("dropped 1 snapshot,")
    assert runner.invoke(cli, ["gc", "--keep", "1", *where]).output.startswith("dropped 1 snapshot,")  # the old name
    shown = runner.invoke(cli, ["gc", "--help"]).output
    assert "--keep-last" in shown and "--keep " not in shown
