"""Money reads one way on every page: to the fen, and a minus sign before the ¥."""

import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.template import Context, Template

from billing.metering import close_usage, open_usage
from billing.models import Notification
from billing.quote import quote

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 2, 9, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


def _render(text: str, **context) -> str:
    return Template("{% load money %}" + text).render(Context(context))


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Decimal("1.718333"), "¥1.718333"),
        (Decimal("1.026"), "¥1.026"),
        (Decimal("4.8"), "¥4.80"),
        (Decimal("0.0285"), "¥0.0285"),  # a per-minute price: never rounded to ¥0.03
        (Decimal("0.041667"), "¥0.041667"),
        (Decimal("0.000694"), "¥0.000694"),  # below one fen: still exact, never ¥0.00
        (Decimal("1.900000"), "¥1.90"),
        (Decimal("0"), "¥0.00"),
        (Decimal("-0.03"), "−¥0.03"),
    ],
)
def test_a_unit_price_is_shown_exactly_with_the_sign_before_the_currency(value, shown):
    assert _render("{{ v|cny_rate }}", v=value) == shown


def test_a_negative_total_reads_minus_yuan_not_yuan_minus():
    assert _render("{{ v|cny }}", v=Decimal("-0.19")) == "−¥0.19"
    assert _render("{{ v|cny }}", v=Decimal("-27648")) == "−¥27,648.00"


def test_the_transactions_page_shows_charges_as_minus_yuan(owner_client, owner, catalog, fund):
    fund(owner, "20")
    resource = uuid.uuid4()
    q = quote(chip=catalog["mlu370-x8"], cards=1, at=START)
    open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=START, label="train")
    with time_machine.travel(START + timedelta(minutes=7), tick=False):
        close_usage(resource_id=resource, ended_at=START + timedelta(minutes=7))

    html = owner_client.get("/billing/transactions/").content.decode()

    assert "−¥" in html
    assert "¥-" not in html and "¥−" not in html


def test_the_low_balance_alert_shows_the_balance_to_the_fen_and_the_hourly_rate_exactly(owner):

    note = Notification(user=owner, kind="low_balance", params={"balance": "1.5", "hourly": "1.718300"})

    assert "¥1.50" in note.message and "¥1.7183 an hour" in note.message
