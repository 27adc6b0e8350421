"""The REPL's forms over dates and links: the agenda, a headline's links, its backlinks, broken links."""

from __future__ import annotations

from .forms import snapshot_ref
from .registry import form
from .values import Message


class AgendaText(Message):
    """An agenda, printed as org-agenda lists it; `.agenda` holds its days and entries (each with its node)."""

    agenda = None

    def __new__(cls, agenda):
        text = super().__new__(cls, str(agenda))
        text.agenda = agenda
        return text


@form
def agenda(session, *, span=7, start=None, today=None, as_of=None):
    """What is scheduled, due and timestamped, day by day, as Emacs's org-agenda lists it.

    (agenda)                          7 days from today
    (agenda :span 14 :start "-1w")    two weeks from a week ago; days: "today", "+7d", "-2w", "2026-11-23"
    :today "2026-11-23" counts the labels ("Sched. 2x:", "3 d. ago:", "In 5 d.:") from another day;
    :as-of "HEAD~1" reads a snapshot. (. (agenda) agenda entries) lists the entries, each with its `node`.
    """
    return AgendaText(session.cortex.agenda(span, start, as_of=snapshot_ref(as_of), today=today))


@form
def links(session, node, *, as_of=None):
    """The links of a headline (a node, an :ID:, a search result) or of a file's text before its first headline
    (its path): kind ("id", "file", "https", "fuzzy"...), target, search (file:x.org::*heading), description.

    (links "task-rotate-secrets"), (links (first (find :text "deploy"))).
    """
    return session.cortex.links(node, as_of=snapshot_ref(as_of))


@form
def backlinks(session, node, *, as_of=None):
    """The headlines whose links lead to a headline (by :ID:, file link ::*heading or ::#custom-id, [[*heading]])
    or to a file (its path), as org-roam lists backlinks; each is a node holding `.link` (at `.link-line`).

    (backlinks "task-rotate-secrets"), (show (first (backlinks "notes/projects.org"))).
    """
    return session.cortex.backlinks(node, as_of=snapshot_ref(as_of))


@form
def broken_links(session, *, as_of=None):
    """The id links whose :ID: no headline or file holds: each a node holding `.link` (at `.link-line`)."""
    return session.cortex.broken_links(as_of=snapshot_ref(as_of))
