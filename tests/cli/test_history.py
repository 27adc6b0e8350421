"""`cortex snapshot`, `diff`, `log` and `history` through the real CLI: a snapshot takes the Org folder's edits (and
nothing when nothing changed since HEAD); each change shows with its text, newest first; `cortex gc` names
its options as the REPL's (gc) does."""

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


def test_diff_log_and_history_show_each_change_with_its_text_literally_newest_first(tmp_path):
    (tmp_path / "org").mkdir()
    notes = tmp_path / "org" / "a.org"
    notes.write_text("* TODO [/] Plan\n:PROPERTIES:\n:ID: plan\n:END:\nold [b] line\n")
    assert cortex(tmp_path, "snapshot", "-m", "first").returncode == 0
    notes.write_text("* TODO [/] Plan\n:PROPERTIES:\n:ID: plan\n:END:\nnew [bold red]x[/] line\n\x1b[31m\n")
    assert cortex(tmp_path, "snapshot", "-m", "second").returncode == 0
    diff = cortex(tmp_path, "diff", "HEAD~1", "HEAD", "--patch")
    assert diff.returncode == 0 and "\x1b" not in diff.stdout, diff.stderr  # piped: no colour, escapes shown
    assert diff.stdout.splitlines() == ["changed  a.org: [/] Plan [plan] (text)", "--- a/a.org: [/] Plan",
                                        "+++ b/a.org: [/] Plan", "@@ -2,4 +2,5 @@", " :PROPERTIES:",
                                        " :ID: plan", " :END:",
                                        "-old [b] line", "+new [bold red]x[/] line", "+\\x1b[31m"]
    log = cortex(tmp_path, "log", "--patch").stdout.splitlines()
    assert log[0].startswith("snapshot ") and log[0].endswith("second [1 changed]")
    assert log[1:11] == diff.stdout.splitlines()
    assert log[11].endswith("first [1 added]") and log[12] == "added    a.org: [/] Plan [plan]"
    history = cortex(tmp_path, "history", "plan", "--patch").stdout.splitlines()
    assert history[0].endswith("a.org: [/] Plan (text)") and history[1:3] == diff.stdout.splitlines()[1:3]
    assert history[-9].endswith("a.org: [/] Plan (added)")
    assert history[-8:-6] == ["--- /dev/null", "+++ b/a.org: [/] Plan"]
    table = cortex(tmp_path, "history", "plan").stdout.splitlines()  # newest first, as the log
    assert table[2].split()[-1] == "text" and table[3].split()[-1] == "added"
