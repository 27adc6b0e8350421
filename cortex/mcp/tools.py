"""The MCP tools: each a thin call into `cortex.api`, its schema typed from its signature and its description (the
docstring) written for the model that calls it. `server.py` registers them according to the server's scope."""

from datetime import datetime
from typing import Annotated, Any, Literal

import anyio.from_thread
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from ..api import (SEARCH_BUDGET, DurationError, ExtractiveSummarizer, RetentionPolicy, Turn, memory_path,
                   parse_duration)
from ..errors import UserError
from ..memory.conversation.orglog import utterance_from
from ..memory.layout import log_path
from ..memory.validity import shown
from ..words import quoted
from . import activity, shapes
from .session import Session

__all__ = ["COMMITS", "CONVERSATIONS", "READ", "UNDONE", "WRITE", "AgentName", "All", "ItemType", "Json", "Limit",
           "Ref", "Run", "SaidTurn", "SessionId", "Tenant", "Tools", "User", "ValidAt"]

Json = dict[str, Any]
AgentName = Annotated[str | None, Field(description="The agent whose memory this is (default: the agent this "
                                                    "server is bound to; required when it is bound to none)")]
ItemType = Literal["fact", "procedure", "pattern"]
Ref = Annotated[str | None, Field(description="A snapshot: HEAD, HEAD~N, HEAD@{N}, an oid prefix from log, or a "
                                              "position (0 = newest); omit for the current (working) state")]
Limit = Annotated[int, Field(ge=1, le=500, description="At most this many entries")]
Tenant = Annotated[str, Field(min_length=1, description="The tenant (organisation) the conversation belongs to")]
User = Annotated[str, Field(min_length=1, description="The user in that tenant")]
SessionId = Annotated[str, Field(min_length=1, description="The conversation's session id")]
Run = Annotated[str, Field(description="A run within the session (optional)")]
ValidAt = Annotated[str | None, Field(description="Only the items that held then: 2026-11-01, -30d, 2026-11-01 14:00 "
                                                  "(default: the current ones, holding now and not replaced)")]
All = Annotated[bool, Field(description="Every item, those that no longer hold (superseded, retired) too; "
                                        "not with valid_at")]

UNDONE = ("Every write is a commit to the versioned store: `diff` shows it, and `rollback` (or `cortex rollback` "
          "by a person) undoes it.")
READ = ("search", "show", "find", "query", "memory_inspect", "recent_activity", "diff", "log", "get_context",
        "proposals")
WRITE = ("memory_add", "memory_retire", "memory_forget", "memory_compact", "snapshot", "add_turn", "memory_turns")
COMMITS = ("memory_add", "memory_retire", "memory_forget", "memory_compact", "rollback",  # writes to the Org files:
           "memory_turns")  # UNDONE holds
CONVERSATIONS = ("get_context", "add_turn")  # offered only to a server that reaches some tenant


class SaidTurn(BaseModel):
    """One turn of a conversation, for `memory_turns`."""

    speaker: str = Field(description="Who said it, by their own name (the agent: its id)")
    text: str = Field(description="What they said, whole")
    at: str | None = Field(None, description="When, as 2026-11-20T14:05 (default: now)")
    tools: list[str] = Field([], description="Tools the turn invoked")
    artifacts: list[str] = Field([], description="Artifacts (files, links) it showed")


class Tools:
    """The tool bodies over one session; `ctx` is the MCP request context, None when called in-process."""

    def __init__(self, session: Session):
        self.session = session
        self.cx = session.cx

    # --- reading ---------------------------------------------------------------------------

    def search(self, query: Annotated[str, Field(description="Words, a question, or an identifier (E1042, 2.3.1)")],
               limit: Annotated[int, Field(ge=1, le=100)] = 10,
               agent: Annotated[str | None, Field(description="Only this agent's memory")] = None,
               type: Annotated[ItemType | None, Field(description="Only memory items of this type")] = None,
               speaker: Annotated[str | None, Field(description="Only the turns this person said")] = None,
               since: Annotated[str | None, Field(description="Only items dated on or after: 2023-05-01, -7d")] = None,
               until: Annotated[str | None, Field(description="Only items dated on or before: 2023-05-31")] = None,
               context: Annotated[int, Field(ge=0, le=20, description="Turns to bring around each turn")] = 0,
               as_of: Ref = None, valid_at: ValidAt = None, all: All = False,  # noqa: A002 - the argument's name
               ctx: Context | None = None) -> Json:
        """Search notes and agent memory by meaning and by exact identifiers (hybrid: embeddings + BM25), best first.
        Each result names its file:line, outline, :ID: and oid; pass the :ID: (or oid) to `show` for the whole
        headline. Filter to one agent's memory (`agent`) and item type, one person's turns (`speaker`), a period
        (`since`, `until`; a period the query names, "in May 2023", raises what is dated within it), or search a
        past snapshot (`as_of`); `context` brings the turns before and after each turn found. Only current items
        come back (an item superseded or retired does not): `valid_at` asks what held on a date (with `as_of`:
        as that snapshot said), `all` includes every item."""
        if not query.strip():
            raise UserError("query is empty: give words, a question or an identifier to search for")
        results = self.cx.search(query, limit=limit, agent=self.session.search_agent(agent), type=type,
                                 speaker=speaker, since=since, until=until, context=context, as_of=as_of,
                                 within=self.session.prefix, budget=SEARCH_BUDGET, valid_at=valid_at, all=all,
                                 progress=_progress(ctx, "embedding items for search"))
        return self._scoped({"results": [shapes.hit(r) for r in results]})

    def show(self, target: Annotated[str, Field(description="An :ID:, a headline's oid (from search), or a file "
                                                            "path such as notes/projects.org")],
             as_of: Ref = None) -> str:
        """The Org text of a headline and its subtree (by :ID: or oid) or of a whole file (by path), as the
        working state holds it or as snapshot `as_of` recorded it."""
        return self.session.render(self.session.target(target, as_of), as_of)

    def find(self, todo: Annotated[str | None, Field(description="A TODO keyword: TODO, NEXT, DONE...")] = None,
             tag: Annotated[str | None, Field(description="A tag the headline carries or inherits from a heading above it or #+FILETAGS, as in Org; query (tags-local ...) for its own only")] = None,
             prop: Annotated[str | None, Field(description="A property NAME, or NAME=VALUE")] = None,
             text: Annotated[str | None, Field(description="Words in the title")] = None,
             limit: Limit = 50, valid_at: ValidAt = None, all: All = False) -> Json:  # noqa: A002
        """Headlines by TODO keyword, tag (own or inherited), property and title words (all given must match), in file order;
        the current ones (not superseded or retired) unless `valid_at` or `all`."""
        if not any(value and value.strip() for value in (todo, tag, prop, text)):
            raise UserError("find needs at least one of todo, tag, prop or text")
        found = [shapes.node(n) for n in self.cx.find(todo=todo, tag=tag, prop=prop, text=text, valid_at=valid_at,
                                                      all=all)
                 if self.session.covers(n.path)]
        return self._scoped(shapes.capped("headlines", found, limit))

    def query(self, query: Annotated[str, Field(description='An org-ql form, (and (todo "TODO") (tags "ops") '
                                                            '(deadline :to "+7d")), or an Org match string, '
                                                            "+ops-home/TODO|NEXT")],
              as_of: Ref = None, limit: Limit = 50, valid_at: ValidAt = None,
              all: All = False) -> Json:  # noqa: A002
        """Headlines matching an Org query: org-ql predicates (todo, done, tags, property, priority, level,
        heading, regexp, path, scheduled, deadline, closed, ts with :from :to :on, links-to, valid [:at DATE]...)
        under and/or/not, or an org-agenda match string. Dates: 2026-11-20, today, +7d, -2w. Only current
        headlines come back (not superseded or retired) unless `valid_at` (what held then) or `all`."""
        if not query.strip():
            raise UserError("query is empty: give an org-ql form such as (todo \"TODO\") or a match string such "
                            "as +ops/TODO")
        found = [shapes.node(n) for n in self.cx.query(query, as_of=as_of, within=self.session.prefix,
                                                       valid_at=valid_at, all=all)]
        return self._scoped(shapes.capped("headlines", found, limit))

    def memory_inspect(self, agent: AgentName = None, valid_at: ValidAt = None,
                       all: All = False) -> Json:  # noqa: A002
        """An agent's memory: its memory.org (Facts, Procedures, Learned Patterns, each item with its :ID:) with
        its current items, the count of its items and the days of its daily logs; `not_holding` lists the items
        left out (superseded or retired: by what, since when), which `all` includes and `valid_at` (what held
        then) chooses otherwise."""
        view = self.cx.inspect_memory(self.session.agent(agent), valid_at=valid_at, all=all)
        return {"summary": view.summary, "memory_org": view.text or "",
                "daily_logs": [day.isoformat() for day in view.logs], "warnings": list(view.context.warnings),
                "not_holding": [{"id": item.id or item.key(kind), "type": kind, "title": item.title,
                                 "why": item.validity.why_not(view.at)} for kind, item in view.apart]}

    def recent_activity(self, since: Annotated[str, Field(description=activity.SINCE)], limit: Limit = 100) -> Json:
        """What changed since a snapshot or a time: the snapshots taken since, and every headline added, removed,
        changed or moved from the state then (the newest snapshot at or before a time) to the working state."""
        return activity.recent(self.session, since, limit)

    def diff(self, from_ref: Annotated[str | None, Field(description="The older state (default HEAD, the last "
                                                                     "snapshot); null for before anything")] = "HEAD",
             to_ref: Ref = None, limit: Limit = 100) -> Json:
        """Headlines added, removed, changed or moved between two states (default: the last snapshot and the
        working state, which is what was written since the last snapshot)."""
        found = [shapes.change(c) for c in activity.changes(self.session, from_ref, to_ref)]
        return shapes.capped("changes", found, limit)

    def log(self, limit: Limit = 20) -> Json:
        """Snapshots, newest first, with what changed in each; their refs go to diff, show, search and rollback."""
        return {"snapshots": activity.log(self.session, limit)}

    def get_context(self, tenant: Tenant, user: User, session: SessionId, run: Run = "",
                    budget_tokens: Annotated[int, Field(ge=1)] = 4096,
                    strategy: Literal["truncation", "rolling_summary"] = "truncation") -> Json:
        """The conversation memory an LLM call for this identity should see: the newest turns that fit
        `budget_tokens` (oldest first) and, with rolling_summary, the summary of older ones."""
        who = self.session.identity(tenant, user, session, run)
        summarizer = ExtractiveSummarizer() if strategy == "rolling_summary" else None
        with self.cx.conversations(strategy, summarizer=summarizer, budget_tokens=budget_tokens) as memory:
            patch = memory.get_llm_context(who)
        return {"strategy": patch.strategy, "summary": patch.summary, "tokens": patch.tokens,
                "health": str(patch.health), "turns": [shapes.turn(t) for t in patch.turns]}

    def _scoped(self, answer: Json) -> Json:
        """A read's answer, saying what it covers when the server is bound to an agent (an empty list is then not
        "nothing anywhere")."""
        if self.session.prefix is None:
            return answer
        return {**answer, "scope": f"{self.session.prefix} only: this server is bound to agent "
                                   f"{self.session.bound!r}"}

    # --- writing ---------------------------------------------------------------------------

    def memory_add(self, text: Annotated[str, Field(min_length=1, description="The item; its first line is "
                                                                              "its title")],
                   type: ItemType = "fact", agent: AgentName = None, source: str = "mcp",
                   supersedes: Annotated[str | None, Field(description=(
                       "The item this one replaces (its :ID:, key or exact text): a fact that changed. It stays in "
                       "memory, marked as no longer true; searches then return only the new one"))] = None,
                   valid_from: Annotated[str | None, Field(description=(
                       "When it became true, as 2026-11-03 or 2026-11-03T14:00 (default: now)"))] = None) -> Json:
        """Remember one fact, procedure or learned pattern in an agent's memory.org (the same text is kept once).
        When a fact changed, pass the old one as `supersedes` rather than adding beside it. Returns the item's
        :ID:, which `memory_forget`, `memory_retire` and `supersedes` take, and `similar`: the other current items
        of that type close in meaning (id, text, cosine score), the same fact in other words or one this
        replaces, for you to decide on."""
        agent = self.session.agent(agent)
        known = None if supersedes is not None else self.cx.memory.known_item(agent, type, text)
        if known is not None:
            return {"added": False, "id": known.id or known.key(type), "note": "already in memory"}
        with self.session.writing(f"memory_add to {agent}"):
            item = self.cx.memory.add_item(agent, type, text, source=source, supersedes=supersedes,
                                           valid_from=valid_from)
            similar = self.cx.memory.similar(agent, type, text)
        answer = {"added": True, "id": item.id, "type": type, "path": memory_path(agent),
                  "similar": [{"id": other.id or other.key(type), "text": other.text, "score": round(score, 3)}
                              for other, score in similar]}
        return answer | ({"supersedes": list(item.validity.replaces)} if supersedes is not None else {})

    def memory_retire(self, item: Annotated[str, Field(min_length=1, description="The item's :ID:, key or exact "
                                                                                 "text")],
                      agent: AgentName = None,
                      at: Annotated[str | None, Field(description=(
                          "When it stopped being true, as 2026-11-20 or 2026-11-20T14:00 (default: now)"))] = None,
                      ) -> Json:
        """Say that one item of an agent's memory stopped being true, with nothing in its place (when something
        replaced it, use `memory_add` with `supersedes`). It stays in memory.org, marked as no longer true."""
        agent = self.session.agent(agent)
        with self.session.writing(f"memory_retire in {agent}"):
            retired = self.cx.memory.retire(agent, item, at=at)
        return {"retired": retired.id, "invalid_at": shown(retired.validity.end), "path": memory_path(agent)}

    def memory_forget(self, item: Annotated[str, Field(min_length=1, description="The item's :ID:, key or exact "
                                                                                 "text")],
                      agent: AgentName = None,
                      chain: Annotated[bool, Field(description="Also the items it replaced and that replaced "
                                                               "it, in turn")] = False) -> Json:
        """Remove one item from an agent's memory.org and daily logs. A snapshot is taken first: `rollback` to
        the ref returned brings the item back."""
        agent = self.session.agent(agent)
        with self.session.writing(f"memory_forget in {agent}"):
            report = self.cx.memory.forget(agent, item, chain=chain)
        return {"forgot": report.ids, "files": report.files, "before": shapes.oid12(report.before.oid)}

    def memory_compact(self, agent: AgentName = None,
                       max_age: Annotated[str | None, Field(description="Delete daily logs older than this "
                                                                        "(90d, 12w); default 90d")] = None,
                       ctx: Context | None = None) -> Json:
        """Move the items marked :fact:/:procedure:/:pattern: in an agent's daily logs into memory.org and delete
        logs past retention. An item memory.org already holds in other words is not moved (`known_in_other_words`);
        one that replaces a current item supersedes it. Snapshots before and after: `rollback` to `before` undoes
        it."""
        agent = self.session.agent(agent)
        try:
            policy = RetentionPolicy(parse_duration(max_age)) if max_age is not None else None
        except DurationError as exc:
            raise UserError(f"max_age {quoted(max_age)}: {exc}") from None
        report_progress = _progress(ctx, f"compacting the memory of {agent}")
        report_progress(0, 1)
        with self.session.writing(f"memory_compact of {agent}"):
            report = self.cx.memory.compact(agent, policy)
        report_progress(1, 1)
        return {"moved": [{"type": kind, "text": item.text} for kind, item in report.moved],
                "already_known": report.duplicates, "deleted_logs": report.deleted_logs,
                "known_in_other_words": [{"text": item.text, "as": known.id or known.key(kind), "score": round(score, 3)}
                                         for kind, item, known, score in report.near],
                "before": shapes.oid12(report.before.oid), "after": shapes.oid12(report.after.oid)}

    def snapshot(self, message: Annotated[str, Field(description="What this state is")] = "") -> Json:
        """Record the working state as a snapshot (O(1)): a named point to diff against or roll back to."""
        return shapes.snapshot(self.cx.snapshot(message))

    def add_turn(self, tenant: Tenant, user: User, session: SessionId,
                 user_message: Annotated[str, Field(description="What the user said")],
                 assistant_response: Annotated[str, Field(description="What the assistant answered")],
                 run: Run = "") -> Json:
        """Remember one exchange of a conversation for this identity (tenant, user and session are required).
        Turns live in the store's conversation memory, shared by every process on it, not in Org files: `diff`
        and `rollback` do not cover them; `get_context` reads them back."""
        who = self.session.identity(tenant, user, session, run)
        with self.cx.conversations() as memory:
            memory.add_turn(who, Turn(user_message, assistant_response))
            return {"stored": True, "tokens": memory.estimate_tokens(who)}

    def memory_turns(self, session: SessionId,
                     turns: Annotated[list[SaidTurn], Field(min_length=1, max_length=500,
                                                            description="The turns, in the order they were said")],
                     title: Annotated[str | None, Field(description="The title of the session's entry, if these "
                                                                    "turns start one (default Conversation)")] = None,
                     agent: AgentName = None) -> Json:
        """Log turns of a conversation (any number of speakers) in an agent's daily log: one headline
        "** Speaker: first line" per turn, the rest of the turn its body, in the session's entry of the day's log
        (the session's later turns join it). The conversation becomes searchable memory, under each speaker's name."""
        agent, now = self.session.agent(agent), datetime.now()
        said = [utterance_from(turn.model_dump(), f"turns[{n}]") for n, turn in enumerate(turns)]
        with self.session.writing(f"memory_turns to {agent}"):
            self.cx.memory.record_session(agent, said, title, session=session, now=now)
        return {"logged": len(said), "session": " ".join(session.split()),
                "logs": sorted({log_path(agent, (u.at or now).date()) for u in said})}

    def rollback(self, ref: Annotated[str, Field(description="The snapshot to return to: HEAD, HEAD~1, an oid "
                                                             "prefix from log or from a write's `before`")],
                 keep: Annotated[bool, Field(description="Snapshot what no snapshot holds first, so that this "
                                                         "rollback can be undone too (default)")] = True) -> Json:
        """Return the Org files, the working state and HEAD to a snapshot. With keep (the default) nothing is
        lost: what changed since is snapshotted first, and `rollback` to `kept` restores it."""
        if self.session.prefix is not None:
            changed = {c.path for c in self.cx.diff(ref, None)} | set(self.cx.unsaved())
            if any(not self.session.covers(p) for p in changed):  # which ones is not this server's to know
                raise UserError(f"rollback to {quoted(ref)} would change files outside {self.session.prefix}, "
                                f"which this server (bound to agent {self.session.bound!r}) may not touch")
        report = self.cx.rollback(ref, keep=keep)
        return {"now_at": shapes.oid12(report.target.oid), "written": report.written, "removed": report.removed,
                "kept": shapes.oid12(report.kept.oid) if report.kept else None}


    # --- review ----------------------------------------------------------------------------

    def proposals(self, agent: AgentName = None, limit: Limit = 50) -> Json:
        """The writes waiting for a person's review (each with its id, what it does and the files it touches), and
        those a person rejected, newest first, with the reason: do not write a rejected one again as it was."""
        agent = agent if self.session.bound is None and agent is None else self.session.agent(agent)
        waiting = [shapes.proposal(p) for p in self.cx.proposals("pending", agent)]
        rejected = [shapes.proposal(p) for p in reversed(self.cx.proposals("rejected", agent))]
        return {**shapes.capped("pending", waiting, limit), "rejected": rejected[:limit]}

def _progress(ctx: Context | None, message: str):
    """A `progress(done, total)` that sends MCP progress notifications (when the client asked for them)."""
    if ctx is None:
        return lambda done, total: None

    def told(done: int, total: int) -> None:
        anyio.from_thread.run(ctx.report_progress, done, total, message)

    return told
