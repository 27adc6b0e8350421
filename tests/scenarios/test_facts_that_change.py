"""An agent's life, scripted: 200 facts added over ten months, 40 superseded (30 by `supersedes`, 10 through
consolidation), 10 retired, with a person editing the properties by hand in between; then "what is X now", "what was X on D" and "what replaced Y", every answer
checked against the script."""

import random
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

import cortex.api as cx

AGENT = "ops"
MEMORY = f"agents/{AGENT}/memory.org"
START = datetime(2025, 1, 6, 9, 0)
SUBJECTS = [f"{thing} of {place}" for thing in ("database", "cache", "queue", "load balancer", "CDN", "DNS provider",
                                                "CI runner", "object store", "search engine", "log pipeline")
            for place in ("billing", "checkout", "search", "accounts", "reports", "mobile", "admin", "partners",
                          "payments", "support", "inventory", "shipping", "analytics", "email", "auth", "media")]
VALUES = ["Postgres 14", "Postgres 15", "Postgres 16", "Postgres 17", "Redis 6", "Redis 7", "Valkey 8", "RabbitMQ",
          "Kafka", "NATS", "HAProxy", "nginx", "Envoy", "Fastly", "Cloudflare", "Route 53", "GitHub Actions",
          "Buildkite", "S3", "MinIO", "OpenSearch", "Meilisearch", "Vector", "Fluent Bit"]


@dataclass
class Version:
    """What the script knows of one item: its subject and value, and when it held."""

    id: str
    subject: str
    value: str
    start: datetime
    end: datetime | None = None
    replaced_by: list[str] = field(default_factory=list)

    def holds(self, day: date | None) -> bool:
        if day is None:
            return self.end is None and not self.replaced_by
        first, after = datetime.combine(day, datetime.min.time()), datetime.combine(day + timedelta(days=1),
                                                                                       datetime.min.time())
        return self.start < after and (self.end is None or first < self.end)


class Life:
    """The script: what it did, as the truth the answers are checked against."""

    def __init__(self, c, org):
        self.c, self.org, self.rng = c, org, random.Random(32)
        self.versions: dict[str, Version] = {}
        self.latest: dict[str, str] = {}  # subject -> id of its newest version
        self.clock = START

    def tick(self) -> datetime:
        self.clock += timedelta(hours=self.rng.randrange(20, 30))
        return self.clock

    def add(self, subject: str, value: str | None = None) -> None:
        now, value = self.tick(), value or self.rng.choice(VALUES)
        item = self.c.memory.add_item(AGENT, "fact", f"The {subject} is {value}.", now=now)
        self.versions[item.id] = Version(item.id, subject, value, now)
        self.latest[subject] = item.id

    def supersede(self, subject: str, by_text: bool) -> None:
        old = self.versions[self.latest[subject]]
        now = self.tick()
        value = self.rng.choice([v for v in VALUES if v != old.value])
        starts = now - timedelta(days=self.rng.randrange(0, 2))
        day = starts.replace(hour=0, minute=0)
        item = self.c.memory.add_item(AGENT, "fact", f"The {subject} is {value}.", now=now, valid_from=day.date(),
                                      supersedes=f"The {subject} is {old.value}." if by_text else old.id)
        old.end, old.replaced_by = day, [item.id]
        self.versions[item.id] = Version(item.id, subject, value, day)
        self.latest[subject] = item.id

    def consolidate(self, subjects: list[str]) -> None:
        """New values added plainly, then superseded through consolidation: of its suggestions, a person applies
        those that pair a subject's old and new values (and leaves the rest), and supersedes by hand any it missed."""
        pairs = {}
        for subject in subjects:
            old = self.versions[self.latest[subject]]
            self.add(subject, value=self.rng.choice([v for v in VALUES if v != old.value]))
            pairs[(old.id, self.latest[subject])] = old
        listed = self.c.memory.consolidate(AGENT)
        chosen = {p.number: (p.older[1].id, p.newer[1].id) for p in listed.suggestions
                  if p.kind == "supersede" and (p.older[1].id, p.newer[1].id) in pairs}
        assert len(chosen) >= len(subjects) - 2, [p.lines()[0] for p in listed.suggestions]
        applied = self.c.memory.consolidate(AGENT, apply=list(chosen), base=listed.version, now=self.tick())
        assert applied.applied == tuple(chosen)
        for old_id, new_id in pairs:
            if (old_id, new_id) not in chosen.values():
                new = self.versions.pop(new_id)
                self.c.memory.forget(AGENT, new_id)
                self.latest[new.subject] = old_id
                self.supersede(new.subject, by_text=False)
                continue
            old = pairs[(old_id, new_id)]
            old.end, old.replaced_by = self.versions[new_id].start, [new_id]

    def retire(self, subject: str) -> None:
        old = self.versions[self.latest[subject]]
        at = self.tick()
        self.c.memory.retire(AGENT, old.id, at=at, now=at)
        old.end = at.replace(second=0, microsecond=0)

    def by_hand(self, edit) -> None:
        """A person edits memory.org in Emacs; the next command reads it."""
        path = self.org / MEMORY
        path.write_text(edit(path.read_text()))


def entry(text: str, item_id: str) -> tuple[int, int]:
    """Where the headline holding :ID: `item_id` starts and ends in memory.org's text."""
    at = text.index(f":ID:       {item_id}\n")
    return text.rindex("\n** ", 0, at) + 1, text.find("\n** ", at) + 1 or len(text)


def with_property(text: str, item_id: str, line: str, archive: bool = False) -> str:
    """memory.org with a property line put in the drawer of one item (and the ARCHIVE tag), as a person would."""
    start, end = entry(text, item_id)
    part = text[start:end].replace(":END:\n", line + "\n:END:\n", 1)
    if archive:
        head, rest = part.split("\n", 1)
        part = head + "   :ARCHIVE:\n" + rest
    return text[:start] + part + text[end:]


@contextmanager
def lived(folder: Path):
    """The script played on a new store and Org folder under `folder`: (the script, the open `Cortex`)."""
    (folder / "org").mkdir()
    with cx.open(folder / "store", folder / "org") as c:
        script = Life(c, folder / "org")
        subjects = script.rng.sample(SUBJECTS, 160)
        for subject in subjects[:120]:
            script.add(subject)
        changing = script.rng.sample(subjects[:120], 35)
        for n, subject in enumerate(changing[:25]):  # while new subjects come in
            script.supersede(subject, by_text=n % 3 == 0)
            script.add(subjects[120 + n])
        for n, subject in enumerate(changing[:5]):  # superseded twice
            script.supersede(subject, by_text=False)
            script.add(subjects[145 + n])
        script.consolidate(changing[25:])
        for subject in subjects[150:]:
            script.add(subject)
        retiring = [s for s in subjects[:120] if s not in changing][:10]
        for subject in retiring:
            script.retire(subject)
        assert len(script.versions) == 200 and sum(1 for v in script.versions.values() if v.replaced_by) == 40
        # A person, in Emacs: moves a retirement a week earlier, dates a fact's start, retires one by hand, and
        # says by hand that one replaced another (with no end).
        moved = script.versions[script.latest[retiring[0]]]
        old_stamp = f":INVALID_AT: [{moved.end:%Y-%m-%d %a %H:%M}]"
        moved.end -= timedelta(days=7)
        script.by_hand(lambda t: t.replace(old_stamp, f":INVALID_AT: [{moved.end:%Y-%m-%d %a %H:%M}]"))
        dated = script.versions[script.latest[subjects[100]]]
        dated.start = datetime(2025, 2, 1)
        script.by_hand(lambda t: with_property(t, dated.id, ":VALID_FROM: [2025-02-01 Sat]"))
        ended = script.versions[script.latest[subjects[101]]]
        ended.end = datetime(2025, 6, 30)
        script.by_hand(lambda t: with_property(t, ended.id, ":INVALID_AT: [2025-06-30 Mon]", archive=True))
        replaced, successor = (script.versions[script.latest[s]] for s in subjects[102:104])
        replaced.replaced_by = [successor.id]
        script.one_way = {(replaced.id, successor.id)}  # the successor does not say what it replaced
        script.by_hand(lambda t: with_property(t, replaced.id, f":SUPERSEDED_BY: {successor.id}"))
        script.add(subjects[104] + " annex")  # the next write reads the hand edits in
        yield script, c


@pytest.fixture(scope="module")
def life(tmp_path_factory):
    with lived(tmp_path_factory.mktemp("life")) as played:
        yield played


def items_of(c):
    return {item.id: item for _, item in c.memory.load_context(AGENT, every=True).items()}


def test_what_holds_now_is_the_newest_version_of_each_subject(life):
    script, c = life
    items = items_of(c)
    assert len(items) == 201
    current = {item_id for item_id, item in items.items() if item.current}
    assert current == {v.id for v in script.versions.values() if v.holds(None)} | {
        i for i in items if i not in script.versions}
    assert len(current) == 201 - 40 - 10 - 2  # superseded, retired, and the two a person ended


@pytest.mark.parametrize("day", [date(2025, 1, 20), date(2025, 3, 1), date(2025, 5, 15), date(2025, 7, 4),
                                 date(2025, 9, 1), date(2025, 10, 20)])
def test_what_held_on_a_day_is_what_the_script_says(life, day):
    script, c = life
    items = items_of(c)
    held = {item_id for item_id in script.versions if items[item_id].validity.holds(day)}
    assert held == {v.id for v in script.versions.values() if v.holds(day)}


def test_what_replaced_an_item_is_named_both_ways(life):
    script, c = life
    items = items_of(c)
    for version in script.versions.values():
        assert list(items[version.id].validity.replaced_by) == version.replaced_by
        for successor in version.replaced_by:
            named = version.id in items[successor].validity.replaces
            assert named != ((version.id, successor) in script.one_way)


def test_the_file_reads_as_org_and_keeps_every_text(life):
    script, c = life
    text = c.memory.show(AGENT)
    for version in script.versions.values():
        assert f"** The {version.subject} is {version.value}." in text
    archived = re.findall(r"^\*\* .*:ARCHIVE:$", text, re.M)
    assert len(archived) == 40 + 10 + 1  # the one replaced by hand has no tag: a person did not put one


DAYS = [date(2025, 3, 1), date(2025, 7, 4), date(2025, 10, 20)]


def test_queries_answer_what_holds_now_and_then_as_the_script_says(life):
    script, c = life
    everything = {n.id for n in c.query(f'(path "{MEMORY}")', all=True) if n.id}
    assert everything >= set(script.versions)
    now = {n.id for n in c.query(f'(path "{MEMORY}")') if n.id}
    assert now == {v.id for v in script.versions.values() if v.holds(None)} | (everything - set(script.versions))
    for day in DAYS:
        then = {n.id for n in c.query(f'(path "{MEMORY}")', valid_at=day.isoformat()) if n.id in script.versions}
        assert then == {v.id for v in script.versions.values() if v.holds(day)}
        assert {n.id for n in c.query(f'(valid :at "{day}")', all=True) if n.id in script.versions} == then


def test_search_answers_what_x_is_now_and_was_then_as_the_script_says(life):
    script, c = life
    changed = [s for s in script.latest if sum(v.subject == s for v in script.versions.values()) > 1][:6]
    for subject in changed:
        versions = [v for v in script.versions.values() if v.subject == subject]
        for day in (None, *DAYS):
            found = c.search(f"What is the {subject}?", agent=AGENT, limit=10, valid_at=day)
            about = {r.id for r in found if f"The {subject} is " in r.text}
            assert about == {v.id for v in versions if v.holds(day)}, (subject, day)


def test_what_replaced_an_item_and_what_it_replaced_is_the_chain_the_script_made(life):
    script, c = life
    for version in script.versions.values():  # either end of a replacement is enough, as a person may write one
        chain = c.chain(version.id)
        assert [s.id for s in chain.later if s.via is None] == version.replaced_by
        assert {s.id for s in chain.earlier if s.via is None} == {
            v.id for v in script.versions.values() if version.id in v.replaced_by}
    twice = [s for s in script.latest if sum(v.subject == s for v in script.versions.values()) == 3]
    assert len(twice) == 5
    for subject in twice:
        first, second, third = sorted((v for v in script.versions.values() if v.subject == subject),
                                      key=lambda v: v.start)
        assert [s.id for s in c.chain(first.id).later][:2] == [second.id, third.id]
        assert [s.id for s in c.chain(third.id).earlier] == [second.id, first.id]
        assert c.chain(second.id).later[0].validity.start == third.start
