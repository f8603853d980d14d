"""The quote function against the operator's published prices and the subsidy rules."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing.choices import Eligibility
from billing.models import Plan, Price, SubsidyUsage
from billing.quote import load_price_book, quote
from billing.subsidies import usage_month
from catalog.models import InstanceSpec
from core.errors import ServiceError

pytestmark = pytest.mark.django_db


def test_eight_a100_cards_for_thirty_days_pay_as_you_go_cost_27648(catalog):
    result = quote(chip=catalog["a100-80g"], cards=8, plan="payg", hours=30 * 24)

    assert result.payable_total == Decimal("27648.00")
    assert result.list_total == Decimal("27648.00")
    assert result.subsidy_total == 0
    assert result.programme is None


def test_910b_in_the_xinchuang_zone_costs_1_71_per_card_hour_after_the_subsidy(catalog, xinchuang_zone):
    result = quote(chip=catalog["ascend-910b"], cards=1, zone=xinchuang_zone)

    assert result.payable_per_card_hour == Decimal("1.71")
    assert result.list_per_card_hour == Decimal("1.9")
    assert result.subsidy_per_hour == Decimal("0.19")
    assert result.programme.slug == "xinchuang-2026"


def test_910b_spot_on_top_of_the_subsidy_costs_1_026_per_card_hour(catalog, xinchuang_zone):
    result = quote(chip=catalog["ascend-910b"], cards=4, zone=xinchuang_zone, spot=True)

    assert result.payable_per_card_hour == Decimal("1.026")
    assert result.payable_per_hour == Decimal("4.104")
    assert result.spot_discount_per_hour == Decimal("3.04")


def test_the_910b_is_quoted_in_the_xinchuang_zone_by_default(catalog):
    assert quote(chip=catalog["ascend-910b"]).zone_slug == "cn-east-xc"


def test_the_910b_in_the_general_zone_gets_no_xinchuang_subsidy(catalog, general_zone):
    result = quote(chip=catalog["ascend-910b"], zone=general_zone)

    assert result.payable_per_card_hour == Decimal("1.9")
    assert result.programme is None


def test_a_foreign_chip_cannot_be_quoted_in_the_xinchuang_zone(catalog, xinchuang_zone):
    with pytest.raises(ServiceError) as excinfo:
        quote(chip=catalog["a100-80g"], zone=xinchuang_zone)
    assert excinfo.value.code == "xinchuang_zone_domestic_only"


def test_spot_is_offered_with_pay_as_you_go_only(catalog):
    with pytest.raises(ServiceError) as excinfo:
        quote(chip=catalog["ascend-910b"], plan="daily", spot=True)
    assert excinfo.value.code == "spot_not_offered"


def test_the_daily_plan_bills_whole_days_at_ninety_percent(catalog):
    result = quote(chip=catalog["a100-80g"], plan="daily", hours=5)

    assert result.billed_minutes == 1440
    assert result.payable_total == Decimal("4.8") * 24 * Decimal("0.9")


def test_the_monthly_plan_is_seventy_five_percent_of_720_hours(catalog):
    result = quote(chip=catalog["a100-80g"], cards=8, plan="monthly", hours=720)

    assert result.payable_total == Decimal("20736.00")
    assert result.plan_discount_total == Decimal("6912.00")


def test_a_plan_factor_is_data_that_staff_can_change(catalog):
    Plan.objects.filter(slug="daily").update(factor=Decimal("0.8"))

    assert quote(chip=catalog["a100-80g"], plan="daily", hours=24).payable_total == Decimal("92.16")


def test_a_price_change_applies_from_its_date_and_never_rewrites_history(catalog):
    chip = catalog["a100-80g"]
    change = timezone.now() + timedelta(days=1)
    Price.objects.create(chip=chip, per_hour=Decimal("4.2"), effective_from=change)

    before = quote(chip=chip, at=change - timedelta(minutes=1))
    after = quote(chip=chip, at=change)

    assert before.list_per_card_hour == Decimal("4.8")
    assert after.list_per_card_hour == Decimal("4.2")


def test_a_chip_without_a_published_price_is_refused_with_a_clear_message(catalog):
    with pytest.raises(ServiceError) as excinfo:
        quote(chip=catalog["rtx-4090"])
    assert excinfo.value.code == "no_price"
    assert "RTX 4090" in str(excinfo.value.message)


def test_the_no_card_mode_costs_a_few_cents_an_hour(catalog):
    spec = InstanceSpec.objects.get(chip=None)

    result = quote(spec=spec, hours=10)

    assert result.cards == 0
    assert result.payable_per_hour == Decimal("0.10")
    assert result.payable_total == Decimal("1.00")


def test_a_spec_is_priced_as_its_chip_and_cards(catalog):
    spec = InstanceSpec.objects.get(chip__slug="a100-80g", cards=8)

    assert quote(spec=spec, hours=720).payable_total == Decimal("27648.00")


def test_the_breakdown_lines_add_up_to_the_payable_amount(catalog):
    result = quote(chip=catalog["mlu370-x8"], cards=2, spot=True, minutes=97)

    assert result.list_total - result.discount_total == result.payable_total
    hourly = result.plan_discount_per_hour + result.spot_discount_per_hour + result.subsidy_per_hour
    assert result.list_per_hour - hourly == result.payable_per_hour


def test_an_exhausted_budget_stops_the_subsidy_at_once(catalog, xinchuang_subsidy):
    xinchuang_subsidy.spent = xinchuang_subsidy.budget
    xinchuang_subsidy.save()

    result = quote(chip=catalog["ascend-910b"])

    assert result.payable_per_card_hour == Decimal("1.9")
    assert result.subsidy_total == 0
    assert result.subsidy_limited


def test_the_subsidy_never_exceeds_what_the_programme_has_left(catalog, xinchuang_subsidy):
    xinchuang_subsidy.spent = xinchuang_subsidy.budget - Decimal("12.34")
    xinchuang_subsidy.save()

    result = quote(chip=catalog["ascend-910b"], cards=8, hours=720)

    assert result.subsidy_total == Decimal("12.34")
    assert result.payable_total == Decimal("10944.00") - Decimal("12.34")


def test_the_subsidy_never_exceeds_the_users_monthly_cap(catalog, xinchuang_subsidy, owner):
    now = timezone.now()
    SubsidyUsage.objects.create(
        programme=xinchuang_subsidy, user=owner, month=usage_month(now), amount=Decimal("4990.00")
    )

    mine = quote(chip=catalog["ascend-910b"], cards=8, hours=720, user=owner, at=now)
    anonymous = quote(chip=catalog["ascend-910b"], cards=8, hours=720, at=now)

    assert mine.subsidy_total == Decimal("10.00")
    assert anonymous.subsidy_total == Decimal("1094.40")


def test_last_months_usage_does_not_count_against_this_months_cap(catalog, xinchuang_subsidy, owner):
    at = datetime(2026, 11, 15, 4, 0, tzinfo=UTC)
    SubsidyUsage.objects.create(
        programme=xinchuang_subsidy, user=owner, month=usage_month(at - timedelta(days=30)), amount=Decimal("5000")
    )

    assert quote(chip=catalog["ascend-910b"], user=owner, at=at).payable_per_card_hour == Decimal("1.71")


def test_a_verified_enterprise_programme_needs_a_verified_enterprise(catalog, xinchuang_subsidy, owner):
    xinchuang_subsidy.eligibility = Eligibility.VERIFIED_ENTERPRISE
    xinchuang_subsidy.save()

    assert quote(chip=catalog["ascend-910b"]).subsidy_total == 0
    assert quote(chip=catalog["ascend-910b"], user=owner).subsidy_total == 0
    owner.is_verified_enterprise = True
    assert quote(chip=catalog["ascend-910b"], user=owner).payable_per_card_hour == Decimal("1.71")


def test_a_programme_outside_its_dates_or_switched_off_does_not_apply(catalog, xinchuang_subsidy):
    xinchuang_subsidy.ends_at = timezone.now() - timedelta(days=1)
    xinchuang_subsidy.save()
    assert quote(chip=catalog["ascend-910b"]).programme is None

    xinchuang_subsidy.ends_at = None
    xinchuang_subsidy.active = False
    xinchuang_subsidy.save()
    assert quote(chip=catalog["ascend-910b"]).programme is None


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"minutes": 0}, "invalid_term"),
        ({"minutes": -5}, "invalid_term"),
        ({"hours": Decimal("1e30")}, "invalid_term"),
        ({"hours": "many"}, "invalid_term"),
        ({"cards": 0}, "invalid_cards"),
        ({"cards": -1}, "invalid_cards"),
        ({"cards": 10**9}, "invalid_cards"),
        ({"plan": "weekly"}, "unknown_plan"),
    ],
)
def test_bad_input_is_refused_with_a_service_error(catalog, kwargs, code):
    with pytest.raises(ServiceError) as excinfo:
        quote(chip=catalog["a100-80g"], **kwargs)
    assert excinfo.value.code == code


def test_a_price_book_answers_many_quotes_without_more_queries(catalog, django_assert_num_queries):
    book = load_price_book()
    with django_assert_num_queries(0):
        for chip in catalog.values():
            if chip.rentable and chip.slug != "rtx-4090":
                quote(chip=chip, cards=8, plan="monthly", hours=720, book=book)
