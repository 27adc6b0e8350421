"""The REPL shows user text as it is: titles that look like Rich markup letter for letter, escape sequences shown
(`\\x1b`), not obeyed by the terminal."""

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
