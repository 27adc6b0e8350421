"""What a tree may name: a relative, normalised path to an Org file that ingest could have read.

A tree comes from ingest, but also from an export anyone can craft, so its paths are
untrusted data until checked: a path that climbs out (`..`), starts at `/` or a drive,
hides (`.git/...`), or carries control characters must never reach the file system.
"""

from __future__ import annotations

import re

ORG_SUFFIX = ".org"
AGENTS = "agents"  # the folder of agents' memory: agents/<agent-id>/ holds one agent's files
MAX_NAME_BYTES = 255  # the longest file name ext4, APFS and NTFS accept
MAX_DEPTH = 64  # folders a path may pass through: deeper is no one's notes, and costs every walk of the tree
MAX_PATH_BYTES = 1024  # a quarter of Linux's PATH_MAX, leaving room for the Org root's own path
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_DRIVE = re.compile(r"^[A-Za-z]:")


def path_problem(path: object) -> str | None:
    """Why `path` cannot name a file of a tree, or None when it can."""
    if not isinstance(path, str) or not path:
        return "not a path"
    if (match := _CONTROL.search(path)) is not None:
        return f"holds the control character {match[0]!r}"
    if path.startswith("/") or _DRIVE.match(path):
        return "is absolute"
    if "\\" in path:
        return "holds a backslash"
    if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    if path.count("/") > MAX_DEPTH:
        return f"lies deeper than {MAX_DEPTH} folders"
    for name in path.split("/"):
        if name in ("", ".", ".."):
            return "is not normalised (empty, '.' or '..' part)" if name != ".." else "climbs out with '..'"
        if name.startswith("."):
            return f"names a hidden file or folder ({name})"
        if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            return f"has a name longer than {MAX_NAME_BYTES} bytes"
    if not path.endswith(ORG_SUFFIX):
        return f"does not name an {ORG_SUFFIX} file"
    return None


def agent_folder_of(path: str) -> str | None:
    """The agent's folder (`agents/<agent-id>/`) a relative path lies in; None outside every agent's folder."""
    parts = path.split("/")
    return f"{parts[0]}/{parts[1]}/" if len(parts) > 2 and parts[0] == AGENTS else None


def tree_problems(paths) -> list[str]:
    """A line for each path of a tree that cannot name a file under the Org root."""
    return [f"{path!r} {problem}" for path in paths if (problem := path_problem(path)) is not None]


def folder_problems(names) -> list[str]:
    """A line for each name of a tree's folder that names more than one file (a path, not a name)."""
    return [f"{name!r} is not a file name" for name in names if not isinstance(name, str) or "/" in name]
