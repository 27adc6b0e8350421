"""Definitions in Org files: marked Hy blocks, with problems located in the Org file itself."""

import pytest

from cortex.dsl import DslError, SourceLocation, extract_from_org, load_definitions

NOTES = """#+TITLE: Review bot
#+STARTUP: overview

* Memory
The bot remembers three months of reviews.

#+begin_src hy :cortex yes
(defmemory review-memory
  :retention "90d")
#+end_src

* Hooks
- GitHub sends pull request events:
  #+BEGIN_SRC hy :results silent :cortex yes
  (defwebhook github-events
    :path "/hooks/github"
    :provider github
    :secret "secret://env/GITHUB_WEBHOOK_SECRET")
  #+END_SRC

This block is ordinary Hy, not definitions:
#+begin_src hy
(print "not a definition" (undefined-function))
#+end_src
"""


def test_marked_blocks_load_with_locations_in_the_org_file():
    defs = extract_from_org(NOTES, "notes.org")
    assert [(m.name, m.location) for m in defs.memories] == [("review-memory", SourceLocation("notes.org", 8, 1))]
    assert [(w.name, w.location) for w in defs.webhooks] == [("github-events", SourceLocation("notes.org", 15, 3))]


def test_problems_are_reported_at_org_lines_and_columns():
    broken = NOTES.replace(":provider github", ":provider gitlab").replace(':retention "90d"', ':retention "90"')
    with pytest.raises(DslError) as caught:
        extract_from_org(broken, "notes.org")
    assert [(d.line, d.column, d.source_line) for d in caught.value.diagnostics] == [
        (9, 17, '  :retention "90")'),
        (17, 15, "    :provider gitlab"),
    ]
    assert str(caught.value).splitlines()[3:6] == [
        "notes.org:17:15: unknown provider gitlab; did you mean github? "
        "(one of github, stripe, slack, standard, custom, jwt)",
        "    :provider gitlab",
        "              ^",
    ]


def test_an_unclosed_form_in_one_block_does_not_swallow_the_next_block():
    broken = NOTES.replace('  :retention "90d")', '  :retention "90d"')
    with pytest.raises(DslError) as caught:
        extract_from_org(broken, "notes.org")
    assert [(d.line, d.column, d.message) for d in caught.value.diagnostics] == [
        (8, 1, "this '(' is never closed")]


def test_names_are_unique_across_blocks():
    text = NOTES + "\n#+begin_src hy :cortex yes\n(defmemory review-memory)\n#+end_src\n"
    with pytest.raises(DslError) as caught:
        extract_from_org(text, "notes.org")
    assert [(d.line, d.column, d.message) for d in caught.value.diagnostics] == [
        (27, 12, "memory review-memory is already defined at 8:1")]


def test_marked_blocks_that_cannot_be_read_are_reported():
    text = "* A\n#+begin_src elisp :cortex yes\n(setq x 1)\n#+end_src\n#+begin_src hy :cortex yes\n(defmemory m)\n"
    with pytest.raises(DslError) as caught:
        extract_from_org(text, "a.org")
    assert [(d.line, d.column, d.message) for d in caught.value.diagnostics] == [
        (2, 1, "cortex definitions are Hy: write #+begin_src hy :cortex yes"),
        (5, 1, "this block is never closed with #+end_src"),
    ]


def test_org_comma_escapes_are_removed_from_block_lines():
    text = """#+begin_src hy :cortex yes
(defwebhook org-hook :path "/hooks/org" :provider slack :secret "s"
  :filter {:json-path "$.text" :contains "
,* TODO"})
#+end_src
"""
    (hook,) = extract_from_org(text, "a.org").webhooks
    assert hook.filter.contains == "\n* TODO"


def test_load_definitions_reads_org_files_by_their_blocks(tmp_path):
    path = tmp_path / "notes.org"
    path.write_text(NOTES, encoding="utf-8")
    defs = load_definitions(path)
    assert [w.location for w in defs.webhooks] == [SourceLocation(str(path), 15, 3)]
    assert extract_from_org("* No blocks here\n", "empty.org").memories == ()
