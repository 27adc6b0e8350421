"""The data-only loader: what definitions files mean, and every problem reported where it is."""

from datetime import timedelta
from pathlib import Path

import pytest

from cortex.dsl import (
    Definitions,
    DslError,
    Encoding,
    Fusion,
    HmacAlgorithm,
    JwtSettings,
    MemoryDefinition,
    MemorySearchConfig,
    Provider,
    SignatureScheme,
    SourceLocation,
    StoreKind,
    WebhookDefinition,
    WebhookFilter,
    definition_rows,
    extract_memory_definitions,
    extract_webhook_definitions,
    load_definitions,
    parse_definitions,
)
from cortex.errors import NotFound, UserError

EXAMPLE = Path(__file__).resolve().parents[2] / "org" / "definitions.hy"


def problems(source: str) -> list[tuple[int, int, str]]:
    with pytest.raises(DslError) as caught:
        parse_definitions(source, "defs.hy")
    return [(d.line, d.column, d.message) for d in caught.value.diagnostics]


def only_problem(source: str) -> tuple[int, int, str]:
    found = problems(source)
    assert len(found) == 1, found
    return found[0]


def test_the_example_file_defines_one_memory_and_two_webhooks():
    defs = load_definitions(EXAMPLE)
    assert defs.memories == (
        MemoryDefinition("agent-memory", StoreKind.ORG, "org/agents", timedelta(days=90),
                         MemorySearchConfig(0.5, 0.5, Fusion.WEIGHTED)),
    )
    github, stripe = defs.webhooks
    assert github == WebhookDefinition(
        "github-events", "/hooks/github", Provider.GITHUB, secret="secret://env/GITHUB_WEBHOOK_SECRET",
        agent="assistant", filter=WebhookFilter("$.action", equals="opened"))
    assert stripe.filter == WebhookFilter("$.type", contains="payment_intent.")
    assert [d.location for d in (*defs.memories, *defs.webhooks)] == [
        SourceLocation(str(EXAMPLE), 8, 1), SourceLocation(str(EXAMPLE), 15, 1), SourceLocation(str(EXAMPLE), 23, 1)]


def test_unset_fields_take_their_defaults():
    defs = parse_definitions('(defmemory m)\n(defwebhook w :path "/w" :provider slack :secret "s")')
    assert defs.memories[0] == MemoryDefinition("m")
    assert defs.memories[0].retention == timedelta(days=90)
    assert defs.memories[0].search == MemorySearchConfig(0.5, 0.5, Fusion.WEIGHTED)
    assert defs.webhooks[0] == WebhookDefinition("w", "/w", Provider.SLACK, secret="s")


def test_one_search_weight_implies_the_other_and_fusion_can_be_rrf():
    (memory,) = extract_memory_definitions('(defmemory m :search {:keyword-weight 0.4 :fusion rrf})')
    assert memory.search == MemorySearchConfig(0.6, 0.4, Fusion.RRF)


def test_retention_takes_the_humantime_grammar_quoted_or_not():
    memories = extract_memory_definitions('(defmemory a :retention "1h 30m")\n(defmemory b :retention 6months)')
    assert [m.retention for m in memories] == [timedelta(minutes=90), timedelta(seconds=6 * 2_630_016)]


def test_custom_and_jwt_providers_take_their_own_options():
    custom, jwt_key, jwt_secret = extract_webhook_definitions("""
(defwebhook ci :path "/hooks/ci" :provider custom :secret "s" :header "X-Signature" :prefix "sha512="
  :encoding base64 :algorithm sha512)
(defwebhook sso :path "/hooks/sso" :provider jwt :public-key "-----BEGIN PUBLIC KEY-----"
  :issuer "https://id.example.com" :audience "cortex" :algorithms ["RS256" "ES256"])
(defwebhook internal :path "/hooks/internal" :provider jwt :secret "secret://env/JWT")
""")
    assert custom.signature == SignatureScheme("X-Signature", "sha512=", Encoding.BASE64, HmacAlgorithm.SHA512)
    assert jwt_key.jwt == JwtSettings(("RS256", "ES256"), "https://id.example.com", "cortex",
                                      "-----BEGIN PUBLIC KEY-----")
    assert jwt_secret.jwt == JwtSettings(("HS256",)) and jwt_secret.secret == "secret://env/JWT"
    assert extract_webhook_definitions('(defwebhook c :path "/c" :provider custom :secret "s" :header "X-S")'
                                       )[0].signature == SignatureScheme("X-S", "", Encoding.HEX)


def test_extract_functions_split_by_kind_and_refuse_a_file_with_any_problem():
    source = '(defmemory m)\n(defwebhook w :path "/w" :provider github :secret "s")'
    assert [m.name for m in extract_memory_definitions(source)] == ["m"]
    assert [w.name for w in extract_webhook_definitions(source)] == ["w"]
    with pytest.raises(DslError):
        extract_memory_definitions('(defmemory m)\n(defwebhook w :provider github)')


def test_a_file_may_require_the_macros_so_hy_can_run_it_too():
    defs = parse_definitions("(require cortex.dsl.macros [defmemory])\n(defmemory m)")
    assert [m.name for m in defs.memories] == ["m"]


ERRORS = [
    # unknown form and keyword, with a did-you-mean
    ("(defmemroy m)", 1, 2, "unknown form defmemroy; did you mean defmemory?"),
    ("(defmemory m\n  :retension \"90d\")", 2, 3,
     "unknown keyword :retension in defmemory m; did you mean :retention?"),
    ("(defmemory m :search {:vector-wieght 0.7})", 1, 23,
     "unknown keyword :vector-wieght in :search; did you mean :vector-weight?"),
    ('"loose"', 1, 1, "expected a (defmemory NAME ...) or (defwebhook NAME ...) form, found string \"loose\""),
    # missing required fields and names
    ('(defwebhook w\n  :provider github :secret "s")', 1, 1, "defwebhook w needs :path"),
    ('(defwebhook w :path "/w" :provider stripe)', 1, 1,
     'defwebhook w needs :secret to verify stripe signatures, like "secret://env/W_SECRET"'),
    ('(defwebhook w :path "/w" :provider custom :secret "s")', 1, 1,
     "defwebhook w needs :header, the request header that carries the signature"),
    ('(defwebhook w :path "/w" :provider jwt)', 1, 1, "defwebhook w needs :public-key (or :secret for HS256 tokens)"),
    ("(defmemory :store org)", 1, 12, "defmemory needs a name first, like (defmemory NAME :path ...)"),
    ('(defmemory "my memory")', 1, 12, 'defmemory takes a name like code-review-agent, found string "my memory"'),
    # wrong types and values
    ("(defmemory m :path 42)", 1, 20, ":path takes a string, found number 42"),
    ("(defmemory m :store sqlite)", 1, 21, "unknown store sqlite (one of org, ephemeral)"),
    ('(defwebhook w :path "hooks" :provider slack :secret "s")', 1, 21,
     ':path must be a URL path starting with / and without spaces, like "/hooks/github"'),
    ('(defwebhook w :path "/w" :provider slack :secret "s" :agent "two words")', 1, 61,
     ':agent takes a name like code-review-agent, found string "two words"'),
    ("(defmemory m :search [0.7 0.3])", 1, 22,
     "'search' takes a map like {:vector-weight ... :keyword-weight ...}, found list [0.7 0.3]"),
    # durations: the caret goes to the bad part inside the string
    ('(defmemory m :retention "90 dayz")', 1, 29,
     "bad duration '90 dayz': unknown unit 'dayz'; did you mean 'day'? "
     "(units: ns us ms s m h d w M y, or their names like days, months)"),
    ('(defmemory m :retention "1.5h")', 1, 27, "bad duration '1.5h': only whole numbers: write 1h 30m, not 1.5h"),
    ('(defmemory m :retention "0d")', 1, 25, ":retention must be longer than zero"),
    # weights
    ("(defmemory m :search {:vector-weight 1.5 :keyword-weight 0.5})", 1, 38,
     ":vector-weight must be between 0 and 1, found 1.5"),
    ("(defmemory m\n  :search {:vector-weight 0.6 :keyword-weight 0.3})", 2, 11,
     ":search: :vector-weight 0.6 and :keyword-weight 0.3 add up to 0.9; they must add up to 1"),
    # providers and their options
    ('(defwebhook w :path "/w" :provider gihub :secret "s")', 1, 36,
     "unknown provider gihub; did you mean github? (one of github, stripe, slack, standard, custom, jwt)"),
    ('(defwebhook w :path "/w" :provider github :secret "s" :header "X-Sig")', 1, 55,
     ":header only applies to :provider custom"),
    ('(defwebhook w :path "/w" :provider jwt :public-key "k" :algorithms ["HS256"])', 1, 68,
     "HS256 verifies with :secret, but this webhook gives :public-key"),
    ('(defwebhook w :path "/w" :provider jwt :secret "k" :algorithms [RS257])', 1, 65,
     "unknown JWT algorithm RS257; did you mean RS256? (one of HS256, HS384, HS512, ES256, ES256K, ES384, "
     "ES512, ES521, EdDSA, PS256, PS384, PS512, RS256, RS384, RS512)"),
    ('(defwebhook w :path "/w" :provider custom :secret "s" :header "X-S" :algorithm md5)', 1, 80,
     "unknown HMAC algorithm md5 (one of sha1, sha256, sha384, sha512)"),
    ('(defwebhook w :path "/w" :provider jwt :secret "k" :public-key "p")', 1, 52,
     "give :public-key or :secret, not both"),
    # filters
    ('(defwebhook w :path "/w" :provider slack :secret "s" :filter {:json-path "$.event[" :equals "x"})', 1, 83,
     "bad JSON path '$.event[': unbalanced brackets"),
    ('(defwebhook w :path "/w" :provider slack :secret "s" :filter {:json-path "$.a" :equals 1 :contains 2})',
     1, 90, ":filter takes :equals or :contains, not both"),
    ('(defwebhook w :path "/w" :provider slack :secret "s" :filter {:json-path "$.a"})', 1, 62,
     ":filter needs :equals or :contains"),
    # pairs
    ("(defmemory m :store org :store org)", 1, 25, ":store is given twice (first at 1:14)"),
    ("(defmemory m :path)", 1, 14, ":path has no value"),
    ("(defmemory m org)", 1, 14, "expected a keyword such as :store, found symbol org"),
    # names and paths
    ("(defmemory m)\n\n(defmemory m :path \"x\")", 3, 12, "memory m is already defined at 1:1"),
    ('(defwebhook a :path "/h" :provider slack :secret "s")\n(defwebhook b :path "/h" :provider slack :secret "s")',
     2, 21, "path /h is already served by webhook a (defined at 1:1)"),
    # parentheses, brackets and strings
    ("(defmemory m\n  :store org\n", 1, 1, "this '(' is never closed"),
    ("(defmemory m))", 1, 14, "unexpected ')': nothing is open here"),
    ("(defmemory m\n  :search {:vector-weight 0.7 )", 2, 31, "')' does not close the '{' at 2:11; expected '}'"),
    ('(defmemory m\n  :path "org/agents)\n', 2, 9, "this string is never closed"),
    ("(defmemory m\n  :store org\n\n(defmemory n))", 1, 1,
     "this (defmemory m ...) is not closed before the (defmemory ...) at line 4"),
    # reading is data only: reader macros of the file are not available
    ('(defmemory m :path #shell "ls")', 1, 20, "reader macro '#shell' is not defined"),
]


@pytest.mark.parametrize("source, line, column, message", ERRORS, ids=[e[3][:40] for e in ERRORS])
def test_each_problem_is_reported_at_its_line_and_column(source, line, column, message):
    assert only_problem(source) == (line, column, message.replace("'search'", ":search"))


def test_all_problems_of_a_file_are_reported_in_one_pass():
    source = """; four definitions, five mistakes
(defmemory agent-memory
  :stor org
  :retention "90x")

(defwebhook github-events
  :path "/hooks/github"
  :provider github
  :secret "s"
  :filter {:json-path "$.action" :equals "opened")

(defwebhook stripe :path "/hooks/stripe" :provider strype :secret "s")
(defmemory notes)
(defmemory notes :retention "1y")
"""
    assert [(line, column) for line, column, _ in problems(source)] == [
        (3, 3),  # unknown keyword :stor
        (4, 17),  # unknown unit: the caret is on the x of "90x"
        (10, 50),  # ')' closing the '{' of :filter; reading goes on at the next form
        (12, 52),  # unknown provider strype
        (14, 12),  # notes defined twice
    ]


def test_a_diagnostic_shows_the_line_and_a_caret_under_the_column_even_after_tabs():
    with pytest.raises(DslError) as caught:
        parse_definitions("(defmemory m\n\t\t:stor org)", "defs.hy")
    assert str(caught.value) == (
        "defs.hy:2:3: unknown keyword :stor in defmemory m; did you mean :store?\n"
        "\t\t:stor org)\n"
        "\t\t^"
    )
    assert isinstance(caught.value, UserError)


def test_positions_count_characters_and_survive_crlf_and_non_ascii_text():
    line, column, _ = only_problem('(defmemory m :path "données/é" :stor org)')
    assert (line, column) == (1, 32)
    with pytest.raises(DslError) as caught:
        parse_definitions('(defmemory m\r\n  :path "x"\r\n  :stor org)\r\n', "defs.hy")
    (diagnostic,) = caught.value.diagnostics
    assert (diagnostic.line, diagnostic.column, diagnostic.source_line) == (3, 3, "  :stor org)\r")
    assert str(caught.value).splitlines()[1:] == ["  :stor org)", "  ^"]


def test_loading_executes_nothing(tmp_path):
    marker = tmp_path / "ran"
    source = f"""(import os)
(os.mkdir "{marker}")
(defmemory m :path (do (os.mkdir "{marker}") "x"))
(defmemory n :path f"{{(os.mkdir "{marker}")}}")
"""
    found = problems(source)
    assert found[:2] == [
        (1, 2, "unknown form import; a definitions file holds defmemory and defwebhook forms"),
        (2, 2, "unknown form os.mkdir; a definitions file holds defmemory and defwebhook forms"),
    ]
    assert [(line, column, message[:35]) for line, column, message in found[2:]] == [
        (3, 20, ":path takes a string, found form (d"), (4, 20, ":path takes a string, found f-strin")]
    assert not marker.exists()


def test_load_definitions_reports_missing_and_undecodable_files(tmp_path):
    with pytest.raises(NotFound, match="no such file"):
        load_definitions(tmp_path / "absent.hy")
    latin = tmp_path / "latin.hy"
    latin.write_bytes('(defmemory m :path "caf\xe9")'.encode("latin-1"))
    with pytest.raises(UserError, match="not UTF-8"):
        load_definitions(latin)


def test_a_file_is_read_once_per_text_and_again_when_it_changes_or_has_problems(tmp_path, monkeypatch):
    import cortex.dsl.loader as loader

    reads = []
    collect = loader.collect
    monkeypatch.setattr(loader, "collect", lambda *args: reads.append(1) or collect(*args))
    path = tmp_path / "definitions.hy"
    path.write_text('(defmemory m :path "m")')
    first = load_definitions(path)
    assert load_definitions(path) is first and len(reads) == 1
    path.write_text('(defmemory m :path "n")')
    assert load_definitions(path).memories[0].path == "n" and len(reads) == 2
    path.write_text('(defmemory m :path 1)')
    for _ in range(2):
        with pytest.raises(DslError, match=":path takes a string"):
            load_definitions(path)
    assert len(reads) == 4


def test_show_rows_describe_each_definition_and_never_print_an_inline_secret():
    defs = parse_definitions('(defmemory m :retention "2w")\n'
                             '(defwebhook w :path "/w" :provider slack :secret "hunter2" :agent bot)', "d.hy")
    rows = definition_rows(defs)
    assert rows == [
        ("memory", "m", "d.hy:1:1",
         "store org · path org/agents · retention 2w · search 0.5 vector + 0.5 keyword (weighted)"),
        ("webhook", "w", "d.hy:2:1", "POST /w · provider slack · secret (inline) · agent bot"),
    ]
    assert definition_rows(Definitions()) == []


def test_load_dsl_adds_a_file_to_the_session_or_nothing_when_it_conflicts(cortex, org):
    more = org / "more.hy"
    more.write_text('(defwebhook triage :path "/hooks/triage" :provider standard :secret "secret://env/T")\n')
    assert [w.name for w in cortex.load_dsl(more).webhooks] == ["triage"]
    assert [w.name for w in cortex.webhooks()] == ["github-events", "stripe-payments", "triage"]
    clash = org / "clash.hy"
    clash.write_text('(defwebhook fine :path "/hooks/fine" :provider github :secret "secret://env/F")\n'
                     '(defwebhook other :path "/hooks/github" :provider github :secret "secret://env/O")\n')
    with pytest.raises(UserError, match="path /hooks/github is already served by webhook github-events"):
        cortex.load_dsl(clash)
    assert [w.name for w in cortex.webhooks()] == ["github-events", "stripe-payments", "triage"]
