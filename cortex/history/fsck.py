"""fsck: check everything a store holds, one line per problem, and repair what can be rebuilt or is unusable.

Objects are re-hashed, decoded and their references followed; refs, the reflog and meta
are checked; so is every entry of every named table, by the checker `TABLE_CHECKS` declares
for it. A derived table (a cache cortex fills again as it goes) is dropped whole by `repair`;
a record table loses only the entries its checker calls `Unusable`, those nothing can read
anyway. Objects and refs are never touched. The tables of the features above history
(search, memory, webhooks, the api) are named here rather than imported, so fsck knows every
table without loading every feature; tests/history/test_fsck.py pins the names to their owners'.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import groupby
from typing import Any

from ..backends import Store
from ..backends.base import META, OBJECTS, REFLOG, REFS, TABLES
from ..codec import FORMAT_VERSION, decode
from ..errors import FormatError, IntegrityError, NotFound
from ..hashing import OID_SIZE, hash_bytes
from ..ingest import DOCS_BY_BYTES, STATS, SUBTREES
from ..objects import Document, Folder, Headline, OrgObject, Snapshot, Tree
from ..objects import decode as decode_object
from ..paths import folder_problems, tree_problems
from .copies import COPIES, REF_PREFIX
from .erasures import ERASURES
from .forget import PURGES
from .proposals import BASE as PROPOSAL_BASE, PENDING, PROPOSALS, Proposal
from .snapshots import SNAPSHOTS, SUMMARIES, snapshot_key

__all__ = ["CONFIG", "CONVERSATION", "EMBEDDINGS", "ENGINE_CHECKS", "LITERATE", "SEEN", "TABLE_CHECKS", "FsckProblem",
           "TableCheck", "Unusable", "fsck", "repair"]

# Tables owned by features above history (see the module docstring).
EMBEDDINGS = "search.embeddings"  # cortex.search.embeddings
SHARED = "search.shared"  # cortex.search.sharing
CONFIG = "config"  # cortex.api
LITERATE = "dsl.literate"  # cortex.api
CONVERSATION = "conversation"  # cortex.memory.conversation.log
DELIVERIES, BODIES = "webhooks.deliveries", "webhooks.bodies"  # cortex.webhooks.deliveries
SEEN = "webhooks.seen"  # cortex.webhooks.seen

# What decoding damaged bytes raises (msgpack raises ValueError and TypeError; objects KeyError too).
_UNREADABLE = (FormatError, IntegrityError, KeyError, TypeError, ValueError)


class Unusable(str):
    """A problem that leaves an entry of no use to anything, so `repair` may remove it."""


def _show(key: bytes) -> str:
    """A key as text when it is printable UTF-8 (paths, names), else as hex."""
    try:
        text = key.decode()
    except UnicodeDecodeError:
        return key.hex()
    return text if text.isprintable() else key.hex()


@dataclass(frozen=True)
class TableCheck:
    """How fsck checks each (key, value) of one table and shows its keys; `derived`: cortex rebuilds the table."""

    entry: Callable[[Store, bytes, bytes], str | None]  # what is wrong with an entry, if anything
    derived: bool = False
    show: Callable[[bytes], str] = _show


@dataclass(frozen=True)
class FsckProblem:
    """One problem: the table and key it lies under, what is wrong, and what `repair` did about it."""

    table: str
    key: str
    problem: str
    unusable: bool = False  # nothing can read the entry, so repair may remove it
    repaired: str = ""
    raw_key: bytes = field(default=b"", repr=False, compare=False)  # for repair

    @property
    def repairable(self) -> bool:
        """Whether `repair` fixes it: its table is derived, or it is an unusable reflog or table entry."""
        return _derived(self.table) or (self.unusable and (self.table in TABLE_CHECKS or self.table == REFLOG))

    def __str__(self) -> str:
        where = f"{self.table} {self.key}" if self.key else self.table
        return f"{where}: {self.problem}" + (f" ({self.repaired})" if self.repaired else "")


def fsck(store: Store) -> list[FsckProblem]:
    """Check every object, ref, reflog and meta entry and every table entry; list what is wrong."""
    layout = store.engine.verify()
    if layout:  # walking a damaged B-tree can abort the process: report it and read no further
        return [FsckProblem("store", "", f"damaged data file: {problem}") for problem in layout]
    problems: list[FsckProblem] = []
    with store.reading():
        for table, check in ENGINE_CHECKS.items():
            problems += _check(store, table, check, store.engine.scan(table))
        for name, entries in groupby(store.engine.scan(TABLES), key=lambda entry: entry[0].split(b"\0", 1)[0]):
            table = name.decode(errors="replace")
            start = len(name) + 1
            pairs = ((key[start:], value) for key, value in entries)
            check = TABLE_CHECKS.get(table)
            if check is None:
                count = sum(1 for _ in pairs)
                problems.append(FsckProblem(table, "", f"unknown table ({_entries(count)}): fsck cannot check it"))
            else:
                problems += _check(store, table, check, pairs)
    return problems


def repair(store: Store, problems: Iterable[FsckProblem]) -> list[FsckProblem]:
    """Drop the derived tables with problems and remove unusable entries; return the problems fixed, saying how."""
    fixed = [p for p in problems if p.repairable]
    dropped = sorted({p.table for p in fixed if _derived(p.table)})

    def apply() -> None:
        for name in dropped:
            store.table(name).clear()
        for p in fixed:
            if p.table not in dropped:
                store.engine.delete(*_location(p))

    store.transact(apply)
    return [replace(p, repaired=f"dropped table {p.table}: cortex rebuilds it as it is used" if p.table in dropped
                    else "removed the entry") for p in fixed]


def _check(store: Store, table: str, check: TableCheck, pairs: Iterable[tuple[bytes, bytes]],
           ) -> Iterator[FsckProblem]:
    for key, value in pairs:
        problem = check.entry(store, key, value)
        if problem:
            yield FsckProblem(table, check.show(key), str(problem), isinstance(problem, Unusable), raw_key=key)


def _entries(count: int) -> str:
    return f"{count} entry" if count == 1 else f"{count} entries"


def _derived(table: str) -> bool:
    check = TABLE_CHECKS.get(table)
    return check is not None and check.derived


def _location(problem: FsckProblem) -> tuple[str, bytes]:
    """The engine table and key of a problem's entry."""
    if problem.table == REFLOG:
        return REFLOG, problem.raw_key
    return TABLES, problem.table.encode() + b"\0" + problem.raw_key


# --- helpers the checkers share ---------------------------------------------------------------

def _decode(value: bytes) -> Any:
    """The decoded value, or None when the bytes are not msgpack (no table here stores a bare nil)."""
    try:
        return decode(value)
    except (TypeError, ValueError):
        return None


def _is_oid(value: Any) -> bool:
    return isinstance(value, bytes) and len(value) == OID_SIZE


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_text(value: bytes) -> bool:
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True


def _number(value: bytes | None) -> int | None:
    """A big-endian 8-byte counter (sequence numbers, times), or None."""
    return struct.unpack(">Q", value)[0] if value is not None and len(value) == 8 else None


def _digest_key(key: bytes) -> str | None:
    return None if len(key) == OID_SIZE else f"key is not a 32-byte digest ({len(key)} bytes)"


def _read(store: Store, oid: bytes) -> OrgObject | None:
    """The object stored under `oid` if it is there and sound (its own check reports damage)."""
    try:
        return decode_object(store.objects.raw(oid))  # not the decoded cache: damage must show the same each run
    except (NotFound, *_UNREADABLE):
        return None


def _names(store: Store, value: bytes, kind: type[OrgObject]) -> str | None:
    """What is wrong with `value` as the oid of a stored object of `kind`, if anything."""
    if not _is_oid(value):
        return Unusable(f"value is not an oid ({len(value)} bytes)")
    obj = _read(store, value)
    if obj is None:
        return None if value in store.objects else Unusable(f"names missing object {value.hex()}")
    return None if isinstance(obj, kind) else Unusable(f"names a {obj.kind} {value.hex()}, not a {kind.kind}")


# --- the engine's own tables -----------------------------------------------------------------

def _object(store: Store, oid: bytes, data: bytes) -> str | None:
    found = hash_bytes(data)
    if found != oid:
        return f"hashes to {found.hex()}"
    try:
        obj = decode_object(data)
    except _UNREADABLE as exc:
        return f"cannot decode: {exc}"
    missing = [ref.hex() for ref in obj.references if ref not in store.objects]
    if missing:
        return f"refers to missing object {', '.join(missing)}"
    if isinstance(obj, Folder):
        crafted = folder_problems(obj.files)
    elif isinstance(obj, Tree):  # its folders read as they are stored: their own checks report their damage
        try:
            crafted = tree_problems(obj.bind(lambda ref: decode_object(store.objects.raw(ref))).entries)
        except (NotFound, *_UNREADABLE):
            crafted = []
    else:
        crafted = []
    return f"a tree naming files that cannot be under an Org root: {'; '.join(crafted)}" if crafted else None


def _ref(store: Store, name: bytes, target: bytes) -> str | None:
    if not _is_oid(target):
        return f"points at no oid ({len(target)} bytes)"
    return None if target in store.objects else f"points at missing object {target.hex()}"


def _reflog_key(key: bytes) -> str:
    name, _, seq = key.partition(b"\0")
    number = _number(seq)
    return key.hex() if number is None else f"{name.decode(errors='replace')} #{number}"


def _reflog_entry(store: Store, key: bytes, value: bytes) -> str | None:
    name, _, seq = key.partition(b"\0")
    if _number(seq) is None:
        return Unusable("key is not a ref name and a sequence number")
    entry = _decode(value)
    if not (isinstance(entry, list) and len(entry) == 4 and all(o is None or _is_oid(o) for o in entry[:2])
            and _is_count(entry[2]) and isinstance(entry[3], str)):
        return Unusable("value is not an [old, new, time, message] entry")
    missing = [oid.hex() for oid in entry[:2] if oid is not None and oid not in store.objects]
    if missing:
        return Unusable(f"names missing object {', '.join(missing)}")
    counter = _number(store.engine.get(META, b"seq\0" + name + b"\0"))
    if counter is None or counter < _number(seq):
        return "is past its ref's sequence counter: the ref's next move would overwrite it"
    return None


def _meta_entry(store: Store, key: bytes, value: bytes) -> str | None:
    if key == b"format":
        version = _decode(value)
        if _is_count(version) and 0 < version <= FORMAT_VERSION:
            return None
        return f"format version {version!r} is not one this cortex reads (1 to {FORMAT_VERSION})"
    if key.startswith(b"seq\0") and key.endswith(b"\0"):
        return None if _number(value) is not None else "sequence counter is not 8 bytes"
    if key == b"id":
        return None if len(value) == 32 and all(c in b"0123456789abcdef" for c in value) else "not a store id"
    return "unknown key"


ENGINE_CHECKS: dict[str, TableCheck] = {
    OBJECTS: TableCheck(_object, show=bytes.hex),
    REFS: TableCheck(_ref),
    REFLOG: TableCheck(_reflog_entry, show=_reflog_key),
    META: TableCheck(_meta_entry),
}


# --- named tables ----------------------------------------------------------------------------

def _document_entry(store: Store, digest: bytes, oid: bytes) -> str | None:
    return _digest_key(digest) or _names(store, oid, Document)


def _subtree_entry(store: Store, digest: bytes, oid: bytes) -> str | None:
    return _digest_key(digest) or _names(store, oid, Headline)


def _stat_entry(store: Store, path: bytes, value: bytes) -> str | None:
    seen = _decode(value)
    if isinstance(seen, list) and len(seen) == 6 and all(map(_is_count, seen[:5])) and _is_oid(seen[5]):
        return None
    return "value is not a [size, mtime, ctime, inode, device, digest] stat signature"


def _summary_entry(store: Store, oid: bytes, value: bytes) -> str | None:
    counts = _decode(value)
    if _is_count(counts) or (isinstance(counts, dict) and set(counts) == {"files", "headlines"}
                             and all(map(_is_count, counts.values()))):
        return _digest_key(oid)
    return "value is neither a document's headline count nor a tree's {files, headlines}"


def _embedding_entry(store: Store, key: bytes, vector: bytes) -> str | None:
    if len(key) <= OID_SIZE + 1 or key[-OID_SIZE - 1] != 0:
        return "key is not a model name and a text digest"
    return None if vector and len(vector) % 4 == 0 else f"value is not float32 vector bytes ({len(vector)} bytes)"


def _shared_entry(store: Store, key: bytes, value: bytes) -> str | None:
    # A manifest (label -> [root, purge, token, files, time]), an upload under way (token -> [time, chunks]), a chunk.
    kind, _, rest = key.partition(b"\0")
    if kind == b"manifest" and rest:
        found = _decode(value)
        return None if isinstance(found, list) and len(found) == 5 else "value is not a shared index's manifest"
    if kind == b"upload" and len(rest) == 16:
        found = _decode(value)
        return None if isinstance(found, list) and len(found) == 2 else "value is not an upload's [time, chunks]"
    return None if kind == b"chunk" and len(rest) == 20 else "not a shared index's manifest, upload or chunk"


def _snapshot_entry(store: Store, key: bytes, oid: bytes) -> str | None:
    if len(key) != 8 + OID_SIZE:
        return Unusable("key is not a time and an oid")
    problem = _names(store, oid, Snapshot)
    snap = None if problem else _read(store, oid)
    if snap is None or key == snapshot_key(snap):
        return problem
    if key[8:] != oid:
        return f"listed under another snapshot's oid {key[8:].hex()}"
    return f"listed at time {_number(key[:8])}, not its own time {snap.time_ns}"


def _purge_entry(store: Store, key: bytes, value: bytes) -> str | None:
    fields = _decode(value)
    if len(key) != 12 or not _is_tombstone(fields):
        return Unusable("not a tombstone: [time, by, what, paths, snapshots, objects] under its time and 4 bytes")
    return None if _number(key[:8]) == fields[0] else "listed at a time that is not the tombstone's"


def _is_tombstone(fields: Any) -> bool:
    if not (isinstance(fields, list) and len(fields) == 6):
        return False
    time_ns, by, what, paths, snaps, objects = fields
    return (all(map(_is_count, (time_ns, snaps, objects))) and isinstance(by, str) and isinstance(what, str)
            and isinstance(paths, list) and all(isinstance(path, str) for path in paths))


def _config_entry(store: Store, key: bytes, value: bytes) -> str | None:
    if key != b"org_root":
        return "unknown key"
    return None if _is_text(value) and os.path.isabs(value.decode()) else "org_root is not an absolute folder path"


def _copy_entry(store: Store, key: bytes, value: bytes) -> str | None:
    record = _decode(value)
    if not (isinstance(record, list) and len(record) in (3, 4) and isinstance(record[0], str)
            and isinstance(record[1], str) and _is_count(record[2])
            and (len(record) == 3 or isinstance(record[3], bytes) and len(record[3]) == 32)):
        return Unusable("value is not a working copy record (folder, machine, time, public key)")
    return None if store.refs.get(REF_PREFIX + key.decode(errors="replace")) else "no ref holds the copy's base"


def _erasure_entry(store: Store, key: bytes, value: bytes) -> str | None:
    copy_id, nul, rest = key.partition(b"\0")
    if not nul or len(rest) != 12 or not isinstance(value, bytes):
        return Unusable("not a copy id, a time and a sealed record")
    return None if store.table(COPIES).get(copy_id) is not None else Unusable("no working copy it waits for")


def _proposal(ident: bytes, value: bytes) -> Proposal | None:
    """A proposal record, or None when it cannot be read."""
    try:
        proposal = Proposal.decoded(ident.decode(), value)
    except (*_UNREADABLE, AttributeError):
        return None
    return proposal if proposal.status in ("pending", "accepted", "rejected") else None


def _proposal_entry(store: Store, key: bytes, value: bytes) -> str | None:
    proposal = _proposal(key, value)
    if proposal is None:
        return Unusable("value is not a proposal record")
    if proposal.pending and None in (store.refs.get(proposal.ref), store.refs.get(proposal.ref + PROPOSAL_BASE)):
        return "pending, but no ref holds its trees"
    return None


def _pending_entry(store: Store, key: bytes, value: bytes) -> str | None:
    agent, nul, ident = key.partition(b"\0")
    recorded = store.table(PROPOSALS).get(ident)
    proposal = None if not nul or recorded is None else _proposal(ident, recorded)
    if proposal is None or not proposal.pending or proposal.agent.encode() != agent:
        return Unusable("lists a proposal that is not pending (or not recorded)")
    return None


def _literate_entry(store: Store, path: bytes, value: bytes) -> str | None:
    return None if _is_text(path) else Unusable("key is not a UTF-8 file path")


_TURN_FIELDS = {"user", "assistant", "trajectory", "shown", "hidden", "time_ns"}


def _conversation_entry(store: Store, key: bytes, value: bytes) -> str | None:
    # Keys are a kind byte, the identity's 32-byte key, then a turn number (t) or a turn's key (k).
    kind, identity, rest = key[:1], key[1:1 + OID_SIZE], key[1 + OID_SIZE:]
    if kind == b"s" and len(identity) == OID_SIZE and not rest:
        state = _decode(value)
        return None if isinstance(state, dict) and _is_count(state.get("next")) else "value is not a conversation state"
    if kind == b"t" and len(identity) == OID_SIZE and len(rest) == 8:
        turn = _decode(value)
        return None if isinstance(turn, dict) and _TURN_FIELDS <= set(turn) else "value is not a turn record"
    if kind == b"k" and len(identity) == OID_SIZE and len(rest) == OID_SIZE and _number(value) is not None:
        if store.table(CONVERSATION).get(b"t" + identity + value) is None:
            # a dangling index entry names a turn that is gone: delete(key) would find nothing to remove
            return Unusable(f"indexes turn #{_number(value)}, which is not stored")
        return None
    return "not a conversation state, turn or turn index entry"


_DELIVERY_FIELDS = {"webhook", "path", "trigger", "time_ns", "status", "outcome"}


def _delivery_entry(store: Store, key: bytes, value: bytes) -> str | None:
    # An unreadable record breaks every listing of the log: it is of no use to keep.
    record = _decode(value)
    if len(key) == 12 and isinstance(record, dict) and _DELIVERY_FIELDS <= set(record):
        return None
    return Unusable("not a delivery record (12-byte id -> its fields)")


def _body_entry(store: Store, key: bytes, body: bytes) -> str | None:
    record = store.table(DELIVERIES).get(key)
    if record is None or _delivery_entry(store, key, record):
        return Unusable("a body without a usable delivery record (nothing can redeliver it)")
    return None


def _seen_entry(store: Store, key: bytes, value: bytes) -> str | None:
    # Keys are an expiry entry (\0, 8-byte time, digest), a seen key (k, digest) or a pending mark (p, delivery id).
    kind, rest = key[:1], key[1:]
    if kind == b"\0" and len(rest) == 8 + OID_SIZE:
        return None if value == b"" else Unusable("an expiry entry holds a value")
    if kind == b"k" and len(rest) == OID_SIZE:
        entry = _decode(value)
        ok = (isinstance(entry, list) and len(entry) == 2 and _is_count(entry[0]) and isinstance(entry[1], bytes)
              and len(entry[1]) == 12)
        return None if ok else Unusable("value is not [expiry, delivery id]")
    if kind == b"p" and len(rest) == 12:
        owner = _decode(value)
        ok = isinstance(owner, list) and len(owner) == 2 and isinstance(owner[0], str) and _is_count(owner[1])
        return None if ok else Unusable("value is not [host, pid]")
    return Unusable("not a seen key, an expiry entry or a pending mark")


# Every named table cortex writes: its checker, and whether cortex rebuilds it (repair may drop it whole).
TABLE_CHECKS: dict[str, TableCheck] = {
    DOCS_BY_BYTES: TableCheck(_document_entry, derived=True),
    SUBTREES: TableCheck(_subtree_entry, derived=True),
    STATS: TableCheck(_stat_entry, derived=True),
    SUMMARIES: TableCheck(_summary_entry, derived=True),
    EMBEDDINGS: TableCheck(_embedding_entry, derived=True),
    SHARED: TableCheck(_shared_entry, derived=True),
    SNAPSHOTS: TableCheck(_snapshot_entry),
    PURGES: TableCheck(_purge_entry),
    COPIES: TableCheck(_copy_entry),
    ERASURES: TableCheck(_erasure_entry),
    PROPOSALS: TableCheck(_proposal_entry),
    PENDING: TableCheck(_pending_entry),
    CONFIG: TableCheck(_config_entry),
    LITERATE: TableCheck(_literate_entry),
    CONVERSATION: TableCheck(_conversation_entry),
    DELIVERIES: TableCheck(_delivery_entry),
    BODIES: TableCheck(_body_entry),
    SEEN: TableCheck(_seen_entry),
}
