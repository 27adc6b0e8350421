"""The MCP server: cortex's tools and resources on the SDK's `MCPServer`, over stdio or streamable HTTP.

Every call runs in a worker thread, one at a time (the session's lock). A user mistake answers a tool error
or an invalid-params resource error carrying cortex's message (what and where); anything else is the SDK's
generic error, its traceback on the server's stderr only.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading

import anyio.to_thread
from mcp.server.mcpserver import MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import Resource, ToolAnnotations
from pydantic import BaseModel, ValidationError

from .. import __version__
from ..api import Cortex
from ..errors import CortexError, UserError
from ..listen import listen
from ..words import prose, quoted
from .http import MAX_SESSIONS, BearerAuth, Policy
from .resources import ORG, TEMPLATES, Resources
from .session import Session
from .stdio import answered_stdio
from .tools import COMMITS, CONVERSATIONS, READ, UNDONE, WRITE, Tools

__all__ = ["INSTRUCTIONS", "PATHS", "CortexServer", "serve"]

INSTRUCTIONS = """cortex keeps notes and agents' memory as Org files under version control. Search or query \
first, then `show` a result by its :ID:; reads answer with what holds now (`valid_at` asks what held on a date, \
`all` adds what was superseded or retired). Remember with memory_add; when a fact changed, memory_add the new one with \
`supersedes` the old; memory_retire one no longer true; forget one item with memory_forget. Every write is a commit: \
`diff` shows what changed since the last snapshot, `recent_activity` what changed since a time, and a person can \
undo any of it with `cortex rollback`. Conversation turns are kept per identity (tenant, user, session)."""
REVIEWED = """ Writes wait for a person's review: each memory write is kept as a proposal (its answer names it), \
which you see in your own memory at once and a person accepts or rejects later; `proposals` lists what waits and \
what was rejected, and why."""
PROPOSES = ("Under review: this write is a proposal a person accepts or rejects; the answer's `proposal` is its id, "
            "and `proposals` shows what became of it.")
POLICY = ("A write the definitions' review policy names is a proposal a person accepts or rejects: then the answer's "
          "`proposal` is its id, and `proposals` shows what became of it.")
PATHS = ResourceSecurity(exempt_params={"path"})  # checked by Session.path, which says what is wrong with one


class CortexServer(MCPServer):
    """cortex over MCP, as one `Session` allows: tools it may not run are refused with the reason."""

    def __init__(self, session: Session):
        scope = f" Bound to agent {session.bound!r}: only agents/{session.bound}/ is visible." if session.bound else ""
        review = REVIEWED if session.cx.review else ""
        super().__init__("cortex", instructions=INSTRUCTIONS + scope + review, version=__version__,
                         log_level="WARNING")
        self.session = session
        self.refused: dict[str, str] = {}
        tools, self.resources = Tools(session), Resources(session)
        for name in (*READ, *WRITE, "rollback"):
            method = getattr(tools, name)
            described = prose(method.__doc__)  # as a model reads it: no source indentation, paragraphs whole
            if (refusal := _refusal(session, name)) is not None:
                self.refused[name] = refusal
            elif name in READ:  # show answers Org text alone: the same text again as structured content is no use
                self.add_tool(self._guarded(method), name=name, description=described, structured_output=name != "show",
                              annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
            elif name in COMMITS and name != "rollback" and self._proposed() is not None:
                told = PROPOSES if session.cx.review else POLICY
                self.add_tool(self._guarded(self._proposing(method)), name=name, description=f"{described} {told}",
                              annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
            else:
                self.add_tool(self._guarded(method), name=name,
                              description=f"{described} {UNDONE}" if name in COMMITS else described,
                              annotations=ToolAnnotations(destructive_hint=name in ("memory_forget", "rollback"),
                                                          idempotent_hint=name == "memory_add",
                                                          open_world_hint=False))
        for name, (uri, description) in TEMPLATES.items():
            self.resource(uri, name=name, description=description, mime_type=ORG, security=PATHS)(
                self._guarded(getattr(self.resources, name), resource=True))

    async def run_stdio_async(self) -> None:
        """Serve over stdin and stdout, every line answered (`stdio`)."""
        async with answered_stdio() as (read_stream, write_stream):
            await self._lowlevel_server.run(read_stream, write_stream,
                                            self._lowlevel_server.create_initialization_options())

    async def call_tool(self, name, arguments, context=None):
        """Run a tool, or say why this server does not offer it, or what is wrong with its arguments."""
        if name in self.refused:
            raise ToolError(self.refused[name])
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"{name}: {_arguments_problem(exc.__cause__)}") from None
            raise

    async def list_resources(self) -> list[Resource]:
        """Every file of the working state in scope, by its cortex:// URI."""
        listed = await anyio.to_thread.run_sync(self._guarded(self.resources.listed, resource=True))
        return [Resource(uri=uri, name=name, description=description, mime_type=ORG)
                for uri, name, description in listed]

    def _proposed(self) -> list | None:
        """The proposals this server's agent memory makes (None: its writes are not under review)."""
        return None if self.session.read_only else getattr(self.session.cx.memory.workspace, "proposed", None)

    def _proposing(self, fn):
        """`fn`, a write under review, answering with the proposal it made (none: it landed, or changed nothing)."""
        made = self._proposed()

        @functools.wraps(fn)
        def run(*args, **kwargs):
            before = len(made)
            answer = fn(*args, **kwargs)
            if len(made) > before:
                answer = answer | {"proposal": made[-1].id, "status": "pending review"}
            return answer

        return run

    def _guarded(self, fn, resource: bool = False):
        """`fn` run under the session's lock, cortex's errors turned into the SDK's tool or resource errors."""

        @functools.wraps(fn)
        def run(*args, **kwargs):
            for name, value in [*((f"argument {n}", a) for n, a in enumerate(args, 1)), *kwargs.items()]:
                if (problem := _not_text(value)) is not None:  # JSON may carry "\udcff", which no UTF-8 holds
                    raise (ResourceError if resource else ToolError)(f"{name}: {problem}")
            with self.session.lock:
                try:
                    return fn(*args, **kwargs)
                except UserError as exc:
                    raise (ResourceNotFoundError if resource else ToolError)(str(exc)) from None
                except CortexError as exc:
                    raise (ResourceError if resource else ToolError)(str(exc)) from None

        return run


def _arguments_problem(error: ValidationError) -> str:
    """What is wrong with a tool's arguments, in one sentence naming each (not pydantic's report)."""
    problems = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "the arguments"
        if problem["type"] == "missing":
            problems.append(f"argument {where} is required")
        else:
            message = problem["msg"][:1].lower() + problem["msg"][1:]
            problems.append(f"argument {where}: {message}, not {quoted(problem['input'])}")
    return "; ".join(problems)


def _not_text(value) -> str | None:
    """Why an argument (a string, or a list, mapping or model of them) holds what is no text cortex can keep: a
    lone surrogate, which UTF-8 cannot hold (None: it holds none)."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return next((problem for part in value if (problem := _not_text(part)) is not None), None)
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not UTF-8 text (a lone surrogate at character {exc.start + 1})"
    return None


def _refusal(session: Session, name: str) -> str | None:
    """Why this server does not offer tool `name` (None: it does)."""
    if name in CONVERSATIONS and session.tenants == frozenset():
        return (f"{name}: conversations are off: this server is bound to agent {session.bound!r} and reaches no "
                "tenant's conversations; a person can start it with --tenant NAME")
    if name not in READ and session.read_only:
        return f"{name} writes, and this server is read-only (cortex mcp --read-only)"
    if name == "rollback" and not session.allow_rollback:
        return "rollback is off: a person can start the server with --allow-rollback"
    if name == "rollback" and session.cx.review:
        return "rollback is off: this server's writes wait for review (cortex mcp --review), and a rollback is a person's"
    return None


def serve(cx: Cortex, *, agent: str | None = None, read_only: bool = False, allow_rollback: bool = False,
          tenants: frozenset[str] | None = None, http: Policy | None = None, host: str = "127.0.0.1",
          port: int = 8765, stop: threading.Event | None = None) -> None:
    """Serve `cx` over stdio (until the client closes it), or over streamable HTTP at http://host:port/mcp by the
    rules of `http` (until interrupted or `stop` is set; port 0 takes a free one). The Org folder is ingested first
    unless read-only; a server over every agent embeds what search needs in the background (one bound to an agent,
    only its files, as it searches)."""
    session = Session(cx, agent, read_only=read_only, allow_rollback=allow_rollback, tenants=tenants)
    sock = None if http is None else listen(host, port)
    _log_warnings_only()
    if cx.root is not None and cx.root.is_dir() and not read_only:
        cx.ingest()
    if agent is None:
        cx.build_search_in_background()
    server = CortexServer(session)
    if sock is None:
        anyio.run(server.run_stdio_async)
        return
    import uvicorn

    from ..serving import Server

    shown = f"[{host}]" if ":" in host else host
    print(f"cortex mcp: {cx.location} at http://{shown}:{sock.getsockname()[1]}/mcp"
          + ("" if http.token is None else " (bearer token required)"), file=sys.stderr, flush=True)
    app = server.streamable_http_app(host=host, transport_security=http.settings(), max_sessions=MAX_SESSIONS)
    if http.token is not None:
        app = BearerAuth(app, http.token)
    Server(uvicorn.Config(app, log_level="warning"), stop).run(sockets=[sock])


def _log_warnings_only() -> None:
    """Log warnings and errors (a crash's traceback) on stderr, and no library's debug chatter: stdout is the
    protocol's."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], format="cortex mcp: %(levelname)s %(message)s")
