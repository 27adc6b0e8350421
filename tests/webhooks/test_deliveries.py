"""The delivery log: time-ordered ids, records and bodies in one transaction, filters and tails, on LMDB."""

from datetime import timedelta

import pytest

from cortex.backends import open_store
from cortex.errors import NotFound, UserError
from cortex.webhooks.deliveries import Delivery, DeliveryLog, Outcome, id_time_ns, new_id
from cortex.webhooks.seen import DELIVERY, REPLAY, SEEN, SeenKey


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
    with pytest.raises(NotFound, match="no webhook delivery 12;"):  # a prefix no id starts with
        log.get("12")
    for bad in ("zz" * 12, "", "0" * 26, "12 34"):
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


DAY = 86_400 * 10**9


def test_recording_drops_deliveries_older_than_the_retention_with_their_bodies(tmp_path):
    store = open_store(tmp_path / "store")
    log = DeliveryLog(store, keep_for=timedelta(days=30))
    start = 1_700_000_000 * 10**9
    old, kept = delivery(time_ns=start), delivery(time_ns=start + 5 * DAY)
    log.record(old, b"old")
    log.record(kept, b"kept")
    newest = log.record(delivery(time_ns=start + 31 * DAY), b"new")
    assert [d.id for d in log.deliveries()] == [kept.id, newest.id]
    with pytest.raises(NotFound):
        log.body(old.id)
    assert log.body(kept.id) == b"kept"
    store.close()


def test_prune_removes_what_is_older_than_asked_and_counts_it(log):
    start = 1_700_000_000 * 10**9
    for day in range(10):
        log.record(delivery(time_ns=start + day * DAY), b"{}")
    assert log.prune(timedelta(days=3), now_ns=start + 9 * DAY) == 6
    assert [id_time_ns(d.id) for d in log.deliveries()] == [start + day * DAY for day in (6, 7, 8, 9)]
    assert log.prune(timedelta(days=3), now_ns=start + 9 * DAY) == 0


def test_a_log_kept_for_ever_drops_nothing_and_a_retention_must_be_positive(tmp_path):
    store = open_store(tmp_path / "store")
    log = DeliveryLog(store, keep_for=None)
    log.record(delivery(time_ns=10**9))
    log.record(delivery(time_ns=10**18))
    assert len(log) == 2
    with pytest.raises(UserError, match="kept for some time"):
        DeliveryLog(store, keep_for=timedelta(0))
    store.close()


def test_a_claim_takes_its_keys_and_a_later_claim_finds_their_holder(log):
    start = 1_700_000_000 * 10**9
    key = SeenKey(DELIVERY, "evt_1", start + DAY)
    first = delivery(time_ns=start)
    assert log.claim(first, b"{}", [key]) is None
    assert log.claim(delivery(time_ns=start + 1), b"{}", [key]) == (key, first)
    assert log.claim(delivery(webhook="other", time_ns=start + 2), b"{}", [key]) is None  # keys are per webhook
    failed = log.record(delivery(time_ns=start + 3, status=500, outcome=Outcome.FAILED))
    assert log.claim(failed, None, [SeenKey(DELIVERY, "evt_2", start + DAY)]) is None
    # A key whose delivery failed is free again: a retry may be routed.
    assert log.claim(delivery(time_ns=start + 4), b"{}", [SeenKey(DELIVERY, "evt_2", start + DAY)]) is None


def test_claims_made_together_land_together_a_later_one_finding_the_keys_an_earlier_one_took(log):
    start = 1_700_000_000 * 10**9
    key = SeenKey(DELIVERY, "evt_1", start + DAY)
    first, copy, other = (delivery(time_ns=start + n, status=202, outcome=Outcome.PENDING, agent="assistant")
                          for n in range(3))
    later = SeenKey(DELIVERY, "evt_1", start + 1 + DAY)  # the copy's key: the same id, expiring a moment later
    assert log.claim_all([(first, b"{}", [key]), (copy, b"{}", [later]), (other, b"{}", [])]) == [
        None, (later, first), None]
    assert sorted(d.id for d, _, _ in log.pending()) == sorted([first.id, other.id])
    assert log.body(other.id) == b"{}" and [d.id for d in log.deliveries()] == [first.id, other.id]


def test_a_pending_claim_is_marked_until_it_finishes(log):
    pending = delivery(status=202, outcome=Outcome.PENDING, agent="assistant")
    still = delivery(status=202, outcome=Outcome.PENDING, agent="assistant")
    log.claim(pending, b"{}", [])
    log.claim(still, b"{}", [])
    found = {d.id: (d, host, pid) for d, host, pid in log.pending()}
    host, pid = found[pending.id][1:]
    assert found[pending.id][0] == pending and log.owner(pending.id) == (host, pid) and isinstance(pid, int)
    # One transaction for many: a delivery whose routing ended leaves the pending ones, one still pending stays.
    log.finish([Delivery(**{**pending.__dict__, "status": 200, "outcome": Outcome.ROUTED}),
                Delivery(**{**still.__dict__, "status": 500, "detail": "the ingest failed"})])
    assert [d.id for d, _, _ in log.pending()] == [still.id] and log.owner(pending.id) is None
    assert log.get(pending.id).outcome == "routed" and log.get(still.id).detail == "the ingest failed"


def test_expired_keys_are_forgotten_so_the_table_stays_bounded(log):
    start = 1_700_000_000 * 10**9
    for n in range(50):
        now = start + n * 10**9
        log.claim(delivery(time_ns=now), None, [SeenKey(REPLAY, f"sig-{n}", now + 300 * 10**9)])
    seen = log.store.table(SEEN)
    assert len(seen) == 2 * 50  # each key and its place in expiry order
    later = start + 320 * 10**9  # the keys of the first 20 s have expired by then
    log.claim(delivery(time_ns=later), None, [])
    assert len(seen) == 2 * 30
    key = SeenKey(REPLAY, "sig-49", start + 349 * 10**9)
    assert log.claim(delivery(time_ns=later), None, [key]) is not None  # the unexpired one still holds
