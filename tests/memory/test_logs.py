"""Daily logs grow by appends: a person's edits are kept byte for byte, a log that is not text is refused
before anything is added, and a log changed behind the writer's back is read again, on real files and LMDB."""

from datetime import datetime

import pytest

import cortex.api as cx
from cortex.errors import UserError
from cortex.memory.agents import MemoryContext
from cortex.memory.logs import render_entry, torn_tail

NOW = datetime(2026, 11, 21, 10, 5)
LOG = "agents/assistant/logs/2026-11-21.org"


def session(n: int) -> MemoryContext:
    return MemoryContext(summary=f"Talked about topic {n}.", title=f"Chat {n}", session=f"s-{n}")


def test_entries_are_appended_after_a_hand_edit_which_stays_as_it_was(cortex, org):
    cortex.memory.save_context("assistant", session(1), now=NOW)
    path = org / LOG
    edited = path.read_bytes() + b"A note typed by hand, without a final newline"
    path.write_bytes(edited)
    cortex.memory.save_context("assistant", session(2), now=NOW)
    data = path.read_bytes()
    assert data.startswith(edited + "\n\n* 10:05 — Chat 2\n".encode())
    assert len(cortex.find(prop=("SESSION", "s-2"))) == 1 and "typed by hand" in cortex.show(LOG)


def test_a_log_that_is_not_text_is_refused_with_its_place_and_left_as_it_was(cortex, org):
    cortex.memory.save_context("assistant", session(1), now=NOW)
    path = org / LOG
    broken = path.read_bytes() + b"caf\xe9\n"
    path.write_bytes(broken)
    line = broken.count(b"\n")
    with pytest.raises(UserError, match=f"^{LOG}:{line}: not UTF-8"):
        cortex.memory.save_context("assistant", session(2), now=NOW)
    assert path.read_bytes() == broken


def test_a_crlf_log_gets_crlf_entries_and_a_new_log_starts_with_its_title(cortex, org):
    path = org / LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"#+TITLE: kept\r\n\r\n* 09:00 \xe2\x80\x94 Earlier\r\n")
    cortex.memory.save_contexts("assistant", [(session(1), NOW), (session(2), NOW)])
    data = path.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") and data.count(b"\r\n\r\n* 10:05") == 2
    cortex.memory.save_context("assistant", session(3), now=datetime(2026, 11, 22, 8, 0))
    assert (org / "agents/assistant/logs/2026-11-22.org").read_text().startswith(
        "#+TITLE: assistant — 2026-11-22\n\n* 08:00 — Chat 3\n")


def test_appends_neither_read_nor_hash_the_log_whole_yet_its_document_is_that_of_its_bytes(cortex, org, monkeypatch):
    import cortex.ingest as ingesting
    import cortex.files as writes
    from cortex.hashing import hash_bytes

    cortex.memory.save_context("assistant", session(1), now=NOW)
    path = org / LOG
    read, hashed = [], []
    real_read, real_hash = writes.read_or_none, ingesting.hash_bytes
    monkeypatch.setattr(writes, "read_or_none", lambda p: read.append(p) or real_read(p))
    monkeypatch.setattr(ingesting, "hash_bytes", lambda data: hashed.append(len(data)) or real_hash(data))
    for n in range(2, 6):
        cortex.memory.save_contexts("assistant", [(session(n), NOW), (session(n * 10), NOW)])
    assert read == [] and all(size < 4096 for size in hashed)  # the log is neither read nor hashed whole
    data = path.read_bytes()
    docs = cortex.store.table(ingesting.DOCS_BY_BYTES)
    assert cortex.working().entries[LOG] == docs[hash_bytes(data)]
    assert len(cortex.find(prop=("SESSION", "s-50"))) == 1
    # A hand edit after that: read again, and kept.
    path.write_bytes(data + b"typed by hand\n")
    cortex.memory.save_context("assistant", session(6), now=NOW)
    assert read and path.read_bytes().startswith(data + "typed by hand\n\n* 10:05 — Chat 6\n".encode())
    assert cortex.working().entries[LOG] == docs[hash_bytes(path.read_bytes())]


def big_session(n: int) -> MemoryContext:
    return MemoryContext(summary=f"Talked about topic {n}.\n" + "A long line of the talk.\n" * 400, title=f"Chat {n}",
                         session=f"s-{n}")


def test_appends_write_only_what_they_add_to_the_same_file(cortex, org, monkeypatch):
    import cortex.files as writes

    cortex.memory.save_context("assistant", big_session(1), now=NOW)
    path = org / LOG
    inode, replaced = path.stat().st_ino, []
    monkeypatch.setattr(writes, "write_under", lambda *a, **k: replaced.append(a))
    for n in range(2, 6):
        before = path.read_bytes()
        cortex.memory.save_contexts("assistant", [(big_session(n), NOW), (big_session(n * 10), NOW)])
        assert path.read_bytes().startswith(before + b"\n* 10:05 ")
    assert replaced == [] and path.stat().st_ino == inode
    assert cortex.show(LOG).encode() == path.read_bytes() and len(cortex.find(prop=("SESSION", "s-50"))) == 1


def test_with_no_org_folder_an_append_to_a_large_log_renders_none_of_it(tmp_path, monkeypatch):
    import cortex.org as org_text

    with cx.open(tmp_path / "store", folder=False) as c:
        for n in range(1, 6):  # past the size whose layout is kept
            c.memory.save_context("assistant", big_session(n), now=NOW)
        before = c.show(LOG)
        rendered, render = [], org_text.render
        monkeypatch.setattr(org_text, "render", lambda *a, **k: rendered.append(a) or render(*a, **k))
        c.memory.save_contexts("assistant", [(big_session(6), NOW), (big_session(7), NOW)])
        assert rendered == []
        monkeypatch.setattr(org_text, "render", render)
        assert c.show(LOG).startswith(before + "\n* 10:05 — Chat 6\n") and len(c.find(prop=("SESSION", "s-7"))) == 1


@pytest.mark.parametrize("crlf", [False, True])
def test_a_cut_off_start_of_an_entry_at_the_end_of_a_log_is_found_and_nothing_else_is(crlf):
    entry = render_entry(NOW, "push via github", "- Delivery :: 1\n#+begin_src json\n{}\n#+end_src", "d-1")
    other = render_entry(NOW, "push via github", "- Delivery :: 2", "d-2")
    nl = b"\r\n" if crlf else b"\n"
    log = ("#+TITLE: assistant — 2026-11-21\n\n" + other).encode().replace(b"\n", nl)
    whole = entry.encode().replace(b"\n", nl)
    for cut in range(1, len(whole)):
        assert torn_tail(log + nl + whole[:cut], [other, entry]) == cut
    assert torn_tail(log, [entry]) == 0 and torn_tail(log + nl + whole, [entry]) == 0  # whole: not cut off
    assert torn_tail(log + nl, [entry]) == 0 and torn_tail(log + b"* 10:0", []) == 0
    assert torn_tail(log + b"x* 10:05", [entry]) == 0  # not at a line start: a person's text


def test_what_a_save_records_with_its_ingest_lands_in_that_transaction_or_not_at_all(cortex, org):
    table = cortex.store.table("test.recorded")

    def record(errors):
        table[b"errors"] = repr(errors).encode()

    cortex.memory.save_contexts("assistant", [(session(1), NOW)], then=record)
    assert table[b"errors"] == b"[None]" and len(cortex.find(prop=("SESSION", "s-1"))) == 1
    before = cortex.store.refs.get("working")

    def fails(errors):
        table[b"errors"] = b"not kept"
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        cortex.memory.save_contexts("assistant", [(session(2), NOW)], then=fails)
    assert table[b"errors"] == b"[None]" and cortex.store.refs.get("working") == before
    assert b"Chat 2" in (org / LOG).read_bytes()  # written, not ingested: the next ingest finds it
    cortex.ingest()
    assert len(cortex.find(prop=("SESSION", "s-2"))) == 1
