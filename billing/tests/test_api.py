"""POST /api/v1/quotes: public, the same breakdown as the pages, bad input as 400 JSON."""

from decimal import Decimal

import pytest
from django.utils import timezone

from billing.models import SubsidyUsage
from billing.subsidies import usage_month

pytestmark = pytest.mark.django_db
URL = "/api/v1/quotes"


def test_anyone_can_quote_eight_a100_for_thirty_days(anon_api, catalog):
    response = anon_api.post(URL, {"chip": "a100-80g", "cards": 8, "hours": "720"}, format="json")

    assert response.status_code == 200
    assert response.json()["payable_total"] == "27648.00"
    assert response.json()["currency"] == "CNY"


def test_the_910b_spot_quote_carries_the_subsidy_programme(anon_api, catalog):
    body = anon_api.post(URL, {"chip": "ascend-910b", "spot": True}, format="json").json()

    assert Decimal(body["payable_per_card_hour"]) == Decimal("1.026")
    assert body["subsidy_programme"]["slug"] == "xinchuang-2026"
    assert isinstance(body["payable_total"], str)


def test_a_spec_can_be_quoted_by_its_slug(anon_api, catalog):
    body = anon_api.post(URL, {"spec": "a100-80g-x8", "minutes": 43200}, format="json").json()

    assert body["payable_total"] == "27648.00"


def test_an_authenticated_callers_monthly_cap_is_applied(owner_api, owner, catalog, xinchuang_subsidy):
    SubsidyUsage.objects.create(
        programme=xinchuang_subsidy, user=owner, month=usage_month(timezone.now()), amount=Decimal("5000")
    )

    body = owner_api.post(URL, {"chip": "ascend-910b"}, format="json").json()

    assert Decimal(body["payable_per_card_hour"]) == Decimal("1.9")
    assert body["subsidy_limited"] is True


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"chip": "a100-80g", "cards": -1}, "invalid"),
        ({"chip": "a100-80g", "cards": "eight"}, "invalid"),
        ({"chip": "a100-80g", "minutes": 0}, "invalid"),
        ({"chip": "a100-80g", "hours": "1e40"}, "invalid"),
        ({"chip": "a100-80g", "hours": "NaN"}, "invalid"),
        ({"chip": "a100-80g", "minutes": 5, "hours": 1}, "invalid"),
        ({"chip": "h100"}, "unknown_chip"),
        ({"spec": "nope"}, "unknown_spec"),
        ({"chip": "a100-80g", "zone": "cn-east-xc"}, "xinchuang_zone_domestic_only"),
        ({"chip": "ascend-910b", "plan": "monthly", "spot": True}, "spot_not_offered"),
        ({"chip": "rtx-4090"}, "no_price"),
    ],
)
def test_bad_input_is_a_400_with_a_code_and_message(anon_api, catalog, payload, code):
    response = anon_api.post(URL, payload, format="json")

    assert response.status_code == (404 if code in {"unknown_chip", "unknown_spec"} else 400)  # not there: 404
    assert response.json()["code"] == code
    assert response.json()["message"]


def test_the_schema_documents_the_quote_endpoint(anon_api, catalog):
    schema = anon_api.get("/api/schema/", {"format": "json"}).json()

    assert "post" in schema["paths"]["/api/v1/quotes/"]
