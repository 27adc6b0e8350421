"""--valid-at and --all on the commands that read items (search, query, find), and the chain `show` and `history`
tell, through the real CLI entry point on a real store."""

import pytest

import cortex.api as cx
from cortex.cli import main
from tests.conftest import with_chain


@pytest.fixture
def cli(tmp_path, org, capsys):
    """`cortex ARGS --store ... --org ...` run by the CLI's entry point: (exit status, stdout, stderr)."""
    with_chain(org)
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        c.snapshot("with the chain")

    def run(*args):
        capsys.readouterr()
        try:
            main([*args, "--store", str(tmp_path / "store"), "--org", str(org)])
            status = 0
        except SystemExit as exited:
            status = exited.code
        out = capsys.readouterr()
        return status, out.out, out.err

    return run


def test_search_query_and_find_keep_current_items_unless_asked(cli):
    _, now, _ = cli("search", "which database do we run?", "--agent", "assistant")
    assert "Postgres 17." in now and "Postgres 16." not in now and "Postgres 15." not in now
    _, then, _ = cli("search", "which database do we run?", "--agent", "assistant", "--valid-at", "2026-10-15")
    assert "Postgres 16." in then and "Postgres 17." not in then
    _, every, _ = cli("search", "which database do we run?", "--agent", "assistant", "--all", "--as-of", "HEAD")
    assert all(f"Postgres {n}." in every for n in (15, 16, 17))
    _, found, _ = cli("query", '(heading "Postgres")')
    assert "Postgres 17." in found and "Postgres 16." not in found and "1 headline" in found
    _, found, _ = cli("query", "+ARCHIVE", "--all")
    assert "3 headlines" in found
    _, found, _ = cli("query", '(heading "Postgres")', "--valid-at", "2026-11-03 13:59")
    assert "Postgres 16." in found and "1 headline" in found
    _, found, _ = cli("find", "postgres", "--valid-at", "2026-09-30")
    assert "Postgres 15." in found and "1 headline" in found
    _, found, _ = cli("find", "postgres", "--all")
    assert "3 headlines" in found


@pytest.mark.parametrize("args, said", [
    (("search", "x", "--all", "--valid-at", "today"), "cortex search: --valid-at and --all exclude each other"),
    (("query", "(todo)", "--valid-at", "someday"), "cortex: 'someday' is not a moment; write a day (today"),
    (("find", "x", "--valid-at", "2026-02-30"), "cortex: '2026-02-30' is not a date (day is out of range"),
])
def test_a_bad_moment_is_one_line(cli, args, said):
    status, out, err = cli(*args)
    assert status in (1, 2) and err.startswith(said) and err.count("\n") == 1 and "Traceback" not in err


def test_show_and_history_tell_the_chain(cli, org):
    status, out, err = cli("show", "mem-assistant-db-16")
    assert status == 0 and out.startswith("** The database is Postgres 16.") and ":SUPERSEDED_BY:" in out
    assert err.splitlines() == [
        "supersedes mem-assistant-db-15: The database is Postgres 15. (valid 2026-01-01 – 2026-10-01)",
        "superseded by mem-assistant-db-17: The database is Postgres 17. (valid 2026-11-03 14:00 – now)"]
    _, _, err = cli("show", "mem-assistant-db-17")
    assert err.splitlines()[1] == ("  mem-assistant-db-16 superseded mem-assistant-db-15: The database is Postgres 15. "
                                   "(valid 2026-01-01 – 2026-10-01)")
    _, out, err = cli("show", "mem-assistant-dark-mode")
    assert err == "" and out.startswith("** User prefers dark mode")
    _, out, err = cli("show", "agents/assistant/memory.org")
    assert err == "" and out == (org / "agents/assistant/memory.org").read_text()
    memory = org / "agents/assistant/memory.org"  # Postgres 17 was rolled back by hand: the snapshot still has it
    memory.write_text(memory.read_text().replace(":SUPERSEDES:    mem-assistant-db-16\n", ""))
    cli("ingest")
    assert cli("show", "mem-assistant-db-17")[2] == ""
    assert "superseded by mem-assistant-db-17" in cli("show", "mem-assistant-db-16")[2]
    _, out, err = cli("show", "mem-assistant-db-17", "--as-of", "HEAD")
    assert ":SUPERSEDES:    mem-assistant-db-16" in out and err.startswith("supersedes mem-assistant-db-16")
    _, out, _ = cli("history", "mem-assistant-db-16")
    assert "validity" in out and "valid 2026-10-01 – 2026-11-03 14:00; supersedes" in out
    assert out.splitlines()[-2:] == [
        "supersedes mem-assistant-db-15: The database is Postgres 15. (valid 2026-01-01 – 2026-10-01)",
        "superseded by mem-assistant-db-17: The database is Postgres 17. (valid 2026-11-03 14:00 – now)"]
