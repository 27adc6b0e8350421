"""The HTTP receiver: a Starlette app with one POST route per webhook path, served by uvicorn."""

from __future__ import annotations

import time

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from cortex.webhooks.deliveries import Delivery
from cortex.webhooks.service import Endpoint, WebhookService

TEST_TRIGGER_HEADER = "X-Cortex-Trigger"  # `cortex webhook test --url` marks its deliveries with it


def create_app(service: WebhookService) -> Starlette:
    """The ASGI app: POST to a webhook's path delivers; unknown paths answer 404, other methods 405."""
    routes = [Route(path, _handler(service, endpoint), methods=["POST"], name=endpoint.definition.name)
              for path, endpoint in service.endpoints.items()]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error})


def make_server(service: WebhookService, host: str = "127.0.0.1", port: int = 8787, *,
                log_level: str = "info") -> uvicorn.Server:
    """A uvicorn server for the receiver: `.run()` serves until interrupted, `.should_exit = True` stops it."""
    return uvicorn.Server(uvicorn.Config(create_app(service), host=host, port=port, log_level=log_level,
                                         lifespan="off"))


def answer(delivery: Delivery) -> JSONResponse:
    """The HTTP answer to a handled delivery."""
    return JSONResponse(delivery.answer(), status_code=delivery.status)


def _handler(service: WebhookService, endpoint: Endpoint):
    async def receive(request: Request) -> JSONResponse:
        started = time.perf_counter()
        body = await _read_capped(request, service.max_body)
        trigger = "test" if request.headers.get(TEST_TRIGGER_HEADER, "").lower() == "test" else "live"
        # Verification and parsing run in a worker thread, so deliveries are verified concurrently.
        delivery = await run_in_threadpool(service.deliver, endpoint, request.headers, body, trigger=trigger,
                                           started=started)
        return answer(delivery)

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
