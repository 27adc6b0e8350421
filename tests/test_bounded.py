"""The bounded dict behind the content caches."""

from cortex.bounded import BoundedDict


def test_a_new_key_past_the_limit_drops_the_one_set_first():
    cache = BoundedDict(2)
    cache["a"], cache["b"] = 1, 2
    cache["a"] = 10  # already there: nothing dropped, and it keeps its place
    assert cache == {"a": 10, "b": 2}
    cache["c"] = 3
    assert cache == {"b": 2, "c": 3}
