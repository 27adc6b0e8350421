"""The problems of an open buffer, located: broken id links, duplicate :ID:s, sync conflicts left in the file,
and mistakes in definitions (`definitions.hy`, literate `#+begin_src hy :cortex yes` blocks)."""

from __future__ import annotations

from lsprotocol import types

from ..api import DEFINITIONS_FILE
from ..errors import UserError
from ..history.conflicts import conflicts_in
from ..org.blocks import DEFINITIONS_MARKER
from .documents import Buffer
from .session import Session

__all__ = ["diagnostics"]

SOURCE = "cortex"
ERROR, WARNING = types.DiagnosticSeverity.Error, types.DiagnosticSeverity.Warning


def diagnostics(session: Session, buffer: Buffer) -> list[types.Diagnostic]:
    """Every problem of the buffer as the editor has it, against the :ID:s of every file."""
    session.ids.ready.wait()
    return [*_broken(session, buffer), *_duplicates(session, buffer), *_conflicts(session, buffer),
            *_definitions(session, buffer)]


def _problem(session: Session, buffer: Buffer, line: int, message: str, severity=ERROR, start: int = 0,
             end: int | None = None, code: str = "") -> types.Diagnostic:
    return types.Diagnostic(range=session.range(buffer.path, line, start, end), message=message, severity=severity,
                            code=code, source=SOURCE)


def _broken(session: Session, buffer: Buffer):
    for x in buffer.links:
        if x.link.kind == "id" and not session.ids.where(x.link.target):
            yield _problem(session, buffer, x.line, f"broken link: no headline or file has :ID: {x.link.target}",
                           start=x.start, end=x.end, code="broken-link")


def _duplicates(session: Session, buffer: Buffer):
    for org_id, lines in buffer.ids.items():
        count = session.ids.count(org_id)
        if count > 1:
            elsewhere = sorted(e.path for e in session.ids.where(org_id) if e.path != buffer.path)
            also = f" (also in {', '.join(elsewhere)})" if elsewhere else ""
            for line in lines:
                yield _problem(session, buffer, line, f"duplicate :ID: {org_id}: {count} headlines carry it{also}",
                               code="duplicate-id")


def _conflicts(session: Session, buffer: Buffer):
    for conflict in conflicts_in(buffer.document, buffer.get):
        where = " / ".join(conflict.outline) or "(whole file)"
        yield _problem(session, buffer, (conflict.line or 1) - 1,
                       f"sync conflict ({conflict.kind}): {where}; keep one version and delete the other",
                       WARNING, code="conflict")


def _definitions(session: Session, buffer: Buffer):
    """Definition mistakes, each where it is (one at the file's first line when not located)."""
    from ..dsl import DslError, extract_from_org, parse_definitions

    where = str(session.root / buffer.path)
    try:
        if buffer.path == DEFINITIONS_FILE:
            parse_definitions(buffer.text, where)
        elif DEFINITIONS_MARKER in buffer.text:
            extract_from_org(buffer.text, where)
    except DslError as error:
        for d in error.diagnostics:
            yield _problem(session, buffer, d.line - 1, d.message, start=max(d.column - 1, 0),
                           end=len(buffer.lines[d.line - 1]) if d.line <= len(buffer.lines) else None,
                           code="definition")
    except UserError as error:
        yield _problem(session, buffer, 0, str(error).splitlines()[0], code="definition")
