"""The REPL's forms over what holds: find and query keep current headlines unless :valid-at or :all, (chain ...),
show's notice of a chain, history's validity, and node views that say when a headline held."""

import pytest

from tests.conftest import with_chain
from tests.repl.test_core import Transcript


@pytest.fixture
def repl(tmp_path, org):
    import cortex.repl.query_forms  # noqa: F401 - registers (query) and (query-select)

    with_chain(org)
    transcript = Transcript(tmp_path / "store", org)
    yield transcript
    transcript.session.close()


def test_find_and_query_keep_current_headlines_unless_asked(repl):
    assert repl('(len (find :text "postgres"))') == "1\n"
    assert repl('(len (find :text "postgres" :valid-at "2026-10-15"))') == "1\n"
    assert "Postgres 16." in repl('(find :text "postgres" :valid-at "2026-10-15")')
    assert repl('(len (find :text "postgres" :all True))') == "3\n"
    assert repl('(len (query (heading "Postgres")))') == "1\n"
    assert repl('(len (query (heading "Postgres") :all True))') == "3\n"
    assert repl('(len (query (heading "Postgres") :valid-at "2026-09-30" :as-of None))') == "1\n"
    assert repl('(len (query (not (valid)) :all True))') == "3\n"
    assert repl("(len (query-select '(heading \"Postgres\") :all True))") == "3\n"
    assert "valid [:at MOMENT]" in repl("(help query)")


def test_chain_show_and_history_tell_what_replaced_what(repl):
    shown = repl('(chain "mem-assistant-db-16")')
    assert "superseded by mem-assistant-db-17: The database is Postgres 17." in shown
    assert "valid" in shown and "2026-10-01 – 2026-11-03 14:00" in shown
    assert "in no chain" in repl('(chain "mem-assistant-dark-mode")')
    assert repl('(chain "nowhere")').startswith("error: no headline with :ID: nowhere")
    shown = repl('(show "mem-assistant-db-17")')
    assert shown.startswith("** The database is Postgres 17.") and repl.notices[-1] == (
        "  mem-assistant-db-16 superseded mem-assistant-db-15: The database is Postgres 15. "
        "(valid 2026-01-01 – 2026-10-01)")
    repl.notices.clear()
    repl('(show "mem-assistant-dark-mode")')
    assert repl.notices == []
    repl('(snapshot "chain")')
    shown = repl('(history "mem-assistant-db-16")')
    assert "validity" in shown and "supersedes" in shown and "mem-assistant-db-15" in shown  # the cell may wrap
    assert repl.notices[-1].startswith("superseded by mem-assistant-db-17")
    shown = repl('(first (query (heading "Postgres 16") :all True))')
    assert "valid 2026-10-01 – 2026-11-03 14:00; supersedes mem-assistant-db-15; superseded by" in shown
