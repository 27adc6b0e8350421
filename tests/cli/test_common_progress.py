"""A long step's progress bar on a terminal: it names what it does, pulses while the total is unknown (no frozen
`0/?`), then counts."""

import io
import time

from rich.console import Console

from cortex.cli import common


def test_the_bar_counts_only_once_the_total_is_known(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(common, "err_console", Console(file=screen, force_terminal=True, width=80))
    monkeypatch.setattr(common, "SHOW_AFTER", 0.0)
    monkeypatch.setattr(common.sys.stderr, "isatty", lambda: True)
    with common.progress_bar("indexing for search") as progress:
        progress(0, None, "loading the model")
        shown(screen, "loading the model")
        time.sleep(0.3)  # a few more refreshes while the total is unknown
        unknown = screen.getvalue()
        progress(3, 10, "embedding for search")
        shown(screen, "3/10")
    assert "/?" not in unknown and "0/" not in unknown


def shown(screen: io.StringIO, text: str, seconds: float = 30) -> None:
    """Wait until the bar has drawn `text` (it refreshes in a thread of its own, late on a busy machine)."""
    deadline = time.monotonic() + seconds
    while text not in screen.getvalue():
        assert time.monotonic() < deadline, f"{text!r} was never drawn: {screen.getvalue()[-500:]!r}"
        time.sleep(0.01)
