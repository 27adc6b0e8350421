"""A hard forget or purge reaches every working copy: its next sync takes the erased text out of the folder (a
headline the person changed since stays, as an `erased` conflict), never sends it back, and the store keeps
nothing of it but what only the copy's own key opens; on LMDB and PostgreSQL."""

import subprocess
import sys

import pytest

import cortex.api as cx
from cortex.backends import open_store
from cortex.codec import decode, encode
from cortex.history import copies, erasures
from cortex.history.copies import COPIES, check_out, conflicts, sync
from cortex.history.erasures import ERASURES, ErasureUnreadable

from tests.history.test_copies import STOPPED_SYNC

SECRET = "Card 4111 1111 1111 1111 expires 09/29."
MEMORY = "agents/assistant/memory.org"


@pytest.fixture
def store_side(store_at):
    """The store with a secret in the assistant's memory, written store-side (no Org folder)."""
    with cx.open(store_at, folder=False) as c:
        c.memory.add_item("assistant", "fact", "Deploys ship on Tuesdays.")
        c.memory.add_item("assistant", "fact", SECRET)
        c.memory.add_item("reviewer", "fact", "Reviews take a day.")
    return store_at


def forget(store_at, hard_purge=False):
    with cx.open(store_at, folder=False) as c:
        if hard_purge:
            c.memory.purge("reviewer", hard=True)
        else:
            c.memory.forget("assistant", SECRET, hard=True)


def no_trace(store_at, tmp_path, text: bytes):
    """Nothing the store holds (objects, tables, LMDB's file) has `text` in the clear."""
    with open_store(store_at) as s:
        assert not any(text in s.objects.raw(oid) for oid in s.objects)
        for table in (ERASURES, COPIES, "ingest.docs", "ingest.subtrees", "ingest.stats"):
            assert not any(text in key or text in value for key, value in s.table(table).items())
    data = tmp_path / "store" / "data.mdb"
    if data.exists():
        assert text not in data.read_bytes()


def test_the_next_sync_of_every_copy_takes_the_erased_text_out_and_never_sends_it_back(store_side, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setattr("cortex.ingest.RACY_SECONDS", 0)  # the copies' files' stats and hashes are kept
    a, b = tmp_path / "a", tmp_path / "b"
    with open_store(store_side) as s:
        check_out(s, a), check_out(s, b)
    assert SECRET in (a / MEMORY).read_text()
    with open_store(store_side) as s:
        sync(s, a), sync(s, b)  # read: their hashes are in the stat cache
        assert len(list(s.table("ingest.stats").items())) == 4
    forget(store_side)
    with open_store(store_side) as s:
        assert len(list(s.table(ERASURES).items())) == 2  # one sealed record for each copy
        assert len(list(s.table("ingest.stats").items())) == 2  # not those of the files that held the text
        for folder in (a, b):
            report = sync(s, folder)
            assert report.conflicts == [] and report.received == [MEMORY] and report.sent == []
            assert SECRET not in (folder / MEMORY).read_text() and "Tuesdays" in (folder / MEMORY).read_text()
        assert list(s.table(ERASURES).items()) == [] and sync(s, a).sent == []
    with cx.open(store_side, folder=False) as c:
        c.snapshot("after")
        assert SECRET not in c.show(MEMORY)
    no_trace(store_side, tmp_path, b"4111 1111")  # (digits alone may be in a stat)


def test_a_headline_changed_in_the_folder_since_stays_as_a_conflict_that_names_the_erasure(store_side, tmp_path):
    a = tmp_path / "a"
    with open_store(store_side) as s:
        check_out(s, a)
    (a / MEMORY).write_text((a / MEMORY).read_text().replace("expires 09/29.", "expires 10/30."))
    forget(store_side)
    with open_store(store_side) as s:
        report = sync(s, a)
        [conflict] = report.conflicts
        assert conflict.kind == "erased" and conflict.path == MEMORY
        assert "expires 10/30." in (a / MEMORY).read_text() and ":CONFLICT_KIND: erased" in (a / MEMORY).read_text()
        assert [c.kind for c in conflicts(s)] == ["erased"]  # in the store too: the person decides


def test_a_hard_purge_removes_the_agent_from_every_copy_but_what_was_changed_since(store_side, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    with open_store(store_side) as s:
        check_out(s, a), check_out(s, b)
    reviewer = "agents/reviewer/memory.org"
    (b / reviewer).write_text((b / reviewer).read_text().replace("a day", "two days"))
    forget(store_side, hard_purge=True)
    with open_store(store_side) as s:
        assert sync(s, a).conflicts == [] and not (a / reviewer).exists()
        [conflict] = sync(s, b).conflicts
        assert conflict.kind == "erased" and "two days" in (b / reviewer).read_text()
        assert "Reviews take" not in (b / reviewer).read_text().split("two days")[1]


def test_what_a_copy_added_under_a_purged_section_stays_without_what_the_purge_erased(store_side, tmp_path):
    a = tmp_path / "a"
    with open_store(store_side) as s:
        check_out(s, a)
    reviewer = a / "agents/reviewer/memory.org"
    reviewer.write_text(reviewer.read_text() + "** Added in the folder since.\n")
    forget(store_side, hard_purge=True)
    with open_store(store_side) as s:
        [conflict] = sync(s, a).conflicts
        text = reviewer.read_text()
        assert conflict.kind == "erased" and "Added in the folder since." in text and "Reviews take" not in text


def test_a_sync_stopped_after_it_committed_the_erasure_still_takes_the_text_out(store_side, store_at, tmp_path):
    a = tmp_path / "a"
    with open_store(store_side) as s:
        check_out(s, a)
    forget(store_side)
    subprocess.run([sys.executable, "-c", STOPPED_SYNC, store_at, str(a), "after the commit", "kill"], timeout=120)
    assert SECRET in (a / MEMORY).read_text()  # not placed yet
    with open_store(store_side) as s:
        assert sync(s, a).conflicts == [] and SECRET not in (a / MEMORY).read_text()
        assert list(s.table(ERASURES).items()) == []
    no_trace(store_side, tmp_path, b"4111 1111")  # (digits alone may be in a stat)


def test_the_tracked_folder_receives_an_erasure_made_with_no_folder(store_side, tmp_path):
    org = tmp_path / "org"
    org.mkdir()
    with cx.open(store_side, org) as c:
        c.sync()  # the tracked folder is a working copy: it receives the working state
    assert SECRET in (org / MEMORY).read_text()
    forget(store_side)
    with cx.open(store_side, org) as c:
        assert c.ingest().received == [MEMORY] and SECRET not in (org / MEMORY).read_text()
        assert SECRET not in c.show(MEMORY)


def test_a_copy_made_before_copies_had_keys_is_refused_after_an_erasure_in_one_line(store_side, tmp_path):
    a = tmp_path / "a"
    with open_store(store_side) as s:
        check_out(s, a)
        [copy] = copies.working_copies(s)
        s.transact(lambda: s.table(COPIES).__setitem__(copy.id.encode(), encode([copy.folder, copy.host,
                                                                                  copy.time_ns])))
    (a / erasures.KEY).unlink()
    forget(store_side)
    with open_store(store_side) as s, pytest.raises(ErasureUnreadable, match="no key to receive the erasure"):
        sync(s, a)
    assert SECRET in (a / MEMORY).read_text()  # left as it was


def test_a_copy_whose_key_is_gone_is_refused_in_one_line(store_side, tmp_path):
    a = tmp_path / "a"
    with open_store(store_side) as s:
        check_out(s, a)
    forget(store_side)
    (a / erasures.KEY).write_bytes(b"\0" * 32)  # another key
    with open_store(store_side) as s, pytest.raises(ErasureUnreadable, match="cannot be opened"):
        sync(s, a)
    (a / erasures.KEY).unlink()
    with open_store(store_side) as s, pytest.raises(ErasureUnreadable, match="unreadable"):
        sync(s, a)


def test_copies_record_their_public_key_and_older_ones_get_one_at_their_next_sync(store_side, tmp_path):
    a = tmp_path / "a"
    with open_store(store_side) as s:
        check_out(s, a)
        [copy] = copies.working_copies(s)
        assert copy.key == erasures.public_key(a) and len(copy.key) == 32
        assert oct((a / erasures.KEY).stat().st_mode & 0o777) == "0o600"
        assert (a / ".cortex" / ".gitignore").read_text().endswith("\n*\n")  # a notes repository never takes it
        s.transact(lambda: s.table(COPIES).__setitem__(copy.id.encode(), encode(decode(
            s.table(COPIES)[copy.id.encode()])[:3])))
        sync(s, a)
        assert copies.working_copies(s)[0].key == copy.key
