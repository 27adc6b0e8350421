"""The HTTP receiver: a Starlette app with one POST route per webhook path, served by uvicorn."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from cortex.serving import Server
from cortex.webhooks.service import Endpoint, WebhookService

__all__ = ["SHUTDOWN_GRACE", "TEST_TRIGGER_HEADER", "create_app", "make_server", "serving"]

TEST_TRIGGER_HEADER = "X-Cortex-Trigger"  # `cortex webhook test --url` marks its deliveries with it
# Seconds a stopping server waits for requests in flight (a slow body, a delivery being written)
# before it cancels them; a delivery cut off there is finished by the next receiver to start.
SHUTDOWN_GRACE = 3


def create_app(service: WebhookService) -> Starlette:
    """The ASGI app: POST to a webhook's exact path delivers; other paths answer 404, other methods 405."""
    routes = [Route(path, _handler(service, endpoint), methods=["POST"], name=endpoint.definition.name)
              for path, endpoint in service.endpoints.items()]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.router.redirect_slashes = False  # a redirect would be built from the request's own Host header
    return app


def make_server(service: WebhookService, host: str = "127.0.0.1", port: int = 8787, *,
                log_level: str = "info") -> uvicorn.Server:
    """A uvicorn server for the receiver: `.run()` serves until interrupted, `.should_exit = True` or its event
    `.stop` set stops it.

    Making it finishes the deliveries a stopped receiver left half routed.
    """
    service.recover()
    return Server(uvicorn.Config(create_app(service), host=host, port=port, log_level=log_level, lifespan="off",
                                 timeout_graceful_shutdown=SHUTDOWN_GRACE))


@contextmanager
def serving(service: WebhookService, host: str = "127.0.0.1", port: int = 0, *,
            log_level: str = "warning") -> Iterator[str]:
    """Run the receiver in a background thread for the block and yield its base URL (port 0: any free port)."""
    sock = socket.create_server((host, port))
    # asyncio turns Nagle's algorithm off only on sockets made with proto IPPROTO_TCP, which these are not;
    # accepted ones inherit the option, and without it every answer waits out a delayed ACK (40 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    server = make_server(service, host, port, log_level=log_level)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="cortex-receiver", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the webhook receiver stopped while starting")
            time.sleep(0.01)
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _handler(service: WebhookService, endpoint: Endpoint):
    async def receive(request: Request) -> JSONResponse:
        started = time.perf_counter()
        body = await _read_capped(request, service.max_body)
        trigger = "test" if request.headers.get(TEST_TRIGGER_HEADER, "").lower() == "test" else "live"
        # Verification and parsing run in a worker thread, so deliveries are verified concurrently.
        delivery = await run_in_threadpool(service.deliver, endpoint, request.headers, body, trigger=trigger,
                                           started=started)
        return JSONResponse(delivery.answer(), status_code=delivery.status)

    return receive


async def _read_capped(request: Request, cap: int) -> bytes:
    """The body, or its first bytes past `cap` once it grows over it (the rest is never read)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            break
    return b"".join(chunks)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)
