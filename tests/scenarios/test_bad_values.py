"""Every command, REPL form and MCP tool that takes a value answers a bad one in one line, quoting at most a short
prefix of it, in bounded time: never a traceback. The commands and their parameters are read from the CLI itself,
so a new command or option is swept too (and one whose required values this file does not know fails here)."""

import io
import shutil
import socket

import click
import pytest

import cortex.api as cx
from cortex.cli import main
from cortex.cli.app import cli
from cortex.errors import CortexError
from cortex.mcp.server import CortexServer
from cortex.mcp.session import Session
from cortex.mcp.tools import SaidTurn
from cortex.repl import eval_source

from tests.conftest import EXAMPLES
from tests.linear import finishes

LONG = "x" * 100_000
TEXT = ["", " ", LONG, "a\nb", "(" * 10_000, "\udcff", "-1"]
NUMBER = ["-1", "99999999999999999999999", "x", ""]
DURATION = ["", "100000000000000000000d", "9" * 5000 + "d", "1e5d", "99999999999y"]
DAY = ["99999-01-01", "+99999999999d", "-" + "9" * 5000 + "w", "9999-12-31", LONG]
REF = ["HEAD~99999999999999999999", "HEAD@{-1}", "9" * 30, LONG, "HEAD~" + "9" * 5000]
PATH = ["/dev/null", "/proc/x.cortex", "/dev/zero", LONG, "", "/"]
QUERY = ['(ts :from "+99999999999d")', '(deadline :to "+' + "9" * 5000 + 'd")', 'X<"<+99999999999d>"',
         "security+project_infrastructure_migration" * 20, "(" * 100_000, '(level 99999999999999999999)',
         f'(regexp "{"a" * 100_000}")', "LEVEL>" + "9" * 5000]
DURATIONS = {"max_age", "keep_logs", "max_lifetime", "age"}
DAYS = {"start", "today", "valid_from", "at"}
REFS = {"ref", "as_of", "a", "b"}
# The values a command needs besides the one swept, by command and parameter (else by parameter).
VALID = {"target": "task-rotate-secrets", "org_id": "task-rotate-secrets", "node": "task-rotate-secrets",
         "agent": "assistant", "query": "deploy", "text": "deploy", "item": "mem-assistant-dark-mode",
         "age": "7d", "name": "deploys", "delivery_id": "0" * 24, "forms": "(stats)", "ref": "HEAD",
         "proposal": "0badc0de",
         ("webhook add", "name"): "swept", ("webhook add", "path"): "/hooks/swept",
         ("webhook add", "provider"): "standard", ("webhook add", "secret"): "whsec_c3dlcHQ=",
         ("webhook test", "payload"): "{}", ("export", "file"): None, ("import", "file"): "{missing}",
         ("checkout", "folder"): "{missing}", ("dsl check", "files"): "{missing}", ("dsl show", "file"): "{missing}",
         ("dsl convert", "file"): "{missing}", ("ingest", "path"): None, ("ls", "path"): None}
SKIPPED = {"repl"}  # the interactive REPL: its forms are swept below, through eval


def commands(group=cli, path=()):
    """(command path, command) of every command of the CLI (its modules loaded as a run would)."""
    context = click.Context(group)
    for name, command in ((name, group.get_command(context, name)) for name in group.list_commands(context)):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        elif " ".join((*path, name)) not in SKIPPED:
            yield " ".join((*path, name)), command


def kind(name: str, param: click.Parameter) -> list[str] | None:
    """The bad values for a parameter, by what it takes (None: click's choices or a flag, which click checks)."""
    if isinstance(param.type, click.Choice) or getattr(param, "is_flag", False):
        return None
    if isinstance(param.type, (click.IntRange, click.types.IntParamType)):
        return NUMBER
    if name == "query" and param.name == "text" or name == "query" and param.name == "query":
        return QUERY
    if param.name in DURATIONS:
        return DURATION
    if param.name in DAYS:
        return DAY
    if param.name in REFS:
        return REF
    if isinstance(param.type, click.Path) or param.name in ("token_file", "private_key", "output"):
        return PATH
    return TEXT


CASES = [(name, param.name, value) for name, command in commands() for param in command.params
         if param.name not in ("store", "org_root", "no_org") and (values := kind(name, param))
         for value in values]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store over the bundled examples, a port nothing can listen at (taken), and the examples' secrets."""
    folder = tmp_path_factory.mktemp("bad")
    shutil.copytree(EXAMPLES, folder / "org")
    with cx.open(folder / "store", folder / "org") as c:
        c.ingest()
        c.snapshot("start")
    taken = socket.create_server(("127.0.0.1", 0))
    with pytest.MonkeyPatch.context() as patch:
        for secret in ("GITHUB_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET", "DEPLOY_WEBHOOK_SECRET"):
            patch.setenv(secret, "whsec_ZXhhbXBsZS1zZWNyZXQ=")
        patch.delenv("CORTEX_MCP_TOKEN", raising=False)
        patch.chdir(folder)
        yield folder, taken.getsockname()[1]
    taken.close()


def argv(name: str, command: click.Command, swept: str, value: str, folder, port: int) -> list[str]:
    """`cortex NAME ...` with `value` for parameter `swept` and valid values for the others it requires."""
    words, options = name.split(), []
    for param in command.params:
        if param.name in ("store", "org_root", "no_org"):
            continue
        given = value if param.name == swept else VALID.get((name, param.name), VALID.get(param.name))
        if param.name != swept and not param.required and not isinstance(param, click.Argument):
            continue
        if given is None:
            continue
        if given == "{missing}":
            given = str(folder / "missing")
        if isinstance(param, click.Argument):
            words.append(given)
        else:
            options += [param.opts[-1], given]
    if name in ("serve", "mcp"):  # a port taken: whatever passes its checks, the server does not start
        options += ["--port", str(port)] if swept != "port" else []
        options += ["--http"] if name == "mcp" else []
    if name not in ("dsl check", "dsl show", "dsl convert"):
        options += ["--store", str(folder / "store"), "--org", str(folder / "org")]
    return [*words, *options]


@pytest.mark.parametrize("name, swept, value", CASES, ids=lambda v: v[:12] if isinstance(v, str) else v)
def test_every_command_answers_a_bad_value_in_one_line(store, capsys, monkeypatch, name, swept, value):
    folder, port = store
    command = dict(commands())[name]
    monkeypatch.setattr("sys.stdin", io.StringIO("(stats)"))
    capsys.readouterr()

    def run() -> int:
        try:
            main(argv(name, command, swept, value, folder, port))
        except SystemExit as exit_:
            return exit_.code
        return 0

    status = finishes(run)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if status not in (0, None):
        assert len(err.strip().splitlines()) == 1 or name in ("dsl check", "eval"), err[:500]
        assert "x" * 100 not in err and "(" * 100 not in err and "9" * 100 not in err, err[:300]


FORMS = ['(query (ts :from "+99999999999d"))', '(query (deadline :to "+' + "9" * 5000 + 'd"))',
         '(query "X<\\"<+99999999999d>\\"")', '(query "LEVEL>' + "9" * 5000 + '")',
         '(query (regexp "' + "(" * 10_000 + '"))'] + [
    '(agenda :span 100000000)', '(agenda :start "+99999999999d")', '(agenda :today "99999-01-01")',
    '(gc :max-age "100000000000000000000d")', '(gc :max-age "")', '(memory-compact "assistant" :max-age "99999y")',
    f'(show "{LONG}")', '(lookup "HEAD~99999999999999999999")', '(diff "HEAD~99999999999999999999")',
    '(search "x" :agent "../reviewer")', f'(memory-add "{LONG}" "fact" "x")', '(rollback "HEAD@{-1}")',
    '(agenda :span "7")', '(links "no-such")', '(history "x")', f'(review-show "{LONG}")',
    '(review :status "maybe")', f'(review-reject "0badc0de" :reason "{LONG}")']


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f[:30])
def test_every_form_answers_a_bad_value_in_one_line(store, form):
    folder, _ = store
    out, err = io.StringIO(), io.StringIO()
    assert finishes(lambda: eval_source(form, str(folder / "store"), str(folder / "org"), out=out, err=err,
                                        ingest=False)) == 1
    shown = err.getvalue()
    assert shown.startswith("error: ") and len(shown.strip().splitlines()) == 1, shown[:300]
    assert "x" * 100 not in shown and "9" * 100 not in shown and "Error:" not in shown, shown[:300]


@pytest.fixture(scope="module")
def tools(store, tmp_path_factory):
    """A server over every agent (on a copy of the store, without its Org folder), whose tools run as it runs them,
    its guard included."""
    folder = tmp_path_factory.mktemp("tools")
    shutil.copytree(store[0] / "store", folder / "store")
    with cx.open(folder / "store", folder=False) as c:  # no Org folder: its writes stay in its store
        yield CortexServer(Session(c, allow_rollback=True))


TOOL_VALUES = {
    "search": {"query": TEXT, "as_of": REF, "agent": TEXT, "speaker": TEXT, "since": DAY, "until": DAY},
    "show": {"target": TEXT + REF, "as_of": REF},
    "find": {"text": TEXT, "prop": TEXT}, "query": {"query": QUERY, "as_of": REF},
    "memory_inspect": {"agent": TEXT}, "proposals": {"agent": TEXT}, "recent_activity": {"since": TEXT + DAY + REF + ["0001-01-01T00:00+14:00"]},
    "diff": {"from_ref": REF, "to_ref": REF}, "log": {},  # (a number only, which the SDK checks)
    "get_context": {"tenant": TEXT, "run": TEXT},
    "memory_add": {"agent": TEXT, "text": ["\udcff", "(" * 10_000], "supersedes": TEXT, "valid_from": DAY},
    "memory_forget": {"item": TEXT, "agent": TEXT}, "memory_retire": {"item": TEXT, "agent": TEXT, "at": DAY},
    "memory_compact": {"max_age": DURATION, "agent": TEXT}, "snapshot": {"message": ["\udcff"]},
    "add_turn": {"tenant": TEXT, "user_message": ["\udcff"]}, "rollback": {"ref": REF},
    "memory_turns": {"session": TEXT, "title": TEXT, "agent": TEXT,
                     "turns": [[SaidTurn(speaker=speaker, text=text, at=at)] for speaker, text, at in (
                         (LONG, "x", None), ("\udcff", "x", None), ("ada", "\udcff", None),
                         ("ada", "x", "+99999999999d"), ("ada", "x", "99999-01-01"), ("", "x", None), ("ada", "", None),
                         ("a\nb", "x", None))]},
}
NEEDED = {"search": {"query": "deploy"}, "show": {"target": "task-rotate-secrets"}, "query": {"query": "+ops"},
          "memory_forget": {"item": "no-such", "agent": "assistant"}, "memory_compact": {"agent": "assistant"},
          "memory_add": {"text": "x", "agent": "assistant"}, "recent_activity": {"since": "1d"},
          "memory_retire": {"item": "mem-assistant-dark-mode", "agent": "assistant"},
          "rollback": {"ref": "HEAD"}, "get_context": {"tenant": "acme", "user": "u", "session": "s"},
          "add_turn": {"tenant": "acme", "user": "u", "session": "s", "user_message": "m", "assistant_response": "r"},
          "memory_turns": {"session": "s-1", "agent": "assistant", "turns": [SaidTurn(speaker="ada", text="hi")]}}
TOOL_CASES = [(tool, argument, value) for tool, arguments in TOOL_VALUES.items() for argument, values in
              arguments.items() for value in values]


def test_every_tool_is_swept():
    from cortex.mcp.tools import READ, WRITE

    assert set(TOOL_VALUES) == {*READ, *WRITE, "rollback"}


@pytest.mark.parametrize("tool, argument, value", TOOL_CASES, ids=lambda v: v[:12] if isinstance(v, str) else v)
def test_every_tool_answers_a_bad_value_in_one_line(tools, tool, argument, value):
    method = tools._guarded(getattr(tools_of(tools), tool))
    try:
        finishes(lambda: method(**{**NEEDED.get(tool, {}), argument: value}))
    except Exception as exc:  # noqa: BLE001 - the SDK answers the client with this error's text
        assert isinstance(exc, CortexError) or type(exc).__name__ in ("ToolError", "ResourceError"), repr(exc)[:300]
        message = str(exc)
        assert len(message.splitlines()) == 1 and "x" * 100 not in message and "(" * 100 not in message, message[:300]


def tools_of(server: CortexServer):
    from cortex.mcp.tools import Tools

    return Tools(server.session)
