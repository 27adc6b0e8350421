"""How the values of search, agent memory, conversation memory, definitions and webhooks print.

Types are recognised by name (`is_a`), so printing a headline never imports the search engine or the DSL.
"""

from __future__ import annotations

from .printer import counted, files, short, when
from .values import SearchResults, is_a

SEARCH_RESULT = "cortex.search.service.SearchResult"
TURN = "cortex.memory.conversation.turns.Turn"
DELIVERY = "cortex.webhooks.deliveries.Delivery"
MEMORY_DEFINITION = "cortex.dsl.definitions.MemoryDefinition"
WEBHOOK_DEFINITION = "cortex.dsl.definitions.WebhookDefinition"


def render(renderer, value):
    """A renderable for a value of these features, or None when the value is none of theirs."""
    from rich.text import Text

    if isinstance(value, SearchResults):
        return search_results(renderer, value)
    if is_a(value, SEARCH_RESULT):
        return search_result(value)
    if is_a(value, "cortex.memory.conversation.protocol.ContextPatch"):
        return context_patch(renderer, value)
    if is_a(value, "cortex.memory.items.MemoryItem"):
        return renderer.key_values(memory_item(value))
    if is_a(value, "cortex.memory.compaction.CompactionReport"):
        return Text(compaction(value))
    if is_a(value, "cortex.memory.forgetting.PurgeReport"):
        return Text(purge(value))
    if is_a(value, "cortex.memory.forgetting.ForgetReport"):
        return Text(forget(value))
    if is_a(value, "cortex.dsl.definitions.Definitions"):
        rows = definition_rows(renderer, [*value.memories, *value.webhooks])
        return renderer.records(rows) if rows else Text("no definitions")
    if is_a(value, MEMORY_DEFINITION) or is_a(value, WEBHOOK_DEFINITION):
        return renderer.key_values(definition_rows(renderer, [value])[0].items())
    if is_a(value, "cortex.webhooks.simulate.Simulation"):
        return renderer.key_values(value.summary())
    if is_a(value, DELIVERY):
        return renderer.key_values(delivery_row(value).items())
    return None


def row(renderer, index: int, item) -> dict | None:
    """The cells of a table row for an item of these features, or None when it is none of theirs."""
    if is_a(item, SEARCH_RESULT):
        return search_row(index, item)
    if is_a(item, TURN):
        return turn_row(index, item)
    if is_a(item, MEMORY_DEFINITION) or is_a(item, WEBHOOK_DEFINITION):
        return definition_rows(renderer, [item])[0]
    if is_a(item, DELIVERY):
        return delivery_row(item)
    return None


# --- search -----------------------------------------------------------------------------------


def search_row(index: int, result) -> dict:
    """A search result as a table row: rank, score, file:line, outline, :ID:."""
    return {"#": str(index), "score": f"{result.score:.3f}", "file:line": f"{result.path}:{result.line}",
            "outline": result.heading, "id": result.id or ""}


def search_results(renderer, results: SearchResults):
    """The table of results (or "no results"), then the status of the vectors while some are missing."""
    from rich.console import Group
    from rich.text import Text

    shown = search_table(renderer, results) if results else Text("no results")
    if results.status is None or results.status.complete:
        return shown
    return Group(shown, Text(f"{results.status}: those without one were found by their words", style="yellow"))


def search_table(renderer, results: SearchResults):
    """Results as a table; explained, each followed by its score breakdown."""
    from rich.text import Text

    rows = []
    for n, result in enumerate(results):
        rows.append(search_row(n, result))
        if results.explain:
            rows.append({"#": "", "score": "", "file:line": "", "outline": Text(result.explain(), style="dim"),
                         "id": ""})
    return renderer.records(rows)


def search_result(result):
    """One result: where it is, why it ranked there, and its text."""
    from rich.console import Group
    from rich.text import Text

    where = Text(f"{result.path}:{result.line}  {' / '.join(result.outline)}", style="dim")
    return Group(where, Text(result.explain(), style="dim"), Text(result.text))


# --- agent and conversation memory ------------------------------------------------------------


def memory_item(item) -> list[tuple[str, str]]:
    """A memory item's :ID:, text, when it was added and where from, and its tags if any."""
    pairs = [("id", item.id or ""), ("text", item.text),
             ("added", f"{item.added:%Y-%m-%d %H:%M}" if item.added else ""), ("source", item.source)]
    return pairs + ([("tags", ":".join(item.tags))] if item.tags else [])


def compaction(report) -> str:
    """What a compaction moved and deleted, and how to undo it."""
    lines = [f"  moved    {kind:9} {item.title}" for kind, item in report.moved]
    lines += [f"  deleted  {path}" for path in report.deleted_logs]
    lines.append(f"{counted(len(report.moved), 'item')} moved, {report.duplicates} already known, "
                 f"{counted(len(report.deleted_logs), 'log')} deleted; "
                 f'(rollback "{short(report.before.oid)}") undoes it')
    return "\n".join(lines)


def purge(report) -> str:
    """What a purge removed, from the files and, when hard, from history."""
    return "\n".join([f"removed {files(report.files)}", *erased(report.history)])


def forget(report) -> str:
    """What forgetting an item changed, in the files and, when hard, in history; how to undo a plain one."""
    lines = [f"forgot {', '.join(report.ids) or 'an item without :ID:'}; rewrote {files(report.files)}",
             *erased(report.history)]
    if report.before is not None:
        lines.append(f'(rollback "{short(report.before.oid)}") undoes it')
    return "\n".join(lines)


def erased(forgotten) -> list[str]:
    """What a hard purge or forget took from history (nothing when it was not hard)."""
    if forgotten is None:
        return []
    return [f"rewrote {counted(forgotten.snapshots, 'snapshot')}, collected {counted(forgotten.objects, 'object')}"]


def context_patch(renderer, patch):
    """A conversation's context: strategy, health and tokens, the summary, then the turns as a table."""
    from rich.console import Group
    from rich.text import Text

    head = (f"{patch.strategy}: {counted(len(patch.turns), 'turn')}, {counted(patch.tokens, 'token')} "
            f"({patch.health.value})")
    parts = [Text(head, style="dim")]
    if patch.summary:
        parts.append(Text(f"summary: {patch.summary}"))
    turns = [turn_row(n, turn) for n, turn in enumerate(patch.turns)]
    parts.append(renderer.records(turns) if turns else Text("no turns"))
    return Group(*parts)


def turn_row(index: int, turn) -> dict:
    """A conversation turn as a table row."""
    return {"#": str(index), "time": when(turn.timestamp_ns), "user": turn.user_message,
            "assistant": turn.assistant_response, "tokens": str(turn.tokens)}


# --- definitions and webhooks -----------------------------------------------------------------


def definition_rows(renderer, definitions: list) -> list[dict]:
    """Definitions as table rows (kind, name, defined at, settings); secrets stay hidden.

    Where a definition was written is shown relative to the Org folder when it is in it.
    """
    from ..api import ROW_HEADERS, Definitions, MemoryDefinition
    from ..api import definition_rows as rows

    memories = tuple(d for d in definitions if isinstance(d, MemoryDefinition))
    webhooks = tuple(d for d in definitions if not isinstance(d, MemoryDefinition))
    org_folder = f"{renderer.session.cortex.root}/"
    return [dict(zip(ROW_HEADERS, (kind, name, where.removeprefix(org_folder), settings), strict=True))
            for kind, name, where, settings in rows(Definitions(memories, webhooks))]


def delivery_row(d) -> dict:
    """A logged delivery as a table row."""
    return {"time": when(d.time_ns), "delivery": d.id, "webhook": d.webhook, "trigger": d.trigger,
            "event": d.event or "-", "answer": f"{d.status} {d.outcome}", "why": d.why or "-",
            "agent": d.agent or "-", "ms": f"{d.duration_us / 1000:.1f}"}

