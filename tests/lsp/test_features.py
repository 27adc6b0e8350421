"""The features' own promises, called directly on a session over a copy of the bundled examples."""

import shutil
import threading

from lsprotocol import types
from pygls.workspace import PositionCodec

import cortex.api as cx
from cortex.lsp import features
from cortex.lsp.session import Session

from tests.conftest import EXAMPLES


def test_hover_answers_from_the_stored_state_while_a_sync_holds_the_session(tmp_path):
    org, store = tmp_path / "org", tmp_path / "store"
    shutil.copytree(EXAMPLES, org)
    with cx.open(store, org) as c:
        c.ingest()
        c.snapshot("start")
        session = Session(c, PositionCodec(types.PositionEncodingKind.Utf16))
        text = (org / "notes" / "projects.org").read_text()
        buffer = session.opened("notes/projects.org", text)
        line = text.split("\n").index(next(x for x in text.split("\n") if x.startswith("* Memory store")))
        held, release, answers = threading.Event(), threading.Event(), []

        def syncing():  # as the first ingest at start holds the lock
            with session.lock:
                held.set()
                release.wait(60)

        holder = threading.Thread(target=syncing)
        holder.start()
        held.wait(60)
        hovering = threading.Thread(target=lambda: answers.append(features.hover(session, buffer, types.Position(
            line=line, character=2))))
        hovering.start()
        hovering.join(60)
        release.set()
        holder.join(60)
        assert answers and "“start”" in answers[0].contents.value
