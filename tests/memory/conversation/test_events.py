"""The event bus delivers typed events; payloads refuse anything but hashed keys, counts and static names."""

import logging
import threading

import pytest

from cortex.hashing import hash_text
from cortex.memory.conversation import (
    EventBus,
    Health,
    HealthChanged,
    IdentityRejected,
    ItemDeleted,
    ItemPut,
    Reason,
    RecoveryDropped,
)

KEY = hash_text("some identity").hex()


def test_subscribers_get_every_event_or_the_named_ones():
    bus, everything, puts = EventBus(), [], []
    bus.subscribe(everything.append)
    bus.subscribe(puts.append, "memory.item_put")
    put, deleted = ItemPut(KEY, KEY), ItemDeleted(KEY, KEY)
    bus.publish(put)
    bus.publish(deleted)
    assert everything == [put, deleted] and puts == [put]


def test_unsubscribe_stops_delivery():
    bus, seen = EventBus(), []
    unsubscribe = bus.subscribe(seen.append)
    unsubscribe()
    unsubscribe()
    bus.publish(ItemPut(KEY, KEY))
    assert seen == []


def test_a_failing_subscriber_does_not_stop_the_others(caplog):
    bus, seen = EventBus(), []

    def broken(event):
        raise RuntimeError("subscriber bug")

    bus.subscribe(broken)
    bus.subscribe(seen.append)
    with caplog.at_level(logging.ERROR):
        bus.publish(ItemPut(KEY, KEY))
    assert seen == [ItemPut(KEY, KEY)] and "memory.item_put" in caplog.text


def test_events_are_named_by_type():
    assert [e.name for e in (IdentityRejected("add_turn", ("tenant",)), HealthChanged(KEY, Health.HEALTHY,
            Health.RETRY, Reason.SUMMARIZER_FAILED), RecoveryDropped(KEY, Reason.BACKLOG_OVERFLOW, 2),
            ItemPut(KEY, KEY), ItemDeleted(KEY, KEY))] == [
        "memory.identity_rejected", "memory.health_changed", "memory.recovery_dropped", "memory.item_put",
        "memory.item_deleted"]


@pytest.mark.parametrize("build", [
    lambda: ItemPut("what the user said", KEY),
    lambda: ItemDeleted(KEY, KEY.upper()),
    lambda: HealthChanged(KEY, Health.HEALTHY, Health.RETRY, "the model said: no"),
    lambda: HealthChanged(KEY, "healthy", Health.RETRY, Reason.SUMMARIZER_FAILED),
    lambda: RecoveryDropped(KEY, Reason.BACKLOG_OVERFLOW, "three turns"),
    lambda: IdentityRejected("tell me a secret", ("tenant",)),
    lambda: IdentityRejected("add_turn", ("tenant", "acme-corp")),
])
def test_payloads_refuse_free_text(build):
    with pytest.raises(TypeError, match="hashed key, a count or a static name"):
        build()


def test_publishing_from_many_threads_delivers_everything():
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    threads = [threading.Thread(target=lambda: [bus.publish(ItemPut(KEY, KEY)) for _ in range(200)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 800
