"""Where the store is when no command names one: `CORTEX_STORE`, else the store of the working copy the folder is
in (as git finds its repository from the current folder), else `snapshots/` in the repository, else the per-user
data folder. A working copy's record (`.cortex/copy`) names its store; reading it loads nothing else."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .backends import is_database_url
from .errors import UserError
from .reads import read_bounded
from .words import brief

__all__ = ["RECORD", "RECORD_BYTES", "CopyRecord", "NotACopy", "copy_around", "default_store_path", "read_record"]

RECORD = Path(".cortex") / "copy"
RECORD_BYTES = 4096  # the most a copy's record or base file holds: a larger one is not read


class NotACopy(UserError):
    """A folder that is not a working copy of this store."""


class CopyRecord:
    """What a folder's `.cortex/copy` says: the copy's id, its store's, whether the store knows it yet, and where
    the store is. (A plain class: the REPL reads it before its prompt, where a dataclass or a named tuple would
    cost more than the rest of the record's reading.)"""

    __slots__ = ("copy", "store", "joined", "location")

    def __init__(self, copy: str, store: str | None, joined: bool, location: str | None = None):
        self.copy = copy
        self.store = store  # None: written before copies named their store
        self.joined = joined
        self.location = location  # a folder, or a URL without its password; None: written before records said


def read_record(folder: Path) -> CopyRecord | None:
    """The folder's copy record (None: there is none); NotACopy if it cannot be read."""
    try:
        found = json.loads(read_bounded(folder / RECORD, RECORD_BYTES, "a working copy's record"))
        record = CopyRecord(found["copy"], found.get("store"), found.get("joined", True), found.get("location"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise NotACopy(f"{brief(str(folder / RECORD), 80)}: unreadable ({exc.strerror}); check the folder out "
                       "again") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NotACopy(f"{folder / RECORD}: unreadable ({exc}); check the folder out again") from None
    if not isinstance(record.copy, str) or not isinstance(record.joined, bool) \
            or not isinstance(record.location, str | None):
        raise NotACopy(f"{folder / RECORD}: not a working copy record; check the folder out again")
    return record


def copy_around(start: str | os.PathLike = ".") -> tuple[Path, CopyRecord] | None:
    """The working copy holding `start` (the folder itself or one above it) and its record; None outside any."""
    here = Path(os.path.abspath(start))
    for folder in (here, *here.parents):
        if (folder / RECORD).is_file():
            return folder, read_record(folder)
    return None


def default_store_path(org_root: str | os.PathLike | None = None) -> str | Path:
    """The store when none is named: `CORTEX_STORE` (a folder, or a postgresql:// URL), else that of the working
    copy `org_root` (default: the current folder) is in, else `snapshots/` when run from the repository, else the
    per-user data folder."""
    location = os.environ.get("CORTEX_STORE")
    if not location and (around := copy_around(org_root or ".")) is not None:
        location = around[1].location
    if location:
        return location if is_database_url(location) else Path(location)
    if Path("snapshots").is_dir() and Path("org").is_dir():
        return Path("snapshots")
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "cortex" / "store"
