"""The audit log reads as sentences a person follows: the kind of thing acted on in the page's language, each
changed field by its label with its values (choices by name, times in local time) — never a Python dict or a
model's internal name."""

import uuid

import pytest
from django.urls import reverse

from accounts.ops.audit import Actor
from backoffice import services
from catalog.models import Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged(finance_user, ops_user, owner, fund, catalog):
    fund(owner, "20")
    services.adjust_balance(
        Actor(finance_user),
        user_id=owner.public_id,
        amount="-7.50",
        reason="Refund of a double top-up",
        idempotency_key=str(uuid.uuid4()),
    )
    node = Node.objects.select_related("zone").first()
    services.set_drained(Actor(ops_user), zone_slug=node.zone.slug, name=node.name, drained=True, reason="维护")
    return finance_user


def _rows(client, user, language):
    client.force_login(user)
    client.cookies["django_language"] = language
    page = client.get(reverse("ops:audit")).content.decode()
    return page[page.index('id="audit-table"') :]


def test_in_chinese_the_log_names_the_kind_and_each_change_by_its_label(client, logged):
    rows = _rows(client, logged, "zh-hans")

    assert "{'" not in rows and "'cash'" not in rows and ">user<" not in rows and ">node<" not in rows
    assert "现金余额：20.00 → 12.50" in rows or "现金余额: 20.00 → 12.50" in rows
    assert "用户" in rows and "节点" in rows


def test_in_english_the_same_entries_read_as_words(client, logged):
    rows = _rows(client, logged, "en")

    assert "Cash balance: 20.00 → 12.50" in rows and "Amount: -7.50" in rows
    assert "Drained: no → yes" in rows and "Cards reserved: 0<" in rows
