"""Writing definitions back: rendered forms, and edits that keep every other byte."""

from datetime import timedelta

import pytest

from cortex.dsl import (
    DslError,
    Encoding,
    Fusion,
    HmacAlgorithm,
    JwtSettings,
    MemoryDefinition,
    MemorySearchConfig,
    Provider,
    SignatureScheme,
    StoreKind,
    WebhookDefinition,
    WebhookFilter,
    add_definition,
    parse_definitions,
    remove_definition,
    render_definition,
    replace_definition,
)
from cortex.errors import NotFound, UserError

SOURCE = """;; Team definitions -- keep this header
(defmemory agent-memory   ; odd spacing is kept
  :retention "90d")

;; GitHub first
(defwebhook github-events
  :path "/hooks/github"
  :provider github
  :secret "secret://env/GH")  ; trailing note

(defwebhook stripe-events :path "/hooks/stripe" :provider stripe :secret "secret://env/STRIPE")
;; the end
"""

SLACK = WebhookDefinition("slack-events", "/hooks/slack", Provider.SLACK, secret="secret://env/SLACK",
                          agent="triage", filter=WebhookFilter("$.event.type", equals="app_mention"))

DEFINITIONS = [
    MemoryDefinition("m"),
    MemoryDefinition("archive", StoreKind.EPHEMERAL, "org/archive", timedelta(days=365.25),
                     MemorySearchConfig(0.25, 0.75, Fusion.RRF)),
    SLACK,
    WebhookDefinition("ci", "/hooks/ci", Provider.CUSTOM, secret="s", filter=WebhookFilter("$.ok", equals=True),
                      signature=SignatureScheme("X-Sig", "sha1=", Encoding.BASE64, HmacAlgorithm.SHA1)),
    WebhookDefinition("sso", "/hooks/sso", Provider.JWT, agent="login_agent",
                      jwt=JwtSettings(("RS256", "ES256"), "https://id.example.com", "cortex", "-----KEY\n-----")),
    WebhookDefinition("count", "/hooks/count", Provider.STANDARD, secret='quote " and \\ backslash',
                      filter=WebhookFilter("$.tags", contains=3)),
]


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.name)
def test_a_rendered_definition_reads_back_as_itself(definition):
    defs = parse_definitions(render_definition(definition))
    assert (*defs.memories, *defs.webhooks) == (definition,)


def test_rendered_forms_put_one_keyword_on_each_line():
    assert render_definition(SLACK) == """(defwebhook slack-events
  :path "/hooks/slack"
  :provider slack
  :secret "secret://env/SLACK"
  :agent triage
  :filter {:json-path "$.event.type" :equals "app_mention"})"""
    assert render_definition(MemoryDefinition("m")) == (
        '(defmemory m\n  :store org\n  :path "org/agents"\n  :retention "90d"\n'
        "  :search {:vector-weight 0.5 :keyword-weight 0.5})")


def test_add_appends_after_everything_else_untouched():
    result = add_definition(SOURCE, SLACK, "defs.hy")
    assert result == SOURCE + "\n" + render_definition(SLACK) + "\n"
    assert [w.name for w in parse_definitions(result).webhooks] == ["github-events", "stripe-events", "slack-events"]


def test_add_completes_a_last_line_and_keeps_crlf_line_breaks():
    assert add_definition("(defmemory m)", SLACK).startswith("(defmemory m)\n\n(defwebhook slack-events\n")
    crlf = add_definition("(defmemory m)\r\n", MemoryDefinition("n"))
    assert crlf.startswith("(defmemory m)\r\n\r\n(defmemory n\r\n") and "\n" not in crlf.replace("\r\n", "")
    assert add_definition("", MemoryDefinition("n")) == render_definition(MemoryDefinition("n")) + "\n"


def test_add_refuses_a_taken_name_or_path_and_a_broken_file():
    with pytest.raises(DslError, match=r"defs.hy:14:13: webhook github-events is already defined at 6:1"):
        add_definition(SOURCE, WebhookDefinition("github-events", "/other", Provider.GITHUB, secret="s"), "defs.hy")
    with pytest.raises(DslError, match="path /hooks/stripe is already served by webhook stripe-events"):
        add_definition(SOURCE, WebhookDefinition("new", "/hooks/stripe", Provider.GITHUB, secret="s"), "defs.hy")
    with pytest.raises(DslError, match="defs.hy:1:1: this '\\(' is not closed before the next form at line 3"):
        add_definition("(defmemory m\n", MemoryDefinition("n"), "defs.hy")


def test_replace_rewrites_one_form_and_keeps_every_other_byte():
    new = WebhookDefinition("github-events", "/hooks/gh", Provider.GITHUB, secret="secret://env/GH", agent="reviewer")
    result = replace_definition(SOURCE, "github-events", new, "defs.hy")
    start = SOURCE.index("(defwebhook github-events")
    end = SOURCE.index("  ; trailing note")
    assert result == SOURCE[:start] + render_definition(new) + SOURCE[end:]
    assert parse_definitions(result).webhooks[0] == new


def test_replace_indents_continuation_lines_under_an_indented_form():
    source = ";; nested\n  (defmemory m)\n"
    result = replace_definition(source, "m", MemoryDefinition("m", retention=timedelta(days=5)))
    assert result == (';; nested\n  (defmemory m\n    :store org\n    :path "org/agents"\n    :retention "5d"\n'
                      "    :search {:vector-weight 0.5 :keyword-weight 0.5})\n")


def test_replace_refuses_a_missing_name_and_an_edit_that_breaks_the_file():
    with pytest.raises(NotFound, match="defs.hy: no definition named nobody"):
        replace_definition(SOURCE, "nobody", SLACK, "defs.hy")
    taken = WebhookDefinition("github-events", "/hooks/stripe", Provider.GITHUB, secret="s")
    with pytest.raises(DslError, match="path /hooks/stripe is already served by webhook github-events"):
        replace_definition(SOURCE, "github-events", taken, "defs.hy")


def test_remove_takes_the_form_and_one_framing_blank_line_and_keeps_comments():
    assert remove_definition(SOURCE, "stripe-events") == SOURCE.replace(
        '(defwebhook stripe-events :path "/hooks/stripe" :provider stripe :secret "secret://env/STRIPE")\n', "")
    # A comment inside the form goes with it; the header comment and the blank line under it stay.
    assert remove_definition(SOURCE, "agent-memory") == SOURCE.replace(
        '(defmemory agent-memory   ; odd spacing is kept\n  :retention "90d")\n', "")


def test_remove_keeps_a_comment_that_shares_the_forms_last_line():
    result = remove_definition(SOURCE, "github-events")
    start = SOURCE.index("(defwebhook github-events")
    end = SOURCE.index("  ; trailing note")
    assert result == SOURCE[:start] + SOURCE[end:]


def test_remove_drops_blank_lines_that_only_framed_the_removed_form():
    source = "(defmemory a)\n\n(defmemory b)\n\n(defmemory c)\n"
    assert remove_definition(source, "b") == "(defmemory a)\n\n(defmemory c)\n"
    assert remove_definition(source, "a") == "(defmemory b)\n\n(defmemory c)\n"
    assert remove_definition(source, "c") == "(defmemory a)\n\n(defmemory b)\n"
    assert remove_definition("; header\n(defmemory a)\n\n(defmemory b)\n", "a") == "; header\n\n(defmemory b)\n"


def test_remove_asks_which_kind_when_a_memory_and_a_webhook_share_a_name():
    source = '(defmemory x)\n\n(defwebhook x :path "/x" :provider slack :secret "s")\n'
    with pytest.raises(UserError, match="both a memory and a webhook are named x"):
        remove_definition(source, "x")
    assert remove_definition(source, "x", kind=WebhookDefinition) == "(defmemory x)\n"
    assert remove_definition(source, "x", kind=MemoryDefinition) == source.removeprefix("(defmemory x)\n\n")
