"""Consolidation on real files and LMDB with the bundled MiniLM: what is suggested, what applying writes, one
commit after a snapshot that a rollback returns to byte for byte, and a person's edit in between."""

import re
import shutil
import subprocess
from datetime import datetime

import pytest

from cortex.errors import NotFound, UserError
from cortex.memory.agents import AgentMemory
from cortex.memory.consolidation import merged
from cortex.memory.items import MemoryItem

MEMORY = "agents/ops/memory.org"
DAY = datetime(2026, 11, 2, 9, 0)


def at(day: int) -> datetime:
    return DAY.replace(day=day)


@pytest.fixture
def ops(cortex):
    """Agent ops: a successor, a near duplicate and an exact one (written by hand), and unrelated facts."""
    add = cortex.memory.add_item
    add("ops", "fact", "The production database runs on PostgreSQL 16.", id="db-16", now=at(2))
    add("ops", "fact", "The billing service is owned by the payments team.", id="billing", now=at(3))
    add("ops", "fact", "The VPN uses WireGuard.", id="vpn", now=at(4))
    add("ops", "fact", "Payments team owns the billing service.", id="billing-again", source="cli", now=at(10))
    add("ops", "fact", "The production database runs on PostgreSQL 17.", id="db-17", now=at(20))
    add("ops", "procedure", "Rotate the keys every quarter.", id="keys", now=at(5))
    return cortex


def memory_file(cortex):
    return cortex.root / MEMORY


def test_suggests_a_merge_and_a_supersession_with_their_diffs(ops):
    found = ops.memory.consolidate("ops")
    assert [(p.number, p.kind, p.older[1].id, p.newer[1].id) for p in found.suggestions] == [
        (1, "supersede", "db-16", "db-17"), (2, "merge", "billing", "billing-again")]
    assert found.suggestions[0].relation.why == "16 → 17"
    listing = found.listing()
    assert listing.startswith(f"{MEMORY} at {found.version}: 2 suggestions\n[1] supersede (fact, 0.9")
    assert "+** The production database runs on PostgreSQL 16." in listing and "+:SUPERSEDED_BY: db-17" in listing
    assert f"--apply --base {found.version}" in listing
    assert found.before is None and not ops.unsaved()  # listing writes nothing


def test_apply_writes_both_in_one_commit_after_a_snapshot_and_rollback_restores_the_file(ops):
    original = memory_file(ops).read_bytes()
    done = ops.memory.consolidate("ops", apply=True)
    text = memory_file(ops).read_text()
    assert re.search(r"\*\* The production database runs on PostgreSQL 16\. +:ARCHIVE:\n:PROPERTIES:\n"
                     r":ID: +db-16\n:ADDED: +\[2026-11-02 Mon 09:00\]\n:SOURCE: +api\n"
                     r":INVALID_AT: \[2026-11-20 Fri 09:00\]\n:SUPERSEDED_BY: db-17\n", text)
    assert ":ID:       db-17\n:ADDED:    [2026-11-20 Fri 09:00]\n:SOURCE:   api\n:SUPERSEDES: db-16\n" \
           ":VALID_FROM: [2026-11-20 Fri 09:00]\n" in text
    assert ":ID:       billing\n:ADDED:    [2026-11-03 Tue 09:00]\n:SOURCE:   api; cli\n:MERGED:   billing-again\n" in text
    assert "Payments team owns the billing service." not in text and "Rotate the keys" in text
    log = ops.log(3)
    assert [entry.snapshot.message for entry in log[:2]] == ["consolidated the memory of ops",
                                                            "before consolidating the memory of ops"]
    assert done.before.oid == log[1].snapshot.oid and done.after.oid == log[0].snapshot.oid
    changes = ops.diff(done.before.oid.hex(), done.after.oid.hex())
    assert sorted(change.kind for change in changes) == ["changed", "changed", "changed", "removed"]
    assert {change.path for change in changes} == {MEMORY}
    assert ops.memory.consolidate("ops").suggestions == ()
    ops.rollback(done.before.oid.hex())
    assert memory_file(ops).read_bytes() == original


def test_each_diff_is_what_applying_its_suggestion_alone_writes(ops, tmp_path):
    """`git apply` makes of memory.org, with a suggestion's diff, the file that applying the suggestion writes; a
    list item that becomes a headline (it moves) included."""
    if shutil.which("git") is None:
        pytest.skip("no git to apply the diffs with")
    path = memory_file(ops)
    path.write_text(path.read_text().replace("* Facts\n", "* Facts\n- The VPN needs a restart after upgrades.\n"))
    ops.memory.add_item("ops", "fact", "The VPN now needs no restart after upgrades.", now=at(25))
    original = path.read_bytes()
    suggestions = ops.memory.consolidate("ops").suggestions
    assert len(suggestions) == 3 and any(p.older[1].plain for p in suggestions)  # the list item moves
    for suggestion in suggestions:
        done = ops.memory.consolidate("ops", apply=[suggestion.number])
        written = path.read_bytes()
        ops.rollback(done.before.oid.hex())
        copy = tmp_path / str(suggestion.number)
        (copy / MEMORY).parent.mkdir(parents=True)
        (copy / MEMORY).write_bytes(original)
        subprocess.run(["git", "apply", "--unidiff-zero", "-"], input=suggestion.diff + "\n", text=True, cwd=copy,
                       check=True)
        assert (copy / MEMORY).read_bytes() == written, suggestion.diff


def test_apply_some_by_number(ops):
    done = ops.memory.consolidate("ops", apply=[2])
    assert done.applied == (2,) and "[1]" not in done.listing() and "applied 2 to" in done.listing()
    text = memory_file(ops).read_text()
    assert ":MERGED:   billing-again" in text and "ARCHIVE" not in text
    with pytest.raises(UserError, match=r"no suggestion '3': there is 1 suggestion$"):
        ops.memory.consolidate("ops", apply=[3])
    with pytest.raises(UserError, match=r"^base is empty: give the version of agents/ops/memory.org the suggestions"):
        ops.memory.consolidate("ops", apply=True, base=" ")


def test_an_edit_made_after_the_listing_is_kept_or_the_apply_refused(ops):
    listed = ops.memory.consolidate("ops")
    snapshots = len(ops.log())
    path = memory_file(ops)
    edited = path.read_text().replace("** The VPN uses WireGuard.", "** The VPN uses WireGuard on port 51820.")
    path.write_text(edited)
    with pytest.raises(UserError, match=rf"^{MEMORY} changed since the suggestions were listed \(at "
                                        rf"{listed.version}, now [0-9a-f]{{12}}\): nothing applied; run "):
        ops.memory.consolidate("ops", apply=True, base=listed.version)
    assert path.read_text() == edited and len(ops.log()) == snapshots
    done = ops.memory.consolidate("ops", apply=True)
    assert len(done.applied) == 2 and "** The VPN uses WireGuard on port 51820." in path.read_text()
    ops.rollback(done.before.oid.hex())
    assert path.read_text() == edited  # the snapshot before holds the edit


def test_a_merge_renames_what_named_the_removed_item_and_a_chain_supersedes_in_turn(cortex):
    add = cortex.memory.add_item
    add("ops", "fact", "Node services run on Node 16.", id="node-16", now=at(2))
    add("ops", "fact", "Node services run on Node 18.", id="node-18", now=at(5))
    add("ops", "fact", "Node services run on Node 20.", id="node-20", now=at(9))
    add("ops", "fact", "Error tracking goes to Sentry.", id="sentry", now=at(3))
    add("ops", "fact", "Error tracking goes to Sentry!", id="sentry-again", now=at(6))
    add("ops", "fact", "Errors were tracked in Rollbar.", id="rollbar", now=at(1))
    cortex.memory.retire("ops", "rollbar", at=at(6))
    path = memory_file(cortex)  # a person says by hand that sentry-again replaced rollbar
    path.write_text(path.read_text().replace(":INVALID_AT: [2026-11-06 Fri 09:00]",
                                             ":INVALID_AT: [2026-11-06 Fri 09:00]\n:SUPERSEDED_BY: sentry-again"))
    done = cortex.memory.consolidate("ops", apply=True)
    pairs = {(p.kind, p.older[1].id, p.newer[1].id) for p in done.suggestions}
    assert pairs == {("supersede", "node-16", "node-18"), ("supersede", "node-18", "node-20"),
                     ("merge", "sentry", "sentry-again")}
    context = cortex.memory.load_context("ops", every=True)
    items = {item.id: item for item in context.facts}
    assert items["rollbar"].validity.replaced_by == ("sentry",) and "sentry-again" not in items
    assert items["node-18"].validity.replaces == ("node-16",) and items["node-18"].validity.replaced_by == ("node-20",)
    assert [item.id for item in context.facts if item.current] == ["node-20", "sentry"]


def test_exact_duplicates_alone_without_an_embedder_and_no_memory_is_not_found(cortex):
    add = cortex.memory.add_item
    add("ops", "fact", "The VPN uses WireGuard.", id="vpn", now=at(2))
    add("ops", "fact", "The VPN uses WireGuard on port 51820.", id="vpn-port", now=at(3))
    path = memory_file(cortex)
    path.write_text(path.read_text() + "** the VPN uses WireGuard\n:PROPERTIES:\n:ID:       vpn-again\n:END:\n")
    bare = AgentMemory(cortex.workspace)
    assert [(p.kind, p.older[1].id, p.newer[1].id) for p in bare.consolidate("ops").suggestions] == [
        ("merge", "vpn", "vpn-again")]
    with pytest.raises(NotFound, match="agent 'nobody' has no memory.org under "):
        cortex.memory.consolidate("nobody")


def test_merged_keeps_the_older_and_what_only_the_newer_had():
    kept = MemoryItem("A", id="a", added=DAY, source="session 1", tags=("ops",),
                      properties=(("SUPERSEDES", "x"), ("OWNER", "dana")))
    dropped = MemoryItem("A!", id="b", added=at(9), source="cli", tags=("db",),
                         properties=(("SUPERSEDES", "y"), ("OWNER", "eve"), ("TEAM", "infra"),
                                     ("VALID_FROM", "[2026-11-09 Mon]")))
    item = merged(kept, dropped)
    assert (item.text, item.id, item.added, item.source, item.tags) == ("A", "a", DAY, "session 1; cli", ("ops", "db"))
    assert item.properties == (("SUPERSEDES", "x y"), ("OWNER", "dana"), ("TEAM", "infra"), ("MERGED", "b"))
