"""Amounts are written one way: ASCII digits, an optional decimal point with up to two decimals, and a leading
minus only where a negative amount means something (staff adjustments). Python's Decimal() would also take
full-width digits ("１００"), other scripts' digits, underscores ("1_000") and exponents ("1e3"); every one of
those is refused with a message saying how to write the amount, and nothing is written."""

import uuid

import pytest
from django.urls import reverse

from backoffice.forms import BudgetForm, PriceForm
from billing import payments, wallet
from billing.models import LedgerTransaction, TopUp
from core.errors import ServiceError

pytestmark = pytest.mark.django_db

NOT_PLAIN = ["１００", "1_000", "٥٠", "+50", "1e3", "50.", ".5", "５0.5"]
MESSAGE = "The amount must be a number of yuan written with ASCII digits, e.g. 50 or 49.90."


@pytest.mark.parametrize("amount", NOT_PLAIN)
def test_the_amount_parser_takes_only_ascii_digits(amount):
    with pytest.raises(ServiceError) as refused:
        wallet.parse_amount(amount)
    assert refused.value.code == "invalid_amount"


@pytest.mark.parametrize("amount, value", [("50", "50.00"), (" 49.9 ", "49.90"), ("-7.50", "-7.50"), ("0", "0.00")])
def test_the_amount_parser_reads_plain_amounts(amount, value):
    assert str(wallet.parse_amount(amount)) == value


@pytest.mark.parametrize("amount", NOT_PLAIN)
def test_a_top_up_page_with_a_full_width_or_underscored_amount_is_refused(owner_client, amount):
    owner_client.cookies["django_language"] = "en"

    response = owner_client.post("/billing/topup/", {"amount": amount})

    assert response.status_code == 400 and MESSAGE in response.content.decode()
    assert not TopUp.objects.exists()


@pytest.mark.parametrize("amount", ["１００", "1_000", "1e2"])
def test_a_top_up_through_the_api_with_a_non_ascii_amount_is_a_400(owner_api, amount):
    response = owner_api.post("/api/v1/topups", {"amount": amount}, format="json", HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid" and MESSAGE in response.json()["message"]
    assert not TopUp.objects.exists()


def test_a_top_up_through_the_api_still_takes_a_json_number_or_a_plain_string(owner_api):
    assert owner_api.post("/api/v1/topups", {"amount": 50}, format="json").status_code == 201
    assert owner_api.post("/api/v1/topups", {"amount": "49.90"}, format="json").status_code == 201


@pytest.mark.parametrize("cap", ["５００", "5_00"])
def test_a_spending_cap_with_a_non_ascii_amount_is_refused_on_the_page_and_the_api(owner_client, owner_api, owner, cap):
    owner_client.cookies["django_language"] = "en"

    page = owner_client.post("/billing/spending-cap/", {"spending_cap": cap})
    api = owner_api.patch("/api/v1/wallet", {"spending_cap": cap}, format="json", HTTP_ACCEPT_LANGUAGE="en")

    assert page.status_code == 400 and MESSAGE in page.content.decode()
    assert api.status_code == 400 and MESSAGE in api.json()["message"]
    assert wallet.summary(owner).spending_cap is None


@pytest.mark.parametrize("amount", ["-５", "1_0", "５"])
def test_a_staff_adjustment_with_a_non_ascii_amount_posts_nothing(client, finance_user, owner, amount):
    client.force_login(finance_user)
    client.cookies["django_language"] = "en"

    response = client.post(
        reverse("ops:adjust-balance", args=[owner.public_id]),
        {"amount": amount, "reason": "typo", "idempotency_key": str(uuid.uuid4())},
    )

    assert response.status_code == 400 and MESSAGE in response.content.decode()
    assert not LedgerTransaction.objects.exists()


def test_the_top_up_service_refuses_text_amounts_not_written_in_ascii(owner):
    with pytest.raises(ServiceError, match="ASCII digits"):
        payments.start_topup(owner, "１００", base_url="http://testserver/")
    assert not TopUp.objects.exists()


def test_a_price_written_with_full_width_digits_is_refused_in_the_back_office():

    price = PriceForm(data={"per_hour": "４.80"})
    budget = BudgetForm(data={"budget": "1_000"})

    assert not price.is_valid() and price.errors["per_hour"] == [MESSAGE]
    assert not budget.is_valid() and budget.errors["budget"] == [MESSAGE]
