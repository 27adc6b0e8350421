"""The REPL core without a terminal: reading, evaluating, forms, printing, errors, watch, completion."""

import inspect
import io
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from pygments import lex
from pygments.token import Comment, Generic, Keyword, Name, Number, String

from cortex.repl import eval_source
from cortex.repl.completion import SessionCompleter
from cortex.repl.core import Session, is_complete
from cortex.repl.orglexer import OrgLexer
from cortex.repl.registry import FORMS, form

from tests.conftest import EXAMPLES

REPO = Path(__file__).resolve().parents[2]
PROJECTS = "notes/projects.org"


class Transcript:
    """A session whose values and errors are captured as text."""

    def __init__(self, store, org, out=None):
        self.out = out or io.StringIO()
        self.err = io.StringIO()
        self.session = Session(store, org, out=self.out, err=self.err)
        self.notices = []
        self.session.notify = self.notices.append

    def __call__(self, text: str) -> str:
        """Evaluate an entry and return what it printed (values and errors)."""
        for stream in (self.out, self.err):
            stream.seek(0)
            stream.truncate()
        self.ok = self.session.execute(text)
        return self.out.getvalue() + self.err.getvalue()


@pytest.fixture
def repl(tmp_path, org):
    transcript = Transcript(tmp_path / "store", org)
    yield transcript
    transcript.session.close()


# --- reading ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, complete", [
    ("(+ 1 1)", True),
    ("(+ 1", False),
    ("(setv x 1) (+ x", False),
    ('(show "task-', False),
    ('"a \\"quoted', False),
    ("[1 2\n 3", False),
    ("(defn f [x]\n  (+ x 1))", True),
    ("", True),
    ("; only a comment", True),
    ("(a b) ; a ( in a comment", True),
    ("(foo))", True),  # a reader error is complete: evaluating it shows the error
])
def test_is_complete(text, complete):
    assert is_complete(text) is complete


# --- evaluating ---------------------------------------------------------------------------------

def test_definitions_persist_between_entries(repl):
    assert repl("(setv x 41)") == ""
    repl("(defn bump [n] (+ n x))")
    assert repl("(bump 1)") == "42\n"
    assert repl("(* *1 2)") == "84\n"  # *1 is the last result
    assert "bump" in repl.session.names()


def test_evaluate_returns_values_in_order(repl):
    assert repl.session.evaluate("(+ 1 1) (setv y 3) [y \"a\"]") == [2, None, [3, "a"]]


def test_plain_values_print_as_hy(repl):
    assert repl('[1 "two" :three {"k" None}]') == '[1 "two" :three {"k" None}]\n'


def test_reader_error_names_line_and_column_and_the_session_goes_on(repl):
    shown = repl("(+ 1 1)\n(foo))")
    assert not repl.ok
    assert shown.startswith("<input>:2:6: Ran into a ')' where it wasn't expected.")
    assert "  (foo))\n       ^" in shown
    assert repl("(+ 2 2)") == "4\n"


def test_compile_error_names_the_line(repl):
    shown = repl("(setv a 1)\n  (defn)")
    assert shown.startswith("<input>:2:") and "defn" in shown


def test_runtime_error_names_the_line_and_the_hy_name(repl):
    shown = repl("(setv a 1)\n(+ a (undefined-thing 2))")
    assert shown == "<input>:2:7: NameError: 'undefined-thing' is not defined\n"
    shown = repl("(/ 1\n   0)")
    assert shown.startswith("<input>:1:") and "ZeroDivisionError: division by zero" in shown


def test_a_mistyped_name_gets_the_closest_form_or_definition(repl):
    assert repl('(fnd :todo "TODO")') == "<input>:1:2: NameError: 'fnd' is not defined; did you mean find?\n"
    repl("(setv deploys 3)")
    assert repl("(+ deploy 1)").endswith("'deploy' is not defined; did you mean deploys?\n")


@pytest.mark.parametrize("entry, said", [
    ('(find "TODO")', "find takes keywords only, 1 argument given before them; usage: (find [:todo None]"),
    ("(lookup)", "lookup needs org-id; usage: (lookup org-id [:as-of None])"),
    ('(lookup "a" "b")', "lookup takes 1 argument before its keywords (org-id), 2 given; usage: (lookup org-id"),
    ('(lookup "a" :org-id "b")', "lookup got org-id twice;"),
    ('(find :tags "ops")', "find has no :tags (did you mean :tag?); usage: (find"),
    ("(gc :keep 3)", "gc has no :keep (did you mean :keep-last?);"),
])
def test_a_wrong_call_says_what_is_wrong_in_hy_words_with_the_forms_usage(repl, entry, said):
    shown = repl(entry)
    assert not repl.ok and shown.startswith(f"error: {said}") and shown.count("\n") == 1
    assert "_" not in shown.partition("usage:")[2] and "positional" not in shown
    assert not repl.session.is_open  # refused before it ran


def test_a_form_or_function_named_without_calling_it_shows_how_to_call_it(repl):
    assert repl("stats") == ("(stats)\nWhere the store and the Org folder are; files, headlines, :ID:s (and the "
                             "duplicated ones), objects, refs, snapshots and the size on disk.\n")
    assert repl("lookup").startswith("(lookup org-id [:as-of None])\nThe headline with this :ID:")
    repl('(defn bump [n [by 1]] "Add to a number." (+ n by))')
    assert repl("bump") == "(bump n [by 1])\nAdd to a number.\n"
    assert "<function" not in repl("first") + repl("defmemory")


def test_cortex_errors_print_their_message(repl):
    assert repl('(lookup "no-such-id")') == "error: no headline with :ID: no-such-id\n"
    assert repl('(rollback "yesterday")').startswith("error: 'yesterday' is not a snapshot")


def test_eval_source_exit_status(tmp_path, org):
    out, err = io.StringIO(), io.StringIO()
    assert eval_source("(+ 1 1) (len (find :todo \"TODO\"))", tmp_path / "s", org, out=out, err=err) == 0
    assert out.getvalue() == "2\n2\n" and err.getvalue() == ""
    out = io.StringIO()
    assert eval_source('(print "before") (lookup "nope") (print "after")', tmp_path / "s", org,
                       out=out, err=err) == 1
    assert "error: no headline with :ID: nope" in err.getvalue()
    assert "after" not in out.getvalue()


def test_eval_source_without_the_store_never_opens_it(tmp_path, org):
    store = tmp_path / "untouched"
    assert eval_source("(+ 1 1)", store, org, out=io.StringIO()) == 0
    assert not store.exists()


def test_forms_piped_on_stdin_run_the_same_code(tmp_path, org):
    result = subprocess.run(
        [sys.executable, "-m", "cortex.repl", "--store", str(tmp_path / "s"), str(org)],
        input='(setv s (find :tag "ops"))\n(. (first s) id)\n(lookup "missing")\n',
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == '"proj-deploy"\n'
    assert "<stdin>" not in result.stderr and "no headline with :ID: missing" in result.stderr


# --- the forms ----------------------------------------------------------------------------------

def test_find_results_are_values_to_keep_working_with(repl):
    repl('(setv s (find :todo "TODO"))')
    assert repl("(len s)") == "2\n"
    shown = repl("(show (first s))")
    assert shown.startswith("** TODO [#A] Rotate the webhook secrets")
    assert ":ID:       task-rotate-secrets" in shown
    assert repl('(. (first (find :prop "OWNER=dana")) id)') == '"proj-memory-store"\n'
    titles = repl.session.evaluate('(lfor n (find :text "DEPLOY") n.title)')[0]
    assert "Deploy pipeline" in titles and all("deploy" in t.lower() for t in titles)


def test_list_of_nodes_prints_as_a_table(repl):
    shown = repl('(find :todo "TODO")')
    header, first, second = shown.splitlines()[:3]
    assert header.split() == ["#", "file:line", "outline", "todo", "tags", "id"]  # as `cortex find` shows them
    assert first.split()[:2] == ["0", "notes/projects.org:25"] and "task-rotate-secrets" in first
    assert second.split()[:2] == ["1", "notes/reading.org:21"] and " TODO " in second


def test_a_node_prints_as_its_org_text_with_its_place(repl):
    shown = repl('(lookup "task-parse-org")')
    assert shown.splitlines()[0] == "notes/projects.org:11  Memory store"
    assert shown.splitlines()[1].startswith("** DONE Parse Org files into headline objects")
    assert "CLOSED: [2026-11-02 Mon 16:20]" in shown


def test_ls_lists_files_then_an_outline(repl):
    rows = [line.split() for line in repl("(ls)").splitlines()]
    assert rows[0] == ["file", "headlines", "ids"]
    assert ["notes/projects.org", "8", "6"] in rows
    outline = repl(f'(ls "{PROJECTS}")').splitlines()
    assert outline[0].split()[:4] == ["notes/projects.org:4", "*", "Memory", "store"]
    assert outline[3].split()[:4] == ["notes/projects.org:25", "**", "TODO", "[#A]"]


def test_stats_prints_as_key_value_table(repl):
    rows = dict(line.rsplit(None, 1) for line in repl("(stats)").splitlines())
    assert rows["files"] == "5" and rows["snapshots"] == "0"
    assert repl('(get (stats) "headlines")') == rows["headlines"] + "\n"


def test_snapshot_edit_diff_rollback_history_log(repl, org):
    repl('(setv before (snapshot "before"))')
    assert "HEAD" in repl("(snapshots)")
    file = org / PROJECTS
    original = file.read_bytes()
    file.write_text(file.read_text().replace("Rotate the webhook secrets", "Rotate every secret"))
    assert repl('(ingest "notes/projects.org")').startswith(f"ingested 1 Org file from {org} (1 parsed, 0 unchanged)")
    changes = repl("(diff)").splitlines()
    assert changes[0].split() == ["change", "file", "headline", "id", "detail"]
    assert changes[1].split()[:2] == ["changed", PROJECTS] and "task-rotate-secrets" in changes[1]

    refused = repl("(rollback before)")
    assert not repl.ok and "notes/projects.org" in refused and ":keep True" in refused

    shown = repl("(rollback before :keep True)")
    assert repl.ok and file.read_bytes() == original
    assert "your edits were kept in snapshot" in shown and f"wrote 1 file: {PROJECTS}" in shown
    versions = repl('(history "task-rotate-secrets")').splitlines()
    assert [v.split()[4] for v in versions[1:]] == ["title", "added"]  # newest first, as (log)
    log = repl("(log)").splitlines()
    assert log[0].split() == ["#", "snapshot", "time", "message", "changes"]
    assert "before rollback to" in log[1] and "1 changed" in log[1]

    assert repl('(rollback "HEAD@{1}")') and file.read_text().count("Rotate every secret") == 1


def test_gc_reports_counts_and_rejects_a_bad_duration(repl):
    repl('(snapshot "a")')
    rows = dict(line.rsplit(None, 1) for line in repl("(gc :keep-last 1 :compact True)").splitlines())
    assert rows == {"snapshots dropped": "0", "objects deleted": "0"}
    assert "max-age 'soon'" in repl('(gc :max-age "soon")') and not repl.ok


def test_help_lists_every_form_and_explains_one(repl):
    listed = repl("(help)")
    for name in ("ingest", "show", "lookup", "find", "ls", "snapshot", "snapshots", "rollback", "diff",
                 "history", "log", "stats", "gc", "watch", "help"):
        assert f"\n{name} " in "\n" + listed, name
    one = repl("(help rollback)")
    assert one.startswith("(rollback ref [:keep False] [:force False])\n")
    assert ":keep True" in one
    assert repl('(help "find")').startswith("(find [:todo None] [:tag None]")
    assert repl('(help "nothing-here")') == "error: no form named nothing-here; (help) lists them\n"
    assert repl('(help "memory-serch")') == ("error: no form named memory-serch; did you mean memory-search? "
                                            "(help) lists them\n")


def test_help_rows_give_each_form_its_first_paragraph_whole(repl):
    listed = " ".join(repl("(help)").split())
    for name, entry in FORMS.items():
        first = " ".join(inspect.cleandoc(entry.doc).split("\n\n")[0].split())
        assert first in listed, (name, first)


def test_one_definition_adds_a_form(tmp_path, org):
    @form
    def count_todos(session, keyword="TODO"):
        """How many headlines carry a TODO keyword."""
        return len(session.cortex.find(todo=keyword))

    try:
        repl = Transcript(tmp_path / "store", org)
        assert repl("(count-todos)") == "2\n"
        assert "count-todos" in repl("(help)")
        assert repl("(help count-todos)").startswith('(count-todos [keyword "TODO"])')
        repl.session.close()
    finally:
        del FORMS["count-todos"]


# --- printing Org ---------------------------------------------------------------------------------

def tokens(text, **options):
    return [(token, value) for token, value in lex(text, OrgLexer(**options)) if value.strip()]


def test_org_lexer_marks_what_a_reader_looks_for():
    text = (EXAMPLES / PROJECTS).read_text()
    found = tokens(text, todo_keywords=["TODO", "NEXT", "WAITING"], done_keywords=["DONE", "CANCELLED"])
    assert (Comment.Preproc, "#+TITLE:") in found
    assert (Generic.Heading, "*") in found and (Generic.Heading, "Memory store") in found
    assert (Generic.Error, "NEXT") in found and (Generic.Error, "WAITING") in found
    assert (Generic.Inserted, "DONE") in found
    assert (Keyword.Type, "[#A]") in found
    assert any(t is Name.Tag and v.strip() == ":webhooks:security:" for t, v in found)
    assert (Comment, ":PROPERTIES:") in found and (Name.Attribute, ":ID:") in found
    assert (String, "proj-memory-store") in found
    assert (Keyword, "DEADLINE:") in found and (Number, "<2026-11-30 Mon>") in found
    assert (String, "=secret://env/GITHUB_WEBHOOK_SECRET=") in found


def test_org_lexer_blocks_links_and_words_that_only_look_like_keywords():
    text = ("* TODOs to read\n#+begin_src python\n* not a headline in a block\n#+end_src\n"
            "See [[https://orgmode.org][Org]] and [2026-11-20 Fri].\n")
    found = tokens(text)
    assert (Generic.Heading, "TODOs to read") in found
    assert (Comment.Preproc, "#+begin_src") in found and (Comment.Preproc, "#+end_src") in found
    assert (Generic.Heading, "*") in [f for f in found][:1]
    assert not any(v.startswith("not a headline") and t is Generic.Heading for t, v in found)
    assert (Name.Namespace, "[[https://orgmode.org][Org]]") in found
    assert (Number, "[2026-11-20 Fri]") in found


def test_org_lexer_keeps_every_character():
    for path in sorted(EXAMPLES.rglob("*.org")):
        text = path.read_text()
        assert "".join(v for _, v in lex(text, OrgLexer(stripnl=False, ensurenl=False))) == text


def test_highlighted_org_in_a_terminal(tmp_path, org):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    session = Session(tmp_path / "store", org, out=out)
    try:
        session.execute('(lookup "task-rotate-secrets")')
    finally:
        session.close()
    shown = out.getvalue()
    assert "\x1b[" in shown and "TODO\x1b[" in shown  # TODO carries its own colour
    assert "Rotate the webhook secrets" in shown


# --- watch ----------------------------------------------------------------------------------------

def wait_for(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_watch_reingests_an_edited_file_and_says_so(repl, org):
    assert repl("(watch :interval 0.05)").startswith("watching ")
    file = org / PROJECTS
    file.write_text(file.read_text().replace("Staging database migration", "Production migration"))
    assert wait_for(lambda: repl.notices), "no notice within 10 s"
    assert repl.notices == [f"watch: re-ingested {PROJECTS}"]
    assert repl('(. (first (find :text "Production")) id)') == '"task-staging-migration"\n'
    assert repl("(watch False)") == "stopped watching\n"
    file.write_text(file.read_text().replace("Production", "Staging"))
    time.sleep(0.2)
    assert len(repl.notices) == 1


# --- completion -----------------------------------------------------------------------------------

def completions(session, text):
    found = SessionCompleter(session).get_completions(Document(text), CompleteEvent(completion_requested=True))
    return {c.text: c.display_meta_text for c in found}


def test_completion_of_ids_files_agents_and_snapshot_refs(repl):
    session = repl.session
    session.open()
    found = completions(session, '(show "task-')
    assert found["task-parse-org"] == "Parse Org files into headline objects"
    assert "task-rotate-secrets" in found and "proj-deploy" not in found
    assert completions(session, '(show "notes/')["notes/projects.org"] == "file"
    (session.cortex.root / "notes" / "roam.org").write_text(":PROPERTIES:\n:ID: roam-note-1\n:END:\n* x\n")
    repl("(ingest)")
    assert completions(session, '(show "roam-')["roam-note-1"] == "file notes/roam.org"
    assert completions(session, '(turns "assis')["assistant"] == "agent"
    assert completions(session, '(rollback "HE') == {}
    repl('(snapshot "one")')
    repl('(snapshot "two")')
    refs = completions(session, '(rollback "')
    assert {"HEAD", "HEAD~1"} <= refs.keys()
    newest = session.cortex.snapshots()[0]
    assert refs[newest.oid.hex()[:12]] == "two"
    # each argument is offered what it takes: refs, agents, webhooks, :ID:s; an unknown one everything
    assert set(refs.values()) <= {"snapshot", "one", "two"}
    assert completions(session, '(diff "HEAD~1" "')["HEAD"] == "snapshot"
    assert set(completions(session, '(memory-inspect "').values()) == {"agent"}
    assert set(completions(session, '(memory-search "assistant" "t').values()) == set()
    assert completions(session, '(webhook-test "')["github-events"].startswith("webhook ")
    assert set(completions(session, '(webhook-logs :tail 5 :name "').values()) <= {"webhook /hooks/github",
                                                                                   "webhook /hooks/stripe"}
    assert "task-parse-org" in completions(session, '(show (first [1 "x"]) "task-')
    assert "HEAD" in completions(session, '(list "')


def test_completion_of_forms_and_defined_names(repl):
    repl("(setv deploy-notes 1)")
    found = completions(repl.session, "(fi")
    assert found["find"] == "form" and found["first"] == "helper"
    assert completions(repl.session, "(+ 1 deploy")["deploy-notes"] == "defined"
    assert completions(repl.session, "(set")["setv"] == "hy"
    assert completions(repl.session, "") == {}


def test_with_no_org_folder_the_session_says_so_once_and_ingest_makes_one_the_stores(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./org here
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.org").write_text("* Alpha\nhello\n")
    repl = Transcript(tmp_path / "store", None)
    try:
        assert re.search(r"\nfiles +0 ", repl("(stats)")) and repl.ok
        assert len(repl.notices) == 1 and f"no Org folder at {tmp_path / 'org'}" in repl.notices[0]
        assert repl.notices[0].endswith("or start the REPL as `cortex repl DIR`")  # a command that exists
        assert "ingested 1 Org file" in repl(f'(ingest "{notes}")') and repl.ok
        assert "a.org" in repl("(ls)") and not (tmp_path / "org").exists()
    finally:
        repl.session.close()


def test_a_form_that_finds_nothing_says_no_results_as_the_cli_does(repl):
    assert repl('(find :text "no such words anywhere")') == "no results\n"
    assert repl('(webhook-logs :name "nobody")') == "no results\n"
