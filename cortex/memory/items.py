"""One memory item: its text, org-id, when it was added and where it came from; read and written as Org.

A headline item is a level-2 headline under a section of memory.org:

    ** User prefers dark mode in every app.
    :PROPERTIES:
    :ID:       mem-assistant-user-prefers-dark-mode-4f0c2a
    :ADDED:    [2026-11-18 Wed 09:12]
    :SOURCE:   session 2026-11-18 09:10
    :END:
    Longer text, if any, is the body.

A plain item is a hand-written list item (`- text`) in the section's own text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime
from functools import cached_property

from ..errors import UserError
from ..hashing import hash_text
from ..objects import Headline
from ..org import parse
from ..org.syntax import Section, headline_line
from .layout import SECTION_TITLES
from .validity import (ARCHIVE, INVALID_AT, SUPERSEDED_BY, SUPERSEDES, VALID_FROM, Validity, moment,
                       org_timestamp, parse_timestamp)

_WORD = re.compile(r"[a-z0-9]+")
TAGS_COLUMN = 77  # Emacs's default `org-tags-column`: tags end at column 77
OWN_PROPERTIES = ("ID", "ADDED", "SOURCE")


class BadItemText(UserError):
    """Item text that would not read back as the same item."""


@dataclass(frozen=True)
class MemoryItem:
    """A fact, procedure or pattern: text (first line is the title), org-id, when added, where from.

    `plain` marks a hand-written list item (`- text`), addressed by a hash of its section and
    text instead of an org-id. `properties` holds any other property, kept as written.
    """

    text: str
    id: str | None = None
    added: datetime | None = None
    source: str = ""
    tags: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    plain: bool = False

    @cached_property
    def normalised(self) -> str:
        """The text as compared for duplicates (see `normalise`)."""
        return normalise(self.text)

    @cached_property
    def validity(self) -> Validity:
        """When it holds, and what it replaced and was replaced by (`validity`)."""
        return Validity.of(self.properties, self.added)

    @property
    def current(self) -> bool:
        """Whether it holds now and nothing replaced it."""
        return self.validity.holds()

    def value_of(self, name: str) -> str | None:
        """The value of one of its other properties (any case), or None."""
        return next((value for key, value in self.properties if key.upper() == name.upper()), None)

    def with_properties(self, **values: str | None) -> MemoryItem:
        """The item with these properties set in place, or added after the others (None: removed)."""
        names = {name.upper(): value for name, value in values.items()}
        kept = [(k, names.pop(k.upper()) if k.upper() in names else v) for k, v in self.properties]
        return replace(self, properties=tuple((k, v) for k, v in [*kept, *names.items()] if v is not None))

    def retired(self, at: datetime | date, now: datetime) -> MemoryItem:
        """The item once it stops holding at `at`: `:INVALID_AT:`, and the ARCHIVE tag Org folds it by when `at`
        is not after `now`."""
        archived = ARCHIVE not in self.tags and moment(at) <= now
        return replace(self.with_properties(**{INVALID_AT: org_timestamp(at)}),
                       tags=(*self.tags, ARCHIVE) if archived else self.tags, plain=False)

    def superseded_by(self, successor: str, at: datetime | date, now: datetime) -> MemoryItem:
        """The item once `successor` (an :ID:) replaces it at `at`."""
        replaced = _joined(self.validity.replaced_by, successor)
        return self.retired(at, now).with_properties(**{SUPERSEDED_BY: replaced})

    def superseding(self, predecessor: str, valid_from: datetime | date | None) -> MemoryItem:
        """The item as the successor of `predecessor` (an :ID:), holding from `valid_from` (None: from when added)."""
        values = {SUPERSEDES: _joined(self.validity.replaces, predecessor)}
        if valid_from is not None:
            values[VALID_FROM] = org_timestamp(valid_from)
        return self.with_properties(**values)

    def without_links(self, ids: set[str]) -> MemoryItem:
        """The item no longer naming these :ID:s as what it replaced or what replaced it."""
        validity = self.validity
        kept = {name: " ".join(i for i in linked if i not in ids) or None
                for name, linked in ((SUPERSEDES, validity.replaces), (SUPERSEDED_BY, validity.replaced_by)) if linked}
        return self.with_properties(**kept)

    def with_links_renamed(self, renamed: dict[str, str]) -> MemoryItem:
        """The item naming, as what it replaced or what replaced it, `renamed[i]` wherever it named `i`."""
        validity = self.validity
        return self.with_properties(**{name: " ".join(dict.fromkeys(renamed.get(i, i) for i in linked))
                                       for name, linked in ((SUPERSEDES, validity.replaces),
                                                            (SUPERSEDED_BY, validity.replaced_by)) if linked})

    @property
    def title(self) -> str:
        """The first line of the text."""
        return self.text.partition("\n")[0]

    def key(self, type_: str) -> str:
        """The name this item is merged by: its org-id, else a hash of its type and normalised text."""
        return self.id or text_key(type_, self.normalised)

    def repl_view(self, renderer):
        """The REPL's view: the :ID:, text, when it was added and where from, and the tags if any."""
        pairs = [("id", self.id or ""), ("text", self.text),
                 ("added", f"{self.added:%Y-%m-%d %H:%M}" if self.added else ""), ("source", self.source)]
        pairs += [("tags", ":".join(self.tags))] if self.tags else []
        return renderer.key_values(pairs + self.validity.repl_pairs())

    @property
    def as_plain(self) -> bool:
        """Whether it is written as a list item: a plain item with nothing a list item cannot hold."""
        return self.plain and "\n\n" not in self.text and not (
            self.id or self.added or self.source or self.tags or self.properties)


def _joined(ids: tuple[str, ...], new: str) -> str:
    return " ".join(dict.fromkeys((*ids, new)))


def normalise(text: str) -> str:
    """Text as compared for duplicates: whitespace collapsed, case folded, a final full stop dropped."""
    return " ".join(text.split()).casefold().rstrip(".")


def text_key(type_: str, normalised: str) -> str:
    """The stable key of an item without an org-id: `key-` and a hash of its type and normalised text."""
    return "key-" + hash_text(f"{type_}\0{normalised}").hex()[:12]


def make_id(agent: str, type_: str, text: str) -> str:
    """A readable org-id: `mem-<agent>-<first words>-<hash of type and text>`."""
    normalised = normalise(text)
    slug = "-".join(_WORD.findall(normalised)[:5])[:40].rstrip("-")
    agent_slug = "-".join(_WORD.findall(agent.casefold())) or "agent"
    digest = hash_text(f"{type_}\0{normalised}").hex()[:6]
    return "-".join(part for part in ("mem", agent_slug, slug, digest) if part)


def check_text(text: str, type_: str) -> str:
    """The item text cleaned (line ends, outer blank space); a BadItemText if Org would read it differently."""
    if not isinstance(text, str):
        raise BadItemText(f"{SECTION_TITLES[type_]}: item text must be a string, not {type(text).__name__}")
    cleaned = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not cleaned:
        raise BadItemText(f"{SECTION_TITLES[type_]}: empty item text")
    title, _, body = cleaned.partition("\n")
    if _read_as_headline(title).tags:
        raise BadItemText(f"{SECTION_TITLES[type_]}: item {title!r} ends with what Org reads as tags; "
                          "pass tags separately")
    shallow = headline_line(2).search(body)
    if shallow:
        line = body.count("\n", 0, shallow.start()) + 2
        raise BadItemText(f"{SECTION_TITLES[type_]}: item {title!r}, line {line} of its text starts with "
                          f"{shallow.group()!r}, which Org reads as a new headline")
    return cleaned


def item_from_headline(headline, text: str) -> MemoryItem:
    """The item a headline subtree holds: title line (without stars and tags), body, properties."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    title = lines[0].lstrip("*").lstrip(" \t")
    if headline.tags:
        title = _without_tags(title)
    section = Section.of(headline.raw)
    rest = lines[1:] if section.drawer_end is None else lines[1:section.drawer] + lines[section.drawer_end + 1:]
    body = "\n".join(rest).strip("\n").rstrip()
    own = {name: headline.get(name) for name in OWN_PROPERTIES}
    return MemoryItem(
        text=title.strip() + ("\n" + body if body else ""),
        id=own["ID"] or None,
        added=parse_timestamp(own["ADDED"]),
        source=own["SOURCE"] or "",
        tags=headline.tags,
        properties=tuple((k, v) for k, v in headline.properties if k.upper() not in OWN_PROPERTIES),
    )


def render_item(item: MemoryItem, newline: str = "\n") -> str:
    """The Org text of an item: a level-2 headline with its property drawer, or a list item."""
    title, _, body = item.text.partition("\n")
    if item.as_plain:
        lines = ["- " + title, *("  " + line if line else line for line in body.split("\n") if body)]
        return newline.join(lines) + newline
    head = "** " + title
    if item.tags:
        tags = ":" + ":".join(item.tags) + ":"
        head += " " * max(1, TAGS_COLUMN - len(head) - len(tags)) + tags
    own = [("ID", item.id), ("ADDED", item.added and org_timestamp(item.added)), ("SOURCE", item.source)]
    drawer = [f"{':' + name + ':':<10} {value}".rstrip()
              for name, value in [*((n, v) for n, v in own if v), *item.properties]]
    lines = [head, *([":PROPERTIES:", *drawer, ":END:"] if drawer else []), *(body.split("\n") if body else [])]
    return newline.join(lines) + newline


def _without_tags(title: str) -> str:
    """`title` without its last word and the blanks around it when that word is `:...:` (3 characters or more).

    The word is found from the end of the line, as the parser does: a pattern like `[ \t]+:[^ \t]+:[ \t]*$`
    is tried at every blank of a run and reads the rest of the run each time, quadratic in its length.
    """
    body = title.rstrip(" \t")
    blank = max(body.rfind(" "), body.rfind("\t"))
    word = body[blank + 1:]
    if blank < 0 or len(word) < 3 or word[0] != ":" or word[-1] != ":":
        return title
    return body[:blank].rstrip(" \t")


def _read_as_headline(title: str) -> Headline:
    """The headline Org reads from `** title`."""
    return next(o for o in parse(f"** {title}\n").objects if isinstance(o, Headline))
