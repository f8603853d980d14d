"""The price book is built once per price version and shared, and is never stale: whatever the back office changes
shows on the pricing page and in quotes at once, and a price set for later takes effect when its moment comes."""

import re
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.conf import settings
from django.db.models import F
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from billing.models import Plan, Price, PriceBookVersion, StoragePrice, SubsidyProgramme, SubsidyUsage
from billing.quote import load_price_book, quote
from billing.rules import month_of
from catalog.models import InstanceSpec, Node
from core.errors import ServiceError

pytestmark = pytest.mark.django_db


def _pricing(client) -> str:
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    response = client.get(reverse("catalog:pricing"))
    assert response.status_code == 200
    return response.content.decode()


def _staff(user) -> Client:
    staff = Client()
    staff.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    staff.force_login(user)
    return staff


def _minute(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def _warm(client, *shown):
    """Two page views and a quote: the shared price book is built and then served from memory."""
    for _ in range(2):
        html = _pricing(client)
        for text in shown:
            assert text in html


def test_a_price_added_in_the_back_office_shows_on_the_page_and_in_quotes_at_once(client, finance_user, catalog):
    a100 = catalog["a100-80g"]
    _warm(client, "¥4.80")
    assert quote(chip=a100).list_per_card_hour == Decimal("4.800000")

    now = timezone.now().replace(second=0, microsecond=0)
    response = _staff(finance_user).post(
        reverse("ops:prices"),
        {"chip": "a100-80g", "per_hour": "5.55", "effective_from": _minute(now), "note": "Supply shortage"},
    )

    assert response.status_code == 302
    assert "¥5.55" in _pricing(client)
    assert quote(chip=a100).list_per_card_hour == Decimal("5.550000")


def test_a_price_set_for_later_takes_effect_at_its_moment_with_no_write_then(client, finance_user, catalog):
    a100 = catalog["a100-80g"]
    with time_machine.travel(timezone.now().replace(second=0, microsecond=0), tick=False) as clock:
        change = timezone.now() + timedelta(hours=1)
        response = _staff(finance_user).post(
            reverse("ops:prices"), {"chip": "a100-80g", "per_hour": "5.55", "effective_from": _minute(change)}
        )
        assert response.status_code == 302
        _warm(client, "¥4.80")
        clock.shift(timedelta(minutes=59, seconds=59))
        assert "¥5.55" not in _pricing(client)
        assert quote(chip=a100).list_per_card_hour == Decimal("4.800000")

        clock.shift(timedelta(seconds=1))

        assert "¥5.55" in _pricing(client)
        assert quote(chip=a100).list_per_card_hour == Decimal("5.550000")
        # A quote for a moment before the change still uses the price in force then.
        assert quote(chip=a100, at=change - timedelta(seconds=1)).list_per_card_hour == Decimal("4.800000")


def test_a_quote_for_another_moment_never_takes_the_book_for_now(catalog):
    a100 = catalog["a100-80g"]
    change = timezone.now() + timedelta(days=1)
    Price.objects.create(chip=a100, per_hour=Decimal("4.2"), effective_from=change)
    assert quote(chip=a100).list_per_card_hour == Decimal("4.800000")

    assert quote(chip=a100, at=change).list_per_card_hour == Decimal("4.200000")
    assert quote(chip=a100).list_per_card_hour == Decimal("4.800000")
    assert quote(chip=a100, at=change + timedelta(days=30)).list_per_card_hour == Decimal("4.200000")


def test_pausing_a_programme_in_the_back_office_removes_its_discount_at_once(client, finance_user, catalog):
    ascend = catalog["ascend-910b"]
    _warm(client, "¥1.71")
    assert quote(chip=ascend).payable_per_card_hour == Decimal("1.710000")
    staff = _staff(finance_user)

    staff.post(reverse("ops:pause-programme", args=["xinchuang-2026"]), {"reason": "Budget review"})

    assert "¥1.71" not in _pricing(client)
    assert quote(chip=ascend).payable_per_card_hour == Decimal("1.900000")

    staff.post(reverse("ops:resume-programme", args=["xinchuang-2026"]), {"reason": "Approved"})

    assert "¥1.71" in _pricing(client)
    assert quote(chip=ascend).payable_per_card_hour == Decimal("1.710000")


def test_a_programmes_rate_and_chips_changed_in_the_admin_apply_at_once(client, superuser, catalog):
    ascend, mlu = catalog["ascend-910b"], catalog["mlu370-x8"]
    _warm(client, "¥1.71")
    assert quote(chip=mlu).payable_per_card_hour == Decimal("1.530000")
    programme = SubsidyProgramme.objects.get(slug="xinchuang-2026")
    starts = timezone.localtime(programme.starts_at)

    response = _staff(superuser).post(
        reverse("admin:billing_subsidyprogramme_change", args=[programme.pk]),
        {
            "slug": programme.slug,
            "name": programme.name,
            "name_zh": programme.name_zh,
            "rate": "0.20",
            "chips": [mlu.pk, catalog["dcu-z100"].pk],
            "zones": list(programme.zones.values_list("pk", flat=True)),
            "starts_at_0": starts.strftime("%Y-%m-%d"),
            "starts_at_1": starts.strftime("%H:%M:%S"),
            "ends_at_0": "",
            "ends_at_1": "",
            "budget": programme.budget,
            "monthly_cap_per_user": programme.monthly_cap_per_user,
            "eligibility": programme.eligibility,
            "active": "on",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    html = _pricing(client)
    assert "¥1.71" not in html  # the 910B has left the programme
    assert "¥1.36" in html  # the MLU370 at 20% off ¥1.70
    assert quote(chip=ascend).payable_per_card_hour == Decimal("1.900000")
    assert quote(chip=mlu).payable_per_card_hour == Decimal("1.360000")


def test_a_budget_cut_in_the_back_office_and_the_budget_running_out_both_apply_at_once(client, finance_user, catalog):
    ascend = catalog["ascend-910b"]
    _warm(client, "¥1.71")
    programme = SubsidyProgramme.objects.get(slug="xinchuang-2026")
    SubsidyProgramme.objects.filter(pk=programme.pk).update(spent=Decimal("999999.99"))  # no signal, as the ledger

    assert quote(chip=ascend).subsidy_per_hour == Decimal("0.010000")  # the one fen left
    response = _staff(finance_user).post(
        reverse("ops:programme-budget", args=["xinchuang-2026"]), {"budget": "999999.99", "reason": "Fund closed"}
    )
    assert response.status_code == 302
    assert "¥1.71" not in _pricing(client)
    assert quote(chip=ascend).subsidy_per_hour == 0


def test_a_plan_changed_in_the_admin_applies_at_once(client, superuser, catalog):
    a100 = catalog["a100-80g"]
    _warm(client, "¥103.68")  # a day of one A100 on the daily plan: 4.80 × 24 × 0.9
    daily = Plan.objects.get(slug="daily")
    fields = {
        "slug": daily.slug,
        "name": daily.name,
        "name_zh": daily.name_zh,
        "factor": "0.8",
        "spot_factor": "",
        "period_minutes": daily.period_minutes,
        "active": "on",
        "sort_order": daily.sort_order,
    }
    staff = _staff(superuser)

    response = staff.post(reverse("admin:billing_plan_change", args=[daily.pk]), fields)

    assert response.status_code == 302
    assert "¥92.16" in _pricing(client)
    assert quote(chip=a100, plan="daily", hours=24).payable_total == Decimal("92.16")

    staff.post(reverse("admin:billing_plan_change", args=[daily.pk]), fields | {"active": ""})

    assert "¥92.16" not in _pricing(client)
    with pytest.raises(ServiceError, match="Unknown plan"):
        quote(chip=a100, plan="daily", hours=24)


def test_draining_a_chips_last_nodes_in_a_zone_moves_its_quotes_at_once(ops_user, catalog):
    a800 = catalog["a800-80g"]
    assert quote(chip=a800).zone_slug is not None
    staff = _staff(ops_user)

    for node in Node.objects.filter(chip=a800).select_related("zone"):
        staff.post(reverse("ops:drain-node", args=[node.zone.slug, node.name]), {"reason": "Maintenance"})

    assert quote(chip=a800).zone_slug is None
    assert a800.pk not in load_price_book().offers


def test_a_change_committed_by_another_process_is_seen_on_the_next_read(catalog):
    a100 = catalog["a100-80g"]
    assert quote(chip=a100).list_per_card_hour == Decimal("4.800000")
    # Another worker's change: its rows and the new price version, written where no signal of this process runs.
    Price.objects.bulk_create([Price(chip=a100, per_hour=Decimal("6"), effective_from=timezone.now())])
    assert quote(chip=a100).list_per_card_hour == Decimal("4.800000")  # the version has not moved: the shared book

    PriceBookVersion.objects.update(token=uuid.uuid4())

    assert quote(chip=a100).list_per_card_hour == Decimal("6.000000")


def test_what_a_programme_has_spent_and_a_users_usage_are_read_every_time(catalog, owner):
    programme = SubsidyProgramme.objects.get(slug="xinchuang-2026")
    first = load_price_book(user=owner)
    # Both are kept by the ledger with no signal (``bulk_update`` and ``update``), as every charge does.
    SubsidyProgramme.objects.filter(pk=programme.pk).update(spent=F("budget") - Decimal("1"))
    SubsidyUsage.objects.create(programme=programme, user=owner, month=month_of(timezone.now()), amount=Decimal("7"))

    second = load_price_book(user=owner)

    assert second.prices is first.prices  # the shared part is shared
    assert {p.slug: p.remaining for p in second.programmes}["xinchuang-2026"] == Decimal("1.00")
    assert second.usage[programme.pk] == Decimal("7")


def test_a_signed_in_book_costs_two_queries_once_the_shared_part_is_built(catalog, owner, django_assert_num_queries):
    programme = SubsidyProgramme.objects.get(slug="xinchuang-2026")
    SubsidyUsage.objects.create(programme=programme, user=owner, month=month_of(timezone.now()), amount=Decimal("3"))
    load_price_book(user=owner)
    with django_assert_num_queries(2):  # the price version; what programmes have spent with the user's usage
        book = load_price_book(user=owner)
    assert book.usage == {programme.pk: Decimal("3")}
    assert {p.slug: p.remaining for p in book.programmes}["xinchuang-2026"] == programme.budget - programme.spent


def test_a_programme_set_for_later_runs_exactly_between_its_start_and_end(client, finance_user, catalog):
    dcu = catalog["dcu-z100"]
    with time_machine.travel(timezone.now().replace(second=0, microsecond=0), tick=False) as clock:
        starts = timezone.now() + timedelta(hours=1)
        response = _staff(finance_user).post(
            reverse("ops:subsidies"),
            {
                "slug": "dcu-launch",
                "name": "DCU launch offer",
                "rate": "0.5",
                "chips": [dcu.pk],
                "starts_at": _minute(starts),
                "ends_at": _minute(starts + timedelta(hours=1)),
                "eligibility": "everyone",
                "reason": "Launch",
            },
        )
        assert response.status_code == 302
        assert quote(chip=dcu).programme.slug == "xinchuang-2026"

        clock.shift(timedelta(hours=1))
        assert quote(chip=dcu).programme.slug == "dcu-launch"
        assert "DCU launch offer" in _pricing(client)

        clock.shift(timedelta(hours=1))
        assert quote(chip=dcu).programme.slug == "xinchuang-2026"
        assert "DCU launch offer" not in _pricing(client)


def test_a_visitors_price_list_is_rendered_once_and_then_served_in_three_queries(
    client, catalog, django_assert_max_num_queries
):
    first = _pricing(client)
    with django_assert_max_num_queries(3):  # the price version, what programmes have spent, the storage prices
        again = _pricing(client)
    token = re.compile(r'"X-CSRFToken": "[^"]+"|name="csrfmiddlewaretoken" value="[^"]+"')  # masked afresh each time
    assert token.sub("", again) == token.sub("", first) and "¥4.80" in again


def test_the_price_list_kept_for_visitors_follows_an_instance_spec_saved_as_the_admin_does(client, catalog):
    spec = InstanceSpec.objects.filter(chip__isnull=False, active=True).first()
    _warm(client, f"<code>{spec.slug}</code>")
    spec.memory_gb = 7777
    spec.save()

    assert ">7777<" in _pricing(client)
    spec.active = False
    spec.save()
    assert f"<code>{spec.slug}</code>" not in _pricing(client)


def test_the_price_list_kept_for_visitors_follows_what_a_programme_spends_and_each_language_has_its_own(
    client, catalog
):
    programme = SubsidyProgramme.objects.filter(budget__isnull=False).first() or SubsidyProgramme.objects.first()
    SubsidyProgramme.objects.filter(pk=programme.pk).update(budget=Decimal("1000.00"), spent=Decimal("0"))
    _warm(client, "¥1,000.00 of budget left")
    SubsidyProgramme.objects.filter(pk=programme.pk).update(spent=F("spent") + Decimal("250"))  # as the ledger does

    assert "¥750.00 of budget left" in _pricing(client)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    chinese = client.get(reverse("catalog:pricing")).content.decode()
    assert "价格" in chinese and "of budget left" not in chinese


def test_the_price_list_kept_for_visitors_follows_a_new_disk_price_at_its_moment(client, catalog):

    _warm(client, "Cloud disks:")
    later = timezone.now() + timedelta(minutes=5)
    StoragePrice.objects.create(resource="disk", per_gb_day=Decimal("9.87"), effective_from=timezone.now())
    assert "¥9.87 per GB-day" in _pricing(client)
    StoragePrice.objects.create(resource="disk", per_gb_day=Decimal("1.23"), effective_from=later)
    assert "¥1.23 per GB-day" not in _pricing(client)
    with time_machine.travel(later + timedelta(seconds=1)):
        assert "¥1.23 per GB-day" in _pricing(client)
