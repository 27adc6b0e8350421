"""fsck: every table is checked, each problem is one line naming the table and key, --repair fixes what it can,
and one bad cache entry no longer breaks ingest."""

import os
import struct
from dataclasses import dataclass
from typing import Callable

import pytest
from click.testing import CliRunner

import cortex.api as cx
from cortex import ingest as ingesting
from cortex.org import parse
from cortex.backends.base import META, OBJECTS, REFLOG, REFS, TABLES
from cortex.cli.app import cli
from cortex.codec import encode, encode_object
from cortex.hashing import Oid, hash_bytes
from cortex.history import PURGES, SNAPSHOTS, SUMMARIES, fsck as history_fsck
from cortex.history.copies import COPIES
from cortex.history.erasures import ERASURES
from cortex.history.forget import newest_purge
from cortex.history.fsck import TABLE_CHECKS
from cortex.history.proposals import PENDING, PROPOSALS, propose, reject
from cortex.ingest import DOCS_BY_BYTES, STATS, SUBTREES
from cortex.memory.conversation.conformance import WHO, make_turn
from cortex.memory.conversation.log import TABLE as CONVERSATION
from cortex.objects import Tree
from cortex.search.embedders import HashingEmbedder
from cortex.search import sharing
from cortex.search.embeddings import EMBEDDINGS
from cortex.webhooks.deliveries import BODIES, DELIVERIES, Delivery, DeliveryLog, Outcome, id_time_ns, new_id
from cortex.webhooks.seen import DELIVERY, SEEN, SeenKey

PROJECTS = "notes/projects.org"
MISSING = b"\x01" * 32  # an oid no object has
GARBAGE = b"\xc1"  # a byte msgpack never writes
LITERATE_ORG = "* Definitions\n#+begin_src hy :cortex yes\n(defmemory notes)\n#+end_src\n"


def table_names(store) -> set[str]:
    return {key.split(b"\0", 1)[0].decode() for key, _ in store.engine.scan(TABLES)}


def put(c, table: str, key: bytes, value: bytes) -> None:
    c.store.table(table)[key] = value


def engine_put(c, table: str, key: bytes, value: bytes) -> None:
    c.store.transact(lambda: c.store.engine.put(table, key, value))


def docs_key(c, rel: str = PROJECTS) -> bytes:
    return hash_bytes((c.root / rel).read_bytes())


def stats_key(c, rel: str = PROJECTS) -> bytes:
    return os.fsencode(os.path.join(c.root, rel))


def subtree_keys(c, rel: str = PROJECTS) -> list[bytes]:
    return list(parse((c.root / rel).read_text()).subtree_keys)


def delivery(c) -> Delivery:
    delivery_id = new_id()
    taken = Delivery(id=delivery_id, webhook="gh", path="/hooks/gh", trigger="live", time_ns=id_time_ns(delivery_id),
                     status=202, outcome=Outcome.PENDING)
    DeliveryLog(c.store).claim(taken, b"{}", [SeenKey(DELIVERY, "evt_1", taken.time_ns + 10**12)])
    return taken


@pytest.fixture
def hashing_search(monkeypatch):
    """Search embeds with the cheap hashing embedder (the cache is what is under test, not the model)."""
    monkeypatch.setattr("cortex.search.embeddings.shared_embedder", lambda: HashingEmbedder())


@pytest.fixture
def stocked(cortex, org, hashing_search, monkeypatch):
    """A store in which every feature has written its tables."""
    monkeypatch.setattr(ingesting, "RACY_SECONDS", 0)  # so the stat cache is written for files copied just now
    (org / "notes" / "defs.org").write_text(LITERATE_ORG)
    cortex.ingest()
    cortex.snapshot("first")
    cortex.memory.purge("reviewer", hard=True)
    cortex.search("webhook secrets")
    cortex._search_index.save()  # and shared, as a store on PostgreSQL shares it (an LMDB store never does)
    sharing.share(cortex.store, cortex._index_folder(), "stocked", bytes(cortex._search_index.root),
                  newest_purge(cortex.store))
    cortex.conversations().add_turn(WHO, make_turn(1))
    delivery(cortex)
    cortex.checkout(org.parent / "copy")
    cortex.memory.forget("assistant", "mem-assistant-dark-mode", hard=True)  # waits for the copy, sealed
    for n in range(2):  # one proposal pending, one rejected
        made = parse(f"* Proposed {n}\n")
        base = cortex.working()
        tree = Tree({**base.entries, f"notes/proposed-{n}.org": made.document.oid})
        proposal = propose(cortex.store, base, tree, agent="bot", message="a note", operation="add",
                           objects=made.objects)
    reject(cortex.store, proposal.id, "not now")
    return cortex


def test_fsck_knows_the_tables_by_their_owners_names():
    assert {DOCS_BY_BYTES, SUBTREES, STATS, SNAPSHOTS, SUMMARIES, PURGES, EMBEDDINGS, sharing.SHARED, cx.CONFIG,
            cx.LITERATE, CONVERSATION, DELIVERIES, BODIES, SEEN, COPIES, ERASURES, PROPOSALS, PENDING} == set(TABLE_CHECKS)


def test_a_store_every_feature_wrote_to_is_clean(stocked):
    assert table_names(stocked.store) == set(TABLE_CHECKS)
    assert stocked.fsck() == []


@dataclass(frozen=True)
class Damage:
    """One way to damage a store: what it does, what fsck says (table, key, words), whether repair fixes it."""

    name: str
    apply: Callable  # (cortex) -> the key fsck should name
    table: str
    says: str
    repaired: bool


def _snapshot_missing(c):
    key = struct.pack(">Q", 1) + MISSING
    put(c, SNAPSHOTS, key, MISSING)
    return key.hex()


def _snapshot_mislisted(c):
    head = c.snapshots()[0]
    key = struct.pack(">Q", head.time_ns + 1) + head.oid
    put(c, SNAPSHOTS, key, head.oid)
    return key.hex()


def _snapshot_misnamed(c):
    head = c.snapshots()[0]
    key = struct.pack(">Q", head.time_ns) + MISSING
    put(c, SNAPSHOTS, key, head.oid)
    return key.hex()


def _reflog(value: bytes, seq: int = 0):
    def apply(c):
        engine_put(c, REFLOG, b"HEAD\0" + struct.pack(">Q", seq), value)
        return f"HEAD #{seq}"
    return apply


def _object_swapped(c):
    node, other = c.lookup("read-rrf"), c.lookup("read-rag").headline
    engine_put(c, OBJECTS, node.oid, other.encoded)
    return node.oid.hex()


def _object_dangling(c):
    tree = Tree({"gone.org": Oid(MISSING)})
    folder = tree.folder("")  # stored with its tree: it is the folder that names the missing document
    engine_put(c, OBJECTS, tree.oid, tree.encoded)
    engine_put(c, OBJECTS, folder.oid, folder.encoded)
    return folder.oid.hex()


def _crafted(kind: str, fields):
    """An object as anyone may write one, naming the document of projects.org (`fields(document)`)."""
    def apply(c):
        data = encode_object(kind, fields(c.working().entries[PROJECTS]))
        engine_put(c, OBJECTS, hash_bytes(data), data)
        return hash_bytes(data).hex()
    return apply


def _tree_leaving_the_root(c):
    tree = Tree({"notes/fine.org": c.working().entries[PROJECTS], "../victim.org": c.working().entries[PROJECTS]})
    for folder in tree.parts():  # its folders are sound: the path they make with the tree's is not
        engine_put(c, OBJECTS, folder.oid, folder.encoded)
    engine_put(c, OBJECTS, tree.oid, tree.encoded)
    return tree.oid.hex()


def _turn_index_dangling(c):
    key = b"k" + bytes(32) + MISSING
    put(c, CONVERSATION, key, struct.pack(">Q", 7))
    return key.hex()


def _turn_garbage(c):
    key = b"t" + bytes(32) + struct.pack(">Q", 0)
    put(c, CONVERSATION, key, GARBAGE)
    return key.hex()


def _body_orphan(c):
    key = bytes.fromhex(new_id())
    put(c, BODIES, key, b"{}")
    return key.hex()


def _delivery_garbage(c):
    key = bytes.fromhex(new_id())
    put(c, DELIVERIES, key, GARBAGE)
    return key.hex()


def _first_subtree_names_missing(c):
    key = subtree_keys(c)[0]
    put(c, SUBTREES, key, MISSING)
    return key.hex()


def _docs(value):
    def apply(c):
        put(c, DOCS_BY_BYTES, docs_key(c), value)
        return docs_key(c).hex()
    return apply


def _set(table: str, key: bytes, value: bytes, shown: str | None = None, engine: bool = False):
    def apply(c):
        (engine_put if engine else put)(c, table, key, value)
        return key.hex() if shown is None else shown
    return apply


DAMAGES = [
    Damage("document cache names a missing object", _docs(MISSING), DOCS_BY_BYTES,
           f"names missing object {MISSING.hex()}", True),
    Damage("document cache holds garbage", _docs(b"junk"), DOCS_BY_BYTES, "value is not an oid", True),
    Damage("document cache names a headline", lambda c: _docs(c.lookup("read-rrf").oid)(c), DOCS_BY_BYTES,
           "not a document", True),
    Damage("subtree cache names a missing object", _first_subtree_names_missing, SUBTREES, "names missing object",
           True),
    Damage("stat cache holds garbage", lambda c: _set(STATS, stats_key(c), GARBAGE, str(c.root / PROJECTS))(c),
           STATS, "stat signature", True),
    Damage("summary cache holds garbage", _set(SUMMARIES, MISSING, GARBAGE), SUMMARIES, "headline count", True),
    Damage("embedding is not float32 bytes", _set(EMBEDDINGS, b"model\0" + MISSING, b"12345"), EMBEDDINGS,
           "float32", True),
    Damage("shared index manifest is garbage", _set(sharing.SHARED, sharing.MANIFEST + b"x", GARBAGE), sharing.SHARED,
           "manifest", True),
    Damage("snapshot list names a missing object", _snapshot_missing, SNAPSHOTS, "names missing object", True),
    Damage("snapshot listed at another time", _snapshot_mislisted, SNAPSHOTS, "not its own time", False),
    Damage("snapshot listed under another oid", _snapshot_misnamed, SNAPSHOTS, "another snapshot's oid", False),
    Damage("tombstone is garbage", _set(PURGES, struct.pack(">Q", 1) + b"abcd", GARBAGE), PURGES,
           "not a tombstone", True),
    Damage("reflog entry is garbage", _reflog(GARBAGE), REFLOG, "not an [old, new, time, message] entry", True),
    Damage("reflog entry names a missing object", _reflog(encode([None, MISSING, 1, "x"])), REFLOG,
           "names missing object", True),
    Damage("reflog entry past its counter", _reflog(encode([None, None, 1, "x"]), seq=99), REFLOG,
           "sequence counter", False),
    Damage("format version unreadable", _set(META, b"format", encode("one"), "format", engine=True), META,
           "format version", False),
    Damage("unknown meta key", _set(META, b"colour", b"blue", "colour", engine=True), META, "unknown key", False),
    Damage("object hashes to another oid", _object_swapped, OBJECTS, "hashes to", False),
    Damage("object refers to a missing one", _object_dangling, OBJECTS, f"refers to missing object {MISSING.hex()}",
           False),
    Damage("tree names a path out of the root", _tree_leaving_the_root, OBJECTS, "'../victim.org' climbs out", False),
    Damage("flat tree names a path out of the root", _crafted("tree", lambda doc: {"entries": {"../v.org": doc}}),
           OBJECTS, "'../v.org' climbs out", False),
    Damage("folder names a path", _crafted("folder", lambda doc: {"files": {"a/b.org": doc}}), OBJECTS,
           "'a/b.org' is not a file name", False),
    Damage("ref points at a missing object", _set(REFS, b"broken", MISSING, "broken", engine=True), REFS,
           f"points at missing object {MISSING.hex()}", False),
    Damage("unknown config key", _set(cx.CONFIG, b"colour", b"blue", "colour"), cx.CONFIG, "unknown key", False),
    Damage("literate path not UTF-8", _set(cx.LITERATE, b"\xff.org", b""), cx.LITERATE, "not a UTF-8 file path",
           True),
    Damage("conversation index names a missing turn", _turn_index_dangling, CONVERSATION, "which is not stored", True),
    Damage("conversation turn is garbage", _turn_garbage, CONVERSATION, "not a turn record", False),
    Damage("delivery record is garbage", _delivery_garbage, DELIVERIES, "not a delivery record", True),
    Damage("body without a delivery", _body_orphan, BODIES, "without a usable delivery record", True),
    Damage("seen key is garbage", _set(SEEN, b"k" + MISSING, GARBAGE), SEEN, "value is not [expiry, delivery id]",
           True),
    Damage("proposal record is garbage", _set(PROPOSALS, b"0badc0de", GARBAGE, "0badc0de"), PROPOSALS, "not a proposal record",
           True),
    Damage("pending entry of no pending proposal", _set(PENDING, b"bot\0" + b"0badc0de", b""),
           PENDING, "not pending", True),
    Damage("unknown table", _set("mystery", b"k", b"v", ""), "mystery", "unknown table (1 entry)", False),
]


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.name for d in DAMAGES])
def test_each_damage_is_one_line_naming_table_and_key_and_repair_fixes_what_it_can(cortex, damage):
    cortex.snapshot("first")
    assert cortex.fsck() == []
    key = damage.apply(cortex)
    [problem] = cortex.fsck()
    assert (problem.table, problem.key) == (damage.table, key)
    assert damage.says in problem.problem and "\n" not in str(problem)
    assert str(problem).startswith(f"{damage.table} {key}: " if key else f"{damage.table}: ")
    assert problem.repairable == damage.repaired
    after = cortex.fsck(repair=True)
    if damage.repaired:
        assert [p.table for p in after] == [damage.table] and after[0].repaired
        assert cortex.fsck() == []
    else:
        assert [(p.key, p.repaired) for p in after] == [(key, "")]


def test_repair_drops_only_the_damaged_derived_table_and_removes_only_unusable_entries(stocked):
    docs_before, objects_before = len(stocked.store.table(DOCS_BY_BYTES)), len(stocked.store.objects)
    refs_before = {name: stocked.store.refs.get(name) for name in stocked.store.refs.names()}
    put(stocked, SUBTREES, subtree_keys(stocked)[0], b"junk")
    put(stocked, cx.CONFIG, b"colour", b"blue")
    body = _body_orphan(stocked)
    fixed = stocked.fsck(repair=True)
    assert [(p.table, p.repaired.split(":")[0]) for p in fixed] == [
        (SUBTREES, f"dropped table {SUBTREES}"), (BODIES, "removed the entry"), (cx.CONFIG, "")]
    assert fixed[1].key == body
    assert len(stocked.store.table(SUBTREES)) == 0 and len(stocked.store.table(DOCS_BY_BYTES)) == docs_before
    assert len(stocked.store.table(BODIES)) == 1 and stocked.store.table(cx.CONFIG)[b"colour"] == b"blue"
    assert len(stocked.store.objects) == objects_before
    assert {name: stocked.store.refs.get(name) for name in stocked.store.refs.names()} == refs_before


def test_dropped_caches_rebuild_themselves_on_the_next_ingest_snapshot_and_search(stocked, org):
    for table in (DOCS_BY_BYTES, SUBTREES, STATS, SUMMARIES, EMBEDDINGS):
        key = next(iter(stocked.store.table(table)))
        put(stocked, table, key, GARBAGE)
    fixed = stocked.fsck(repair=True)
    assert {p.table for p in fixed if p.repaired} == {DOCS_BY_BYTES, SUBTREES, STATS, SUMMARIES, EMBEDDINGS}
    assert stocked.fsck() == []
    (org / "notes" / "reading.org").write_text((org / "notes" / "reading.org").read_text() + "* A fresh thought\n")
    stocked.ingest()
    stocked.snapshot("second")
    stocked.search("a fresh thought")
    files = stocked.working().entries
    assert {docs_key(stocked, rel) for rel in files} <= set(stocked.store.table(DOCS_BY_BYTES))
    for table in (SUBTREES, STATS, SUMMARIES, EMBEDDINGS):
        assert len(stocked.store.table(table)) > 0, table
    assert stocked.fsck() == []


BAD_CACHE_ENTRIES = {
    "document entry names a missing object": lambda c: put(c, DOCS_BY_BYTES, docs_key(c), MISSING),
    "document entry is not an oid": lambda c: put(c, DOCS_BY_BYTES, docs_key(c), b"junk"),
    "subtree entries name missing objects": lambda c: [put(c, SUBTREES, k, MISSING) for k in subtree_keys(c)],
    "subtree entries are not oids": lambda c: [put(c, SUBTREES, k, b"junk") for k in subtree_keys(c)],
    "stat entry is garbage": lambda c: put(c, STATS, stats_key(c), GARBAGE),
    "stat entry's digest is not bytes": lambda c: put(c, STATS, stats_key(c), encode(
        [*ingesting.stat_signature(os.stat(c.root / PROJECTS)), 5])),
}


@pytest.mark.parametrize("corrupt", BAD_CACHE_ENTRIES.values(), ids=BAD_CACHE_ENTRIES)
def test_one_bad_cache_entry_is_a_miss_not_a_broken_ingest(cortex, org, monkeypatch, corrupt):
    monkeypatch.setattr(ingesting, "RACY_SECONDS", 0)  # so the stat entry is rewritten for a file copied just now
    projects = org / PROJECTS
    projects.write_text(projects.read_text() + "* One more\n")
    cortex.ingest()
    corrupt(cortex)
    report = cortex.ingest()
    assert report.problems == [] and cortex.store.objects[cortex.working().entries[PROJECTS]]
    projects.write_text(projects.read_text() + "* And another\n")
    assert cortex.ingest().parsed == [PROJECTS]
    assert cortex.fsck() == []


def _run(args, store, org):
    return CliRunner().invoke(cli, ["fsck", "--store", str(store), "--org", str(org), *args])


def test_cli_reports_each_problem_on_one_line_and_repair_fixes_what_it_can(tmp_path, org):
    store = tmp_path / "store"
    with cx.open(store, org) as c:
        c.ingest()
        c.snapshot("first")
        docs, snapshot, turn = _docs(MISSING)(c), _snapshot_missing(c), _turn_garbage(c)
    turn_line = f"damaged {CONVERSATION} {turn}: value is not a turn record"
    damaged = _run([], store, org)
    assert damaged.exit_code == 1 and damaged.stdout == ""
    assert damaged.stderr.splitlines() == [
        turn_line,
        f"damaged {SNAPSHOTS} {snapshot}: names missing object {MISSING.hex()}",
        f"damaged {DOCS_BY_BYTES} {docs}: names missing object {MISSING.hex()}",
        "3 problems remain; `cortex fsck --repair` fixes 2 of them"]
    repaired = _run(["--repair"], store, org)
    assert repaired.exit_code == 1
    assert repaired.stdout.splitlines() == [
        f"repaired {SNAPSHOTS} {snapshot}: names missing object {MISSING.hex()} (removed the entry)",
        f"repaired {DOCS_BY_BYTES} {docs}: names missing object {MISSING.hex()} "
        f"(dropped table {DOCS_BY_BYTES}: cortex rebuilds it as it is used)"]
    assert repaired.stderr.splitlines() == [turn_line, "1 problem remains"]
    with cx.open(store, org) as c:  # what repair leaves to a person: here, they drop the unreadable turn
        del c.store.table(CONVERSATION)[bytes.fromhex(turn)]
    again = _run([], store, org)
    assert again.exit_code == 0 and again.stderr == "" and again.stdout.startswith("ok: ")


def test_cli_exits_1_while_damage_repair_cannot_fix_remains(tmp_path, org):
    store = tmp_path / "store"
    with cx.open(store, org) as c:
        c.ingest()
        put(c, "mystery", b"k", b"v")
    for args in ([], ["--repair"]):
        result = _run(args, store, org)
        assert result.exit_code == 1
        assert result.stderr.splitlines() == ["damaged mystery: unknown table (1 entry): fsck cannot check it",
                                              "1 problem remains"]


def test_a_clean_store_is_ok_with_counts(tmp_path, org):
    store = tmp_path / "store"
    with cx.open(store, org) as c:
        c.ingest()
        objects, entries = c.object_count, len(list(c.store.engine.scan(TABLES)))
        assert history_fsck(c.store) == []
    result = _run([], store, org)
    assert result.exit_code == 0 and result.stdout == f"ok: {objects:,} objects, {entries:,} table entries verified\n"
