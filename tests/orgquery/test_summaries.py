"""What each document holds (the tags it names, whether the agenda may list a headline of it), read once per document
and kept beside the store, never trusted across a purge."""

import shutil

import cortex.api as cx
from cortex.orgquery import summaries
from cortex.orgquery.summaries import SUMMARIES_FILE, files_dated, files_naming

FILES = {
    "a.org": "#+FILETAGS: :ops:\n* Deploy\n",
    "deep/b.org": "* Projects\n** Cluster :infra:\n*** TODO Rotate the key :dev:\n",
    "c.org": "* TODO Unrelated :home:\n",
}


def opened(tmp_path, files=FILES):
    org = tmp_path / "org"
    for path, text in files.items():
        (org / path).parent.mkdir(parents=True, exist_ok=True)
        (org / path).write_text(text)
    c = cx.open(tmp_path / "store", org)
    c.ingest()
    return c, org


def naming(c, tag, folder) -> list[str]:
    """The paths of the files of the working state naming `tag`."""
    return sorted(files_naming(c.store, c.working, tag, folder).entries)


def reads(monkeypatch) -> list:
    """The documents read from here on."""
    read, summary = [], summaries._summary
    monkeypatch.setattr(summaries, "_summary",
                        lambda store, document: read.append(document.oid) or summary(store, document))
    return read


def test_a_file_names_its_filetags_and_every_headlines_own_tags(tmp_path):
    c, _ = opened(tmp_path)
    with c:
        folder = c._index_folder()
        assert naming(c, "ops", folder) == ["a.org"]
        assert naming(c, "dev", folder) == ["deep/b.org"]  # three levels down
        assert naming(c, "infra", None) == ["deep/b.org"]
        assert naming(c, "Dev", folder) == []  # Org's tags are case-sensitive
        assert naming(c, "missing", folder) == []


def test_each_document_is_read_once_and_a_change_reads_only_its_own(tmp_path, monkeypatch):
    c, org = opened(tmp_path)
    with c:
        naming(c, "dev", c._index_folder())
        assert (c._index_folder() / SUMMARIES_FILE).exists()
    read = reads(monkeypatch)
    with cx.open(tmp_path / "store", org) as c:  # a new session reads what the last one kept
        assert naming(c, "dev", c._index_folder()) == ["deep/b.org"]
        assert read == []
        (org / "c.org").write_text("* TODO Unrelated :home:dev:\n")
        c.ingest()
        assert naming(c, "dev", c._index_folder()) == ["c.org", "deep/b.org"]
        assert read == [c.working().entries["c.org"]]


def test_with_no_folder_nothing_is_kept(tmp_path, monkeypatch):
    c, _ = opened(tmp_path)
    with c:
        read = reads(monkeypatch)
        for _ in range(2):
            assert naming(c, "ops", None) == ["a.org"]
        assert len(read) == 6 and not (c._index_folder() / SUMMARIES_FILE).exists()


def test_what_was_kept_before_a_purge_is_not_trusted_after_it(tmp_path, monkeypatch):
    """As on another machine, whose folder still holds what it kept: the purge key it was made after differs."""
    secret = "* Facts\n- A secret :project_x:\n** Kept :project_x:\n"
    c, org = opened(tmp_path, {**FILES, "agents/old/memory.org": secret})
    with c:
        folder = c._index_folder()
        assert naming(c, "project_x", folder) == ["agents/old/memory.org"]
        shutil.copy(folder / SUMMARIES_FILE, tmp_path / "kept")
        c.memory.purge("old", hard=True)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "kept", folder / SUMMARIES_FILE)
        read = reads(monkeypatch)
        assert naming(c, "project_x", folder) == []
        assert len(read) == 3  # every document read again
        assert b"project_x" not in (folder / SUMMARIES_FILE).read_bytes()


def test_a_folder_it_cannot_write_only_costs_the_reading(tmp_path):
    c, _ = opened(tmp_path)
    with c:
        (tmp_path / "a-file").write_text("not a folder")
        assert naming(c, "ops", tmp_path / "a-file") == ["a.org"]


def test_a_damaged_file_is_read_again(tmp_path, monkeypatch):
    c, _ = opened(tmp_path)
    with c:
        folder = c._index_folder()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SUMMARIES_FILE).write_bytes(b"\x93\x01not msgpack")
        read = reads(monkeypatch)
        assert naming(c, "ops", folder) == ["a.org"]
        assert len(read) == 3


def test_the_files_the_agenda_may_list_a_headline_of(tmp_path):
    c, org = opened(tmp_path, {
        "planned.org": "* Projects\n** TODO Ship\n   DEADLINE: <2026-11-30 Mon>\n",
        "stamped.org": "* Notes\n** Met Dana <2026-11-24 Tue 10:00>\n",
        "diary.org": "* Birthdays\n%%(diary-anniversary 3 31 2000) Dana\n",
        "inactive.org": "* Notes\n** Logged [2026-11-24 Tue]\n",
        "none.org": "* Notes\n** Plain\n",
    })
    with c:
        assert sorted(files_dated(c.store, c.working, c._index_folder()).entries) == [
            "diary.org", "planned.org", "stamped.org"]
        assert listed(c) == ["planned.org", "stamped.org"]
        (org / "none.org").write_text("* Notes\n** TODO Plain\n   SCHEDULED: <2026-11-25 Wed>\n")
        c.ingest()
        assert listed(c) == ["none.org", "planned.org", "stamped.org"]


def listed(c) -> list[str]:
    """The files of the week's agenda entries from 2026-11-24."""
    return sorted({entry.node.path for entry in c.agenda(7, "2026-11-24", today="2026-11-24").entries})


def test_find_by_tag_reads_the_files_naming_it_and_finds_what_every_file_gives(tmp_path, monkeypatch):
    from cortex import query

    c, _ = opened(tmp_path)
    with c:
        for tag in ("ops", "infra", "dev", "home", "missing"):
            assert c.find(tag=tag, all=True) == query.find(c.store, c.working(), tag=tag)
        assert [n.title for n in c.find(tag="infra")] == ["Cluster", "Rotate the key"]  # inherited too
        read = reads(monkeypatch)
        walked = []
        monkeypatch.setattr(query, "walk_document", lambda store, path, document, walk=query.walk_document:
                            walked.append(path) or walk(store, path, document))
        assert [n.title for n in c.find(tag="ops", todo="TODO")] == []
        assert read == [] and walked == ["a.org"]
