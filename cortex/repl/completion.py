"""Completion from the session: names outside strings; :ID:s, agent ids, Org files, webhook names and
snapshot refs inside them.

Candidates drawn from the store are cached under what they depend on (the working state for ids and
files, HEAD for snapshots, the definitions for webhooks), so a Tab costs a ref read unless something
changed.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable, Iterator

import hy
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from .registry import PRELUDE

SYMBOL_TAIL = re.compile(r"[^\s()\[\]{}\"';`~,]*$")
QUOTE = re.compile(r'(?<!\\)"')
MAX_HEAD_STEPS = 10  # HEAD~1 .. HEAD~10 are offered; older snapshots by oid prefix


class SessionCompleter(Completer):
    """Completes what a user types at the cortex REPL."""

    def __init__(self, session):
        self.session = session
        self._cache: dict[str, tuple[object, list[tuple[str, str]]]] = {}

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        """Completions for the word before the cursor, or for the string it is inside."""
        before = document.text_before_cursor
        if len(QUOTE.findall(before)) % 2:
            word = before[before.rindex('"') + 1:]
            candidates = self.string_candidates()
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

    def string_candidates(self) -> list[tuple[str, str]]:
        """:ID:s, Org files, agent ids, webhook names and snapshot refs; nothing from the store until it is open."""
        if not self.session.is_open:
            return []
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
        """Agent ids: the folders under the Org folder's `agents/`."""
        folder = self.session.cortex.root / "agents"
        if not folder.is_dir():
            return []
        return [(p.name, "agent") for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")]

    def webhooks(self) -> list[tuple[str, str]]:
        """The names of the webhooks in force, and the agents they route to; none while the definitions are broken."""
        from ..errors import CortexError

        cortex = self.session.cortex
        file = cortex.definitions_path
        live = tuple(cortex.registry.webhooks.values())
        changed = (cortex.working_oid, file.stat().st_mtime_ns if file.exists() else None, live)

        def compute():
            try:
                webhooks = cortex.webhooks()
            except CortexError:  # (load-dsl ...) and `cortex dsl check` say what is wrong
                return []
            found = [(w.name, f"webhook {w.path}") for w in webhooks]
            return found + [(w.agent, "agent") for w in webhooks if w.agent]

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


def _is_form(namespace: dict, name: str) -> bool:
    return hasattr(namespace.get(hy.mangle(name)), "form")


def _form_names(namespace: dict) -> Iterable[str]:
    return (value.form.name for value in namespace.values() if hasattr(value, "form"))
