"""One rule gives every printed id back: the whole id, or a prefix only one id starts with."""

import pytest

from cortex.errors import NotFound, UserError
from cortex.prefixes import unique

IDS = ["0badc0de", "0badf00d", "1234abcd", "1234"]


def test_an_id_or_a_prefix_only_it_starts_with_names_it():
    assert unique("0badc", IDS, "proposal") == "0badc0de"
    assert unique("1234", IDS, "proposal") == "1234"  # whole, though a longer id starts with it


def test_no_id_or_several_say_so_in_one_line():
    with pytest.raises(NotFound, match=r"^no proposal ffff; `cortex review` lists them$"):
        unique("ffff", IDS, "proposal", "; `cortex review` lists them")
    with pytest.raises(UserError, match=r"^proposal prefix 0bad is ambiguous, 2 start with it: 0badc0de, 0badf00d$"):
        unique("0bad", IDS, "proposal")
    many = [f"{n:024x}" for n in range(9)]
    with pytest.raises(UserError, match=r"9 start with it: (0{23}\d, ){4}0{23}4 and 4 more$"):
        unique("0", many, "webhook delivery")
    with pytest.raises(UserError, match="no proposal given"):
        unique("", IDS, "proposal")
