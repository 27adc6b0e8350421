"""The bounded dict behind the content caches."""

from cortex.bounded import BoundedDict


def test_a_new_key_past_the_limit_drops_the_one_set_first():
    cache = BoundedDict(2)
    cache["a"], cache["b"] = 1, 2
    cache["a"] = 10  # already there: nothing dropped, and it keeps its place
    assert cache == {"a": 10, "b": 2}
    cache["c"] = 3
    assert cache == {"b": 2, "c": 3}


def test_past_its_limit_it_holds_the_newest_keys_in_the_order_set():
    cache = BoundedDict(1000)
    for key in range(50_000):
        cache[key] = key
    assert len(cache) == 1000 and list(cache) == list(range(49_000, 50_000))
