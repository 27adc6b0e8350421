"""`cortex query` through the real CLI: a match string that starts with `-` is a query, not an option."""

from tests.cli.test_common_literal import cortex


def test_a_match_string_starting_with_a_minus_is_a_query(tmp_path):
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "a.org").write_text("* Public\n* Private :noexport:\n** Inside\n")
    assert cortex(tmp_path, "ingest").returncode == 0
    found = cortex(tmp_path, "query", "-noexport+LEVEL=1")
    assert found.returncode == 0 and "Public" in found.stdout and "Private" not in found.stdout, found.stderr
    assert "1 headline" in found.stdout
    wrong = cortex(tmp_path, "query", "--bogus")
    assert wrong.returncode == 1 and "match string '--bogus'" in wrong.stderr
