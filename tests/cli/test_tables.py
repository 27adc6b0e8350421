"""Tables never break an identifier: at 80 columns paths, ids and reason codes come out whole, text wraps between
words, and a table too wide for that is shown a record per row; every id a command prints can be given back."""

import io
import os
import re

import pytest
from click.testing import CliRunner
from rich.console import Console

from cortex.cli import common
from cortex.cli.app import cli
from cortex.cli.tables import table

from tests.cli.test_webhooks import ENV

LONG_PATH = "notes/projects/a-rather-long-folder-name/quarterly-planning.org"
HEX_ID = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # 64 hex digits
ORG = f"""* TODO Rotate the signing keys of every webhook before the end of the quarter, as agreed :security:
:PROPERTIES:
:ID: {HEX_ID}
:END:
"""


def whole(shown: str, *tokens: str) -> None:
    """Each token is on one line of `shown`, unbroken."""
    for token in tokens:
        assert token in shown, (token, shown)


@pytest.mark.parametrize("width", [80, 100, 160])
def test_identifiers_stay_whole_at_any_width(width):
    rows = [(("#", "file:line", "outline", "todo", "tags", "id"),
             ("0", f"{LONG_PATH}:25", "Projects / Rotate the signing keys of every webhook before the end", "TODO",
              "security", HEX_ID)),
            (("time", "delivery", "webhook", "trigger", "event", "answer", "why", "agent", "ms"),
             ("2026-11-20 09:30:00", "0190abcdef0123456789abcd", "github-events", "test", "pull_request",
              "401 rejected", "signature_mismatch", "-", "1.2")),
            (("name", "path", "provider", "agent", "filter", "secret", "defined at"),
             ("stripe-payments", "/hooks/stripe", "stripe", "assistant", '$.type contains "payment."',
              "secret://env/STRIPE_WEBHOOK_SECRET", "/home/dana/org/definitions.hy:23:1"))]
    for headers, row in rows:
        console = Console(file=io.StringIO(), width=width)
        t = table(*headers)
        t.add_row(*row)
        console.print(t)
        shown = console.file.getvalue()
        assert max(map(len, shown.splitlines())) <= width
        lines = shown.splitlines()
        if not all(h in lines[0] for h in headers):  # too wide for a table: one record, each cell beside its name
            assert [line.split()[0] for line in lines if line.strip()][:3] == [h.split()[0] for h in headers[:3]]
        whole(shown, *(word for cell in row for word in cell.split()))


def test_text_wraps_between_words_beside_whole_identifiers():
    console = Console(file=io.StringIO(), width=80)
    t = table("#", "file:line", "outline", "id")
    t.add_row("0", "notes/projects.org:25", "Projects / " + "words that wrap " * 6, "task-rotate-the-secrets")
    console.print(t)
    lines = console.file.getvalue().splitlines()
    assert "notes/projects.org:25" in lines[2] and "task-rotate-the-secrets" in lines[2] and len(lines) > 3
    assert all(re.search(r"│ (?:Projects|words|wrap|that) ", line) for line in lines[2:])  # a word starts each


@pytest.fixture
def narrow(tmp_path, org, monkeypatch):
    """`cortex ...` on the bundled examples and a file of long path and 64-hex :ID:, printed at 80 columns."""
    (org / LONG_PATH).parent.mkdir(parents=True)
    (org / LONG_PATH).write_text(ORG)
    monkeypatch.setattr(common.console, "width", 80)
    runner = CliRunner(env=ENV)

    def invoke(*args, ok=True):
        group, command = (args[:1], args[1:]) if args[0] in ("webhook", "memory", "review") else ((), args)
        result = runner.invoke(cli, [*group, command[0], "--store", str(tmp_path / "store"), "--org", str(org),
                                     *command[1:]])
        assert (result.exit_code == 0) == ok, result.output + repr(result.exception)
        return result.output if ok else str(result.exception)

    invoke("ingest")
    return invoke


def test_commands_print_paths_ids_and_reason_codes_whole_at_80_columns(narrow):
    whole(narrow("find", "--tag", "security"), f"{LONG_PATH}:1", HEX_ID, "notes/projects.org:25",
          "task-rotate-secrets")
    whole(narrow("query", '(heading "signing keys")'), f"{LONG_PATH}:1", HEX_ID)
    whole(narrow("search", "rotate signing keys webhook quarter", "--fusion", "keyword"), f"{LONG_PATH}:1", HEX_ID)
    whole(narrow("ls"), LONG_PATH)
    narrow("snapshot", "-m", "a message long enough that it has to wrap somewhere in a table eighty columns wide")
    log = narrow("snapshots")
    snapshot = re.search(r"\b([0-9a-f]{12})\b", log)[1]
    whole(log, snapshot)
    whole(narrow("webhook", "list"), "secret://env/GITHUB_WEBHOOK_SECRET", "definitions.hy:15:1", "github-events")
    whole(narrow("memory", "list"), "assistant")


def test_delivery_ids_print_whole_and_come_back_by_prefix(narrow):
    narrow("webhook", "test", "github-events", "--payload", '{"action": "opened"}', "--tamper")
    narrow("webhook", "test", "github-events", "--payload", '{"action": "opened"}', "--event", "pull_request")
    logs = narrow("webhook", "logs")
    ids = re.findall(r"\b[0-9a-f]{24}\b", logs)
    assert len(ids) == 2, logs
    whole(logs, "signature_mismatch", "200 routed")
    accepted = ids[1]
    redelivered = narrow("webhook", "redeliver", accepted[:20])  # a unique prefix, as snapshot refs take
    assert redelivered.startswith(f"redelivered {accepted} as "), redelivered
    third = re.search(r" as ([0-9a-f]{24})\b", redelivered)[1]
    # ids start with the time: three made a moment apart share their first digits (how many depends on whether
    # the moments straddle a power of two of nanoseconds: 8 hex digits are 4.3 s)
    common_prefix = os.path.commonprefix([ids[0], accepted, third])
    ambiguous = narrow("webhook", "redeliver", common_prefix, ok=False)
    assert f"webhook delivery prefix {common_prefix} is ambiguous, 3 start with it" in ambiguous, ambiguous
    assert "no webhook delivery ffff; `cortex webhook logs` lists them" in narrow("webhook", "redeliver", "ffff",
                                                                                   ok=False)
