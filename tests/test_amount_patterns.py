"""The schema's patterns for amounts in a range (``core.api.ranges``) match exactly the texts of the numbers in it."""

import re
from decimal import Decimal

import pytest

from core.api.ranges import amounts, integers, positive_numbers


@pytest.mark.parametrize("low, high", [(0, 9), (1, 50000), (10, 50000), (7, 123), (99, 1001), (5, 10080)])
def test_integers_match_the_whole_numbers_of_the_range_and_no_other(low, high):
    pattern = re.compile(f"^{integers(low, high)}$")
    for n in range(0, high + 200):
        assert bool(pattern.match(str(n))) == (low <= n <= high), n
    assert not pattern.match(f"0{low}")  # no leading zeros


@pytest.mark.parametrize("low, high", [(Decimal("10"), Decimal("50000")), (Decimal("1"), None), (Decimal("0"), None)])
def test_amounts_match_the_amounts_of_the_range_with_two_decimals_at_most(low, high):
    pattern = re.compile(amounts(low, high))
    top = high if high is not None else Decimal("99999")
    for text in ["0", "0.5", "1", "9.99", "10", "10.5", "49.90", "50000", "50000.00", "50000.01", "60000", "99999"]:
        value = Decimal(text)
        assert bool(pattern.match(text)) == (low <= value <= top), text
    for text in ["10.123", "abc", "", "1e3", "-5", "010"]:
        assert not pattern.match(text), text


def test_positive_numbers_match_what_is_above_zero_up_to_the_limit():
    pattern = re.compile(positive_numbers(Decimal("1000")))
    for text in ["0.5", ".5", "7", "13.25", "999.999", "1000", "1000.0"]:
        assert pattern.match(text), text
    for text in ["0", "0.0", "1000.1", "1001", "-1", "abc", ""]:
        assert not pattern.match(text), text
    two_places = re.compile(positive_numbers(Decimal("10"), places=2))
    assert two_places.match("0.01") and two_places.match("9.99") and not two_places.match("0.001")
