"""The banner and prompt, drawn on the terminal before prompt-toolkit is loaded.

Loading prompt-toolkit takes longer than starting Hy, so the interactive REPL first writes its
banner and prompt and puts the terminal in the mode prompt-toolkit reads keys in: keys typed
meanwhile are neither echoed nor turned into signals, but wait in the terminal's queue until
prompt-toolkit reads them as typed and draws its prompt over this one.
"""

from __future__ import annotations

import os
import termios
import tty

PROMPT = "cortex=> "
BANNER = "cortex REPL: (help) lists the forms, Tab completes, Ctrl-C cancels an entry, Ctrl-D leaves"

# What prompt-toolkit's raw mode turns off: keys reach it as typed (no echo, line editing, signals,
# flow control or carriage-return translation).
RAW_OFF_INPUT = termios.IXON | termios.IXOFF | termios.ICRNL | termios.INLCR | termios.IGNCR
RAW_OFF_LOCAL = termios.ECHO | termios.ICANON | termios.IEXTEN | termios.ISIG


class EarlyPrompt:
    """A context that draws the banner and prompt on the terminal `fd_in`/`fd_out` and holds the keys
    typed until `hand_over`; leaving it restores the terminal, should prompt-toolkit never have come up."""

    def __init__(self, fd_in: int, fd_out: int):
        self.fd_in, self.fd_out = fd_in, fd_out
        self.saved = termios.tcgetattr(fd_in)

    def __enter__(self) -> EarlyPrompt:
        mode = termios.tcgetattr(self.fd_in)
        mode[tty.IFLAG] &= ~RAW_OFF_INPUT
        mode[tty.LFLAG] &= ~RAW_OFF_LOCAL
        termios.tcsetattr(self.fd_in, termios.TCSANOW, mode)
        os.write(self.fd_out, f"{BANNER}\r\n{PROMPT}".encode())
        return self

    def hand_over(self) -> None:
        """Give prompt-toolkit the terminal as it was, with the cursor at the start of the prompt line.

        The keys typed so far stay queued; prompt-toolkit saves this mode to restore it between entries.
        """
        termios.tcsetattr(self.fd_in, termios.TCSANOW, self.saved)
        os.write(self.fd_out, b"\r")

    def __exit__(self, *exc) -> None:
        termios.tcsetattr(self.fd_in, termios.TCSANOW, self.saved)
