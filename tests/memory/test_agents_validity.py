"""Facts that change, written: an item superseded by another or retired, in Org a person reads, in one commit."""

import subprocess
import sys
from datetime import date, datetime

import pytest

import cortex.api as cx
from cortex.errors import NotFound, UserError
from cortex.ingest import WORKING
from cortex.memory.memoryfile import MemoryConflict, MemoryFile
from cortex.org import parse
from cortex.query import render_file

MEMORY = "agents/assistant/memory.org"
RATE = "mem-assistant-rate-limit"
NOW = datetime(2026, 11, 21, 10, 5)


def items(cortex):
    return {item.id: item for _, item in cortex.memory.load_context("assistant", every=True).items()}


def test_a_successor_and_the_item_it_replaces_say_so_in_org_in_one_commit(cortex, org):
    commits = len(cortex.store.refs.reflog(WORKING))
    new = cortex.memory.add_item("assistant", "fact", "The API rate limit is 120 requests per minute.",
                                 supersedes=RATE, valid_from="2026-11-20 08:00", now=NOW)
    text = (org / MEMORY).read_text()
    old_entry = text[text.index("** The API rate limit is 100"):text.index("* Procedures")]
    assert old_entry.splitlines()[0].endswith(":ARCHIVE:")
    assert ":INVALID_AT: [2026-11-20 Fri 08:00]" in old_entry and f":SUPERSEDED_BY: {new.id}" in old_entry
    assert f":SUPERSEDES: {RATE}" in text and ":VALID_FROM: [2026-11-20 Fri 08:00]" in text
    now = items(cortex)
    assert not now[RATE].current and now[new.id].current and new.validity.replaces == (RATE,)
    assert now[RATE].validity.holds(date(2026, 11, 19)) and not now[new.id].validity.holds(date(2026, 11, 19))
    # one commit moved the working state, and the file still reads as every other item did
    assert len(cortex.store.refs.reflog(WORKING)) == commits + 1
    assert [i.title for i in cortex.memory.load_context("assistant").facts][:2] == [
        "The staging cluster lives in eu-west-1.", "User prefers dark mode in every app."]


def test_the_properties_are_org_properties_and_the_old_item_keeps_its_text(cortex, org):
    new = cortex.memory.add_item("assistant", "fact", "The API rate limit is 120 requests per minute.",
                                 supersedes="the api rate limit is 100 requests per minute", now=NOW)
    parsed = parse((org / MEMORY).read_text())
    headlines = {h.get("ID"): h for h in parsed.objects if getattr(h, "properties", None)}
    old = headlines[RATE]
    assert old.title == "The API rate limit is 100 requests per minute." and old.tags == ("ARCHIVE",)
    assert old.get("INVALID_AT") == "[2026-11-21 Sat 10:05]" and old.get("SUPERSEDED_BY") == new.id
    assert headlines[new.id].get("SUPERSEDES") == RATE


def test_retire_marks_an_item_that_stopped_being_true(cortex, org):
    retired = cortex.memory.retire("assistant", "mem-assistant-dark-mode", at="2026-11-19", now=NOW)
    assert retired.validity.end == datetime(2026, 11, 19) and "ARCHIVE" in retired.tags and not retired.current
    assert ":INVALID_AT: [2026-11-19 Thu]" in (org / MEMORY).read_text()
    # retired from a day still to come: it holds until then, and Org does not fold it yet
    later = cortex.memory.retire("assistant", RATE, at=date(2099, 1, 1), now=NOW)
    assert later.current and "ARCHIVE" not in later.tags


def test_a_hand_written_list_item_gets_an_id_to_be_named_by(cortex, org):
    new = cortex.memory.add_item("assistant", "fact", "The staging cluster moved to eu-central-1.",
                                 supersedes="The staging cluster lives in eu-west-1.", now=NOW)
    old_id = new.validity.replaces[0]
    assert old_id.startswith("mem-assistant-the-staging-cluster-lives")
    old = items(cortex)[old_id]
    assert old.validity.replaced_by == (new.id,) and not old.plain and old.text == "The staging cluster lives in eu-west-1."
    assert "- The staging cluster lives in eu-west-1." not in (org / MEMORY).read_text()


def test_mistakes_say_what_and_write_nothing(cortex, org):
    original = (org / MEMORY).read_bytes()
    mistakes = [
        (lambda: cortex.memory.add_item("assistant", "fact", "x", supersedes="no such item"), NotFound,
         "has no memory item 'no such item' to supersede"),
        (lambda: cortex.memory.add_item("assistant", "fact", "x", valid_from="soon"), UserError, "not a date"),
        (lambda: cortex.memory.retire("assistant", RATE, at="2026-13-45"), UserError, "retired at '2026-13-45'"),
        (lambda: cortex.memory.add_item("assistant", "fact", "The API rate limit is 100 requests per minute.",
                                        supersedes=RATE), UserError, "cannot replace itself"),
    ]
    for call, kind, message in mistakes:
        with pytest.raises(kind, match=message):
            call()
    assert (org / MEMORY).read_bytes() == original
    cortex.memory.retire("assistant", RATE, now=NOW)
    with pytest.raises(UserError, match="invalid from 2026-11-21 10:05; only a current item can be superseded"):
        cortex.memory.add_item("assistant", "fact", "The limit is 200.", supersedes=RATE)
    with pytest.raises(UserError, match="only a current item can be retired"):
        cortex.memory.retire("assistant", RATE)


def test_an_end_before_the_start_an_item_states_is_refused(cortex):
    new = cortex.memory.add_item("assistant", "fact", "Deploys happen on Wednesdays.", valid_from="2026-11-10", now=NOW)
    with pytest.raises(UserError, match=r"holds from 2026-11-10 \(:VALID_FROM:\): its end cannot be before, at 2026-11-01"):
        cortex.memory.retire("assistant", new.id, at="2026-11-01")
    with pytest.raises(UserError, match="its successor's start cannot be before"):
        cortex.memory.add_item("assistant", "fact", "Deploys happen on Thursdays.", supersedes=new.id,
                               valid_from="2026-11-09")


def test_two_items_one_name_asks_for_an_id(cortex, org):
    path = org / MEMORY
    path.write_text(path.read_text().replace("* Procedures\n", "** User prefers dark mode in every app.\n* Procedures\n"))
    with pytest.raises(UserError, match=r"names 2 items of assistant \(mem-assistant-dark-mode, key-"):
        cortex.memory.retire("assistant", "User prefers dark mode in every app.")


def test_saying_a_change_again_links_what_is_there_and_names_the_item_that_holds(cortex, org):
    old_text, new_text = "The API rate limit is 100 requests per minute.", "The API rate limit is 120 requests per minute."
    first = cortex.memory.add_item("assistant", "fact", new_text, supersedes=RATE, now=NOW)
    again = cortex.memory.add_item("assistant", "fact", old_text, now=NOW)  # its text, true again
    assert again.current and again.id != RATE
    # the text names the replaced item and the one added again: the one that holds is meant
    linked = cortex.memory.add_item("assistant", "fact", new_text, supersedes=old_text, now=NOW)
    assert linked.id == first.id and set(linked.validity.replaces) == {RATE, again.id}
    now = items(cortex)
    assert not now[again.id].current and now[again.id].validity.replaced_by == (first.id,)
    assert (org / MEMORY).read_text().count(new_text) == 1
    with pytest.raises(UserError, match="cannot replace itself"):
        cortex.memory.add_item("assistant", "fact", new_text, supersedes=first.id, now=NOW)


def test_a_change_said_twice_is_made_once(cortex, org):
    new_text = "The API rate limit is 120 requests per minute."
    first = cortex.memory.add_item("assistant", "fact", new_text, supersedes=RATE, valid_from="2026-11-20", now=NOW)
    retired = cortex.memory.retire("assistant", "User prefers dark mode in every app.", at="2026-11-21 09:30")
    text, commits = (org / MEMORY).read_text(), len(cortex.store.refs.reflog(WORKING))
    again = cortex.memory.add_item("assistant", "fact", new_text, supersedes=RATE, valid_from="2026-11-20", now=NOW)
    assert again.id == first.id and again.current
    assert cortex.memory.retire("assistant", "User prefers dark mode in every app.", at="2026-11-21 09:30") == retired
    assert (org / MEMORY).read_text() == text and len(cortex.store.refs.reflog(WORKING)) == commits
    with pytest.raises(UserError, match="only a current item can be retired"):  # another end is another change
        cortex.memory.retire("assistant", "User prefers dark mode in every app.", at="2026-11-22")


def test_a_person_who_changed_the_old_item_meanwhile_is_not_overwritten(cortex, org, monkeypatch):
    path = org / MEMORY
    rewrite = MemoryFile.rewrite

    def person_edits_it_meanwhile(self, *args):
        text = path.read_text()
        if "100 requests per minute." in text:  # between the write reading the file and replacing it
            path.write_text(text.replace("100 requests per minute.", "100 requests per minute, per user."))
        return rewrite(self, *args)

    monkeypatch.setattr(MemoryFile, "rewrite", person_edits_it_meanwhile)
    retired = cortex.memory.retire("assistant", RATE, now=NOW)
    # the retirement is made again on what the person saved: both are kept
    assert retired.title == "The API rate limit is 100 requests per minute, per user."
    text = path.read_text()
    assert "** The API rate limit is 100 requests per minute, per user." in text and ":INVALID_AT: [2026-11-21" in text


def test_rollback_undoes_a_supersession_and_as_of_answers_as_it_was(cortex, org):
    original = (org / MEMORY).read_bytes()
    before = cortex.snapshot("before")
    cortex.memory.add_item("assistant", "fact", "The API rate limit is 120 requests per minute.", supersedes=RATE)
    cortex.snapshot("after")
    past = {h.id: h for h in cortex.headlines("HEAD~1")}
    assert past[RATE].headline.get("SUPERSEDED_BY") is None
    cortex.rollback(before.oid.hex())
    assert (org / MEMORY).read_bytes() == original and items(cortex)[RATE].current


def test_without_an_org_folder_the_same_writes_land_in_the_store(tmp_path, org):
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
    with cx.open(tmp_path / "store", folder=False) as c:
        new = c.memory.add_item("assistant", "fact", "The API rate limit is 120 requests per minute.",
                                supersedes=RATE, now=NOW)
        c.memory.retire("assistant", new.id, at="2026-11-22", now=NOW)
        text = c.memory.show("assistant")
        assert f":SUPERSEDED_BY: {new.id}" in text and ":INVALID_AT: [2026-11-22 Sun]" in text


def test_forgetting_an_item_leaves_no_item_naming_it_and_chain_takes_the_chain(cortex, org):
    path = org / MEMORY
    second = cortex.memory.add_item("assistant", "fact", "The API rate limit is 120 requests per minute.",
                                    supersedes=RATE, now=NOW)
    third = cortex.memory.add_item("assistant", "fact", "The API rate limit is 150 requests per minute.",
                                   supersedes=second.id, now=NOW)
    cortex.snapshot("the chain")
    cortex.memory.forget("assistant", second.id, hard=True)
    assert "120 requests" not in path.read_text() and second.id not in path.read_text()  # an :ID: holds its words
    for snapshot in cortex.snapshots():
        assert second.id not in render_file(cortex.store, cortex.store.objects[snapshot.root], MEMORY)
    now = items(cortex)
    assert not now[RATE].current and now[RATE].validity.replaced_by == () and now[third.id].validity.replaces == ()
    assert now[RATE].validity.end == now[third.id].validity.start == NOW  # the gap a forgotten item leaves stays

    fourth = cortex.memory.add_item("assistant", "fact", "The API rate limit is 200 requests per minute.",
                                    supersedes=third.id, now=NOW)
    report = cortex.memory.forget("assistant", fourth.id, chain=True)
    assert sorted(report.ids) == sorted([third.id, fourth.id])
    assert "150 requests" not in path.read_text() and "200 requests" not in path.read_text()
    assert "100 requests" in path.read_text()  # the chain was broken before: what no link reaches stays


def test_a_value_that_is_true_again_is_a_new_current_item(cortex):
    second = cortex.memory.add_item("assistant", "fact", "The API rate limit is 120 requests per minute.",
                                    supersedes=RATE, now=NOW)
    assert cortex.memory.known_item("assistant", "fact", "The API rate limit is 100 requests per minute.") is None
    back = cortex.memory.add_item("assistant", "fact", "The API rate limit is 100 requests per minute.",
                                  supersedes=second.id, now=NOW)
    again = cortex.memory.add_item("assistant", "fact", "The API rate limit is 100 requests per minute.", now=NOW)
    assert back.id != RATE and back.current and again == back  # added once: the current one is that text now
    now = items(cortex)
    assert [i.id for i in now.values() if i.title.startswith("The API rate limit is 100")] == [RATE, back.id]


def test_a_loaded_context_holds_what_holds_now_and_its_save_keeps_the_rest(cortex, org):
    new = cortex.memory.add_item("assistant", "fact", "The API rate limit is 120 requests per minute.",
                                 supersedes=RATE, now=NOW)
    context = cortex.memory.load_context("assistant")
    assert [i.id for i in context.facts if i.id] == ["mem-assistant-dark-mode", new.id]
    assert RATE in [i.id for i in cortex.memory.load_context("assistant", every=True).facts]
    context.facts = [i for i in context.facts if i.id != "mem-assistant-dark-mode"]  # removed: it goes
    context.facts.append("Deploys happen on Tuesdays.")
    saved = cortex.memory.save_context("assistant", context, now=NOW)
    assert [i.title for i in saved.facts][-1] == "Deploys happen on Tuesdays."
    text = (org / MEMORY).read_text()
    assert "mem-assistant-dark-mode" not in text and f":ID:       {RATE}" in text  # not loaded, so kept
    context.facts = list(reversed(context.facts))  # any change that compares them all
    cortex.memory.save_context("assistant", context, now=NOW)
    assert f":ID:       {RATE}" in (org / MEMORY).read_text()


SUPERSEDE = """
import sys, time
from pathlib import Path
import cortex.api as cx
from cortex.errors import UserError
store, n, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
with cx.open(store, folder=False) as c:
    c.memory.load_context("assistant")
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    try:
        print(c.memory.add_item("assistant", "fact", f"The API rate limit is {n}00 per second.",
                                supersedes="mem-assistant-rate-limit").id)
    except UserError as error:
        print("refused:", error)
"""


def test_two_processes_superseding_one_item_at_once_one_wins(store_at, org, tmp_path):
    with cx.open(store_at, org) as c:
        c.ingest()
    go = tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, "-c", SUPERSEDE, store_at, str(n), str(go)], text=True,
                                stdout=subprocess.PIPE) for n in (1, 2)]
    assert [w.stdout.readline() for w in writers] == ["ready\n", "ready\n"]
    go.touch()
    said = sorted(w.communicate(timeout=120)[0].strip() for w in writers)
    assert said[0].startswith("mem-assistant-the-api-rate-limit-is-") and said[1].startswith("refused:")
    assert f": superseded by {said[0]} on " in said[1]
    with cx.open(store_at, folder=False) as c:
        text = c.memory.show("assistant")
    assert text.count(":SUPERSEDED_BY:") == 1 and text.count(":SUPERSEDES:") == 1
