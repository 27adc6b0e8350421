"""The REPL shows user text as it is: titles that look like Rich markup letter for letter, escape sequences shown
(`\\x1b`), not obeyed by the terminal; and its tables keep ids and reason codes whole, whatever the width."""

import io
import re

import pytest

from tests.cli.test_common_literal import ESC, ORG, SHOWN
from tests.repl.test_core import Transcript


@pytest.fixture
def hostile(tmp_path):
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "notes.org").write_text(ORG)
    transcript = Transcript(tmp_path / "store", tmp_path / "org")
    transcript("(ingest)")
    yield transcript
    transcript.session.close()


@pytest.mark.parametrize("form", ['(query "LEVEL=1")', "(find)", '(ls "notes.org")', '(show "notes.org")',
                                  '(show "hostile-3")'])
def test_forms_show_titles_as_they_are(hostile, form):
    shown = hostile(form)
    assert hostile.ok and ESC not in shown, shown
    wanted = SHOWN if "hostile-3" not in form else [SHOWN[3]]
    for title in wanted:
        assert title in shown, (title, shown)


def test_a_table_wider_than_the_terminal_keeps_delivery_ids_and_reason_codes_whole(tmp_path, org, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", "gh-s3cr3t-6f1d0c")
    repl = Transcript(tmp_path / "store", org, out=Terminal())
    try:
        repl.session.cortex.webhook_test("github-events", '{"action": "opened"}', tamper=True)
        repl.session.cortex.webhook_test("github-events", '{"action": "opened"}', event="pull_request")
        shown = re.sub(r"\x1b\[[0-9;]*m", "", repl("(webhook-logs)"))
        ids = [d.id for d in repl.session.cortex.webhook_logs(None, 20)]
    finally:
        repl.session.close()
    assert repl.ok and max(map(len, shown.splitlines())) <= 120
    for token in (*ids, "signature_mismatch", "pull_request", "github-events"):
        assert token in shown, (token, shown)
