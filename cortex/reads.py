"""Reading a file or a stream whole, never more than a bound: a file that turns out to be /dev/zero, a pipe that
never ends or a log of gigabytes is refused, in one line naming it and the bound, after reading at most the bound.

Each kind of input has its bound where it is read (`ORG_FILE` here, since every Org file reader shares it).
"""

from __future__ import annotations

import os
from .errors import UserError
from .words import size

TYPE_CHECKING = False  # typing's, without loading typing before the REPL's prompt
if TYPE_CHECKING:
    from typing import BinaryIO, TextIO

ORG_FILE = 256 << 20  # bytes an Org file may hold (a million-line log is about 100 MiB): a larger one is not read


class TooLarge(UserError):
    """A file or stream holds more than its reader takes."""

    def __init__(self, name: str, limit: int, what: str):
        super().__init__(f"{name}: more than {size(limit)}, the most {what} may hold")
        self.reason = f"more than {size(limit)}, the most {what} may hold"


def read_bounded(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The bytes of the file at `path`; TooLarge (before reading a regular file, after `limit` bytes of anything
    else) when it holds more than `limit`. `what` names the kind of file in the message ("a payload")."""
    with open(path, "rb") as file:
        return read_file_bounded(file, limit, what, os.fspath(path))


def read_file_bounded(file: BinaryIO, limit: int, what: str, name: str) -> bytes:
    """The rest of an open binary `file`, as `read_bounded` reads a path."""
    try:
        if os.fstat(file.fileno()).st_size > limit:
            raise TooLarge(name, limit, what)
    except (AttributeError, OSError, ValueError):  # no descriptor: a stream in memory
        pass
    data = file.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(name, limit, what)
    return data


def read_text_bounded(stream: TextIO, limit: int, what: str, name: str) -> str:
    """The rest of a text `stream` (stdin), at most `limit` characters; TooLarge beyond."""
    text = stream.read(limit + 1)
    if len(text) > limit:
        raise TooLarge(name, limit, what)
    return text
