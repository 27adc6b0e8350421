"""Two working copies, a store-side writer, hard forgets and purges, and syncs killed at every step boundary, in a
seeded random order: nothing acknowledged is lost, nothing erased comes back (LMDB and PostgreSQL)."""

import random
import subprocess
import sys
from pathlib import Path

import cortex.api as cx
from cortex.backends import open_store
from cortex.errors import NotFound
from cortex.history.copies import check_out, conflicts, sync
from cortex.history.fsck import fsck
from cortex.ingest import working_tree
from cortex.query import render_file

from tests.history.test_copies import STOPPED_SYNC

AGENTS = ("assistant", "reviewer")
BOUNDARIES = ("after the read", "after the commit", "after one file is placed", "before the base is named")
STEPS = 36


def memory(agent: str) -> str:
    return f"agents/{agent}/memory.org"


class World:
    """The store, two copies, and what each side was told: written, acknowledged, erased."""

    def __init__(self, store_at: str, tmp_path: Path, seed: int):
        self.store_at, self.rng = store_at, random.Random(seed)
        self.copies = {name: tmp_path / name for name in ("a", "b")}
        self.pending = {name: {} for name in self.copies}  # token -> agent, written in a copy's folder
        self.acknowledged: dict[str, str] = {}  # token -> agent, in the store
        self.erased: set[str] = set()
        self.count, self.kills = 0, 0
        with cx.open(store_at, folder=False) as c:
            for agent in AGENTS:
                self.store_add(c, agent)
        with open_store(store_at) as s:
            for folder in self.copies.values():
                check_out(s, folder)

    def token(self, where: str) -> str:
        self.count += 1
        return f"Item-{self.count:04d}-{where}."

    def store_add(self, c, agent: str) -> None:
        token = self.token("store")
        c.memory.add_item(agent, "fact", token)
        self.acknowledged[token] = agent

    def copy_add(self, name: str, agent: str) -> None:
        path = self.copies[name] / memory(agent)
        if path.exists():  # (a file made anew beside one the store has is a both-added conflict: not this test's)
            token = self.token(name)
            path.write_text(path.read_text() + f"** {token}\n")
            self.pending[name][token] = agent

    def synced(self, name: str) -> None:
        with open_store(self.store_at) as s:
            report = sync(s, self.copies[name])
        assert {c.kind for c in report.conflicts} <= {"erased"}, report
        self.acknowledged.update(self.pending[name])
        self.pending[name].clear()

    def killed(self, name: str) -> None:
        where = BOUNDARIES[self.kills % len(BOUNDARIES)]  # every boundary, in turn
        self.kills += 1
        subprocess.run([sys.executable, "-c", STOPPED_SYNC, self.store_at, str(self.copies[name]), where, "kill"],
                       timeout=120)
        if where != "after the read":  # it committed: the store holds (and a purge erases) what it sent
            self.acknowledged.update(self.pending[name])
            self.pending[name].clear()

    def forget(self) -> None:
        with cx.open(self.store_at, folder=False) as c:
            items = {item.text for agent in AGENTS for _, item in c.memory.load_context(agent).items()}
            known = sorted(token for token in self.acknowledged if token in items)  # (not one left in a conflict)
            if known:
                token = self.rng.choice(known)
                c.memory.forget(self.acknowledged.pop(token), token, hard=True)
                self.erased.add(token)

    def purge(self, agent: str) -> None:
        with cx.open(self.store_at, folder=False) as c:
            try:
                c.memory.purge(agent, hard=True)
            except NotFound:  # purged already, and nothing written to it since
                return
        for token in [t for t, a in self.acknowledged.items() if a == agent]:
            del self.acknowledged[token]
            self.erased.add(token)

    def step(self) -> None:
        name, agent = self.rng.choice(sorted(self.copies)), self.rng.choice(AGENTS)
        roll = self.rng.random()
        if roll < 0.3:
            self.copy_add(name, agent)
        elif roll < 0.45:
            with cx.open(self.store_at, folder=False) as c:
                self.store_add(c, agent)
        elif roll < 0.65:
            self.synced(name)
        elif roll < 0.85:
            self.killed(name)
        elif roll < 0.97 and self.acknowledged:
            self.forget()
        else:
            self.purge(agent)

    def check(self, tmp_path: Path) -> None:
        for name in ("a", "b", "a"):  # converge
            self.synced(name)
        with open_store(self.store_at) as s:
            tree = working_tree(s)
            stored = "".join(render_file(s, tree, memory(agent)) for agent in AGENTS if memory(agent) in tree.entries)
            folders = {name: "".join((f / memory(agent)).read_text() for agent in AGENTS if (f / memory(agent)).exists())
                       for name, f in self.copies.items()}
            for token in self.acknowledged:
                assert token in stored and all(token in text for text in folders.values()), token
            for token in self.erased:
                assert token not in stored and all(token not in text for text in folders.values()), token
                assert not any(token.encode() in s.objects.raw(oid) for oid in s.objects), token
            assert {c.kind for c in conflicts(s)} <= {"erased"} and fsck(s) == []
        data = tmp_path / "store" / "data.mdb"
        if data.exists():
            raw = data.read_bytes()
            assert not [token for token in self.erased if token.encode() in raw]


def test_copies_store_side_writers_erasures_and_killed_syncs_lose_nothing_and_bring_nothing_back(store_at, tmp_path):
    world = World(store_at, tmp_path, seed=20261127 + store_at.startswith("postgresql"))  # (two histories)
    for _ in range(STEPS):
        world.step()
    assert world.kills >= len(BOUNDARIES) and world.erased
    world.check(tmp_path)
