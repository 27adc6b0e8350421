"""`cortex lsp` through a real LSP client over stdio (pygls's own), one server for the module, over a copy of the
bundled examples with a file of links: every feature as an editor reaches it."""

import shutil
import time

import pytest
from lsprotocol import types

import cortex.api as cx

from tests.conftest import EXAMPLES
from tests.lsp_client import editor

LINKS = """\
* Links 🚀 to things
:PROPERTIES:
:ID:       links-home
:END:
See 🚀 [[id:proj-memory-store][the store]] and [[id:no-such-id][nothing]].
Also [[file:projects.org::*Deploy pipeline][deploy]] and [[*Twin][the twin]].
* Twin
:PROPERTIES:
:ID:       proj-deploy
:END:
"""


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


def at(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lsp")
    org, store = folder / "org", folder / "store"
    shutil.copytree(EXAMPLES, org)
    (org / "notes" / "links.org").write_text(LINKS)
    with cx.open(store, org) as c:
        c.ingest()
        c.snapshot("start")
    with editor(store, org, folder / "server.log") as session:
        yield session


def test_workspace_symbols_rank_as_cortex_search(client, tmp_path):
    found = client.request("workspace_symbol", types.WorkspaceSymbolParams(query="staging database migration"))
    assert found[0].name.endswith("WAITING Staging database migration") or "Staging database migration" in found[0].name
    assert found[0].location.uri == client.uri("notes/projects.org")
    assert found[0].location.range.start.line == 36  # its heading, 0-based
    assert client.request("workspace_symbol", types.WorkspaceSymbolParams(query="  ")) == []


def test_a_workspace_symbol_in_an_open_buffer_is_at_its_heading_as_it_stands(client):
    uri = client.open("notes/projects.org")
    client.diagnosed(uri, client.change(uri, "\n\n" + client.text(uri)))
    found = client.request("workspace_symbol", types.WorkspaceSymbolParams(query="staging database migration"))
    assert (found[0].location.uri, found[0].location.range.start.line) == (uri, 38)  # its heading, two lines down
    client.diagnosed(uri, client.change(uri, client.text(uri)[2:]))


def test_definition_follows_id_file_and_heading_links_counting_utf16(client):
    uri = client.open("notes/links.org")
    # the 🚀 before the link is two UTF-16 code units: a column in characters would land on the wrong link
    at = client.position(uri, "[[id:proj-memory-store]", 3)
    found = client.request("text_document_definition", types.DefinitionParams(text_document=doc(uri), position=at))
    assert [(d.uri, d.range.start.line) for d in found] == [(client.uri("notes/projects.org"), 3)]
    at = client.position(uri, "[[file:projects.org", 3)
    found = client.request("text_document_definition", types.DefinitionParams(text_document=doc(uri), position=at))
    assert [(d.uri, d.range.start.line) for d in found] == [(client.uri("notes/projects.org"), 32)]
    at = client.position(uri, "[[*Twin]", 3)
    found = client.request("text_document_definition", types.DefinitionParams(text_document=doc(uri), position=at))
    assert [(d.uri, d.range.start.line) for d in found] == [(uri, 6)]


def test_references_are_backlinks_with_utf16_columns(client):
    uri = client.open("notes/projects.org")
    at = client.position(uri, "* Memory store", 2)
    found = client.request("text_document_references", types.ReferenceParams(
        text_document=doc(uri), position=at, context=types.ReferenceContext(include_declaration=False)))
    links, reading = client.uri("notes/links.org"), client.uri("notes/reading.org")
    # the open buffer's link (after a 🚀: two UTF-16 code units) and the saved file's
    assert [(r.uri, r.range.start.line, r.range.start.character) for r in found] == [(links, 4, 7), (reading, 17, 4)]


def test_hover_on_a_headline_tells_its_id_last_change_and_validity(client):
    uri = client.open("agents/assistant/memory.org")
    text = client.text(uri)
    heading = next(line for line in text.split("\n") if line.startswith("** "))
    hovered = client.request("text_document_hover", types.HoverParams(
        text_document=doc(uri), position=client.position(uri, heading, 3)))
    assert ":ID:" in hovered.contents.value and "snapshot `" in hovered.contents.value
    assert "“start”" in hovered.contents.value
    assert client.request("text_document_hover", types.HoverParams(text_document=doc(uri), position=at(0, 0))) is None


def test_diagnostics_broken_links_duplicate_ids_and_their_ranges(client):
    uri = client.open("notes/links.org")
    found = {d.code: d for d in client.diagnosed(uri)}
    broken = found["broken-link"]
    assert "no-such-id" in broken.message
    line = client.text(uri).split("\n")[4]
    start = line.index("[[id:no-such-id")
    assert broken.range.start == at(4, len(line[:start].encode("utf-16-le")) // 2)
    assert "proj-deploy" in found["duplicate-id"].message and "notes/projects.org" in found["duplicate-id"].message


def test_an_unsaved_edit_is_diagnosed_from_the_buffer_not_the_file(client):
    uri = client.open("notes/links.org")
    version = client.change(uri, LINKS.replace("no-such-id", "task-parse-org").replace("proj-deploy", "twin"))
    assert list(client.diagnosed(uri, version)) == []
    assert "no-such-id" in (client.root / "notes" / "links.org").read_text()  # the file is as it was


def test_conflicts_and_definition_mistakes_are_located(client):
    conflict = ("* Plan\n:PROPERTIES:\n:CONFLICT_OF: Plan\n:CONFLICT_FROM: theirs\n:CONFLICT_KIND: both-changed\n"
                ":END:\n")
    uri = client.open("notes/conflicted.org", "* Plan\n" + conflict)
    (problem,) = client.diagnosed(uri)
    assert problem.code == "conflict" and problem.range.start.line == 1
    uri = client.open("definitions.hy", '(defmemory "x" :retention "ninety days")\n')
    (problem,) = client.diagnosed(uri)
    assert problem.code == "definition" and problem.range.start.line == 0


def test_completion_of_id_links_by_title(client):
    uri = client.open("notes/links.org")
    version = client.change(uri, client.text(uri) + "Now [[id:\n")
    client.diagnosed(uri, version)
    at = client.position(uri, "Now [[id:", len("Now [[id:"))
    found = client.request("text_document_completion", types.CompletionParams(text_document=doc(uri), position=at))
    items = found if isinstance(found, list) else found.items
    assert items, found
    rotate = next(i for i in items if "Rotate the webhook secrets" in i.label)
    assert rotate.text_edit.new_text == f"[[id:task-rotate-secrets][{rotate.label}]]"
    assert rotate.text_edit.range.start.character == len("Now ")


def test_commands_snapshot_history_diff_and_proposals(client):
    assert client.command("cortex.snapshot", "from the editor").startswith("snapshot ")
    assert "Rotate the webhook secrets (added)" in client.command("cortex.history", "task-rotate-secrets")
    uri = client.open("notes/projects.org")
    assert "no change since HEAD" in client.command("cortex.diff", uri, "HEAD")
    assert client.command("cortex.proposals") == "no pending proposals"
    actions = client.request("text_document_code_action", types.CodeActionParams(
        text_document=doc(uri), range=types.Range(start=at(3, 0), end=at(3, 0)),
        context=types.CodeActionContext(diagnostics=[])))
    names = {a.command for a in actions}
    assert names >= {"cortex.history", "cortex.rollbackHeadline", "cortex.diff", "cortex.snapshot", "cortex.log"}


def test_log_lists_snapshots_newest_first_and_refuses_a_bad_limit(client):
    made = client.command("cortex.snapshot", "logged from the editor").split("\n")[0]
    logged = client.command("cortex.log", 2).split("\n")
    assert len(logged) == 2 and logged[0].startswith(made) and "logged from the editor" in logged[0]
    with pytest.raises(Exception, match="positive whole number, not 'many'"):
        client.command("cortex.log", "many")


def test_rollback_of_one_headline_is_an_edit_the_client_applies(client):
    uri = client.open("notes/projects.org")
    original = client.text(uri)
    edited = original.replace("* Memory store", "* Memory store, renamed")
    client.diagnosed(uri, client.change(uri, edited))
    answer = client.command("cortex.rollbackHeadline", uri, "proj-memory-store", "HEAD")
    assert answer == {"applied": True}
    assert client.text(uri) == original  # the buffer, through the protocol
    assert (client.root / "notes" / "projects.org").read_text() == original  # and no file written meanwhile
    with pytest.raises(Exception, match="no headline with :ID: nope"):
        client.command("cortex.rollbackHeadline", uri, "nope", "HEAD")


def eventually(check, what: str):
    """Wait until `check()` holds (the server's work is under way in its threads)."""
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_sync_the_server_runs_never_writes_a_file_the_editor_has_open(client, tmp_path):
    uri = client.open("notes/reading.org")
    elsewhere = tmp_path / "elsewhere"
    with cx.open(client.store, folder=False) as other:  # another working copy writes the same file meanwhile
        other.checkout(elsewhere)
        theirs = elsewhere / "notes" / "reading.org"
        theirs.write_text(theirs.read_text().replace("B-trees explain", "B-trees, written elsewhere, explain"))
        other.sync(elsewhere)
    saved = client.text(uri).replace("robust without", "robust, edited in the editor, without")
    client.change(uri, saved)
    client.save(uri)  # the server syncs the saved file: the store merges both edits, the open file is not written
    eventually(lambda: "edited in the editor" in client.command("cortex.diff", uri, "HEAD"), "the save is not synced")
    assert "written elsewhere" in client.command("cortex.diff", uri, "HEAD")
    assert (client.root / "notes" / "reading.org").read_text() == saved
    # the buffer receives the store's merge as an edit (`workspace/applyEdit`), which the editor can undo
    eventually(lambda: "written elsewhere" in client.text(uri), "the buffer did not receive the store's edit")
    assert "edited in the editor" in client.text(uri)
    client.close(uri)  # closed (the edit unsaved): the server's sync brings the file up to date
    path = client.root / "notes" / "reading.org"
    eventually(lambda: "written elsewhere" in path.read_text(), "the closed file did not receive the store's edit")
    assert "edited in the editor" in path.read_text() and "CONFLICT" not in path.read_text()
