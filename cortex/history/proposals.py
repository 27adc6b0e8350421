"""Proposals: writes that wait for a person, each the tree it would make on top of the working tree it read.

A proposal is kept under two refs of its own, `proposals/<id>` (the tree it would make) and
`proposals/<id>/base` (the working tree it was made from), so that gc keeps both and a hard forget
rewrites them with every other kept state; and a record in `history.proposals` (who, when, what it does,
which files, its status). While it is pending its record is also listed in `history.proposals.pending`
under its agent, so that listing what waits reads that table alone, however many were decided before.

Accepting merges the proposal into the working state as a sync merges a working copy (`merge.merge_trees`:
base = the proposal's base, ours = the working state now, theirs = the proposal), so what changed meanwhile
is kept and a true conflict stays in the file as a `:CONFLICT:` copy. In one transaction the working state
moves, the record says accepted and the refs go (a writer that loses the race merges again onto what won);
the same transaction snapshots the working state it merged into (unless HEAD holds it) and the one it made,
so a rollback to the first undoes the accept. `only` takes some of the proposal's headlines, named as `diff`
names them (by :ID: or outline path): the rest stays out. Rejecting keeps the record with its reason and
drops the refs; gc then collects what only the proposal held.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from .. import org
from ..backends import Store
from ..codec import decode, encode
from ..errors import NotFound, UserError
from ..hashing import Oid
from ..ingest import WORKING, working_tree
from ..objects import EMPTY_TREE, Document, OrgObject, Snapshot, Tree
from ..prefixes import unique
from ..retry import retrying
from ..words import counted, quoted, short, when
from .conflicts import Conflict
from .diff import Change, diff, differing, patched, unified
from .merge import holds, merge_trees
from .siblings import Getter, pair
from .snapshots import HEAD, SNAPSHOTS, snapshot_key, summary

__all__ = ["ACCEPTED", "BASE", "PENDING", "PROPOSALS", "REF_PREFIX", "REJECTED", "STATUSES", "Accepted", "Proposal",
           "accept", "applied", "changes", "find", "patch", "pending", "propose", "proposals", "reject", "trees"]

PROPOSALS = "history.proposals"  # id -> record
PENDING = "history.proposals.pending"  # agent \0 id -> record, while it waits
REF_PREFIX = "proposals/"
BASE = "/base"  # with a proposal's ref: the working tree it was made on
PENDING_STATUS, ACCEPTED, REJECTED = "pending", "accepted", "rejected"
STATUSES = (PENDING_STATUS, ACCEPTED, REJECTED)
ID_BYTES = 4  # an id is this many random bytes in hex: 8 characters, a prefix of them names one too
MAX_REASON = 2000  # characters of a reason for a rejection
LISTING = "; `cortex review` lists the pending ones"
_ID = re.compile(r"[0-9a-f]{1,%d}" % (2 * ID_BYTES))


@dataclass(frozen=True)
class Proposal:
    """A write waiting for review, or decided: who made it, when, what it does and to which files."""

    id: str
    agent: str
    time_ns: int
    message: str
    operation: str  # add, forget, compact, turns, delivery...
    paths: tuple[str, ...]
    status: str = PENDING_STATUS
    reason: str = ""  # why it was rejected
    decided_ns: int | None = None
    commit: Oid | None = None  # the snapshot of the working state its acceptance made
    undo: Oid | None = None  # the snapshot a rollback to undoes its acceptance
    only: tuple[str, ...] = ()  # the headlines accepted, when not all were
    conflicts: tuple[str, ...] = ()  # what its acceptance left in conflict

    @property
    def ref(self) -> str:
        return REF_PREFIX + self.id

    @property
    def pending(self) -> bool:
        return self.status == PENDING_STATUS

    def encoded(self) -> bytes:
        return encode({"agent": self.agent, "time_ns": self.time_ns, "message": self.message,
                       "operation": self.operation, "paths": list(self.paths), "status": self.status,
                       "reason": self.reason, "decided_ns": self.decided_ns,
                       "commit": None if self.commit is None else bytes(self.commit),
                       "undo": None if self.undo is None else bytes(self.undo), "only": list(self.only),
                       "conflicts": list(self.conflicts)})

    @classmethod
    def decoded(cls, ident: str, data: bytes) -> "Proposal":
        fields = decode(data)
        return cls(ident, fields["agent"], fields["time_ns"], fields["message"], fields["operation"],
                   tuple(fields["paths"]), fields["status"], fields["reason"], fields["decided_ns"],
                   _oid(fields["commit"]), _oid(fields["undo"]), tuple(fields["only"]), tuple(fields["conflicts"]))

    def __str__(self) -> str:
        return f"{self.id} {self.status} {self.agent} {self.operation}: {self.message}"

    def heading(self) -> str:
        """One line: id, agent, when, what it does and the files it touches (and how it was decided)."""
        decided = "" if self.pending else f"  {self.status} {when(self.decided_ns)}" + (
            f": {self.reason}" if self.reason else "")
        return f"{self.id}  {self.agent}  {when(self.time_ns)}  {self.operation}  {', '.join(self.paths)}{decided}"

    def lines(self) -> list[str]:
        """Its heading, its message and, once accepted, how to undo it and what it left in conflict."""
        lines = [self.heading(), f"  {self.message}"]
        if self.status == ACCEPTED:
            lines.append(f"  accepted as snapshot {short(self.commit)}; undo with `cortex rollback {short(self.undo)}`"
                         + (f" (only {', '.join(self.only)})" if self.only else ""))
            lines += [f"  conflict {conflict}" for conflict in self.conflicts]
        return lines


@dataclass(frozen=True)
class Accepted:
    """What accepting a proposal did: the proposal as decided, the files it changed, what it left in conflict."""

    proposal: Proposal
    paths: list[str] = field(default_factory=list)
    conflicts: tuple[Conflict, ...] = ()

    def __str__(self) -> str:
        decided = self.proposal
        taken = f" (only {', '.join(decided.only)})" if decided.only else ""
        lines = [f"accepted {decided.id}{taken}: {counted(len(self.paths), 'file')} changed, as snapshot "
                 f"{short(decided.commit)}; undo with `cortex rollback {short(decided.undo)}`"]
        return "\n".join(lines + [f"  conflict {conflict}" for conflict in self.conflicts])


# --- making and listing ----------------------------------------------------------------------------------

def propose(store: Store, base: Tree, proposed: Tree, *, agent: str, message: str, operation: str,
            objects: Iterable[OrgObject] = (), then: Callable[[Proposal], None] | None = None) -> Proposal | None:
    """Keep `proposed` (made on the working tree `base`) as a pending proposal of `agent`, with the new
    `objects` its trees need, in one transaction in which `then(proposal)` runs too; None (and nothing
    written) when it changes nothing."""
    paths = tuple(sorted(differing(base, proposed)))
    if not paths:
        return None
    objects = [*objects, base, proposed]

    def record() -> Proposal:
        table = store.table(PROPOSALS)
        while (ident := secrets.token_hex(ID_BYTES)).encode() in table:
            pass
        made = Proposal(ident, agent, time.time_ns(), message, operation, paths)
        store.objects.add_many(objects)
        store.refs.set_if_equals(made.ref, proposed.oid, None, logged=False)
        store.refs.set_if_equals(made.ref + BASE, base.oid, None, logged=False)
        _write(store, made)
        if then is not None:
            then(made)
        return made

    return store.transact(record)


def pending(store: Store, agent: str | None = None) -> list[Proposal]:
    """The proposals waiting for review (of one agent, or all), oldest first: one read of the pending table."""
    prefix = b"" if agent is None else agent.encode() + b"\0"
    found = [Proposal.decoded(key.split(b"\0", 1)[1].decode(), value)
             for key, value in store.table(PENDING).items(prefix)]
    return sorted(found, key=lambda p: (p.time_ns, p.id))


def proposals(store: Store, status: str | None = None, agent: str | None = None) -> list[Proposal]:
    """Every proposal (or those of one status, of one agent), oldest first."""
    if status is not None and status not in STATUSES:
        raise UserError(f"proposal status {quoted(status)}: use one of {', '.join(STATUSES)}")
    if status == PENDING_STATUS:
        return pending(store, agent)
    found = [Proposal.decoded(key.decode(), value) for key, value in store.table(PROPOSALS).items()]
    return sorted((p for p in found if (status is None or p.status == status) and (agent is None or p.agent == agent)),
                  key=lambda p: (p.time_ns, p.id))


def find(store: Store, name: str) -> Proposal:
    """The proposal `name` names: its id or a unique prefix of it."""
    text = str(name).strip().lower()
    if not _ID.fullmatch(text):
        raise UserError(f"{quoted(name)} is not a proposal id (up to {2 * ID_BYTES} hex digits); {LISTING[2:]}")
    found = dict(store.table(PROPOSALS).items(text.encode()))
    ident = unique(text, (key.decode() for key in found), "proposal", LISTING)
    return Proposal.decoded(ident, found[ident.encode()])


def trees(store: Store, proposal: Proposal) -> tuple[Tree, Tree]:
    """A pending proposal's base and the tree it would make."""
    base, made = store.refs.get(proposal.ref + BASE), store.refs.get(proposal.ref)
    if base is None or made is None:
        raise NotFound(f"proposal {proposal.id} was {proposal.status}: its trees are no longer kept")
    return store.objects[base], store.objects[made]


def changes(store: Store, proposal: Proposal) -> list[Change]:
    """The headlines a pending proposal adds, removes, changes or moves, as `diff` names them."""
    return diff(store, *trees(store, proposal))


def patch(store: Store, proposal: Proposal) -> str:
    """The text of each change of a pending proposal, as a patch: what changed before a file's first headline,
    then each change and its patch, as `cortex diff --patch` shows them."""
    base, made = trees(store, proposal)
    get = store.objects.__getitem__
    lines: list[str] = []
    for path in proposal.paths:
        a, b = base.entries.get(path), made.entries.get(path)
        before = get(a).preamble if a is not None else ""
        after = get(b).preamble if b is not None else ""
        if before != after:
            name = f"{path}: (the text before the first headline)"
            lines += [f"changed  {name}", unified(before, after, name, name)]
    return "\n".join([*lines, *patched(store, diff(store, base, made))])


# --- deciding --------------------------------------------------------------------------------------------

def accept(store: Store, name: str, only: Iterable[str] | None = None) -> Accepted:
    """Merge a pending proposal (or the headlines of it `only` names) into the working state, in one commit
    (see the module)."""
    only = tuple(dict.fromkeys(only or ()))
    if not all(isinstance(headline, str) and headline.strip() for headline in only):
        raise UserError(f"only names headlines, by :ID: or outline path; got {quoted(only)}")
    proposal = _waiting(find(store, name))
    base, theirs = trees(store, proposal)
    made: dict[Oid, OrgObject] = {}
    if only:
        theirs = _restricted(store, base, theirs, only, made)
    get = _reading(made, store.objects.__getitem__)
    labels = ("working state", f"proposal {proposal.id}")

    def once() -> Accepted:
        ours_oid = store.refs.get(WORKING)
        ours = working_tree(store)
        merge = merge_trees(base, ours, theirs, get, labels=labels)
        conflicts = merge.conflicts

        def commit() -> Accepted:
            _waiting(find(store, proposal.id))  # not decided meanwhile by another reviewer
            store.objects.add_many([*made.values(), *merge.objects])
            undo = _snapshot(store, ours_oid or store.objects.add(EMPTY_TREE), f"before accepting proposal {proposal.id}")
            if merge.tree.oid != ours_oid:
                store.refs.set_if_equals(WORKING, merge.tree.oid, ours_oid, f"accepted proposal {proposal.id}")
            after = _snapshot(store, merge.tree.oid, f"accepted proposal {proposal.id}")
            decided = replace(proposal, status=ACCEPTED, decided_ns=time.time_ns(), commit=after, undo=undo,
                              only=only, conflicts=tuple(map(str, conflicts)))
            _decide(store, decided)
            return Accepted(decided, sorted(differing(ours, merge.tree)), conflicts)

        return store.transact(commit)

    return retrying(once)


def reject(store: Store, name: str, reason: str = "") -> Proposal:
    """Reject a pending proposal: its record stays, with `reason`; its trees are no longer kept."""
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise UserError(f"a reason is text of at most {MAX_REASON:,} characters; got {quoted(reason)}")
    proposal = _waiting(find(store, name))

    def decide() -> Proposal:
        decided = replace(_waiting(find(store, proposal.id)), status=REJECTED, reason=reason,
                          decided_ns=time.time_ns())
        _decide(store, decided)
        return decided

    return store.transact(decide)


def _waiting(proposal: Proposal) -> Proposal:
    if not proposal.pending:
        raise UserError(f"proposal {proposal.id} was {proposal.status} already")
    return proposal


def _write(store: Store, proposal: Proposal) -> None:
    """Record a proposal, listed as pending while it is; call inside a transaction."""
    data = proposal.encoded()
    store.table(PROPOSALS)[proposal.id.encode()] = data
    key = proposal.agent.encode() + b"\0" + proposal.id.encode()
    if proposal.pending:
        store.table(PENDING)[key] = data
    elif key in store.table(PENDING):
        del store.table(PENDING)[key]


def _decide(store: Store, decided: Proposal) -> None:
    """Record a decision and let the proposal's trees go; call inside a transaction."""
    _write(store, decided)
    for ref in (decided.ref, decided.ref + BASE):
        if (target := store.refs.get(ref)) is not None:
            store.refs.set_if_equals(ref, None, target, logged=False)


def _snapshot(store: Store, root: Oid, message: str) -> Oid:
    """A snapshot holding the working tree `root`: HEAD if it does, else a new one; call inside a transaction."""
    head = store.refs.get(HEAD)
    if head is not None and store.objects[head].root == root:
        return head
    snap = Snapshot(root=root, parent=head, time_ns=time.time_ns(), message=message,
                    counts=summary(store, store.objects[root]))
    store.objects.add(snap)
    store.table(SNAPSHOTS)[snapshot_key(snap)] = snap.oid
    store.refs.set_if_equals(HEAD, snap.oid, head, f"snapshot: {message}")
    return snap.oid


# --- some headlines of a proposal ---------------------------------------------------------------------

def _restricted(store: Store, base: Tree, proposed: Tree, names: tuple[str, ...], made: dict[Oid, OrgObject]) -> Tree:
    """`base` with only the changes of `proposed` that `names` name (each by :ID:, outline path, or `path:
    outline path`, as `diff` shows them); the documents it makes go into `made`."""
    found = diff(store, base, proposed)
    picked: list[Change] = []
    for name in names:
        named = [c for c in found if _names(c, name)]
        if not named:
            listed = "; ".join(_name_of(c) for c in found[:5]) + (" ..." if len(found) > 5 else "")
            raise UserError(f"{quoted(name)} names no headline this proposal changes (it changes: {listed})")
        picked += named
    taken = {c.new for c in picked if c.new is not None}
    dropped = {c.old for c in picked if c.old is not None and c.kind in ("removed", "moved")}
    entries: dict[str, Oid] = {}  # changes to `base`
    get = store.objects.__getitem__
    for path in sorted({c.path for c in picked} | {c.old_path for c in picked if c.old_path}):
        a, b = base.entries.get(path), proposed.entries.get(path)
        before = get(a) if a is not None else Document(preamble=get(b).preamble if b is not None else "")
        after = get(b) if b is not None else Document()
        text = before.preamble + "".join(_ended(_picked(get, before.children, after.children, taken, dropped)))
        parsed = org.parse(text)
        made.update((obj.oid, obj) for obj in parsed.objects)
        entries[path] = parsed.document.oid
    tree = base.with_changes(entries)
    made[tree.oid] = tree
    return tree


def _names(change: Change, name: str) -> bool:
    """Whether `name` names the headline of `change`: its :ID:, its outline path, or `path: outline path`."""
    outlines = [change.outline] + ([change.old_outline] if change.old_outline else [])
    paths = [change.path] + ([change.old_path] if change.old_path else [])
    shown = {" / ".join(outline) for outline in outlines}
    return (change.id is not None and name == change.id) or name.strip() in shown or \
        any(name.strip() == f"{path}: {outline}" for path in paths for outline in shown)


def _name_of(change: Change) -> str:
    return change.id or f"{change.path}: {' / '.join(change.outline)}"


def _picked(get: Getter, base: tuple[Oid, ...], proposed: tuple[Oid, ...], taken: set[Oid],
            dropped: set[Oid]) -> Iterator[str]:
    """The raw text, in order, of a list of siblings as `base` has it with the changes of `proposed` picked:
    a headline whose own change was picked (`taken`, by its new oid) takes the proposal's section, one added
    is there when it or a headline under it was picked, one removed goes when it was picked (`dropped`)."""
    pairs = pair(list(base), list(proposed), get, loose=True)
    by_new = {j: i for i, j in pairs.items()}
    left = 0  # base entries up to here are written
    for j, new in enumerate(proposed):
        i = by_new.get(j)
        if i is None:
            if new in taken or holds(get, new, taken):
                yield org.render_headline(get(new), get)
            continue
        for k in range(left, i):
            if k not in pairs and base[k] not in dropped:
                yield org.render_headline(get(base[k]), get)
        left = max(left, i + 1)
        old = base[i]
        if old == new:
            yield org.render_headline(get(old), get)
            continue
        a, b = get(old), get(new)
        yield b.raw if new in taken else a.raw
        yield from _picked(get, a.children, b.children, taken, dropped)
    for k in range(left, len(base)):
        if k not in pairs and base[k] not in dropped:
            yield org.render_headline(get(base[k]), get)


def _ended(parts: Iterable[str]) -> Iterator[str]:
    """Texts to join, each but the last ending a line (a headline that ended the file may be followed now)."""
    last = None
    for part in parts:
        if last is not None:
            yield last if last.endswith("\n") or not last else last + "\n"
        last = part
    if last is not None:
        yield last


# --- an agent's view -------------------------------------------------------------------------------------

def applied(store: Store, tree: Tree, waiting: list[Proposal], get: Getter | None = None
            ) -> tuple[Tree, dict[Oid, OrgObject]]:
    """`tree` with the pending proposals `waiting` merged in, in order (as accepting them would, conflicts
    kept in Org), and the objects made for it that the store does not hold."""
    made: dict[Oid, OrgObject] = {}
    chained = _reading(made, get or store.objects.__getitem__)
    for proposal in waiting:
        try:
            base, theirs = trees(store, proposal)
        except NotFound:  # decided meanwhile
            continue
        merge = merge_trees(base, tree, theirs, chained, labels=("working state", f"proposal {proposal.id}"))
        made.update((obj.oid, obj) for obj in merge.objects)
        tree = merge.tree
    return tree, made



def _reading(made: dict[Oid, OrgObject], get: Getter) -> Getter:
    """A getter of the objects `made` (not stored), then of `get`'s."""
    return lambda oid: made.get(oid) or get(oid)


def _oid(value: bytes | None) -> Oid | None:
    return None if value is None else Oid(value)
