"""The CLI end to end through click's runner: store, history and DSL commands, on LMDB and PostgreSQL."""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import cortex.api as cx
from cortex.cli import main
from cortex.cli.app import cli


def invoker(*options):
    """`invoke(command, *args, ok=True)`: run a cortex command with `options` after it; `ok`: it must succeed."""
    runner = CliRunner()

    def invoke(*args, ok=True):
        result = runner.invoke(cli, [args[0], *options, *args[1:]])
        if ok:
            assert result.exit_code == 0, result.output + str(result.exception)
        return result

    return invoke


@pytest.fixture
def run(store_at, org):
    """Commands on a store of each engine tracking the copied Org folder."""
    return invoker("--store", store_at, "--org", str(org))


@pytest.fixture
def dsl():
    """`cortex dsl ...` commands, which need no store."""
    return invoker()


def test_ingest_find_show_stats_fsck(run, store_at):
    assert "5 files: 5 parsed" in run("ingest").output
    assert run("find", "--tag", "security").output.endswith("\n1 headline\n")
    out = run("find", "--tag", "security").output
    assert "notes/projects.org:25" in out and "task-rotate-secrets" in out
    assert run("show", "task-rotate-secrets").output.startswith("** TODO [#A] Rotate the webhook secrets")
    stats = run("stats").output
    assert "headlines" in stats and cx.store_name(store_at) in stats
    assert run("fsck").output.startswith("ok:")


def test_snapshot_diff_rollback_log(run, org):
    run("ingest")
    assert "5 files" in run("snapshot", "-m", "first").output
    path = org / "notes" / "reading.org"
    original = path.read_text()
    path.write_text(original + "* Later thoughts\n")
    unsaved = run("diff").output  # not ingested yet: the diff says so, and how to include it
    assert "no changes" in unsaved and "1 file: notes/reading.org edited since the last ingest" in unsaved
    run("ingest")
    assert "added    notes/reading.org: Later thoughts" in run("diff").output
    refused = run("rollback", "HEAD", ok=False)
    assert refused.exit_code == 1
    run("rollback", "HEAD", "--force")
    assert path.read_text() == original
    assert "first" in run("log").output and "HEAD" in run("snapshots").output


def test_user_errors_are_one_line_without_traceback(tmp_path, org, capsys):
    main(["ingest", "--store", str(tmp_path / "s"), "--org", str(org)])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["show", "--store", str(tmp_path / "s"), "--org", str(org), "no-such-id"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.strip() == "cortex: no headline with :ID: no-such-id" and "Traceback" not in err


def test_dsl_check_reports_every_error(dsl, tmp_path):
    bad = tmp_path / "bad.hy"
    bad.write_text('(defwebhook x :path "/a" :provider gitlab :secret "s")\n(defmemory m :serch {})\n')
    result = dsl("dsl", "check", str(bad), ok=False)
    assert result.exit_code == 1
    assert f"{bad}:1:36: unknown provider gitlab; did you mean github?" in result.output
    assert f"{bad}:2:14: unknown keyword :serch in defmemory m; did you mean :search?" in result.output


def test_dsl_show_and_convert(dsl, tmp_path):
    assert "github-events" in dsl("dsl", "show", "org/definitions.hy").output
    brace = tmp_path / "agent.dsl"
    brace.write_text('webhook "gh" {\n  path "/hooks/gh"\n  provider github\n  secret $GH_SECRET\n}\n')
    out = dsl("dsl", "convert", str(brace)).output
    assert "(defwebhook gh" in out and '"secret://env/GH_SECRET"' in out


def test_eval_runs_forms_and_fails_on_the_first_error(tmp_path, org, capsys):
    args = ["eval", "--store", str(tmp_path / "store"), "--org", str(org)]
    with pytest.raises(SystemExit) as exit_:
        main(args + ['(len (find :todo "TODO"))'])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == "2"
    with pytest.raises(SystemExit) as exit_:
        main(args + ['(lookup "nope")'])
    assert exit_.value.code == 1 and "no headline with :ID: nope" in capsys.readouterr().err


def test_search_shows_the_matching_item(run):
    run("ingest")
    out = run("search", "which region hosts staging?", "-n", "1", "--agent", "assistant").output
    assert "agents/assistant/memory.org:4" in out and "Facts — The staging cluster lives in eu-west-1." in out
    logged = run("search", "release fix", "--path", "agents/assistant/logs/2026-11", "--since", "2026-11-01").output
    assert "agents/assistant/logs/2026-11-20.org" in logged and "memory.org" not in logged


def test_a_search_before_the_vectors_are_built_answers_and_says_what_is_missing(tmp_path, org, monkeypatch):
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()  # parsed: nothing is embedded yet
    monkeypatch.setattr("cortex.api.SEARCH_BUDGET", 0)  # as when the budget ran out on a big store
    result = invoker("--store", str(tmp_path / "store"))("search", "staging cluster", "-n", "1")
    assert "agents/assistant/memory.org:4" in result.stdout
    assert re.fullmatch(r"vectors: 0 of \d+ items: those without one were found by their words; "
                        r"`cortex ingest` embeds the rest\n", result.stderr)
    result = CliRunner().invoke(cli, ["memory", "search", "--store", str(tmp_path / "store"), "assistant",
                                      "staging cluster"])
    assert "The staging cluster lives in eu-west-1." in result.stdout.splitlines()[0]
    assert re.fullmatch(r"vectors: 0 of \d+ items: those without one were found by their words; "
                        r"`cortex ingest` embeds the rest\n", result.stderr)
    monkeypatch.undo()  # the budget of SEARCH_BUDGET seconds embeds these few items
    assert "vectors:" not in invoker("--store", str(tmp_path / "store"))("search", "staging cluster").stderr


def test_a_store_url_is_kept_as_a_url_and_named_without_its_password(monkeypatch):
    url = "postgresql://ann:s3cret@db.example:5433/cortex?sslmode=require&password=s3cret"
    monkeypatch.setenv("CORTEX_STORE", url)
    assert cx.default_store_path() == url  # not a Path, which would fold the // away
    assert cx.store_name(url) == "postgresql://ann@db.example:5433/cortex?sslmode=require"
    monkeypatch.setenv("CORTEX_STORE", "some/folder")
    assert cx.default_store_path() == Path("some/folder")


def test_checkout_sync_and_conflicts(run, tmp_path):
    run("ingest")
    a, b = tmp_path / "a", tmp_path / "b"
    assert "checked out 5 files" in run("checkout", str(a)).output
    run("checkout", str(b))
    for folder, word in ((a, "Mine"), (b, "Theirs")):
        path = folder / "notes" / "reading.org"
        path.write_text(path.read_text().replace("* ", f"* {word} ", 1))
    assert "1 sent" in run("sync", str(a)).output
    merged = run("sync", str(b), ok=False)
    assert merged.exit_code == 1 and "both-changed" in merged.output
    listed = run("conflicts", str(b), ok=False)
    assert listed.exit_code == 1 and "notes/reading.org" in listed.output  # exit 1: a script sees there are some
    assert "both-changed" in run("conflicts", ok=False).output
    assert run("conflicts", str(a)).output == "no conflicts\n"
    assert "not a working copy" in str(run("sync", str(tmp_path / "elsewhere"), ok=False).exception)


def test_commands_that_find_nothing_say_no_results_without_an_empty_table(run):
    run("ingest")
    for command in (("find", "no such words anywhere"), ("query", '(heading "no such words anywhere")')):
        result = run(*command)
        assert result.stdout == "" and result.stderr == "no results\n", result.output


def test_each_module_s_commands_are_named_where_the_cli_finds_them_and_only_there():
    import importlib
    import pkgutil

    import click

    import cortex.cli as package
    from cortex.cli.app import MODULES

    found = {}
    for module in pkgutil.iter_modules(package.__path__):
        commands = getattr(importlib.import_module(f"cortex.cli.{module.name}"), "commands", None)
        if isinstance(commands, tuple) and all(isinstance(c, click.Command) for c in commands):
            found[module.name] = tuple(c.name for c in commands)
    assert found == MODULES
    assert set(cli.list_commands(None)) == {name for names in MODULES.values() for name in names} | {"repl", "eval"}


def test_a_command_imports_its_own_module_and_not_the_others(tmp_path):
    import subprocess
    import sys

    shown = subprocess.run([sys.executable, "-c", "import sys; from cortex.cli.app import main; main(['lsp', '--help']); "
                            "print(sorted(m for m in sys.modules if m.startswith('cortex.cli.')))"],
                           capture_output=True, text=True, check=True).stdout
    assert "['cortex.cli.app', 'cortex.cli.common', 'cortex.cli.lsp'" in shown and "cortex.cli.hooks" not in shown
