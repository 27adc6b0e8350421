"""The commands an editor runs (`workspace/executeCommand`, offered as code actions): snapshot, the log of
snapshots, a headline's history, the diff of a file since a snapshot, the rollback of one headline, the review of pending proposals.

Each answers text, or the WorkspaceEdit the server sends the client to apply (`rollback_edit`): nothing here
writes a file the editor has open.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from ..errors import UserError
from .documents import Buffer
from .session import Session

__all__ = ["COMMANDS", "actions"]


def snapshot(session: Session, message: str = "") -> str:
    """Record the working state (the Org folder's saved files) as a snapshot; say which buffers' edits it lacks."""
    with session.lock:
        made = str(session.cx.snapshot(message))
    unsaved = _unsaved(session)
    return f"{made}\nnot in it, as not saved: {', '.join(unsaved)}" if unsaved else made


def log(session: Session, limit: int = 20) -> str:
    """The newest `limit` snapshots, newest first, each with how many headlines it added, changed, moved or removed."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UserError(f"cortex.log: the number of snapshots to show is a positive whole number, not {str(limit)[:20]!r}")
    with session.lock:
        return "\n".join(str(entry) for entry in session.cx.log(limit)) or "no snapshots yet"


def history(session: Session, org_id: str) -> str:
    """The versions of the headline with :ID: `org_id` across snapshots, newest first, each with its patch."""
    with session.lock:
        return session.cx.patch(session.cx.history(org_id))


def diff(session: Session, uri: str, ref: str = "HEAD") -> str:
    """What changed in one file from snapshot `ref` to its saved text, as a patch."""
    path = _path(session, uri)
    with session.lock:
        changes = [c for c in session.cx.diff(ref, within=path) if path in (c.path, c.old_path)]
        return session.cx.patch(changes) if changes else f"{path}: no change since {ref}"


def rollback_edit(session: Session, uri: str, org_id: str, ref: str = "HEAD") -> types.WorkspaceEdit:
    """The edit that returns one headline (and its subtree) of an open buffer to its version in snapshot `ref`."""
    buffer = _buffer(session, uri)
    node = next((n for n in buffer.nodes if n.id == org_id), None)
    if node is None:
        raise UserError(f"{buffer.path}: no headline with :ID: {org_id} in this buffer")
    with session.lock:
        text = session.cx.show(org_id, as_of=ref)
    first, past = buffer.subtree_lines(node)
    if past >= len(buffer.lines) - 1 and not buffer.text.endswith("\n"):
        text = text.rstrip("\n")
    end = session.range(buffer.path, past).end if past == len(buffer.lines) - 1 else types.Position(line=past, character=0)
    edit = types.TextEdit(range=types.Range(start=types.Position(line=first, character=0), end=end), new_text=text)
    return types.WorkspaceEdit(changes={uri: [edit]})


def proposals(session: Session) -> str:
    """The pending proposals, each with its patch."""
    with session.lock:
        pending = session.cx.proposals()
        return "\n\n".join(f"{p}\n{session.cx.proposal_patch(p.id)}" for p in pending) or "no pending proposals"


def accept_proposal(session: Session, name: str) -> str:
    """Accept a pending proposal (its files receive it: refused while a buffer holds unsaved edits)."""
    refuse_unsaved(session, "accepting a proposal")
    with session.lock:
        return str(session.cx.accept_proposal(name))


def reject_proposal(session: Session, name: str, reason: str = "") -> str:
    """Reject a pending proposal."""
    with session.lock:
        return str(session.cx.reject_proposal(name, reason))


def refuse_unsaved(session: Session, what: str) -> None:
    """Refuse `what` while an open buffer differs from its saved file."""
    if unsaved := _unsaved(session):
        raise UserError(f"{what} reads the saved files, and {', '.join(unsaved)} has unsaved edits: save first")


def _unsaved(session: Session) -> list[str]:
    """The open buffers whose text differs from their saved file."""
    return sorted(path for path, buffer in list(session.buffers.items()) if _saved(session, path) != buffer.text)


def _saved(session: Session, path: str) -> str | None:
    try:
        return (Path(session.root) / path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _path(session: Session, uri: str) -> str:
    path = session.path(uri)
    if path is None:
        raise UserError(f"{uri}: not a file of the Org folder {session.root}")
    return path


def _buffer(session: Session, uri: str) -> Buffer:
    buffer = session.buffers.get(_path(session, uri))
    if buffer is None:
        raise UserError(f"{uri}: not open in the editor")
    return buffer


COMMANDS = {"cortex.snapshot": snapshot, "cortex.log": log, "cortex.history": history, "cortex.diff": diff,
            "cortex.rollbackHeadline": rollback_edit, "cortex.proposals": proposals,
            "cortex.acceptProposal": accept_proposal, "cortex.rejectProposal": reject_proposal}


def actions(session: Session, buffer: Buffer, uri: str, line: int) -> list[types.Command]:
    """The commands that apply where the cursor is: on a headline with an :ID:, its history and its rollback to
    HEAD; anywhere, the file's diff since HEAD, a snapshot and the log of snapshots; the review of proposals when
    some are pending."""
    node = buffer.node_at(line)
    with session.lock:
        head = session.cx.head_oid is not None
        pending = len(session.cx.proposals())
    offered = []
    if node is not None and node.id:
        offered.append((f"cortex: history of “{node.title}”", "cortex.history", [node.id]))
        if head:
            offered.append((f"cortex: roll “{node.title}” back to HEAD", "cortex.rollbackHeadline",
                            [uri, node.id, "HEAD"]))
    if head:
        offered.append(("cortex: diff of this file since HEAD", "cortex.diff", [uri, "HEAD"]))
    offered.append(("cortex: snapshot", "cortex.snapshot", [""]))
    if head:
        offered.append(("cortex: log of snapshots", "cortex.log", [20]))
    if pending:
        offered.append((f"cortex: review {pending} pending proposal{'s' * (pending > 1)}", "cortex.proposals", []))
    return [types.Command(title=title, command=name, arguments=arguments) for title, name, arguments in offered]
