"""Filters: RFC 9535 JSONPath with equals or contains, over real-shaped provider payloads."""

import pytest

from cortex.errors import UserError
from cortex.webhooks import UNSET, JsonPathFilter, matches

ISSUE_OPENED = {
    "action": "opened",
    "issue": {
        "number": 1347,
        "title": "Found a bug in the parser",
        "state": "open",
        "locked": False,
        "comments": 0,
        "labels": [{"name": "bug", "color": "d73a4a"}, {"name": "parser", "color": "0e8a16"}],
        "assignees": [],
    },
    "repository": {"full_name": "octocat/Hello-World", "topics": ["org-mode", "memory"]},
    "sender": {"login": "octocat"},
}


def test_equals_matches_and_says_what_it_found():
    result = matches(JsonPathFilter("$.action", equals="opened"), ISSUE_OPENED)
    assert result.matched
    assert result.found == ("opened",)
    assert result.reason == '$.action found "opened", equal to "opened"'


def test_equals_mismatch_is_explained():
    result = matches(JsonPathFilter("$.action", equals="closed"), ISSUE_OPENED)
    assert not result.matched
    assert result.reason == '$.action found "opened", not equal to "closed"'


def test_a_path_that_finds_nothing_does_not_match():
    result = matches(JsonPathFilter("$.pull_request.merged", equals=True), ISSUE_OPENED)
    assert not result.matched and result.found == ()
    assert result.reason == "$.pull_request.merged found nothing"


def test_equality_follows_json_types():
    assert matches(JsonPathFilter("$.issue.number", equals=1347), ISSUE_OPENED).matched
    assert matches(JsonPathFilter("$.issue.number", equals=1347.0), ISSUE_OPENED).matched
    assert not matches(JsonPathFilter("$.issue.number", equals="1347"), ISSUE_OPENED).matched
    assert matches(JsonPathFilter("$.issue.locked", equals=False), ISSUE_OPENED).matched
    # false is not 0, and 0 is not false
    assert not matches(JsonPathFilter("$.issue.locked", equals=0), ISSUE_OPENED).matched
    assert not matches(JsonPathFilter("$.issue.comments", equals=False), ISSUE_OPENED).matched
    assert matches(JsonPathFilter("$.issue.assignees", equals=[]), ISSUE_OPENED).matched
    assert matches(JsonPathFilter("$.sender", equals={"login": "octocat"}), ISSUE_OPENED).matched


def test_equals_null_is_a_real_test_not_a_missing_one():
    assert matches(JsonPathFilter("$.a", equals=None), {"a": None}).matched
    assert not matches(JsonPathFilter("$.a", equals=None), {"a": 0}).matched
    assert JsonPathFilter("$.a").equals is UNSET


def test_contains_is_substring_for_strings():
    assert matches(JsonPathFilter("$.issue.title", contains="bug"), ISSUE_OPENED).matched
    result = matches(JsonPathFilter("$.issue.title", contains="feature"), ISSUE_OPENED)
    assert not result.matched and "does not contain" in result.reason


def test_contains_is_membership_for_lists():
    assert matches(JsonPathFilter("$.repository.topics", contains="memory"), ISSUE_OPENED).matched
    assert not matches(JsonPathFilter("$.repository.topics", contains="mem"), ISSUE_OPENED).matched
    assert not matches(JsonPathFilter("$.issue.number", contains="13"), ISSUE_OPENED).matched


def test_any_node_of_a_wildcard_can_match():
    names = JsonPathFilter("$.issue.labels[*].name", equals="parser")
    result = matches(names, ISSUE_OPENED)
    assert result.matched and result.found == ("bug", "parser")
    assert not matches(JsonPathFilter("$.issue.labels[*].name", equals="docs"), ISSUE_OPENED).matched


def test_rfc9535_filter_selectors_and_functions_work():
    red = JsonPathFilter("$.issue.labels[?@.color == 'd73a4a'].name", equals="bug")
    assert matches(red, ISSUE_OPENED).matched
    assert matches(JsonPathFilter("$.issue.labels[?length(@.name) > 4]"), ISSUE_OPENED).found == (
        {"name": "parser", "color": "0e8a16"},)
    assert matches(JsonPathFilter("$..login", equals="octocat"), ISSUE_OPENED).matched


def test_a_path_alone_matches_when_it_finds_something():
    assert matches(JsonPathFilter("$.sender.login"), ISSUE_OPENED).matched
    assert not matches(JsonPathFilter("$.sender.email"), ISSUE_OPENED).matched


def test_no_filter_matches_everything():
    assert matches(None, {"anything": 1}).matched


def test_long_values_are_shortened_in_the_reason():
    payload = {"body": "x" * 500}
    result = matches(JsonPathFilter("$.body", contains="y"), payload)
    assert len(result.reason) < 200 and "…" in result.reason


@pytest.mark.parametrize("expression", ["action", "$.a[", "$..", "$[?@.x ==]", "$.a[?nosuch(@)]"])
def test_a_bad_jsonpath_is_a_user_error_quoting_the_expression(expression):
    with pytest.raises(UserError) as caught:
        JsonPathFilter(expression, equals=1)
    assert repr(expression) in str(caught.value)


def test_equals_and_contains_together_are_refused():
    with pytest.raises(UserError, match="not both"):
        JsonPathFilter("$.action", equals="opened", contains="open")


def test_values_read_from_hy_source_compare_as_plain_json():
    import hy

    form = hy.read('["$.issue.labels[*].name" "bug" 1347]')
    path, label, number = form
    assert matches(JsonPathFilter(path, equals=label), ISSUE_OPENED).matched
    assert matches(JsonPathFilter(hy.models.String("$.issue.number"), equals=number), ISSUE_OPENED).matched
    assert matches(JsonPathFilter("$.repository.topics", equals=hy.read('["org-mode" "memory"]')),
                   ISSUE_OPENED).matched
