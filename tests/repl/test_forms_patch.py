"""The REPL's (diff), (log) and (history) take :patch True, as the CLI takes --patch: each change with its text,
printed as it is; history lists newest first, as (log)."""

from tests.repl.test_core import Transcript


def test_diff_log_and_history_show_each_change_with_its_text(tmp_path):
    org = tmp_path / "org"
    org.mkdir()
    (org / "a.org").write_text("* Plan [b]\n:PROPERTIES:\n:ID: plan\n:END:\nold line\n")
    repl = Transcript(tmp_path / "store", org)
    try:
        repl('(snapshot "first")')
        (org / "a.org").write_text("* Plan [b]\n:PROPERTIES:\n:ID: plan\n:END:\nnew [/] line\n")
        repl("(ingest)")
        lines = repl("(diff :patch True)").splitlines()
        assert lines == ["changed  a.org: Plan [b] [plan] (text)", "--- a/a.org: Plan [b]", "+++ b/a.org: Plan [b]",
                         "@@ -2,4 +2,4 @@", " :PROPERTIES:", " :ID: plan", " :END:", "-old line", "+new [/] line"]
        repl('(snapshot "second")')
        logged = repl("(log :patch True)").splitlines()
        assert logged[0].endswith("second [1 changed]") and logged[1:10] == lines
        assert logged[10].endswith("first [1 added]")
        versions = repl('(history "plan" :patch True)').splitlines()
        assert versions[0].endswith("a.org: Plan [b] (text)") and versions[1:3] == lines[1:3]
        table = repl('(history "plan")').splitlines()  # newest first, as (log)
        assert [row.split()[4] for row in table[1:]] == ["text", "added"]
        assert repl('(diff :patch True)') == "no changes\n"
    finally:
        repl.session.close()
