"""Completion from the session: names outside strings; :ID:s, agent ids, Org files, webhook names and
snapshot refs inside them, only those the argument takes where the form says (by its parameter's name:
`(rollback "` offers snapshot refs, `(memory-inspect "` agents, `(webhook-test "` webhooks).

Candidates drawn from the store are cached under what they depend on (the working state for ids and
files, HEAD for snapshots, the definitions for webhooks), so a Tab costs a ref read unless something
changed.
"""

from __future__ import annotations

import builtins
import inspect
import re
from collections.abc import Iterable, Iterator

import hy
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from ..errors import CortexError
from .registry import FORMS, PRELUDE

__all__ = ["SessionCompleter"]

SYMBOL_TAIL = re.compile(r"[^\s()\[\]{}\"';`~,]*$")
QUOTE = re.compile(r'(?<!\\)"')
MAX_HEAD_STEPS = 10  # HEAD~1 .. HEAD~10 are offered; older snapshots by oid prefix
ATOM = re.compile(r'[^\s()\[\]{}";]+')
# What a form's string argument names, by the name of its parameter; any other takes every kind.
ARGUMENT_KINDS = {"agent": "agents", "ref": "snapshot_refs", "a": "snapshot_refs", "b": "snapshot_refs",
                  "as_of": "snapshot_refs", "name": "webhooks", "org_id": "ids", "target": "ids",
                  "headline": "ids", "path": "ids"}
FREE_TEXT = {"query", "text", "message", "summary"}  # parameters whose strings name nothing: nothing is offered


class SessionCompleter(Completer):
    """Completes what a user types at the cortex REPL."""

    def __init__(self, session):
        self.session = session
        self._cache: dict[str, tuple[object, list[tuple[str, str]]]] = {}

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        """Completions for the word before the cursor, or for the string it is inside."""
        before = document.text_before_cursor
        if len(QUOTE.findall(before)) % 2:
            opening = before.rindex('"')
            word = before[opening + 1:]
            candidates = self.string_candidates(_parameter(before[:opening]))
        else:
            word = SYMBOL_TAIL.search(before).group()
            if not word:
                return
            candidates = self.name_candidates()
        seen = set()
        for text, meta in candidates:
            if text.startswith(word) and text != word and text not in seen:
                seen.add(text)
                yield Completion(text, -len(word), display_meta=meta)

    # --- names ------------------------------------------------------------------------------

    def name_candidates(self) -> list[tuple[str, str]]:
        """Forms first, then what the session defined, then Hy's macros and Python's builtins."""
        namespace = vars(self.session.module)
        found = [(name, "form") for name in sorted(_form_names(namespace))]
        found += [(name, "helper" if name in PRELUDE else "defined") for name in self.session.names()
                  if not _is_form(namespace, name)]
        found += [(hy.unmangle(name), "hy") for name in sorted(getattr(builtins, "_hy_macros", {}))]
        found += [(hy.unmangle(name), "builtin") for name in sorted(vars(builtins)) if not name.startswith("_")]
        return found

    # --- strings ----------------------------------------------------------------------------

    def string_candidates(self, parameter: str | None = None) -> list[tuple[str, str]]:
        """What a string for `parameter` (of the form called around it) may name: :ID:s, Org files, agent ids,
        webhook names or snapshot refs; all of them for a parameter of no known kind. Nothing from the
        store until it is open."""
        if not self.session.is_open or parameter in FREE_TEXT:
            return []
        kind = ARGUMENT_KINDS.get(parameter)
        if kind is not None:
            return getattr(self, kind)()
        return [*self.ids(), *self.agents(), *self.webhooks(), *self.snapshot_refs()]

    def ids(self) -> list[tuple[str, str]]:
        """Every :ID: and Org file of the working state, with the headline's title (or the file an :ID: names)."""
        cortex = self.session.cortex

        def compute():
            found = [(path, "file") for path in cortex.working().entries]
            found += [(org_id, f"file {path}") for org_id, path in cortex.file_ids().items()]
            found += [(node.id, node.title) for node in cortex.headlines() if node.id]
            return found

        return self._cached("ids", cortex.working_oid, compute)

    def agents(self) -> list[tuple[str, str]]:
        """Agent ids: those with memory, and those the webhooks in force route to."""
        routed = [(w.agent, "agent") for w in self._webhooks() if w.agent]
        return [(agent, "agent") for agent in self.session.cortex.memory.list_agent_contexts()] + routed

    def webhooks(self) -> list[tuple[str, str]]:
        """The names of the webhooks in force."""
        return [(w.name, f"webhook {w.path}") for w in self._webhooks()]

    def _webhooks(self) -> list:
        """The webhooks in force; none while the definitions are broken (`cortex dsl check` says why)."""
        cortex = self.session.cortex
        file = cortex.definitions_path if cortex.root is not None else None
        live = tuple(cortex.registry.webhooks.values())
        changed = (cortex.working_oid, file.stat().st_mtime_ns if file and file.exists() else None, live)

        def compute():
            try:
                return cortex.webhooks()
            except CortexError:
                return []

        return self._cached("webhooks", changed, compute)

    def snapshot_refs(self) -> list[tuple[str, str]]:
        """HEAD, HEAD~N along HEAD's parents, and a 12-character prefix of every kept snapshot."""
        cortex = self.session.cortex
        head = cortex.head_oid

        def compute():
            snaps = cortex.snapshots()
            found = [("HEAD", "snapshot")] if head else []
            found += [(f"HEAD~{n}", "snapshot") for n in range(1, min(len(snaps), MAX_HEAD_STEPS + 1))]
            found += [(s.oid.hex()[:12], s.message or "snapshot") for s in snaps]
            return found

        return self._cached("snapshots", (head, cortex.snapshot_count), compute)

    def _cached(self, name: str, key, compute) -> list[tuple[str, str]]:
        stored = self._cache.get(name)
        if stored is None or stored[0] != key:
            stored = self._cache[name] = (key, compute())
        return stored[1]


def _parameter(text: str) -> str | None:
    """The name of the parameter a string opened at the end of `text` is given for: the form called by the
    innermost open parenthesis, and the string's position or keyword there (None: no known form)."""
    frames: list[list[str | None]] = [[]]
    at = 0
    while at < len(text):
        char = text[at]
        if char in "([{":
            frames.append([])
        elif char in ")]}":
            if len(frames) > 1:
                frames.pop()
            frames[-1].append(None)  # a nested form is one argument
        elif char == '"':
            end = QUOTE.search(text, at + 1)
            at = len(text) if end is None else end.end() - 1
            frames[-1].append(None)
        elif char == ";":
            at = text.find("\n", at)
            at = len(text) if at < 0 else at
        elif not char.isspace():
            atom = ATOM.match(text, at)
            frames[-1].append(atom.group())
            at = atom.end() - 1
        at += 1
    head, *args = frames[-1] if len(frames) > 1 and frames[-1] else [None]
    form = FORMS.get(head) if isinstance(head, str) else None
    if form is None or form.macro:
        return None
    if args and isinstance(args[-1], str) and args[-1].startswith(":"):
        return hy.mangle(args[-1][1:])
    keywords = [n for n, arg in enumerate(args) if isinstance(arg, str) and arg.startswith(":")]
    position = len(args) - 2 * len(keywords)
    positional = [p.name for p in list(inspect.signature(form.fn).parameters.values())[1:]
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return positional[position] if position < len(positional) else None


def _is_form(namespace: dict, name: str) -> bool:
    return hasattr(namespace.get(hy.mangle(name)), "form")


def _form_names(namespace: dict) -> Iterable[str]:
    return (value.form.name for value in namespace.values() if hasattr(value, "form"))
