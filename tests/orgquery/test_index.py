"""orgquery indexes: following a tree through random edits gives what a rebuild gives, and reads only what changed."""

from __future__ import annotations

import random
from datetime import date, datetime
from dataclasses import dataclass, field

import pytest

from cortex.backends import open_store
from cortex.orgquery import Index, parse_query
from cortex.orgquery.index import _SPECIAL, DAY_KINDS, KEYS
from cortex.orgquery.predicates import SPECIAL_PROPERTIES
from tests.orgquery.test_predicates import data_files, tree_of

TAGS = ("work", "home", "ops", "security", "ARCHIVE")
KEYWORDS = (None, None, "TODO", "NEXT", "DONE")


@dataclass
class Entry:
    level: int
    title: str
    todo: str | None = None
    tags: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)
    scheduled: str | None = None
    body: str = ""

    def text(self) -> str:
        head = "*" * self.level + " " + " ".join(filter(None, [self.todo, self.title]))
        if self.tags:
            head += "  :" + ":".join(self.tags) + ":"
        lines = [head]
        if self.scheduled:
            lines.append(f"   SCHEDULED: <{self.scheduled}>")
        if self.properties:
            lines += ["   :PROPERTIES:", *(f"   :{k}: {v}" for k, v in self.properties.items()), "   :END:"]
        if self.body:
            lines.append("   " + self.body)
        return "\n".join(lines) + "\n"


@dataclass
class OrgFile:
    entries: list[Entry]
    filetags: tuple[str, ...] = ()
    keywords: str = "TODO NEXT | DONE"

    def text(self) -> str:
        head = f"#+TODO: {self.keywords}\n" + (f"#+FILETAGS: :{':'.join(self.filetags)}:\n" if self.filetags else "")
        return head + "\n" + "".join(e.text() for e in self.entries)


# Validity properties (`cortex.memory.validity`): items that start, end or were replaced at various moments.
VALIDITY = (("ADDED", "[2026-11-10 Tue 09:00]"), ("VALID_FROM", "[2026-11-20 Fri]"), ("VALID_FROM", "[2099-01-01 Thu]"),
            ("INVALID_AT", "[2026-11-15 Sun 12:00]"), ("INVALID_AT", "[2099-01-01 Thu]"), ("SUPERSEDED_BY", "id-1"))
MOMENTS = (None, date(2026, 11, 15), datetime(2026, 11, 15, 12, 0), datetime(2026, 11, 20, 0, 0), date(2100, 1, 1))


def random_entry(rng: random.Random, level: int, n: int) -> Entry:
    properties = {}
    if rng.random() < 0.3:
        properties["ID"] = f"id-{n}"
    if rng.random() < 0.15:
        properties["CATEGORY"] = rng.choice(("alpha", "beta"))
    if rng.random() < 0.2:
        properties["OWNER"] = rng.choice(("dana", "eli"))
    if rng.random() < 0.3:
        properties.update([rng.choice(VALIDITY)])
    body = rng.choice(("", "", f"See [[id:id-{rng.randrange(n + 5)}]].", "Met on [2026-11-10 Tue].",
                       f"[[file:f{rng.randrange(3)}.org::*T{rng.randrange(n + 5)}]]"))
    return Entry(level, f"T{n}", rng.choice(KEYWORDS), tuple(rng.sample(TAGS, rng.choice((0, 0, 1, 2)))),
                 properties, rng.choice((None, None, f"2026-11-{rng.randrange(10, 28)} Mon")), body)


def random_file(rng: random.Random, size: int, start: int) -> OrgFile:
    entries, level = [], 1
    for n in range(start, start + size):
        level = rng.randint(1, min(level + 1, 4))
        entries.append(random_entry(rng, level, n))
    return OrgFile(entries, tuple(rng.sample(TAGS, rng.choice((0, 1)))))


def edit(rng: random.Random, files: dict[str, OrgFile], counter: list[int]) -> None:
    """One random change: of a headline's keyword, tags, properties, date or body; a headline added, removed
    or moved; a file's #+FILETAGS or TODO setup; a file added or removed."""
    path = rng.choice(sorted(files))
    f = files[path]
    what = rng.randrange(12)
    if what == 10 or not f.entries:
        counter[0] += 1
        files[f"f{counter[0]}.org"] = random_file(rng, rng.randint(1, 8), counter[0] * 100)
        return
    if what == 11 and len(files) > 1:
        del files[path]
        return
    i = rng.randrange(len(f.entries))
    e = f.entries[i]
    if what == 0:
        e.todo = rng.choice(KEYWORDS)
    elif what == 1:
        e.tags = tuple(rng.sample(TAGS, rng.choice((0, 1, 2))))
    elif what == 2:
        e.properties.update([rng.choice((("CATEGORY", rng.choice(("alpha", "beta", "gamma"))), *VALIDITY))])
    elif what == 3:
        e.scheduled = rng.choice((None, "2026-12-01 Tue"))
    elif what == 4:
        counter[0] += 1
        f.entries.insert(i, random_entry(rng, max(1, e.level + rng.choice((-1, 0, 1))), counter[0]))
    elif what == 5:
        del f.entries[i]
        if f.entries and f.entries[0].level > 1:
            f.entries[0].level = 1
    elif what == 6:
        f.entries.append(f.entries.pop(i))
        f.entries[-1].level = rng.randint(1, 2)
    elif what == 7:
        f.filetags = tuple(rng.sample(TAGS, rng.choice((0, 1))))
    elif what == 8:
        f.keywords = rng.choice(("TODO NEXT | DONE", "TODO | NEXT DONE"))
    else:
        e.body = rng.choice(("", "[[id:id-3]]", "<2026-11-24 Tue>"))
    for a, b in zip(f.entries, f.entries[1:]):  # keep levels reachable: at most one deeper than the one before
        b.level = min(b.level, a.level + 1)


def signature(index: Index) -> dict:
    """Everything an index holds, by where each headline is: rows, what they inherit, every posting."""
    for state in index.files.values():
        state.lay_out()

    def at(row):
        return row.path, row.position

    rows = sorted((at(r), bytes(r.headline.oid), r.inherited, r.tags, r.category,
                   tuple(at(c) for c in r.children), r.parent and at(r.parent)) for r in index.rows)
    postings = {kind: {key: sorted(map(at, index.posting(kind, key))) for key in index.keys(kind)} for kind in KEYS}
    days = {kind: {day: sorted(map(at, rows_)) for day, rows_ in index.days(kind).starts.items()}
            for kind in DAY_KINDS}
    holding = {at_: sorted(map(at, index.not_holding(at_))) for at_ in MOMENTS}
    assert holding == {at_: sorted(at(r) for r in index.rows if not r.validity.holds(at_)) for at_ in MOMENTS}
    return {"rows": rows, "postings": postings, "days": days, "not holding": holding}


def collect_every_kind(index: Index) -> None:
    for kind in KEYS:
        index.keys(kind)
    for kind in DAY_KINDS:
        index.days(kind)
    index.not_holding(None)


@pytest.mark.parametrize("seed", range(4))
def test_following_random_edits_gives_what_a_rebuild_gives(seed):
    rng = random.Random(seed)
    files = {f"f{n}.org": random_file(rng, rng.randint(5, 25), n * 100) for n in range(3)}
    counter = [len(files)]
    store = open_store(None)
    followed = Index(store)
    followed.follow(tree_of(store, {p: f.text() for p, f in files.items()}))
    collect_every_kind(followed)  # from here on every kind of posting is kept up to date as the tree changes
    trees = []
    for step in range(40):
        edit(rng, files, counter)
        tree = tree_of(store, {p: f.text() for p, f in files.items()})
        trees.append(tree)
        followed.follow(tree)
        if step % 8 == 7:
            rebuilt = Index(store)
            rebuilt.follow(tree)
            assert signature(followed) == signature(rebuilt), f"seed {seed}, step {step}"
    followed.follow(trees[3])  # back in time, as a rollback or an :as-of query goes
    rebuilt = Index(store)
    rebuilt.follow(trees[3])
    assert signature(followed) == signature(rebuilt)


def test_an_edit_reads_and_reposts_only_what_changed(monkeypatch):
    rng = random.Random(7)
    big = OrgFile([Entry(1 + (n % 3), f"T{n}", tags=("work",) if n % 3 == 0 else ()) for n in range(600)])
    other = random_file(rng, 20, 5000)
    store = open_store(None)
    index = Index(store)
    index.follow(tree_of(store, {"big.org": big.text(), "other.org": other.text()}))
    collect_every_kind(index)
    before = {r.headline.title: r for r in index.rows}
    posted = []
    monkeypatch.setattr(Index, "_post", lambda self, row, post=Index._post: (posted.append(row.title), post(self, row)))
    big.entries[301].todo = "TODO"  # T301, at level 2 under T300, with T302 under it
    index.follow(tree_of(store, {"big.org": big.text(), "other.org": other.text()}))
    assert sorted(posted) == ["T300", "T301"]  # the headline and its parent, whose oid changed with it
    after = {r.headline.title: r for r in index.rows}
    assert all(after[title] is row for title, row in before.items())  # every row kept, none rebuilt
    assert [n.title for n in index.nodes(parse_query('(and (todo "TODO") (path "big.org"))'))] == ["T301"]
    posted.clear()
    big.entries[300].tags = ("home",)  # T300's children inherit "home" now: re-posted, the rest are not
    index.follow(tree_of(store, {"big.org": big.text(), "other.org": other.text()}))
    assert sorted(posted) == ["T300", "T301", "T302"]
    assert [n.title for n in index.nodes(parse_query('(and (tags-inherited "home") (path "big.org"))'))] == ["T301", "T302"]


def test_kinds_of_postings_are_collected_when_first_asked_for():
    store = open_store(None)
    index = Index(store)
    index.follow(tree_of(store, data_files()))
    assert index.postings == {} and index.dated == {}  # a build reads the tree, not the dates and links
    assert len(index.nodes(parse_query('(tags "security")'))) == 7
    assert set(index.postings) == {"tag"}
    assert len(index.nodes(parse_query('(scheduled :on "2026-11-24")'))) == 1
    assert set(index.dated) == {"scheduled"}


def test_a_file_whose_setup_changed_is_read_again_whole():
    store = open_store(None)
    index = Index(store)
    f = OrgFile([Entry(1, "A", "NEXT"), Entry(2, "B", "DONE")], ("work",))
    index.follow(tree_of(store, {"a.org": f.text()}))
    assert [n.title for n in index.nodes(parse_query("(todo)"))] == ["A"]
    assert [n.title for n in index.nodes(parse_query('(tags "work")'))] == ["A", "B"]
    f.keywords, f.filetags = "TODO | NEXT DONE", ("home",)
    index.follow(tree_of(store, {"a.org": f.text()}))
    assert [n.title for n in index.nodes(parse_query("(done)"))] == ["A", "B"]
    assert index.nodes(parse_query('(tags "work")')) == []
    assert [n.title for n in index.nodes(parse_query('(tags "home")'))] == ["A", "B"]


def test_every_special_property_is_read():
    assert set(_SPECIAL) == SPECIAL_PROPERTIES
