"""What an Org folder holds: its Org files by relative path, found without recursion, without following a link
out of the root (or out of an agent's folder), and the files that were skipped and why.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR, S_ISREG

from .errors import UserError, located
from .files import is_leftover
from .paths import MAX_DEPTH, ORG_SUFFIX, agent_folder_of

__all__ = ["FolderScan", "Problem", "link_problem", "org_files", "org_paths", "relative_path", "scan_folder"]


@dataclass(frozen=True)
class Problem:
    """A file that could not be ingested, and why."""

    path: str
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        return located(self.path, self.line, self.reason)


@dataclass
class FolderScan:
    """The Org files under a folder, the ones skipped and why, and temporary files killed writes left."""

    paths: list[str] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)


def scan_folder(folder: str | os.PathLike, root: str | os.PathLike | None = None, *, deep: bool = True) -> FolderScan:
    """Every Org file under `folder` (not `deep`: its own files only, not its subfolders') by relative POSIX
    path, skipping hidden ones, in a stable order: a folder's files by name, then its subfolders by name.
    Links to folders are not followed, links to files only to files inside `root` (default: `folder`); a
    link that loops or breaks is skipped, and so is a folder deeper than a tree may name (`paths.MAX_DEPTH`)."""
    scan = FolderScan()
    real_root = Path(os.path.realpath(root if root is not None else folder))
    stack = [(os.fspath(folder), "")]  # folders to visit, the next on top: nesting costs no recursion
    while stack:
        directory, prefix = stack.pop()
        if prefix.count("/") > MAX_DEPTH:
            scan.skipped.append(Problem(prefix.rstrip("/"), f"a folder deeper than {MAX_DEPTH} levels: not read"))
            continue
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:  # unreadable or gone: as if empty, like os.walk
            continue
        for entry in entries:
            if entry.name.startswith("."):
                if is_leftover(directory, entry.name):
                    scan.leftovers.append(entry.path)
            elif entry.name.endswith(ORG_SUFFIX) and not entry.is_dir(follow_symlinks=False):
                problem = link_problem(entry.path, real_root) if entry.is_symlink() else \
                    None if entry.is_file(follow_symlinks=False) else "not a regular file"
                if problem is None:
                    scan.paths.append(prefix + entry.name)
                elif problem:
                    scan.skipped.append(Problem(prefix + entry.name, problem))
        stack.extend((entry.path, prefix + entry.name + "/") for entry in reversed(entries)
                     if deep and not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False))
    return scan


def link_problem(path: str, real_root: Path) -> str | None:
    """Why the link at `path` is not followed ("" for a link to a folder, which names no file), or None. A link in
    an agent's folder is followed only to a file in that folder: what an agent's folder holds is that agent's
    alone (a server bound to the agent sees it), and it would hold another's file under its own name."""
    try:
        real = Path(os.path.realpath(path, strict=True))
        mode = os.stat(real).st_mode
    except OSError as exc:
        return "a symbolic link that loops" if exc.errno == errno.ELOOP else f"a broken symbolic link ({exc.strerror})"
    if S_ISDIR(mode):
        return ""
    if not real.is_relative_to(real_root):
        return f"a symbolic link out of the Org root (to {real}): not followed"
    folder = Path(os.path.realpath(os.path.dirname(path)))
    agent = agent_folder_of((folder / os.path.basename(path)).relative_to(real_root).as_posix()) \
        if folder.is_relative_to(real_root) else None
    if agent is not None and not real.relative_to(real_root).as_posix().startswith(agent):
        return f"a symbolic link out of the agent's folder {agent} (to {real.relative_to(real_root)}): not followed"
    return None if S_ISREG(mode) else "a link to something that is not a regular file"


def org_paths(folder: str | os.PathLike) -> list[str]:
    """Relative POSIX paths of every Org file under `folder`, as `scan_folder` finds them."""
    return scan_folder(folder).paths


def org_files(folder: Path) -> list[Path]:
    """Every Org file under `folder`, skipping hidden folders and files, in a stable order."""
    return [folder / rel for rel in org_paths(folder)]


def relative_path(root: Path, path: Path) -> str:
    """`path` as a POSIX path relative to the Org root, or a UserError if it lies outside."""
    try:
        return Path(os.path.abspath(path)).relative_to(root).as_posix()
    except ValueError:
        raise UserError(f"{path}: outside the Org root {root} this store tracks") from None
