"""Routing a verified delivery: its event type, the filter decision, and the entry it leaves in an agent's log."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

from cortex.dsl.definitions import Provider, WebhookDefinition, WebhookFilter
from cortex.errors import CortexError
from cortex.memory.agents import MemoryContext
from cortex.org import escape_block
from cortex.webhooks.deliveries import Delivery
from cortex.webhooks.filters import UNSET, JsonPathFilter
from cortex.webhooks.verify import Reason

# Providers that name the event in a header; the rest name it in the payload's `type`.
EVENT_HEADERS = ("X-GitHub-Event", "X-Gitlab-Event", "X-Event-Type")
DIGEST_LIMIT = 16_000  # characters of payload kept in the agent's log; the delivery log keeps all of it
# Levels of nested arrays and objects a payload may have: well under the JSONPath library's 100,
# and real webhook payloads stay under 15.
MAX_DEPTH = 64

NOT_JSON = object()  # what parse_payload gives for a body that is not JSON

_EVENT_TEXT = re.compile(r"[^\w.:/@+-]+")
# Line breaks that JSON leaves unescaped but some Org readers split lines on.
_LINE_SEPARATORS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # a NUL would make the log a binary file


class PayloadRefused(CortexError):
    """A verified body the receiver will not process, with the reason code it answers with."""

    def __init__(self, reason: Reason, detail: str):
        super().__init__(detail)
        self.reason = reason


def parse_payload(body: bytes) -> object:
    """The body parsed as JSON, or `NOT_JSON` when it is not JSON; PayloadRefused when it nests too deep."""
    try:
        payload = json.loads(body)
        too_deep = _deeper_than(payload, MAX_DEPTH)
    except ValueError:
        return NOT_JSON
    except RecursionError:
        too_deep = True
    if too_deep:
        raise PayloadRefused(Reason.PAYLOAD_TOO_DEEP, f"the JSON nests deeper than {MAX_DEPTH} levels")
    return payload


def provider_delivery_id(provider: Provider, headers: Mapping[str, str], payload: object, body: bytes) -> str:
    """The id the provider gives this delivery and keeps for its retries ("" when it gives none)."""
    if provider is Provider.GITHUB:
        given = _header(headers, "X-GitHub-Delivery")
        # GitHub does not sign this header: bound to the body, a forged one cannot shadow a real delivery.
        return f"{given}:{hashlib.sha256(body).hexdigest()}" if given else ""
    if provider is Provider.STANDARD:
        return _header(headers, "webhook-id")
    field = {Provider.STRIPE: "id", Provider.SLACK: "event_id"}.get(provider)
    value = payload.get(field) if field and isinstance(payload, dict) else None
    return value if isinstance(value, str) else ""


def needs_json(definition: WebhookDefinition, headers: Mapping[str, str]) -> bool:
    """JSON is needed when a filter has to read the payload or the sender says the body is JSON."""
    content_type = _header(headers, "Content-Type").split(";")[0].strip().lower()
    return definition.filter is not None or content_type == "application/json" or content_type.endswith("+json")


def event_type(headers: Mapping[str, str], payload: object = NOT_JSON) -> str:
    """The event a delivery reports: a provider's event header, else the payload's `type` or `event`."""
    for name in EVENT_HEADERS:
        if value := _header(headers, name):
            return _event_text(value)
    if isinstance(payload, dict):
        for key in ("type", "event"):
            if isinstance(payload.get(key), str):
                return _event_text(payload[key])
    return ""


def json_filter(spec: WebhookFilter | None) -> JsonPathFilter | None:
    """The runnable filter for a definition's `:filter` (None when it has none)."""
    if spec is None:
        return None
    return JsonPathFilter(spec.json_path,
                          equals=UNSET if spec.equals is None else spec.equals,
                          contains=UNSET if spec.contains is None else spec.contains)


def memory_context(delivery: Delivery, body: bytes, payload: object) -> MemoryContext:
    """The daily-log entry for a routed delivery: event, delivery id and a readable digest of the payload."""
    event = delivery.event
    lines = [f"- Webhook :: {delivery.webhook} (POST {delivery.path})",
             f"- Event :: {event or 'not named'}",
             f"- Delivery :: {delivery.id}",
             f"- Trigger :: {delivery.trigger}"]
    if payload is NOT_JSON:
        begin, end = "#+begin_example", "#+end_example"
        text = _CONTROL.sub("\ufffd", "\n".join(body.decode("utf-8", "replace").splitlines()))
    else:
        begin, end = "#+begin_src json", "#+end_src"
        text = json.dumps(payload, indent=2, ensure_ascii=False).translate(_LINE_SEPARATORS)
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate stays a JSON escape
    if len(text) > DIGEST_LIMIT:
        text = (text[:DIGEST_LIMIT] + f"\n… {len(text) - DIGEST_LIMIT} more characters; "
                f"the delivery log keeps the whole body")
    lines += [begin, escape_block(text), end]
    return MemoryContext(title=f"{event or 'delivery'} via {delivery.webhook}", summary="\n".join(lines),
                         session=delivery.id)


def _deeper_than(payload: object, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels, walked a level at a time (no recursion)."""
    level = [payload] if isinstance(payload, (dict, list)) else []
    for _ in range(limit):
        level = [child for node in level for child in (node.values() if isinstance(node, dict) else node)
                 if isinstance(child, (dict, list))]
        if not level:
            return False
    return True


def _event_text(value: str) -> str:
    """An event name safe for a headline title: no spaces or control characters, at most 100 characters."""
    return _EVENT_TEXT.sub("_", value.strip())[:100]


def _header(headers: Mapping[str, str], name: str) -> str:
    lowered = name.lower()
    return next((value for key, value in headers.items() if key.lower() == lowered), "")
