"""Facts that changed, as Emacs reads them: the memory.org of the scripted agent life (tests/scenarios/
test_facts_that_change.py) against Emacs 28.2 / Org 9.5.5's own reading of it (tests/data/validity/, made by
tests/data/make_validity_oracle.sh): the validity properties are Org properties, and the agenda skips what no longer
holds because Org archives it."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cortex.memory.validity import Validity
from cortex.objects import Headline
from cortex.org import parse

from tests.scenarios.test_facts_that_change import MEMORY, lived

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURE, RECORDED = DATA / "validity" / "memory.org", DATA / "validity" / "emacs.json"
NAMES = {"valid_from": "VALID_FROM", "invalid_at": "INVALID_AT", "supersedes": "SUPERSEDES",
         "superseded_by": "SUPERSEDED_BY"}


def headlines(text: str) -> dict[int, Headline]:
    """The headlines of a file by line."""
    parsed = parse(text)
    found, line = {}, 1 + parsed.document.preamble.count("\n")
    objects = {obj.oid: obj for obj in parsed.objects}
    stack = list(reversed(parsed.document.children))
    while stack:
        headline = objects[stack.pop()]
        found[line] = headline
        line += headline.raw.count("\n")
        stack.extend(reversed(headline.children))
    return found


def shape(text: str) -> list[tuple[int, tuple[str, ...], tuple[str, ...]]]:
    """Each headline's level, tags and property names: what a file of facts that changed is made of."""
    return [(h.level, h.tags, tuple(name for name, _ in h.properties)) for h in headlines(text).values()]


def test_the_scripted_life_writes_files_like_the_one_emacs_read(tmp_path):
    # (byte for byte only on the machine that made it: which pairs consolidation finds rests on embeddings)
    with lived(tmp_path) as (script, c):
        assert shape((script.org / MEMORY).read_text()) == shape(FIXTURE.read_text())


def test_cortex_reads_the_validity_properties_as_emacs_does():
    emacs = json.loads(RECORDED.read_text())
    ours = headlines(FIXTURE.read_text())
    assert sorted(ours) == [record["line"] for record in emacs] and len(emacs) == 202
    for record in emacs:
        headline = ours[record["line"]]
        assert (headline.id, list(headline.tags)) == (record["id"], record["tags"]), record["line"]
        for key, name in NAMES.items():
            assert headline.get(name) == record[key], (record["line"], name)


def test_the_agenda_lists_what_holds_now_and_what_a_person_ended_without_archiving():
    emacs = json.loads(RECORDED.read_text())
    ours = headlines(FIXTURE.read_text())
    items = [(record, Validity.of(ours[record["line"]].properties)) for record in emacs if record["level"] == 2]
    assert all(record["listed"] for record, validity in items if validity.holds())
    unlisted_yet_current = [r["id"] for r, v in items if not r["listed"] and v.holds()]
    listed_yet_ended = [r["id"] for r, v in items if r["listed"] and not v.holds()]
    assert unlisted_yet_current == [] and len(listed_yet_ended) == 1  # replaced by hand: no ARCHIVE tag was put
    assert all("ARCHIVE" not in r["tags"] for r, _ in items if r["id"] in listed_yet_ended)
    assert sum(r["listed"] for r, _ in items) == 150


@pytest.mark.skipif(shutil.which("emacs") is None, reason="no emacs on this machine: the recorded reading is used")
def test_emacs_reads_the_file_so_today(tmp_path):
    output = tmp_path / "emacs.json"
    subprocess.run(["emacs", "--batch", "-Q", "-l", str(DATA / "validity_oracle.el"), str(FIXTURE), str(output)],
                   check=True, capture_output=True, timeout=120)
    assert json.loads(output.read_text()) == json.loads(RECORDED.read_text())
