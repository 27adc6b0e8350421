"""The REPL's forms for search, agent memory and conversation memory, over `cortex.api`.

Like every form module, it imports only what start-up needs; each form loads its libraries on first use.
"""

from __future__ import annotations

from ..errors import UserError
from ..words import similar_item
from .forms import duration, snapshot_ref
from .registry import form
from .values import Message, OrgText, SearchResults


@form
def search(session, query, *, limit=10, agent=None, type=None, source=None, path=None,
           tag=None, todo=None, speaker=None, since=None, until=None, context=0, as_of=None, fusion=None,
           explain=False, valid_at=None, all=False):  # noqa: A002 - what the user writes
    """Hybrid search, by meaning and by exact words: a table of score, file:line and outline, best first.

    (search "deploy")                                   the working state
    (search "E1042" :agent "assistant" :type "fact")    one agent's memory, one type of item
    :source "memory" or "notes", :path "notes/" (a prefix), :tag "ops" (own or inherited, as in (find)),
    :todo "TODO" narrow it down;
    :speaker "Caroline" keeps one person's turns; :since "2023-05-01" :until "-7d" keep what is dated then
    (a period the query names, "in May 2023", "last week", raises it); :context 2 brings the turns around;
    :as-of "HEAD~1" searches a snapshot; :fusion "rrf" ranks by reciprocal rank fusion;
    :explain True shows the scores behind each rank. (show (first r)) shows where a result is.
    Items that no longer hold (superseded, retired) are left out: :valid-at "2026-11-01" finds what held then,
    :all True every item.
    """
    results = session.cortex.search(query, limit=limit, agent=agent, type=type, source=source, path=path,
                                    tag=tag, todo=todo, speaker=speaker, since=since, until=until, context=context,
                                    as_of=snapshot_ref(as_of), fusion=fusion, valid_at=valid_at, all=all)
    return SearchResults(results, explain)


# --- agent memory -----------------------------------------------------------------------------


@form
def memory_inspect(session, agent, *, valid_at=None, all=False):  # noqa: A002
    """An agent's memory.org, highlighted, with its current items: (memory-inspect "assistant").

    :all True shows the items that no longer hold too (and says what replaced each, and when);
    :valid-at "2026-11-01" those that held then.
    """
    from ..api import memory_path

    view = session.cortex.inspect_memory(agent, valid_at=valid_at, all=all)
    for warning in view.context.warnings:
        session.notify(warning)
    text = view.org
    session.notify(view.summary + ("; :all True shows them" if view.apart and valid_at is None and not all else ""))
    for note in view.notes() if all else ():
        session.notify(f"  {note}")
    return OrgText(text, memory_path(agent))


@form
def memory_search(session, agent, query, *, limit=10, explain=False, valid_at=None, all=False):  # noqa: A002
    """Search one agent's memory items and daily logs: (memory-search "assistant" "deploy"); its current items,
    unless :valid-at or :all True."""
    return SearchResults(session.cortex.memory.search(agent, query, limit, valid_at=valid_at, all=all), explain)


@form
def memory_add(session, agent, type, text, *, source="repl", supersedes=None, valid_from=None):
    """Add a fact, procedure or pattern to an agent's memory.org: (memory-add "assistant" "fact" "Staging is eu-west-1.").

    The same text is never added twice (the item already there is returned, and said to be); the item is
    returned with its :ID:. :supersedes names the item it replaces (:ID:, key or text), which stops holding
    when this one starts (:valid-from "2026-11-03", else now). Other current items of that type close in
    meaning are said (`similar: ID TITLE (0.87)`).
    """
    memory = session.cortex.memory
    if supersedes is None and (known := memory.known_item(agent, type, text)):
        session.notify(f"already present: {known.id or known.key(type)}")
        return known
    item = memory.add_item(agent, type, text, source=source, supersedes=supersedes, valid_from=valid_from)
    for other, score in memory.similar(agent, type, text):
        session.notify(similar_item(other.id or other.key(type), other.title, score))
    return item


@form
def memory_retire(session, agent, item, *, at=None):
    """Say that an item (its :ID:, key or text) stopped being true, with no successor: (memory-retire "assistant"
    "mem-assistant-dark-mode" :at "2026-11-20"); default now. It keeps its text and place, marked
    :INVALID_AT: and ARCHIVE; searches and queries then leave it out unless asked."""
    return session.cortex.memory.retire(agent, item, at=at)


@form
def memory_compact(session, agent, *, max_age=None):
    """Move the items marked in an agent's daily logs into memory.org and delete logs past `max-age` (90d).

    (memory-compact "assistant" :max-age "30d"); a snapshot is taken first, so
    (rollback (. *1 before)) undoes it.
    """
    from ..api import RetentionPolicy

    age = duration(max_age, "max-age")
    return session.cortex.memory.compact(agent, None if age is None else RetentionPolicy(age))


@form
def memory_consolidate(session, agent, *, apply=False, base=None):
    """Suggest merging an agent's duplicate items and superseding items by their likely successors, each
    numbered with the diff of memory.org it would make: (memory-consolidate "assistant").

    :apply True applies them all, :apply [1 3] those numbered, in one commit after a snapshot, so
    (rollback (. *1 before)) undoes it; :base "3fa2c1d0e4b1" (the version listed) refuses once memory.org
    changed since.
    """
    if not isinstance(apply, bool):
        apply = list(apply) if isinstance(apply, (list, tuple)) else [apply]
    return session.cortex.memory.consolidate(agent, apply=apply, base=base)


@form
def memory_purge(session, agent, *, hard=False, yes=False):
    """Remove an agent's files and its items from the working state; :hard True erases it from history too.

    A plain purge snapshots first, so a rollback brings the agent back. A hard purge rewrites every
    snapshot without the agent and cannot be undone: the REPL asks first unless :yes True, and where
    nothing can ask (cortex eval, piped forms) it needs :yes True.
    """
    if hard and not _confirmed(session, yes, f"erase {agent}'s memory from the Org files and from every snapshot?"):
        return Message(f"nothing purged: {agent}'s memory is as it was")
    return session.cortex.memory.purge(agent, hard=hard)


@form
def memory_forget(session, agent, item, *, hard=False, chain=False, yes=False):
    """Remove one item (its :ID:, key or text) from an agent's memory.org and logs; :hard True from history too,
    :chain True with the items it replaced and that replaced it.

    (memory-forget "assistant" "mem-assistant-dark-mode"); a plain forget snapshots first, so
    (rollback (. *1 before)) undoes it. A hard forget cannot be undone and asks first, as a hard purge does.
    """
    if hard and not _confirmed(session, yes, f"erase this item of {agent} from the Org files and from every snapshot?"):
        return Message(f"nothing forgotten: {agent}'s memory is as it was")
    return session.cortex.memory.forget(agent, item, hard=hard, chain=chain)


@form
def memory_turn(repl, agent, session, speaker, text, *, at=None, title=None):
    """Log one turn of a conversation in an agent's daily log, and show the session's entry as it is now.

    (memory-turn "assistant" "s-42" "Dana" "When is the next deploy?") adds the headline
    "** Dana: When is the next deploy?" to the entry of session s-42 in today's log (a new entry, titled
    :title or "Conversation", when the session has none there yet); :at "2026-11-20 14:05" says when.
    """
    # `repl` is the REPL session: `session` is the conversation's, as its log names it.
    from ..api import Utterance
    from ..memory.conversation.orglog import session_entry

    path = repl.cortex.memory.record_session(agent, [Utterance(speaker, text, at)], title, session=session)
    return OrgText(session_entry(repl.cortex.show(path), session), path)


def _confirmed(session, yes: bool, question: str) -> bool:
    """Whether an erasure that cannot be undone may go ahead: :yes True, or the person says so."""
    if yes:
        return True
    if session.ask is None:
        raise UserError(f"{question.rstrip('?')} cannot be undone; nothing can ask for confirmation here, "
                        "so add :yes True")
    return session.ask(f"{question} This cannot be undone.")


# --- conversation memory ----------------------------------------------------------------------


@form
def add_turn(repl, tenant, user, session, message, response, *, run=""):
    """Keep one exchange in the conversation memory of an identity, as MCP's add_turn does, and show what the
    identity's next LLM call would see.

    (add-turn "acme" "dana" "s-42" "When is the next deploy?" "Tuesday, after the standup.");
    :run names a run within the session. (turns "acme" "dana" "s-42") shows it again.
    """
    from ..api import Identity, Turn

    who = Identity(tenant, user, session, run)
    with repl.cortex.conversations() as memory:
        memory.add_turn(who, Turn(message, response))
        return memory.get_llm_context(who)


@form
def turns(repl, tenant, user, session, *, run="", strategy="truncation", budget_tokens=4096):
    """The conversation memory of one identity: the turns its next LLM call would see, oldest first.

    (turns "acme" "ada" "s-42"); :run names a run within the session; :strategy "rolling_summary"
    shows the summary of older turns too; :budget-tokens bounds the truncation window.
    """
    # `repl` is the REPL session: `session` is the conversation's, as the identity names it.
    from ..api import ExtractiveSummarizer, Identity

    # Reading a rolling summary never summarises, but opening the strategy needs a summarizer.
    summarizer = ExtractiveSummarizer() if strategy == "rolling_summary" else None
    with repl.cortex.conversations(strategy, summarizer=summarizer, budget_tokens=budget_tokens) as memory:
        return memory.get_llm_context(Identity(tenant, user, session, run))
