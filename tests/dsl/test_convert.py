"""Brace-block files of Symbiont-style DSLs converted to defmemory/defwebhook forms."""

from datetime import timedelta

import pytest

import cortex.api as cx
from cortex.errors import UserError
from cortex.dsl import (
    DslError,
    JwtSettings,
    MemoryDefinition,
    MemorySearchConfig,
    Provider,
    StoreKind,
    WebhookDefinition,
    WebhookFilter,
    convert_brace_syntax,
    parse_definitions,
)

BRACES = """// Agent memory for the review bot
memory "agent-memory" {
    store     markdown
    path      "data/agents"      // root directory for memory files
    retention "90d"
    search {
        vector_weight  0.6
        keyword_weight 0.4
    }
}

agent code_review_agent(body: JSON) -> Maybe<Review> {
    capabilities = ["review"]
    with memory = "ephemeral" { let key = vault://reviews/key; if body.x { return None; } }
}

/* Verified GitHub deliveries,
   opened pull requests only */
webhook github_events {
    path     "/hooks/github"
    provider github
    secret   $GITHUB_WEBHOOK_SECRET
    agent    code_review_agent
    filter {
        json_path "$.action"
        equals    "opened"
    }
}

webhook sso_events { path: "/hooks/sso", provider: jwt, public_key: "vault://keys/sso", algorithms: ["ES256"] }
"""

CONVERTED = """; Agent memory for the review bot
; store markdown became org: cortex keeps memory in Org files
; root directory for memory files
(defmemory agent-memory
  :store org
  :path "data/agents"
  :retention "90d"
  :search {:vector-weight 0.6 :keyword-weight 0.4})

; skipped agent block (line 12): only memory and webhook blocks convert

; Verified GitHub deliveries,
; opened pull requests only
(defwebhook github-events
  :path "/hooks/github"
  :provider github
  :secret "secret://env/GITHUB_WEBHOOK_SECRET"
  :agent code-review-agent
  :filter {:json-path "$.action" :equals "opened"})

(defwebhook sso-events
  :path "/hooks/sso"
  :provider jwt
  :public-key "vault://keys/sso"
  :algorithms ["ES256"])
"""


def test_memory_and_webhook_blocks_become_forms_with_their_comments():
    assert convert_brace_syntax(BRACES, "agent.symbi") == CONVERTED


def test_the_converted_file_defines_what_the_blocks_said():
    defs = parse_definitions(convert_brace_syntax(BRACES))
    assert defs.memories == (MemoryDefinition("agent-memory", StoreKind.ORG, "data/agents", timedelta(days=90),
                                              MemorySearchConfig(0.6, 0.4)),)
    assert defs.webhooks == (
        WebhookDefinition("github-events", "/hooks/github", Provider.GITHUB,
                          secret="secret://env/GITHUB_WEBHOOK_SECRET", agent="code-review-agent",
                          filter=WebhookFilter("$.action", equals="opened")),
        WebhookDefinition("sso-events", "/hooks/sso", Provider.JWT,
                          jwt=JwtSettings(("ES256",), public_key="vault://keys/sso")),
    )


def test_unquoted_durations_and_names_convert():
    text = convert_brace_syntax("memory knowledge_store {\n    store markdown\n    retention 1h30m\n}\n")
    assert parse_definitions(text).memories == (MemoryDefinition("knowledge-store", retention=timedelta(minutes=90)),)
    assert convert_brace_syntax("") == ""


BROKEN = """memory agent_memory {
    store     markdown
    retension 90d
    search { vector_weight 0.6 keyword_weight 0.3 }
}

memroy notes { store markdown }

webhook { path "/hooks/a" }

webhook github_events {
    path     "/hooks/github"
    provider gihub
    secret   "s"

webhook stripe_events {
    path "/hooks/stripe" provider stripe secret "s" filter ["charge.succeeded"]
    retention 90x
}
"""


def test_every_problem_is_reported_at_its_brace_file_position_in_one_pass():
    with pytest.raises(DslError) as caught:
        convert_brace_syntax(BROKEN, "agent.symbi")
    assert [(d.line, d.column, d.message) for d in caught.value.diagnostics] == [
        (3, 5, "unknown keyword retension in memory agent-memory; did you mean retention?"),
        (4, 12, "search: vector_weight 0.6 and keyword_weight 0.3 add up to 0.9; they must add up to 1"),
        (7, 1, "unknown block memroy; did you mean memory?"),
        (9, 9, "webhook needs a name: webhook NAME { ... }"),
        (11, 23, "this '{' is not closed before the next block at line 16"),
        (17, 60, "filter takes a map like {json_path ... equals ...}, found list [\"charge.succeeded\"]"),
        (18, 5, "unknown keyword retention in webhook stripe-events"),
    ]
    assert str(caught.value).splitlines()[:3] == [
        "agent.symbi:3:5: unknown keyword retension in memory agent-memory; did you mean retention?",
        "    retension 90d",
        "    ^",
    ]


@pytest.mark.parametrize("text, line, column, message", [
    ('memory m {\n    store markdown\n', 1, 10, "this '{' is never closed"),
    ('memory m {\n    retention 90x\n}', 2, 15, "bad duration '90x': unknown unit 'x' "
                                           "(units: ns us ms s m h d w M y, or their names like days, months)"),
    ('webhook w {\n    path "/w\n}\n', 2, 10, "this string is never closed"),
    ('webhook w { path "/w" provider slack secret "s" agent }', 1, 55, "agent needs a value, found '}'"),
    ('webhook w { path "/w" provider slack secret "s" 42 }', 1, 49, "expected a setting name such as path, found '42'"),
    ('/* never closed\nmemory m { }', 1, 1, "this comment is never closed"),
])
def test_malformed_blocks_are_located(text, line, column, message):
    with pytest.raises(DslError) as caught:
        convert_brace_syntax(text, "a.dsl")
    assert [(d.line, d.column, d.message) for d in caught.value.diagnostics] == [(line, column, message)]


def test_convert_brace_file_returns_the_forms_and_writes_them_where_asked(tmp_path):
    source = tmp_path / "agent.symbi"
    source.write_text(BRACES)
    assert cx.convert_brace_file(source) == CONVERTED and not (tmp_path / "out").exists()
    target = tmp_path / "out" / "definitions.hy"
    assert cx.convert_brace_file(source, target) == CONVERTED
    assert target.read_text() == CONVERTED
    assert [w.name for w in cx.load_definitions(target).webhooks] == ["github-events", "sso-events"]


def test_convert_brace_file_refuses_a_file_that_is_not_utf8(tmp_path):
    source = tmp_path / "old.cortex"
    source.write_bytes(b'memory "m" { retention = "30d" }\n\xff\n')
    with pytest.raises(UserError, match=r"old.cortex:2: not UTF-8 text"):
        cx.convert_brace_file(source)
