"""Hostile payloads, signed: each costs little and gets a logged answer with a reason code, never a 500."""

import json
import time

import httpx
import pytest

from cortex.dsl import DslError, Provider, WebhookDefinition, WebhookFilter, load_definitions
from cortex.errors import UserError
from cortex.webhooks import JsonPathFilter, matches, verifier_for
from cortex.webhooks.receiver import serving
from cortex.webhooks.service import WebhookService

SECRET = "gh-s3cr3t-6f1d0c"


def service_with(cortex, json_path: str | None = None, **test) -> WebhookService:
    spec = WebhookFilter(json_path, **test) if json_path else None
    return cortex.webhook_service([WebhookDefinition("gh", "/hooks/gh", Provider.GITHUB, SECRET, agent="assistant",
                                                     filter=spec)])


def post(url: str, body: bytes, timeout: float = 10) -> httpx.Response:
    headers = {"Content-Type": "application/json", **verifier_for("github", SECRET).sign(body)}
    return httpx.post(url + "/hooks/gh", content=body, headers=headers, timeout=timeout)


def test_a_backtracking_pattern_runs_in_linear_time(cortex):
    service = service_with(cortex, '$.items[?match(@, "(a|a)+b")]')
    with serving(service) as url:
        started = time.monotonic()
        response = post(url, json.dumps({"items": ["a" * 40]}).encode())
        assert time.monotonic() - started < 5
    assert response.status_code == 200 and response.json()["outcome"] == "filtered"
    assert service.log.get(response.json()["delivery"]).outcome == "filtered"


def test_search_and_match_follow_i_regexp():
    labels = {"labels": ["bug", "needs-triage", "a^b$", "line\nbreak", "caf\u00e9", "lone \ud800"]}
    assert matches(JsonPathFilter('$.labels[?search(@, "triage")]'), labels).found == ("needs-triage",)
    assert matches(JsonPathFilter('$.labels[?match(@, "tri")]'), labels).found == ()
    # ^ and $ are plain characters in I-Regexp, and . matches neither \n nor \r.
    assert matches(JsonPathFilter('$.labels[?match(@, "a^b$")]'), labels).found == ("a^b$",)
    assert matches(JsonPathFilter('$.labels[?match(@, "line.break")]'), labels).found == ()
    assert matches(JsonPathFilter('$.labels[?match(@, "caf.")]'), labels).found == ("caf\u00e9",)
    assert matches(JsonPathFilter(r'$.labels[?match(@, "\\p{Lu}")]'), labels).found == ()
    assert matches(JsonPathFilter('$.labels[?search(@, "lone")]'), labels).found == ("lone \ud800",)


@pytest.mark.parametrize("expression, problem", [
    ('$[?match(@.a, "a{1001}")]', "cannot run"),  # valid I-Regexp, past RE2's repetition limit
    ('$[?search(@.a, "\\\\p{Cn}")]', "cannot run"),
    ('$[?match(@.a, "(a")]', "not an I-Regexp"),
    ('$[?match(@.a, "\\\\d+")]', "not an I-Regexp"),
    ("$[?match(@.a, @.b)]", "string literal"),  # a pattern from the payload would be the sender's to choose
])
def test_a_pattern_re2_cannot_run_is_refused_when_the_filter_loads(expression, problem):
    with pytest.raises(UserError, match=problem) as caught:
        JsonPathFilter(expression)
    assert repr(expression) in str(caught.value)


@pytest.mark.parametrize("expression, problem", [
    ("$..[?$..id]", "root"),  # 37 s on a 25 KB payload before: the whole payload again for every node
    ("$[?$.*]", "root"),
    ("$..*..*", "descend"),
    ("$..[?@..id]", "descend"),
])
def test_a_query_whose_cost_would_grow_faster_than_the_payload_is_refused(expression, problem):
    with pytest.raises(UserError, match=problem):
        JsonPathFilter(expression)


@pytest.mark.parametrize("expression", ["$..id", "$.items[?@..id]", "$[?@.a == $.b[0]]", "$..[?count(@.*) > 2]"])
def test_queries_that_read_each_part_of_the_payload_a_bounded_number_of_times_are_fine(expression):
    assert JsonPathFilter(expression).json_path == expression


def test_the_definitions_file_refuses_such_a_pattern_where_it_is_written(tmp_path):
    definitions = tmp_path / "definitions.hy"
    definitions.write_text('(defwebhook gh :path "/hooks/gh" :provider github :secret "s"\n'
                           '  :filter {:json-path "$[?match(@.a, \\"a{1001}\\")]" :equals 1})\n')
    with pytest.raises(DslError, match=r"definitions.hy:2:\d+: bad JSON path .* cannot run on RE2"):
        load_definitions(definitions)


def test_the_receiver_refuses_to_start_with_such_a_pattern(cortex):
    with pytest.raises(UserError, match="'gh'.*cannot run"):
        service_with(cortex, '$[?match(@.a, "a{1001}")]')


@pytest.mark.parametrize("depth", [70, 150, 5000])
def test_a_payload_nested_too_deep_gets_400_payload_too_deep(cortex, depth):
    service = service_with(cortex, "$..number")
    with serving(service) as url:
        response = post(url, b'{"a": ' + b"[" * depth + b"1" + b"]" * depth + b"}")
    assert response.status_code == 400 and response.json()["reason"] == "payload_too_deep"
    assert service.log.get(response.json()["delivery"]).reason == "payload_too_deep"


def test_nesting_up_to_the_limit_is_filtered_as_usual(cortex):
    service = service_with(cortex, "$..number")
    with serving(service) as url:
        response = post(url, b'{"a": ' + b"[" * 60 + b'{"number": 1}' + b"]" * 60 + b"}")
    assert response.status_code == 200 and response.json()["outcome"] == "routed"


def test_a_lone_surrogate_in_the_payload_is_filtered_and_logged(cortex):
    service = service_with(cortex, "$.action", equals="opened")
    with serving(service) as url:
        response = post(url, b'{"action": "\\ud800"}')
    assert response.status_code == 200 and response.json()["outcome"] == "filtered"
    assert "\\ud800" in service.log.get(response.json()["delivery"]).filter_reason


def test_a_routed_payload_with_a_lone_surrogate_reaches_the_log(cortex, org):
    service = service_with(cortex)
    with serving(service) as url:
        response = post(url, b'{"type": "\\udc00x", "text": "\\ud83d"}')
    assert response.status_code == 200 and response.json()["outcome"] == "routed"


def test_a_body_that_is_not_json_says_so_with_a_reason_code(cortex):
    service = service_with(cortex, "$.action", equals="opened")
    with serving(service) as url:
        response = post(url, b'{"n": 1' + b"0" * 5000 + b"}")  # past Python's 4300-digit limit
    assert response.status_code == 400 and response.json()["reason"] == "not_json"


def test_a_body_over_the_cap_says_so_with_a_reason_code(cortex):
    service = cortex.webhook_service([WebhookDefinition("gh", "/hooks/gh", Provider.GITHUB, SECRET)], max_body=64)
    with serving(service) as url:
        response = post(url, b'{"pad": "' + b"x" * 100 + b'"}')
    assert response.status_code == 413 and response.json()["reason"] == "body_too_large"
