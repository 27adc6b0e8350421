"""Writing files safely: atomic replacement, and Org files confined to their root.

A write goes to a temporary file beside its target, is fsynced and renamed over it, so the
target holds its old bytes or all of the new ones, even after a crash. The new file keeps the
old one's mode (and owner, where the process may set it), and a symbolic link is written
through, to its target. Writes under an Org root resolve the real folder first and refuse one
that leaves the root; the folders are then opened one by one without following links, so a
folder swapped for a link meanwhile is refused too. A caller can have the target compared
with what it expects, so an edit saved meanwhile is never overwritten: a target that differs is
left untouched (its path never shows the new bytes, which an editor reading it then would take
for the file's); where the system can (renameat2 on Linux), one that holds what is expected is
exchanged with the new file in one step, and the one taken out compared again and put back if a
save landed in between, so a save landing at any moment stays; elsewhere the target is compared
right before the rename.

Temporary files are named `.NAME.PID.RANDOM.tmp`: one left by a killed process is found and
removed by the next scan of its folder (`is_leftover`).

A sync replaces its files again and again, and on most filesystems writing over a file's blocks is
several times faster than finding blocks for a new one. So the version a `Staged` write replaces is
kept, under its temporary name, as the spare the next staging of that file in this process writes
over (`free`): for a large file only, while no other name links it, and for a few minutes (removed
at exit). A reader that had the old version open then sees it change, as when an editor saves in
place; `ingest` notices and reads again.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import re
import secrets
import shutil
import stat as stats
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .bounded import BoundedDict
from .errors import UserError
from .locks import alive
from .paths import agent_folder_of, path_problem
from .reads import ORG_FILE, read_bounded

LEFTOVER_SECONDS = 600  # no write takes this long: an older temporary file was abandoned
SPARE_SECONDS = LEFTOVER_SECONDS / 2  # a spare kept longer is not written over (a scan may be removing it)
COMPARED_BYTES = 1 << 18  # read at once by `file_holds`
TAIL_BYTES = 4096  # the last bytes of a file compared before appending to it, when its stat is as last left
SPARE_MIN_BYTES = 64 * 1024  # a smaller file is written anew as fast: no spare of it is kept
# (process, a file's real path) -> its spare's name beside it, and that folder (opened: removed from there)
_spares: dict[tuple[int, str], tuple[str, int]] = {}
# a file's real path -> its stat and last bytes as this process last appended to it (`append_under`)
_marks: BoundedDict = BoundedDict(64)
# `.NAME.PID.RANDOM.tmp`, and `.NAME.RANDOM.tmp` as earlier versions (mkstemp) named them
_TEMPORARY = re.compile(r"^\..+\.org\.(?:(\d+)\.[0-9a-f]{8}|[a-z0-9_]{8})\.tmp$")
_FULL = (errno.ENOSPC, errno.EDQUOT)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class OutsideRoot(UserError):
    """A path that is not a file under the Org root, or reaches outside it through a link."""


class ChangedMeanwhile(UserError):
    """A file changed between the moment a new version was computed and the moment it was written."""

    def __init__(self, path: Path):
        super().__init__(f"{path}: changed while it was being replaced; it was left as it is")
        self.path = path


class DiskFull(UserError):
    """The disk refused a file's new bytes; the file keeps its old ones."""

    def __init__(self, path: Path):
        try:
            free = f"{shutil.disk_usage(path.parent).free:,} bytes free"
        except OSError:
            free = "no space left"
        super().__init__(f"{path}: the disk is full ({free}); the file was left as it was")
        self.path = path


Check = Callable[[Path], bool]  # is the file at this path still as expected?


def write_atomically(path: str | os.PathLike, data: bytes, unchanged: Check | None = None,
                     durable: bool = True) -> None:
    """Replace the file at `path` (or the file its link points at) with `data` atomically; not `durable`:
    without waiting for the disk, so a crash may leave the old file (never a torn one, on journalled filesystems)."""
    real = Path(os.path.realpath(path))
    real.parent.mkdir(parents=True, exist_ok=True)
    with _opened(real.parent) as folder:
        _replace(folder, real, data, unchanged, durable)


def confined(root: Path, rel: str, follow: bool = True) -> Path:
    """The real path of the Org file `rel` under `root` (of its folder when not `follow`ing a link
    there); OutsideRoot when `rel` is not a file under the root or reaches outside it."""
    problem = path_problem(rel)
    if problem is not None:
        raise OutsideRoot(f"{rel!r}: cannot be a file under the Org root: it {problem}")
    real_root = Path(os.path.realpath(root))
    lexical = real_root / rel
    real = Path(os.path.realpath(lexical if follow else lexical.parent))
    real = real if follow else real / lexical.name
    if real == real_root or not real.is_relative_to(real_root):
        raise OutsideRoot(f"{root / rel}: leads outside the Org root {root} through a symbolic link (to {real})")
    return real


def write_under(root: Path, rel: str, data: bytes, unchanged: Check | None = None) -> None:
    """Replace the Org file `rel` under `root` atomically, never writing outside the root."""
    Staged(root, rel, data).put(unchanged)


class Staged:
    """New bytes for the Org file `rel` under `root`, written and synced beside it under a temporary
    name (never outside the root): `put` renames them over the file, `drop` removes them. Staging
    can run while other work waits (a store's commit), leaving only the rename for after."""

    def __init__(self, root: Path, rel: str, data: bytes):
        self.target = confined(root, rel)
        self._folder: int | None = _open_under(Path(os.path.realpath(root)), self.target.parent)
        self._old: str | None = None
        try:
            self._temporary = (_write_spare(self._folder, self.target, data)
                               or _write_temporary(self._folder, self.target, data))
            self._inode = os.stat(self._temporary, dir_fd=self._folder, follow_symlinks=False).st_ino
        except BaseException:
            os.close(self._folder)
            raise

    def put(self, unchanged: Check | None = None, *, free_later: bool = False) -> None:
        """Put the new bytes in place of the file, if `unchanged` says it still holds what was expected
        (ChangedMeanwhile otherwise, the new bytes dropped). `free_later`: the old file stays linked
        under a temporary name until `free`, which also makes the rename durable: freeing the old
        blocks and syncing the folder are the slow part of a rename."""
        try:
            old = _rename_over(self._folder, self._temporary, self.target, unchanged, durable=not free_later,
                               keep_old=free_later)
        except BaseException:
            self._close(None)
            raise
        if free_later:
            self._old = old
        else:
            self._close(old)

    def in_place(self) -> bool:
        """After `put`: whether the file is still the one put in place, not replaced since (by an editor's
        save, say, which may have been made from what it held before)."""
        try:
            return os.stat(self.target, follow_symlinks=False).st_ino == self._inode
        except OSError:
            return False

    def free(self) -> None:
        """After `put(free_later=True)`: make the rename durable, keep the old bytes as the spare of the
        file (see the module) or free them, and close the folder (once: later calls do nothing)."""
        if self._folder is None:
            return
        try:
            os.fsync(self._folder)
        finally:
            if self._old is not None and _keep_spare(self._folder, self._old, self.target):
                self._old = None
            self._close(self._old)

    def drop(self) -> None:
        """Remove the new bytes, leaving the file as it is."""
        self._close(self._temporary)

    def _close(self, leftover: str | None) -> None:
        folder, self._folder = self._folder, None
        if folder is not None:
            try:
                if leftover is not None:
                    _unlink_quietly(leftover, folder)
            finally:
                os.close(folder)


def file_holds(path: Path, data: bytes) -> bool:
    """Whether the file at `path` holds exactly `data`, compared block by block as it is read: reading it
    whole would take fresh memory, slower to fill than comparing."""
    block = bytearray(min(len(data) + 1, COMPARED_BYTES))
    view, at = memoryview(block), 0
    try:
        with open(path, "rb", buffering=0) as file:
            if os.fstat(file.fileno()).st_size != len(data):
                return False
            while count := file.readinto(block):
                if not data.startswith(view[:count], at):
                    return False
                at += count
    except OSError:  # gone, or no longer a file one can read
        return False
    return at == len(data)


def remove_under(root: Path, rel: str, unchanged: Check | None = None) -> None:
    """Remove the Org file `rel` under `root` (a link itself, not its target), then the folders this
    left empty, up to the root."""
    real_root = Path(os.path.realpath(root))
    target = confined(root, rel, follow=False)
    with _folder_under(real_root, target.parent) as folder:
        if unchanged is None:
            os.unlink(target.name, dir_fd=folder)
        else:
            _take_away(folder, target, unchanged)
        os.fsync(folder)
    parent = target.parent
    while parent != real_root:
        try:
            parent.rmdir()
        except OSError:  # not empty (or not ours to remove): keep it and what is above it
            return
        parent = parent.parent


class FilesBusy(UserError):
    """Another process held a folder's files too long, or a file kept changing while it was being written."""


EDIT_ATTEMPTS = 5  # reads of a file that keeps changing while an edit of it is written


def read_or_none(path: Path) -> bytes | None:
    """A file's bytes (at most the bound of an Org file), or None when it does not exist."""
    try:
        return read_bounded(path, ORG_FILE, "an Org file")
    except FileNotFoundError:
        return None


def holds(path: Path, data: bytes | None) -> bool:
    """Whether the file holds exactly `data` (None: the file does not exist)."""
    return not os.path.exists(path) if data is None else file_holds(path, data)


class Appended:
    """New bytes that are the bytes an edit was given (`old`, bytes or an `Appended` itself) with `addition` after
    them: `edit_file` appends them, writing only the addition. Their length, first line and last bytes are read
    without joining them: the bytes whole (`data`) are made once asked for, so that appends one after the other
    cost what they add until then. Once made, the bytes before no longer need to be kept (`old` is None)."""

    __slots__ = ("old", "addition", "size", "first_line", "_data")

    def __init__(self, old: "bytes | Appended", addition: bytes):
        self.old, self.addition, self._data = old, addition, None
        self.size = len(old) + len(addition)
        self.first_line = old.first_line if isinstance(old, Appended) else _first_line(old, addition)

    def __len__(self) -> int:
        return self.size

    @property
    def data(self) -> bytes:
        """The new bytes whole."""
        if self._data is None:
            additions, at = [self.addition], self.old
            while isinstance(at, Appended) and at._data is None:
                additions.append(at.addition)
                at = at.old
            additions.append(at._data if isinstance(at, Appended) else at)
            self._data, self.old = b"".join(reversed(additions)), None
        return self._data

    def tail(self, count: int) -> bytes:
        """The last `count` bytes (fewer when there are fewer)."""
        if self._data is not None:
            return self._data[-count:]
        parts, at = [], self
        while isinstance(at, Appended) and at._data is None:
            if count <= len(at.addition):  # within this addition: nothing before it is read
                parts.append(at.addition[len(at.addition) - count:])
                return b"".join(reversed(parts))
            parts.append(at.addition)
            count -= len(at.addition)
            at = at.old
        parts.append((at.data if isinstance(at, Appended) else at)[-count:])
        return b"".join(reversed(parts))


def whole(data: "bytes | Appended | None") -> bytes | None:
    """Bytes given as they are or as `Appended`, whole."""
    return data.data if isinstance(data, Appended) else data


def tail_of(data: "bytes | Appended", count: int) -> bytes:
    """The last `count` bytes of bytes given as they are or as `Appended`."""
    return data.tail(count) if isinstance(data, Appended) else data[-count:]


def _first_line(old: bytes, addition: bytes) -> bytes:
    """The first line of `old` with `addition` after it (with its line end)."""
    end = old.find(b"\n")
    if end >= 0:
        return old[:end + 1]
    end = addition.find(b"\n")
    return old + (addition if end < 0 else addition[:end + 1])


def edit_file(root: Path, rel: str, compute: Callable[[bytes | Appended | None], bytes | Appended | None],
              expected: bytes | Appended | None = None) -> tuple[bool, bytes | Appended | None]:
    """Make the Org file `rel` under `root` hold `compute(its current bytes)` (None: no file), atomically, unless
    the file changes meanwhile; return whether it changed, and its bytes now. Nothing is read or written
    outside the root, nor through a link out of an agent's folder.

    The bytes `compute` was given are compared with the file right before the new version replaces it
    (or it is removed); when they differ, it runs again on the file's new bytes. `expected` is what the
    caller last read or wrote there: the first run computes from it, so the file is read only when it
    has changed. A UserError from `compute` stands only if the file still holds what it was given.
    New bytes given as `Appended` to what `compute` was given are appended (`append_under`): the write
    costs what it adds, and they are returned as given. (`expected` may be an `Appended` too: then it is what
    `compute` is first given.)
    """
    _in_its_agent_folder(root, rel)
    path = None if expected is not None else confined(root, rel)  # (write_under confines what it writes)
    old = expected if expected is not None else read_or_none(path)
    for _ in range(EDIT_ATTEMPTS):
        try:
            new = compute(old)
        except UserError:
            path = path or confined(root, rel)
            if holds(path, whole(old)):
                raise
            old = read_or_none(path)  # the error came from bytes the file no longer holds
            continue
        path = path or confined(root, rel)
        try:
            if isinstance(new, Appended):
                if old is not None and new.old is old and new.addition:
                    append_under(root, rel, old, new.addition)
                    return True, new
                new = new.data
            old = whole(old)
            if new == old:
                if holds(path, old):
                    return False, old
            elif new is None:
                remove_under(root, rel, lambda real: holds(real, old))
                return True, None
            else:
                write_under(root, rel, new, lambda real: holds(real, old))
                return True, new
        except ChangedMeanwhile:
            pass
        old = read_or_none(path)
    raise FilesBusy(f"{path}: changed {EDIT_ATTEMPTS} times while it was being written; nothing was written")


def append_under(root: Path, rel: str, old: bytes | Appended, addition: bytes) -> None:
    """Append `addition` to the Org file `rel` under `root` if it holds exactly `old`, and wait for the disk
    (ChangedMeanwhile, nothing written, if it does not). Nothing is read or written outside the root.

    The file is known to hold `old` without reading it when it is as this process last left it (the
    same size, times and identity) and still ends with `old`'s last bytes; otherwise it is compared
    whole. The addition goes after exactly those bytes; a write the disk refuses is cut off again, so
    the file holds `old` or `old` and all of the addition. (A process killed while writing may leave
    part of it: readers of what is appended must tell a whole addition from a cut one.) The file is
    checked again after the write: one replaced meanwhile (an editor's save) is ChangedMeanwhile."""
    target = confined(root, rel)
    with _folder_under(Path(os.path.realpath(root)), target.parent) as folder:
        try:
            fd = os.open(target.name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP):  # gone, or a link put in its place meanwhile
                raise ChangedMeanwhile(target) from None
            raise
        try:
            before = os.fstat(fd)
            if not stats.S_ISREG(before.st_mode):
                raise OutsideRoot(f"{target}: not a regular file; nothing was written")
            if not _ends_as(fd, before, target, old):
                raise ChangedMeanwhile(target)
            try:
                view, done = memoryview(addition), 0
                while done < len(addition):
                    done += os.pwrite(fd, view[done:], len(old) + done)
                _sync_data(fd)
            except BaseException as exc:
                with suppress(OSError):
                    os.ftruncate(fd, len(old))
                    _sync_data(fd)
                if isinstance(exc, OSError) and exc.errno in _FULL:
                    raise DiskFull(target) from None
                raise
            after = os.fstat(fd)
            try:
                placed = os.stat(target.name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                placed = None
            if placed is None or (placed.st_ino, placed.st_dev) != (after.st_ino, after.st_dev):
                _marks.pop(str(target), None)
                raise ChangedMeanwhile(target)  # replaced meanwhile: the save holds what it was made from
            _marks[str(target)] = stat_signature(after), (tail_of(old, TAIL_BYTES) + addition)[-TAIL_BYTES:]
        finally:
            os.close(fd)


def as_appended(root: Path, rel: str, data: bytes | Appended) -> bool:
    """Whether the Org file `rel` under `root` holds `data` as this process's last append there left it: the
    same stat (size, times, identity) and last bytes, so that the rest need not be read (False when that
    cannot be told so: the file was not appended to here, or changed since)."""
    try:
        target = confined(root, rel)
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, OutsideRoot):
        return False
    try:
        mark = _marks.get(str(target))
        return mark is not None and mark[0] == stat_signature(os.fstat(fd)) and len(data) == mark[0][0] and \
            tail_of(data, len(mark[1])) == mark[1] and os.pread(fd, len(mark[1]), len(data) - len(mark[1])) == mark[1]
    finally:
        os.close(fd)


def _ends_as(fd: int, stat: os.stat_result, target: Path, old: bytes | Appended) -> bool:
    """Whether the open file `fd` (its `stat`) holds exactly `old`: its size and last bytes, when this
    process last left it so; else compared whole."""
    if stat.st_size != len(old):
        return False
    mark = _marks.get(str(target))
    tail = tail_of(old, TAIL_BYTES)
    if mark is not None and mark[0] == stat_signature(stat) and mark[1] == tail:
        return os.pread(fd, len(tail), len(old) - len(tail)) == tail
    return file_holds(target, whole(old))  # (a file put in its place meanwhile is found after the write)


def stat_signature(stat: os.stat_result) -> tuple:
    """What changes whenever a file's bytes do: size, times (ctime cannot be set back) and identity."""
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev


def _sync_data(fd: int) -> None:
    """Wait for the disk to hold a file's bytes (and its size)."""
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _in_its_agent_folder(root: Path, rel: str) -> None:
    """Refuse a file of an agent's folder that is a symbolic link out of that folder: an agent's memory is written
    in its folder only, never through its name into another agent's file (ingest does not follow such a link).
    A link out of the Org root is refused where the path is confined, as for any write."""
    agent = agent_folder_of(rel)
    if agent is None or not os.path.islink(root / rel):
        return
    real, folder = os.path.realpath(root / rel), os.path.realpath(root / agent)
    if real.startswith(os.path.join(os.path.realpath(root), "")) and not real.startswith(os.path.join(folder, "")):
        raise UserError(f"{root / rel}: a symbolic link out of the agent's folder {agent} (to {real}); an agent's "
                        "memory is written in its own folder only")


def _take_away(folder: int, target: Path, unchanged: Check) -> None:
    """Remove `target` from the open `folder` if `unchanged` says it may: checked in place (one that already
    differs is never moved: it never seems gone to a reader), then renamed away (one step), checked there
    again and put back unless it is as expected, so that a save landing meanwhile is never removed (and a
    file saved in its place meanwhile, newer, stays)."""
    if not unchanged(target):
        raise ChangedMeanwhile(target)
    taken = _temporary_name(target.name)
    try:
        os.rename(target.name, taken, src_dir_fd=folder, dst_dir_fd=folder)
    except FileNotFoundError:
        raise ChangedMeanwhile(target) from None
    fit = False
    try:
        fit = unchanged(target.with_name(taken))
    finally:
        if not fit:
            try:
                os.link(taken, target.name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            except FileExistsError:  # saved in its place meanwhile: that one stays
                pass
            except OSError:  # no links on this filesystem
                os.rename(taken, target.name, src_dir_fd=folder, dst_dir_fd=folder)
        _unlink_quietly(taken, folder)
    if not fit:
        raise ChangedMeanwhile(target)


def is_leftover(folder: str, name: str, now: float | None = None) -> bool:
    """Whether `name` in `folder` is a temporary file a killed write left behind."""
    match = _TEMPORARY.match(name)
    if match is None:
        return False
    if match[1] is not None and not alive(int(match[1])):
        return True
    try:
        age = (now or time.time()) - os.stat(os.path.join(folder, name), follow_symlinks=False).st_mtime
    except OSError:
        return False
    return age > LEFTOVER_SECONDS


def remove_leftovers(paths: list[str]) -> None:
    """Remove temporary files that killed writes left behind (gone already is fine)."""
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def remove_stale(folder: Path, now: float | None = None) -> None:
    """Remove the hidden files and folders a killed save left in `folder`, one cortex alone writes to
    (the search indexes): any older than a save could take."""
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(".")]
    except OSError:
        return
    for entry in entries:
        try:
            if (now or time.time()) - entry.stat(follow_symlinks=False).st_mtime <= LEFTOVER_SECONDS:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except FileNotFoundError:  # another process cleaned it first
            pass


def remove_tree(folder: Path) -> None:
    """Remove a folder and everything under it, however deeply nested (`shutil.rmtree` recurses), never
    following a link."""
    stack, emptied = [os.fspath(folder)], []
    while stack:
        directory = stack.pop()
        emptied.append(directory)
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    os.unlink(entry.path)
    for directory in reversed(emptied):
        os.rmdir(directory)


@contextmanager
def _opened(folder: Path) -> Iterator[int]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _folder_under(real_root: Path, folder: Path) -> Iterator[int]:
    """`folder` opened from the root down, creating missing folders and following no link on the way."""
    fd = _open_under(real_root, folder)
    try:
        yield fd
    finally:
        os.close(fd)


def _open_under(real_root: Path, folder: Path) -> int:
    """A descriptor of `folder` opened from the root down, creating missing folders and following no link."""
    fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in folder.relative_to(real_root).parts:
            try:
                step = os.open(name, _DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(name, 0o777, dir_fd=fd)
                step = os.open(name, _DIRECTORY, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise OutsideRoot(f"{folder}: became a symbolic link or a file while writing under the Org "
                                  f"root {real_root}; nothing was written there") from None
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _replace(folder: int, target: Path, data: bytes, unchanged: Check | None, durable: bool = True) -> None:
    """Write `data` to a temporary file in the open `folder` and rename it over `target`'s name."""
    old = _rename_over(folder, _write_temporary(folder, target, data, durable), target, unchanged, durable)
    if old is not None:
        _unlink_quietly(old, folder)


def _write_temporary(folder: int, target: Path, data: bytes, durable: bool = True) -> str:
    """Write `data` to a new temporary file beside `target` in the open `folder` (keeping the target's
    mode and owner); return its name."""
    name = target.name
    try:
        old = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and not stats.S_ISREG(old.st_mode):
        raise OutsideRoot(f"{target}: not a regular file; nothing was written")
    temporary = _temporary_name(name)
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=folder)
    except OSError as exc:
        raise DiskFull(target) if exc.errno in _FULL else exc
    with _or_removed(temporary, folder, target), os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        if old is not None:
            _keep_owner_and_mode(out.fileno(), old)
        if durable:
            os.fsync(out.fileno())
    return temporary


def _write_spare(folder: int, target: Path, data: bytes) -> str | None:
    """Write `data` over the spare of `target` (in the open `folder`) kept by this process, and sync it;
    return its name, or None when there is none fit to write over (then it is removed)."""
    kept = _spares.pop((os.getpid(), str(target)), None)
    if kept is None:
        return None
    name, kept_in = kept
    os.close(kept_in)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError:  # removed meanwhile (taken for a leftover, say)
        return None
    try:
        spare, old = os.fstat(fd), os.stat(target.name, dir_fd=folder, follow_symlinks=False)
        # Not if another name links it now, or a scan may be taking it for a leftover.
        if (stats.S_ISREG(spare.st_mode) and spare.st_nlink == 1 and stats.S_ISREG(old.st_mode)
                and time.time() - spare.st_mtime < SPARE_SECONDS):
            view, done = memoryview(data), 0
            while done < len(data):
                done += os.pwrite(fd, view[done:], done)
            os.ftruncate(fd, len(data))
            _keep_owner_and_mode(fd, old)
            os.fsync(fd)
            return name
    except OSError as exc:
        if exc.errno in _FULL:
            _unlink_quietly(name, folder)
            raise DiskFull(target) from None
    finally:
        os.close(fd)
    _unlink_quietly(name, folder)
    return None


def _keep_spare(folder: int, name: str, target: Path) -> bool:
    """Keep the file `name` (in the open `folder`), the version of `target` just replaced, as its spare,
    if it is large and nothing else links it; freshly dated, so that no scan takes it for a leftover."""
    try:
        old = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if old.st_nlink != 1 or old.st_size < SPARE_MIN_BYTES:
            return False
        os.utime(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return False
    _remove_spare(_spares.pop((os.getpid(), str(target)), None))
    _spares[os.getpid(), str(target)] = name, os.dup(folder)
    return True


def _remove_spare(kept: tuple[str, int] | None) -> None:
    """Remove a spare from the folder it was kept in (None: there is none)."""
    if kept is not None:
        name, folder = kept
        try:
            _unlink_quietly(name, folder)
        finally:
            os.close(folder)


@atexit.register
def _remove_spares() -> None:
    """Remove the spares this process kept (those a killed process kept are found as leftovers)."""
    for (pid, target), kept in list(_spares.items()):
        if pid == os.getpid():
            with suppress(OSError):
                _remove_spare(kept)


def _temporary_name(name: str) -> str:
    """A new name for a temporary file beside the file `name`, found as a leftover if its process dies."""
    return f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _rename_over(folder: int, temporary: str, target: Path, unchanged: Check | None, durable: bool = True,
                 keep_old: bool = False) -> str | None:
    """Put the `temporary` file in place of `target` in the open `folder`, if `unchanged` says it may
    (ChangedMeanwhile otherwise, the temporary file removed). Returns the name the replaced file goes by
    now, if it still has one (always when `keep_old` and there was one): the caller frees it.

    The target is checked first: one that already differs is left as it is, its path never showing the
    new bytes (an editor reading it while they were there would save its next edit over them, and the
    put-back file would look unchanged to it). Then, where the system can, the two files are exchanged
    (one atomic step) and the one that comes out is checked again, then put back if it is not as
    expected: so an editor's save that lands while the check reads is never unlinked by the rename,
    as it would be by checking first, then renaming over."""
    with _or_removed(temporary, folder, target):
        if unchanged is None and not keep_old:
            os.replace(temporary, target.name, src_dir_fd=folder, dst_dir_fd=folder)
            old = None
        else:
            if unchanged is not None and not unchanged(target):
                raise ChangedMeanwhile(target)
            exchanged, old = _exchange(folder, temporary, target, unchanged)
            if not exchanged:
                old = _check_and_rename(folder, temporary, target, unchanged, keep_old)
    if durable:
        os.fsync(folder)
    return old


def _exchange(folder: int, temporary: str, target: Path, unchanged: Check | None) -> tuple[bool, str | None]:
    """Exchange `temporary` with `target` and check the file that came out (now named `temporary`).
    Returns whether this system could, and that name (None: there was no file, and the new one was
    placed only as there was still none)."""
    ours = os.stat(temporary, dir_fd=folder, follow_symlinks=False).st_ino
    exchanged = _renameat2(folder, temporary, target.name, _RENAME_EXCHANGE)
    if exchanged is None:
        return False, None
    if not exchanged:  # no file there
        if unchanged is not None and not unchanged(target):
            raise ChangedMeanwhile(target)
        placed = _renameat2(folder, temporary, target.name, _RENAME_NOREPLACE)
        if placed is None:  # this filesystem cannot say: renamed over (one made meanwhile is lost)
            os.replace(temporary, target.name, src_dir_fd=folder, dst_dir_fd=folder)
        elif not placed:
            raise ChangedMeanwhile(target)  # one was made meanwhile: it is someone's
        return True, None
    try:
        fit = unchanged is None or unchanged(target.with_name(temporary))
    except BaseException:
        _put_back(folder, temporary, target, ours)
        raise
    if not fit:
        _put_back(folder, temporary, target, ours)
        raise ChangedMeanwhile(target)
    return True, temporary


def _put_back(folder: int, temporary: str, target: Path, ours: int) -> None:
    """Exchange again the file `_exchange` took out of `target` (named `temporary`) with what is there now:
    the new file (inode `ours`) then goes by `temporary`, to be removed. If a save replaced the new file
    meanwhile, that save, the newest, stays in place."""
    if not _renameat2(folder, temporary, target.name, _RENAME_EXCHANGE):  # the new file was removed meanwhile
        os.rename(temporary, target.name, src_dir_fd=folder, dst_dir_fd=folder)
    elif os.stat(temporary, dir_fd=folder, follow_symlinks=False).st_ino != ours:
        os.replace(temporary, target.name, src_dir_fd=folder, dst_dir_fd=folder)


def _check_and_rename(folder: int, temporary: str, target: Path, unchanged: Check | None,
                      keep_old: bool) -> str | None:
    """Check `target`, then rename `temporary` over it (a save landing in between is lost: the fallback
    of `_rename_over`); when `keep_old`, the replaced file is linked first under a temporary name, returned."""
    old = _temporary_name(target.name) if keep_old else None
    if old is not None:
        try:
            os.link(target.name, old, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        except OSError:  # no old file, or no links on this filesystem: the rename frees it
            old = None
    try:
        if unchanged is not None and not unchanged(target):
            raise ChangedMeanwhile(target)
        os.replace(temporary, target.name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        if old is not None:
            _unlink_quietly(old, folder)
        raise
    return old


def _load_renameat2() -> Callable[..., int] | None:
    """The C library's renameat2 (Linux), or None."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_libc_renameat2 = _load_renameat2()
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2  # renameat2(2) flags


def _renameat2(folder: int, old: str, new: str, flags: int) -> bool | None:
    """renameat2(2) of two names in the open `folder`: True when done; False when a name is missing
    (an exchange) or taken (no replacing); None where this system or filesystem cannot."""
    if _libc_renameat2 is None:
        return None
    if _libc_renameat2(folder, os.fsencode(old), folder, os.fsencode(new), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOENT, errno.EEXIST):
        return False
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return None
    raise OSError(code, os.strerror(code), new)


@contextmanager
def _or_removed(temporary: str, folder: int, target: Path) -> Iterator[None]:
    """Remove the `temporary` file in the open `folder` if the block fails (DiskFull when the disk is)."""
    try:
        yield
    except BaseException as exc:
        _unlink_quietly(temporary, folder)
        if isinstance(exc, OSError) and exc.errno in _FULL:
            raise DiskFull(target) from None
        raise


def _unlink_quietly(name: str, folder: int) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        pass


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:  # only root gives a file away; a group we belong to may still be kept
            try:
                os.fchown(fd, -1, old.st_gid)
            except PermissionError:
                pass
    os.fchmod(fd, stats.S_IMODE(old.st_mode))
