"""Invariants of the quote function, checked by hypothesis on in-memory price books (no database)."""

from datetime import UTC, datetime
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from billing.choices import Eligibility
from billing.models import Plan
from billing.quote import PriceBook, PriceEntry, quote
from billing.subsidies import ProgrammeTerms
from catalog.models import Chip, Zone

AT = datetime(2026, 6, 1, tzinfo=UTC)
CHIP = Chip(id=1, slug="chip", name="Chip", backend="npu", xinchuang=True, rentable=True)
ZONE = Zone(id=1, slug="zone", name="Zone", xinchuang=True)
PLANS = {
    "payg": Plan(slug="payg", name="PAYG", factor=Decimal("1"), period_minutes=1, spot_factor=Decimal("0.6")),
    "daily": Plan(slug="daily", name="Daily", factor=Decimal("0.9"), period_minutes=1440),
    "monthly": Plan(slug="monthly", name="Monthly", factor=Decimal("0.75"), period_minutes=43200),
}

money = st.decimals(min_value=0, max_value=10**6, places=2, allow_nan=False, allow_infinity=False)
prices = st.decimals(min_value=Decimal("0.01"), max_value=100, places=6, allow_nan=False, allow_infinity=False)
rates = st.decimals(min_value=0, max_value=1, places=4, allow_nan=False, allow_infinity=False)
cards = st.integers(min_value=1, max_value=4096)
minutes = st.integers(min_value=1, max_value=2 * 365 * 1440)
plans = st.sampled_from(["payg", "daily", "monthly"])


@st.composite
def books(draw):
    budget = draw(st.none() | money)
    spent = draw(money) if budget is not None else Decimal(0)
    cap = draw(st.none() | money)
    used = draw(money) if cap is not None else Decimal(0)
    terms = ProgrammeTerms(
        id=1,
        slug="p",
        name="P",
        name_zh="",
        rate=draw(rates),
        chip_ids=frozenset({CHIP.pk}),
        zone_ids=frozenset(),
        eligibility=Eligibility.EVERYONE,
        remaining=None if budget is None else max(budget - spent, Decimal(0)),
        monthly_cap=cap,
    )
    return PriceBook(
        at=AT,
        prices={CHIP.pk: PriceEntry(draw(prices), AT)},
        plans=PLANS,
        programmes=(terms,),
        offers={CHIP.pk: (ZONE,)},
        usage={terms.id: used},
    )


def _quote(book, n_cards=1, n_minutes=60, plan="payg", spot=False):
    return quote(chip=CHIP, cards=n_cards, plan=plan, spot=spot and plan == "payg", minutes=n_minutes, book=book)


@settings(max_examples=300, deadline=None)
@given(books(), cards, minutes, plans, st.booleans())
def test_payable_never_exceeds_the_list_price_and_lines_add_up(book, n_cards, n_minutes, plan, spot):
    result = _quote(book, n_cards, n_minutes, plan, spot)

    assert Decimal(0) <= result.payable_total <= result.list_total
    assert Decimal(0) <= result.payable_per_hour <= result.list_per_hour
    assert result.list_total - result.discount_total == result.payable_total
    assert min(result.plan_discount_total, result.spot_discount_total, result.subsidy_total) >= 0


@settings(max_examples=300, deadline=None)
@given(books(), cards, minutes, plans, st.booleans())
def test_the_subsidy_never_exceeds_what_the_programme_has_left_or_the_cap(book, n_cards, n_minutes, plan, spot):
    result = _quote(book, n_cards, n_minutes, plan, spot)
    terms = book.programmes[0]

    if terms.remaining is not None:
        assert result.subsidy_total <= terms.remaining
        assert result.subsidy_per_hour <= terms.remaining
    if terms.monthly_cap is not None:
        left = max(terms.monthly_cap - book.usage[terms.id], Decimal(0))
        assert result.subsidy_total <= left
        assert result.subsidy_per_hour <= left


@settings(max_examples=200, deadline=None)
@given(books(), cards, cards, minutes, plans, st.booleans())
def test_more_cards_never_cost_less(book, a, b, n_minutes, plan, spot):
    fewer, more = sorted((a, b))

    assert (
        _quote(book, fewer, n_minutes, plan, spot).payable_total
        <= _quote(book, more, n_minutes, plan, spot).payable_total
    )


@settings(max_examples=200, deadline=None)
@given(books(), cards, minutes, minutes, plans, st.booleans())
def test_a_longer_term_never_costs_less(book, n_cards, a, b, plan, spot):
    shorter, longer = sorted((a, b))

    assert (
        _quote(book, n_cards, shorter, plan, spot).payable_total
        <= _quote(book, n_cards, longer, plan, spot).payable_total
    )
