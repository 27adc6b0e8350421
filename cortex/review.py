"""Writes under review: a view of a workspace for agents whose writes wait for a person.

An agent under review reads the working state with its pending proposals merged in (`proposals.applied`),
so it sees what it wrote and does not write it again; everyone else reads the working state through the
workspace itself. Its writes go through the one write path, `change_files`: the edits compute the new
bytes from that view, and the tree they make is kept as a proposal on top of it (`proposals.propose`),
with what the caller records (`then`) in the same transaction, instead of files written or the working
state moved. A write the policy lets through (`needs_review` says no, or it changes nothing) is made as
any other, by the workspace under the view. Agent memory writes only into its agent's folder, so a
proposal touches that agent's files alone and the view of one agent's files is what that agent wrote.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from . import ingest as ingesting, org
from .errors import UserError
from .hashing import Oid
from .history import RollbackReport
from .history.proposals import Proposal, applied, pending, propose
from .history.siblings import Getter
from .ingest import IngestReport
from .objects import OrgObject, Tree
from .paths import agent_folder_of
from .retry import retrying
from .workspace import UNCHANGED, Changed, Current, Workspace, new_bytes

__all__ = ["ReviewedWorkspace", "Write", "everything"]

WAITING = "what waits for review cannot be changed until a person accepts it (`cortex review`)"


@dataclass(frozen=True)
class Write:
    """A write a policy decides on: whose, what it does, the view it was made on and the tree it would make."""

    agent: str
    operation: str
    base: Tree
    tree: Tree
    get: Getter

    @property
    def paths(self) -> list[str]:
        return sorted(path for path, _ in self.base.entries.items() ^ self.tree.entries.items())


class _View(NamedTuple):
    """What an agent under review reads: the working state (`key`: its oid and the pending proposals' ids) with
    its pending proposals, the objects made for it that the store does not hold, and the bytes it wrote last
    that no read has needed parsed yet (a write needs their bytes alone)."""

    key: tuple
    tree: Tree
    made: dict[Oid, OrgObject]
    unparsed: dict[str, bytes | None]


def everything(write: Write) -> bool:
    """The policy of a handle under review: every write waits."""
    return True


class ReviewedWorkspace(Workspace):
    """A workspace whose agents' writes become proposals (see the module): `agents` are those whose pending
    proposals its reads see (None: every agent's), `needs_review(write)` says which writes wait."""

    def __init__(self, inner: Workspace, needs_review: Callable[[Write], bool] = everything,
                 agents: frozenset[str] | None = None):
        super().__init__(inner.store)
        self.inner, self.needs_review, self.agents = inner, needs_review, agents
        self.erasing, self.replacing = inner.erasing, inner.replacing
        self.proposed: list[Proposal] = []  # the proposals made here, oldest first
        self._view: _View | None = None
        self._lock = threading.Lock()

    @property
    def root(self):  # type: ignore[override]
        return self.inner.root

    # --- reading: the working state with the pending proposals ------------------------------------

    def waiting(self) -> list[Proposal]:
        """The pending proposals this view holds, oldest first."""
        if self.agents is None:
            return pending(self.store)
        return sorted((p for agent in self.agents for p in pending(self.store, agent)), key=lambda p: p.time_ns)

    def working(self) -> Tree:
        return self._viewed().tree

    def _viewed(self) -> _View:
        """The view, its files parsed."""
        view = self._latest()
        if not view.unparsed:
            return view
        staged = ingesting.stage_files(self.store, view.tree, view.unparsed)
        parsed = _View(view.key, staged.tree, {**view.made, **staged.objects}, {})
        with self._lock:
            if self._view is view:
                self._view = parsed
        return parsed

    def _latest(self) -> _View:
        """The view, made again only when the working state or the pending proposals changed (from the last
        view, when proposals were only added)."""
        working, waiting = self.inner.working(), self.waiting()
        key = (working.oid, tuple(p.id for p in waiting))
        with self._lock:
            last = self._view
            if last is None or last.key != key:
                (seen, ids), done = last.key if last else (None, ()), len(last.key[1]) if last else 0
                if seen == working.oid and key[1][:done] == ids and not last.unparsed:  # proposals added since
                    tree, made = applied(self.store, last.tree, waiting[done:], self._get)
                    self._view = _View(key, tree, {**last.made, **made}, {})
                else:
                    self._view = _View(key, *applied(self.store, working, waiting), {})
            return self._view

    def _get(self, oid: bytes) -> OrgObject:
        made = self._view.made if self._view is not None else {}
        return made.get(oid) or self.store.objects[oid]

    def current(self, path: str, tree: Tree | None = None) -> Current:
        tree = self.working() if tree is None else tree
        oid = tree.entries.get(path)
        return Current(path, None, None if oid is None else self._get(oid), self._get)

    def _current_in(self, view: _View, path: str) -> Current:
        """A file's version in the view: the bytes the agent wrote last, else its document."""
        if path in view.unparsed:
            return Current(path, view.unparsed[path], store=self.store)
        return self.current(path, view.tree)

    def rendered(self, path: str, tree: Tree | None = None) -> str:
        tree = self.working() if tree is None else tree
        return org.render(self._get(tree.entries[path]), self._get)

    def read(self, path: str) -> bytes | None:
        tree = self.working()
        return self.rendered(path, tree).encode("utf-8") if path in tree.entries else None

    def size(self, path: str, tree: Tree) -> int:
        return len(self.rendered(path, tree).encode("utf-8")) if path in tree.entries else 0

    def where(self, folder: str) -> str:
        return self.inner.where(folder)

    def unsaved(self) -> list[str]:
        return self.inner.unsaved()

    def held(self, folder: str):
        return self.inner.held(folder)

    def refresh(self, folder: str, written=None, digests=None, then=None) -> IngestReport | None:
        return self.inner.refresh(folder, written, digests, then)

    def ingest(self, path=None, progress=None, written=None, digests=None, then=None) -> IngestReport:
        return self.inner.ingest(path, progress, written, digests, then)

    # --- what an agent under review may not do -------------------------------------------------------

    def rollback(self, ref, *, keep=False, force=False) -> RollbackReport:
        raise UserError("writes under review wait for a person: a rollback is theirs to make (`cortex rollback`)")

    def erase(self, rewrite, what):
        self.check_erase()

    def check_erase(self) -> None:
        raise UserError("erasing from history cannot wait for review: a person does it (`cortex memory forget "
                        "--hard`, `cortex memory purge --hard`); under review, forget without --hard")

    # --- writing: a proposal ---------------------------------------------------------------------------

    def change_files(self, message, edits, *, within=".", expected=None, digests=None, then=None,
                     operation="write", ingest=True) -> Changed:
        """Under review, the files' new bytes made on the working state are kept as a proposal on it (so that
        a proposal holds its own write alone, and a rejected one never comes in with another); an edit that
        changes nothing in the view (the agent's pending writes included) is no proposal."""
        if callable(edits):
            self.inner.refresh(within)

        def proposed() -> Changed | None:
            working, view = self.inner.working(), self._viewed() if callable(edits) else self._latest()
            listed = edits(view.tree) if callable(edits) else edits
            waiting = any(path in view.unparsed or view.tree.entries.get(path) != working.entries.get(path)
                          for path in listed)
            files = _on_working(self.inner, working, edits)
            # made last on what the agent reads: what it remembers of a file is then the version it reads next
            on_view = dict(_computed(lambda path: self._current_in(view, path), listed)) if waiting else {}
            if waiting and not on_view:
                return self._unchanged(working, then)
            staged = ingesting.stage_files(self.store, working, files)
            if staged.tree.oid == working.oid:
                if waiting:  # it changes what waits for review alone
                    raise UserError(f"agent {_agent_of(listed)!r}: {WAITING}")
                return self._unchanged(working, then)
            write = Write(_agent_of(files), operation, working, staged.tree, staged.get)
            if not self.needs_review(write):
                return None

            def recorded(proposal: Proposal) -> None:
                staged.write()
                if then is not None:
                    then(staged.report)

            proposal = propose(self.store, working, staged.tree, agent=write.agent, message=message,
                               operation=operation, then=recorded)
            staged.committed()
            self.proposed.append(proposal)
            self._viewing(view, proposal, on_view if waiting else None, staged)
            return Changed(write.paths, staged.report, proposal)

        done = retrying(proposed)
        if done is not None:
            return done
        return self.inner.change_files(message, edits, within=within, expected=expected, digests=digests,
                                       then=then, operation=operation, ingest=ingest)

    def _viewing(self, view: _View, proposal: Proposal, written: dict[str, bytes | None] | None,
                 staged: ingesting.StagedFiles) -> None:
        """Make the view the agent reads next the one it read with its write: the bytes it wrote on that view
        (`written`), parsed when a read needs them, or, where the view and the working state agreed, the files
        `staged` on the working state. No merge of the proposal into it is needed."""
        key = (view.key[0], (*view.key[1], proposal.id))
        if written is not None:
            following = view._replace(key=key, unparsed={**view.unparsed, **written})
        else:
            tree = view.tree.with_changes({path: staged.tree.entries.get(path) for path in proposal.paths})
            following = _View(key, tree, {**view.made, **staged.objects}, view.unparsed)
        with self._lock:
            if self._view is not None and self._view.key == view.key:
                self._view = following

    def _unchanged(self, working: Tree, then) -> Changed:
        """What a write that changes nothing did: `then` runs in a transaction of its own."""
        if then is not None:
            self.store.transact(lambda: then(IngestReport(root=working.oid)))
        return Changed()


def _computed(current_of: Callable[[str], Current], edits) -> Iterator[tuple[str, bytes | None]]:
    """Each file's new bytes, from its version `current_of(path)` gives (those an edit leaves as they are left
    out)."""
    for path, edit in edits.items():
        current = current_of(path)
        new = new_bytes(edit(current))
        if new is not UNCHANGED and (current.data if current.exists else None) != new:
            yield path, new


def _on_working(workspace: Workspace, working: Tree, edits) -> dict[str, bytes | None]:
    """The files' new bytes made on the working state: an edit of what waits for review alone is refused."""
    try:
        return dict(_computed(lambda path: workspace.current(path, working),
                              edits(working) if callable(edits) else edits))
    except UserError as error:
        raise UserError(f"{error} in the working state: {WAITING}") from None


def _agent_of(paths) -> str:
    """The agent whose folder holds the files written ("" when none does)."""
    folders = sorted({folder for path in paths if (folder := agent_folder_of(path)) is not None})
    return folders[0].split("/")[1] if folders else ""
