"""Which store a command opens when none is named: the environment's, then the working copy's around the folder
(as git finds its repository), then the repository's, then the user's."""

import json
from pathlib import Path

import pytest

from cortex.location import RECORD, NotACopy, copy_around, default_store_path


def _copy(folder: Path, location: str | None) -> Path:
    (folder / RECORD).parent.mkdir(parents=True)
    record = {"copy": "c1", "store": "s1", "joined": True} | ({"location": location} if location else {})
    (folder / RECORD).write_text(json.dumps(record))
    return folder


def test_the_store_is_the_environments_then_the_copys_then_the_repositorys_then_the_users(tmp_path, monkeypatch):
    monkeypatch.delenv("CORTEX_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    laptop = _copy(tmp_path / "laptop", "postgresql://ann@db/cortex")
    (laptop / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(laptop / "deep" / "er")
    assert default_store_path() == "postgresql://ann@db/cortex"
    assert copy_around()[0] == laptop and copy_around(tmp_path) is None
    monkeypatch.setenv("CORTEX_STORE", str(tmp_path / "named"))
    assert default_store_path() == tmp_path / "named"
    monkeypatch.delenv("CORTEX_STORE")

    repo = tmp_path / "repo"
    (repo / "snapshots").mkdir(parents=True)
    (repo / "org").mkdir()
    monkeypatch.chdir(repo)
    assert default_store_path() == Path("snapshots")
    assert default_store_path(laptop) == "postgresql://ann@db/cortex"  # the Org folder named: its copy's store
    _copy(repo / "org", str(tmp_path / "store"))
    assert default_store_path(repo / "org") == tmp_path / "store"
    monkeypatch.chdir(tmp_path)
    assert default_store_path() == tmp_path / "data" / "cortex" / "store"
    assert default_store_path(_copy(tmp_path / "old", None)) == tmp_path / "data" / "cortex" / "store"


def test_an_unreadable_record_is_named(tmp_path):
    (tmp_path / RECORD).parent.mkdir()
    (tmp_path / RECORD).write_text('{"copy": 7')
    with pytest.raises(NotACopy, match=r"\.cortex/copy: unreadable .*; check the folder out again"):
        copy_around(tmp_path / "below")
