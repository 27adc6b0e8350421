"""`cortex snapshot` through the real CLI: it takes the Org folder's edits, and records nothing when nothing
changed since HEAD."""

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
