"""The banner and prompt, drawn on the terminal before prompt-toolkit is loaded.

Loading prompt-toolkit takes longer than starting Hy, so the interactive REPL first writes its
banner and prompt and puts the terminal in the mode prompt-toolkit reads keys in. Until
prompt-toolkit is up, a thread reads the keys typed and echoes the line they make; at the first
key that is not text (Enter, Tab, Ctrl-C, an arrow...) it stops echoing and reading, so that
prompt-toolkit acts on that key and everything after it. Every key read is handed over, in order.
"""

from __future__ import annotations

import codecs
import os
import select
import termios
import threading
import tty

__all__ = ["BANNER", "PROMPT", "EarlyPrompt"]

PROMPT = "cortex=> "
BANNER = "cortex REPL: (help) lists the forms, Tab completes, Ctrl-C cancels an entry, Ctrl-D leaves"
RUBOUT = ("\x7f", "\b")

# What prompt-toolkit's raw mode turns off: keys reach it as typed (no echo, line editing, signals,
# flow control or carriage-return translation).
RAW_OFF_INPUT = termios.IXON | termios.IXOFF | termios.ICRNL | termios.INLCR | termios.IGNCR
RAW_OFF_LOCAL = termios.ECHO | termios.ICANON | termios.IEXTEN | termios.ISIG


class EarlyPrompt:
    """A context that draws the banner and prompt on the terminal `fd_in`/`fd_out` and echoes the text
    typed until `hand_over`; leaving it restores the terminal, should prompt-toolkit never have come up."""

    def __init__(self, fd_in: int, fd_out: int):
        self.fd_in, self.fd_out = fd_in, fd_out
        self.saved = termios.tcgetattr(fd_in)
        self.typed = bytearray()  # every byte read from the terminal, in order
        self._stop_read, self._stop_write = os.pipe()
        self._reader = threading.Thread(target=self._echo, name="cortex-early-keys", daemon=True)

    def __enter__(self) -> EarlyPrompt:
        mode = termios.tcgetattr(self.fd_in)
        mode[tty.IFLAG] &= ~RAW_OFF_INPUT
        mode[tty.LFLAG] &= ~RAW_OFF_LOCAL
        termios.tcsetattr(self.fd_in, termios.TCSANOW, mode)
        os.write(self.fd_out, f"{BANNER}\r\n{PROMPT}".encode())
        self._reader.start()
        return self

    def hand_over(self) -> bytes:
        """Stop echoing, give prompt-toolkit the terminal as it was with the cursor at the start of the
        prompt line, and return the keys read so far (the keys not read yet stay queued).

        prompt-toolkit saves the terminal's mode at this point to restore it between entries.
        """
        self._stop()
        termios.tcsetattr(self.fd_in, termios.TCSANOW, self.saved)
        os.write(self.fd_out, b"\r")
        return bytes(self.typed)

    def __exit__(self, *exc) -> None:
        self._stop()
        termios.tcsetattr(self.fd_in, termios.TCSANOW, self.saved)

    def _stop(self) -> None:
        if self._stop_write >= 0:
            os.write(self._stop_write, b"x")
            self._reader.join()
            for fd in (self._stop_read, self._stop_write):
                os.close(fd)
            self._stop_write = -1

    def _echo(self) -> None:
        """Read keys and redraw the prompt line with the text they make, until told to stop or a key
        that is not text arrives."""
        decode, line = codecs.getincrementaldecoder("utf-8")("replace").decode, ""
        while self._stop_read not in select.select([self.fd_in, self._stop_read], [], [])[0]:
            try:
                keys = os.read(self.fd_in, 4096)
            except OSError:  # the terminal went away; prompt-toolkit will find that out too
                return
            self.typed += keys
            line, text_only = edited(line, decode(keys))
            os.write(self.fd_out, f"\r{PROMPT}{line}\x1b[K".encode())
            if not (keys and text_only):
                return


def edited(line: str, keys: str) -> tuple[str, bool]:
    """`line` after typing `keys` (text and rub-outs), up to the first other key; and whether there was none."""
    for key in keys:
        if key in RUBOUT:
            line = line[:-1]
        elif key.isprintable():
            line += key
        else:
            return line, False
    return line, True
