"""The MCP resources: agents' memory.org and daily logs, Org files, headlines by :ID:, and a snapshot's view of
files and headlines, as cortex:// URIs; `listed` names what a client can browse without a tool call."""

from __future__ import annotations

from datetime import date

from mcp.shared.uri_template import UriTemplate

from ..errors import NotFound, UserError
from ..memory.layout import AGENTS, LOGS, MEMORY_FILE, log_date, log_path
from ..words import quoted
from .session import Session

__all__ = ["ORG", "TEMPLATES", "Resources"]

ORG = "text/x-org"
MEMORY, LOG, FILE = ("cortex://agents/{agent}/memory{?valid_at,all}", "cortex://agents/{agent}/logs/{day}",
                     "cortex://files/{+path}")
TEMPLATES = {  # method -> (URI template, description)
    "agent_memory": (MEMORY, "An agent's memory.org: Facts, Procedures, Learned Patterns, each item with its :ID:; "
                             "its current items (?all=true: every item, those superseded or retired too; "
                             "?valid_at=2026-11-01: those that held then)"),
    "agent_log": (LOG, "An agent's daily log of one day (YYYY-MM-DD): its sessions, newest last"),
    "file": (FILE, "An Org file of the working state, by its path from the Org root"),
    "headline": ("cortex://ids/{id}", "A headline and its subtree, by :ID: (a file's own :ID: gives the file)"),
    "snapshot_file": ("cortex://snapshots/{ref}/files/{+path}",
                      "An Org file as a snapshot recorded it (ref: HEAD, HEAD~1, an oid prefix from log)"),
    "snapshot_headline": ("cortex://snapshots/{ref}/ids/{id}", "A headline by :ID: as a snapshot recorded it"),
}
_URIS = {uri: UriTemplate.parse(uri) for uri in (MEMORY, LOG, FILE)}


class Resources:
    """The resource readers over one session: each returns Org text."""

    def __init__(self, session: Session):
        self.session = session
        self.cx = session.cx

    def agent_memory(self, agent: str, valid_at: str | None = None, all: str | None = None) -> str:  # noqa: A002
        return self.cx.inspect_memory(self.session.agent(agent), valid_at=valid_at or None,
                                      all=_flag("all", all)).org

    def agent_log(self, agent: str, day: str) -> str:
        agent = self.session.agent(agent)
        try:
            path = log_path(agent, date.fromisoformat(day))
        except ValueError:
            raise UserError(f"day {quoted(day)}: not a date; a daily log is named by its day, as 2026-11-20") from None
        if path not in self.cx.working().entries:
            raise NotFound(f"{path}: agent {agent!r} has no daily log for {day}")
        return self.cx.show(path)

    def file(self, path: str) -> str:
        return self.snapshot_file(None, path)

    def headline(self, id: str) -> str:  # noqa: A002 - the URI template's name
        return self.snapshot_headline(None, id)

    def snapshot_file(self, ref: str | None, path: str) -> str:
        return self.session.render(self.session.target(self.session.path(path), ref), ref)

    def snapshot_headline(self, ref: str | None, id: str) -> str:  # noqa: A002
        return self.session.render(self.session.target(id, ref), ref)

    def listed(self) -> list[tuple[str, str, str]]:
        """(URI, name, description) of every file of the working state in scope: agents' memory and daily logs
        by agent, the other Org files by path."""
        found = []
        for path in sorted(self.cx.working().entries):
            if not self.session.covers(path):
                continue
            parts = path.split("/")
            if len(parts) == 3 and parts[0] == AGENTS and parts[2] == MEMORY_FILE:
                found.append((_URIS[MEMORY].expand({"agent": parts[1]}), f"{parts[1]}: memory",
                              f"The memory.org of agent {parts[1]}"))
            elif len(parts) == 4 and parts[0] == AGENTS and parts[2] == LOGS and (day := log_date(parts[3])):
                found.append((_URIS[LOG].expand({"agent": parts[1], "day": day.isoformat()}),
                               f"{parts[1]}: log {day}", f"The daily log of agent {parts[1]} for {day}"))
            else:
                found.append((_URIS[FILE].expand({"path": path}), path, "An Org file"))
        return found


_FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False, "": False}


def _flag(name: str, value: str | None) -> bool:
    """A URI's flag parameter (`?all=true`); a UserError for anything but true or false."""
    if value is None:
        return False
    flag = _FLAGS.get(value.strip().lower())
    if flag is None:
        raise UserError(f"{name} {quoted(value)}: write true or false")
    return flag
