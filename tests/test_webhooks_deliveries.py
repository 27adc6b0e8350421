"""The delivery log: time-ordered ids, records and bodies in one transaction, filters and tails, on LMDB."""

import pytest

from cortex.backends import open_store
from cortex.errors import NotFound, UserError
from cortex.webhooks.deliveries import Delivery, DeliveryLog, Outcome, id_time_ns, new_id


@pytest.fixture
def log(tmp_path):
    store = open_store(tmp_path / "store")
    yield DeliveryLog(store)
    store.close()


def delivery(webhook="gh", time_ns=1_700_000_000_000_000_000, **fields):
    defaults = {"path": "/hooks/gh", "trigger": "live", "status": 200, "outcome": Outcome.ACCEPTED}
    delivery_id = new_id(time_ns)
    return Delivery(id=delivery_id, webhook=webhook, time_ns=id_time_ns(delivery_id), **{**defaults, **fields})


def test_ids_are_24_hex_digits_that_sort_by_time():
    ids = [new_id(t) for t in (5, 1_000, 10**18)]
    assert all(len(i) == 24 and int(i, 16) >= 0 for i in ids)
    assert sorted(ids) == ids and [id_time_ns(i) for i in ids] == [5, 1_000, 10**18]
    assert new_id(5) != new_id(5)


def test_a_record_round_trips_with_its_body(log):
    d = delivery(event="push", verified=True, filter_matched=True, filter_reason="no filter", agent="assistant",
                 size=3, sha256="ab" * 32, headers={"x-hub-signature-256": "***", "x-github-event": "push"},
                 duration_us=1234)
    log.record(d, b"{}\n")
    assert log.get(d.id) == d
    assert log.body(d.id) == b"{}\n"


def test_a_rejected_delivery_keeps_no_body(log):
    d = log.record(delivery(status=401, outcome=Outcome.REJECTED, verified=False, reason="signature_mismatch"))
    with pytest.raises(NotFound, match="kept no body: it was rejected"):
        log.body(d.id)


def test_listing_is_oldest_first_by_webhook_and_tail(log):
    for n, name in enumerate(["a", "b", "a", "a", "b"]):
        log.record(delivery(webhook=name, time_ns=1_700_000_000_000_000_000 + n * 1000, event=str(n)))
    assert [d.event for d in log.deliveries()] == ["0", "1", "2", "3", "4"]
    assert [d.event for d in log.deliveries("a")] == ["0", "2", "3"]
    assert [d.event for d in log.deliveries("a", tail=2)] == ["2", "3"]
    assert [d.event for d in log.deliveries(tail=1)] == ["4"]
    assert log.deliveries("nobody") == [] and len(log) == 5


def test_unknown_and_malformed_ids_say_what_is_wrong(log):
    with pytest.raises(NotFound, match="no webhook delivery"):
        log.get(new_id())
    for bad in ("12", "zz" * 12, "", "0" * 26):
        with pytest.raises(UserError, match="is not a delivery id"):
            log.get(bad)


def test_an_unknown_trigger_is_refused(log):
    with pytest.raises(ValueError, match="trigger"):
        log.record(delivery(trigger="manual"))
    assert len(log) == 0


def test_the_answer_hides_routing_from_a_rejected_sender():
    rejected = delivery(status=401, outcome=Outcome.REJECTED, verified=False, reason="replay", detail="seen",
                        agent=None)
    assert rejected.answer() == {"delivery": rejected.id, "webhook": "gh", "outcome": "rejected",
                                 "reason": "replay", "detail": "seen"}
    routed = delivery(outcome=Outcome.ROUTED, verified=True, filter_matched=True, filter_reason="no filter",
                      agent="assistant", event="push")
    assert routed.answer()["agent"] == "assistant" and routed.answer()["filter_matched"] is True
