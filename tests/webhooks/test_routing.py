"""Routing: event types, when JSON is needed, and log entries that stay one readable Org entry."""

import json

import pytest

from cortex.dsl import Provider, WebhookDefinition, WebhookFilter
from cortex.memory.logs import render_entry
from cortex.org import parse
from cortex.webhooks import matches
from cortex.webhooks.deliveries import Delivery
from cortex.webhooks.routing import (
    DIGEST_LIMIT,
    MAX_DEPTH,
    NOT_JSON,
    PayloadRefused,
    event_type,
    json_filter,
    memory_context,
    needs_json,
    parse_payload,
    provider_delivery_id,
)

HOOK = WebhookDefinition("gh", "/hooks/gh", Provider.GITHUB, "secret://env/GH", agent="assistant")
FILTERED = WebhookDefinition("gh", "/hooks/gh", Provider.GITHUB, "secret://env/GH",
                             filter=WebhookFilter("$.action", equals="opened"))


def routed(delivery_id: str, event: str = "") -> Delivery:
    """A delivery to webhook gh as the log records it before routing."""
    return Delivery(delivery_id, "gh", "/hooks/gh", "live", 0, 202, "pending", event=event, agent="assistant")


def entry_text(context) -> str:
    """The entry as the agent's daily log will hold it."""
    from datetime import datetime

    return render_entry(datetime(2026, 11, 21, 9, 30), context.title, context.summary, context.session)


def test_the_event_comes_from_the_provider_header_then_the_payload():
    assert event_type({"x-github-event": "pull_request"}, {"type": "ignored"}) == "pull_request"
    assert event_type({}, {"type": "payment_intent.succeeded"}) == "payment_intent.succeeded"
    assert event_type({}, {"event": "deploy"}) == "deploy"
    assert event_type({}, [1, 2]) == "" and event_type({}, NOT_JSON) == ""


def test_an_event_name_cannot_break_a_headline():
    assert event_type({"X-Event-Type": "push\n* injected :tag:"}) == "push_injected_:tag:"
    assert len(event_type({"X-Event-Type": "x" * 500})) == 100


def test_json_is_needed_for_a_filter_or_a_json_content_type():
    assert needs_json(FILTERED, {})
    assert needs_json(HOOK, {"content-type": "application/json; charset=utf-8"})
    assert needs_json(HOOK, {"Content-Type": "application/cloudevents+json"})
    assert not needs_json(HOOK, {"content-type": "application/x-www-form-urlencoded"})


def test_parse_payload_tells_json_from_everything_else():
    assert parse_payload(b'{"a": [1, null]}') == {"a": [1, None]}
    assert parse_payload(b"null") is None
    for body in (b"token=x&text=hi", b"\xff\xfe\xfa", b"[1", b""):
        assert parse_payload(body) is NOT_JSON


@pytest.mark.parametrize("body", [b"[" * 100_000, b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
                                  b'{"a": ' + b'{"b": ' * MAX_DEPTH + b"1" + b"}" * (MAX_DEPTH + 1)])
def test_parse_payload_refuses_json_nested_too_deep(body):
    with pytest.raises(PayloadRefused, match=f"deeper than {MAX_DEPTH}") as caught:
        parse_payload(body)
    assert caught.value.reason == "payload_too_deep"
    assert isinstance(parse_payload(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH), list)  # the limit itself is fine


def test_the_providers_delivery_ids():
    github = {"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}
    assert provider_delivery_id(Provider.GITHUB, github, {}, b"{}").startswith("72d3162e-cc78-11e3-81ab-4c9367dc0958:")
    assert provider_delivery_id(Provider.GITHUB, github, {}, b"{}") != provider_delivery_id(Provider.GITHUB, github,
                                                                                            {}, b"{ }")
    assert provider_delivery_id(Provider.STANDARD, {"webhook-id": "msg_1"}, NOT_JSON, b"") == "msg_1"
    assert provider_delivery_id(Provider.STRIPE, {}, {"id": "evt_1"}, b"") == "evt_1"
    assert provider_delivery_id(Provider.SLACK, {}, {"event_id": "Ev1"}, b"") == "Ev1"
    assert provider_delivery_id(Provider.STRIPE, {}, {"id": 7}, b"") == ""
    assert provider_delivery_id(Provider.CUSTOM, {"webhook-id": "x"}, {"id": "y"}, b"") == ""


def test_a_definition_filter_becomes_a_runnable_json_path_filter():
    runnable = json_filter(FILTERED.filter)
    assert matches(runnable, {"action": "opened"}).matched
    assert not matches(runnable, {"action": "closed"}).matched
    contains = json_filter(WebhookFilter("$.labels[*]", contains="bug"))
    assert matches(contains, {"labels": ["bug", "ui"]}).matched
    assert json_filter(None) is None


def test_the_entry_carries_event_delivery_and_pretty_json():
    payload = {"action": "opened", "pull_request": {"number": 7, "title": "Fix é"}}
    context = memory_context(routed("0123abcd", "pull_request"), json.dumps(payload).encode(), payload)
    assert context.session == "0123abcd" and context.title == "pull_request via gh"
    text = entry_text(context)
    assert "- Event :: pull_request\n- Delivery :: 0123abcd\n" in text
    block = text[text.index("#+begin_src json\n") + 17:text.index("#+end_src")]
    assert json.loads(block) == payload


def test_payload_text_cannot_create_headlines_or_end_its_block():
    body = b"* fake headline\n#+end_example\n** deeper\n,* already escaped\n\x00\xe2\x80\xa8* after a separator"
    text = entry_text(memory_context(routed("d1"), body, NOT_JSON))
    headlines = [h for h in parse(text).objects if hasattr(h, "level")]
    assert [h.title for h in headlines] == ["09:30 — delivery via gh"]
    assert ",* fake headline\n,#+end_example\n,** deeper\n,,* already escaped\n" in text
    assert "\0" not in text and text.count("#+end_example") == 1 + text.count(",#+end_example")


def test_json_strings_with_line_separators_stay_on_one_line():
    payload = {"text": "a\u2028* b\u2029c\x85d", "lone": "\ud800"}
    text = entry_text(memory_context(routed("d1"), b"", payload))
    block = text[text.index("#+begin_src json\n") + 17:text.index("#+end_src")]
    assert not any(sep in text for sep in "\u2028\u2029\x85")
    assert json.loads(block) == payload
    text.encode("utf-8")  # no lone surrogate reaches the file


def test_a_huge_payload_is_cut_in_the_log_entry():
    payload = {"items": ["x" * 100] * 1000}
    text = entry_text(memory_context(routed("d1"), b"", payload))
    assert len(text) < DIGEST_LIMIT + 1000
    assert "more characters; the delivery log keeps the whole body" in text
