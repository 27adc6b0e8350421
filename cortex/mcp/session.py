"""What one MCP server may do with its open cortex: its scope (one agent or all, and which tenants'
conversations), whether it writes, and the one-call-at-a-time lock every tool and resource takes.

A server bound to an agent sees only `agents/<agent>/`: every state it reads (the working state, a snapshot) is
the view of it that holds that folder's files alone (`view`), so a headline elsewhere is no headline to it, an
oid is found only where the view holds it, and searches and queries run over indexes of the view. Ingest follows
no symbolic link out of an agent's folder and memory writes write through none, so what the view holds is what
really is in the folder. Conversations are the tenants' named at start (`--tenant`): none for a bound server
given no tenant. Nothing is read from disk by path: files come from the store's states, whose paths are checked
(`cortex.paths`), so nothing outside the Org root can be named.
"""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager

from ..api import Cortex, Identity
from ..errors import NotFound, UserError
from ..hashing import Oid
from ..memory.layout import AGENTS, check_agent_id
from ..objects import Tree
from ..paths import path_problem
from ..query import FileIdNotHeadline, Node, lookup, render_file, walk
from ..words import brief, quoted

__all__ = ["Session"]

_OID = re.compile(r"[0-9a-f]{64}")


class Session:
    """An open cortex, the scope this server was started with, and the lock that makes its calls one at a time.

    `tenants`: whose conversations it reaches (None: every tenant's; an empty set: none, the default of a server
    bound to an agent)."""

    def __init__(self, cx: Cortex, agent: str | None = None, *, read_only: bool = False,
                 allow_rollback: bool = False, tenants: frozenset[str] | None = None):
        if agent is not None:
            check_agent_id(agent)
        if allow_rollback and read_only:
            raise UserError("--allow-rollback needs writes, and --read-only refuses them; choose one")
        if tenants is not None and not all(t.strip() for t in tenants):
            raise UserError("--tenant is empty: name the tenant whose conversations this server reaches")
        self.cx, self.bound, self.read_only, self.allow_rollback = cx, agent, read_only, allow_rollback
        self.tenants = tenants if tenants is not None else (None if agent is None else frozenset())
        self.prefix = None if agent is None else f"{AGENTS}/{agent}/"
        self.lock = threading.Lock()
        self._written = None  # the working state this server's last write left

    def covers(self, path: str | None) -> bool:
        """Whether this server may see the file at `path`."""
        return path is None or self.prefix is None or path.startswith(self.prefix)

    def view(self, ref: str | None = None) -> Tree:
        """The working state (or snapshot `ref`) as this server sees it: the files in its scope alone."""
        return self.cx.state(ref, self.prefix)

    def agent(self, requested: str | None) -> str:
        """The agent a memory call is about: the one named, which must be the bound one when the server is bound."""
        if self.bound is None:
            if requested is None:
                raise UserError("agent: name the agent whose memory to use (this server serves every agent)")
            return check_agent_id(requested)
        if requested not in (None, self.bound):
            raise UserError(f"agent {quoted(requested)}: this server is bound to agent {self.bound!r} "
                            f"(cortex mcp --agent {self.bound}) and cannot reach another agent's memory")
        return self.bound

    def search_agent(self, requested: str | None) -> str | None:
        """The agent a search is filtered to: the bound one, else the one asked for (None: every file)."""
        return requested if self.bound is None else self.agent(requested)

    def identity(self, tenant: str, user: str, session: str, run: str = "") -> Identity:
        """A conversation's identity, in a tenant this server reaches."""
        if self.tenants is not None and tenant not in self.tenants:
            reached = ", ".join(sorted(map(repr, self.tenants)))
            raise UserError(f"tenant {quoted(tenant)}: this server reaches the conversations of "
                            + (f"tenant {reached} only (cortex mcp --tenant)" if reached else
                               "no tenant; a person can start it with --tenant NAME"))
        return Identity(tenant, user, session, run)

    def path(self, path: str) -> str:
        """A file path checked: one a tree can hold, inside this server's scope."""
        problem = path_problem(path)
        if problem is not None:
            raise UserError(f"file {quoted(path)} {problem}; name an Org file by its path from the Org root, "
                            "such as notes/projects.org")
        if not self.covers(path):
            raise UserError(f"{quoted(path)}: outside this server's scope; it is bound to agent {self.bound!r} "
                            f"and sees only {self.prefix}")
        return path

    def target(self, name: str, ref: str | None = None) -> Node | str:
        """What `show` names, in the working state or snapshot `ref`: a headline (by :ID: or oid) or a file path;
        one outside this server's view is no headline, as one that does not exist."""
        name = name.strip()
        if not name:
            raise UserError("nothing to show: give an :ID:, a headline's oid or a file path")
        tree = self.view(ref)
        if name in tree.entries or name.endswith(".org"):
            if name not in tree.entries:
                raise NotFound(f"{self.path(name)}: no such file in {_state(ref)}")
            return name
        if _OID.fullmatch(name):
            oid = Oid.from_hex(name)
            found = next((n for n in walk(self.cx.store, tree) if n.oid == oid), None)
        else:
            try:
                found = lookup(self.cx.store, tree, name)
            except FileIdNotHeadline as named:
                found = named.path
            except NotFound:
                found = None
        if found is None:
            raise NotFound(f"no headline with :ID: or oid {brief(name, 80)} in {_state(ref)}"
                           + ("" if self.prefix is None else f" under {self.prefix}"))
        return found

    def render(self, target: Node | str, ref: str | None = None) -> str:
        """The Org text of a headline and its subtree, or of a whole file, in `ref` (None: the working state)."""
        if isinstance(target, Node):
            return self.cx.show(target)
        return render_file(self.cx.store, self.view(ref), target)

    @contextmanager
    def writing(self, what: str):
        """Around a write: first snapshot changes this server did not make, so that `rollback HEAD` undoes only
        this server's writes since; its writes in a row add up to one `diff`."""
        working, head = self.cx.working_oid, self.cx.head_oid
        if working is not None and working != self._written and (
                head is None or self.cx.resolve("HEAD").root != working):
            self.cx.snapshot(f"before {what} (cortex mcp)")
        yield
        self._written = self.cx.working_oid


def _state(ref: str | None) -> str:
    return "the working state" if ref is None else f"snapshot {brief(ref)}"
