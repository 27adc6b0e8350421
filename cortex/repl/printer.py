"""Values and errors as a person reads them: plain data as Hy; a form or function named without calling it as
how to call it and what it does; anything else through `render.Renderer` (headlines as highlighted Org, lists of
records as tables, dicts as key/value tables).

Plain data prints without loading rich; the renderer, and rich with it, load on the first value that needs them.
"""

from __future__ import annotations

import dataclasses
from typing import TextIO

import hy

from .registry import described
from .values import Help, Message, OrgText, Outline, SearchResults

__all__ = ["Printer"]

PIPE_WIDTH = 160


class Printer:
    """Prints values to `out` and errors to `err` for one session."""

    def __init__(self, session, out: TextIO, err: TextIO):
        self.session = session
        self.out = out
        self.err = err
        self._consoles: dict[int, object] = {}

    def show(self, value) -> None:
        """Print a value the way the REPL shows results; None prints nothing."""
        if value is None:
            return
        if isinstance(value, Message):
            self.out.write(f"{value}\n")
        elif isinstance(value, list) and not value:  # a form found nothing: said as the CLI says it
            self.out.write("no results\n")
        elif (usage := described(value)) is not None:  # `stats` typed without parentheses
            self.out.write(f"{usage}\n")
        elif is_plain(value):
            self.out.write(f"{hy.repr(value)}\n")
        else:
            from .render import Renderer  # here: it loads rich

            self.console(self.out).print(Renderer(self.session).render(value))
        self.out.flush()

    def notice(self, message: str) -> None:
        """Print a line about something that happened in the background."""
        self.err.write(f"{message}\n")
        self.err.flush()

    def error(self, message: str) -> None:
        """Print an error message, in red where the terminal has colour."""
        from rich.text import Text

        self.console(self.err).print(Text(message, style="red"), soft_wrap=True)

    def console(self, stream: TextIO):
        """A rich console writing to `stream` (made once per stream)."""
        console = self._consoles.get(id(stream))
        if console is None:
            from rich.console import Console

            # A terminal gets its own width; a pipe or file gets wide lines rather than wrapped ones.
            width = None if stream.isatty() else PIPE_WIDTH
            console = self._consoles[id(stream)] = Console(file=stream, width=width, highlight=False,
                                                           markup=False, emoji=False)
        return console


def is_plain(value) -> bool:
    """True for data that `hy.repr` shows well: scalars, models, and collections of them."""
    if isinstance(value, (OrgText, Outline, Help, SearchResults, dict)) or dataclasses.is_dataclass(value):
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(is_plain(item) for item in value)
    return not type(value).__module__.startswith("cortex.")
