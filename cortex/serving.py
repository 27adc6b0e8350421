"""How cortex runs an HTTP server (the webhook receiver, the MCP server over HTTP): uvicorn's, which Ctrl-C stops
gracefully, and which also stops, as gracefully, once an event is set. The event is for a Ctrl-C met before
uvicorn listened for it and lost: Python prints and drops a KeyboardInterrupt raised in a weakref callback or a
`__del__` (as in importlib's module locks while the server's modules load), and the server would serve on."""

from __future__ import annotations

import threading

import uvicorn


class Server(uvicorn.Server):
    """uvicorn's server, stopped by Ctrl-C, `should_exit`, or `stop` (an event) once set."""

    def __init__(self, config: uvicorn.Config, stop: threading.Event | None = None):
        super().__init__(config)
        self.stop = stop

    async def on_tick(self, counter: int) -> bool:
        return await super().on_tick(counter) or (self.stop is not None and self.stop.is_set())
