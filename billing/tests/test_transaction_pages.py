"""Pages of the transactions list, on the page and through the API: a deep page is read backwards from the far end
of the listing and must hold exactly the rows, in exactly the order, of the plain newest-first slice."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing import ledger
from billing.choices import AccountKind, TransactionKind
from billing.models import LedgerTransaction
from billing.statements import filtered_transactions
from core.paging import BothEnds

PAGE = 50
COUNT = 7 * PAGE + 13  # a partial last page


def _history(user, count=COUNT):
    """``count`` credits in runs of nine posted at the same instant (as a tick posts them), so that the order
    among equal times rests on the primary key; every third is a refund, the rest adjustments."""
    accounts = ledger.user_accounts([user.pk])[user.pk]
    adjustments = ledger.system_account(AccountKind.ADJUSTMENTS)
    start = timezone.now() - timedelta(days=30)
    ledger.post_batch(
        [
            ledger.Posting(
                kind=TransactionKind.REFUND if n % 3 == 0 else TransactionKind.ADJUSTMENT,
                idempotency_key=f"pages:{uuid.uuid4()}",
                entries=((adjustments.pk, Decimal("-1")), (accounts[AccountKind.USER_CASH].pk, Decimal("1"))),
                user_id=user.pk,
                at=start + timedelta(minutes=n // 9),
            )
            for n in range(count)
        ]
    )


def _newest_first(user):
    return list(LedgerTransaction.objects.filter(user=user).order_by("-created_at", "-pk").values_list("pk", flat=True))


@pytest.mark.django_db
def test_every_slice_read_from_either_end_holds_the_rows_of_the_plain_slice(owner):
    _history(owner)
    expected = _newest_first(owner)
    listing = BothEnds(filtered_transactions(owner))
    middle = COUNT // 2
    for start, stop in [
        (0, PAGE),
        (middle - PAGE, middle),
        (middle - 1, middle + PAGE - 1),
        (middle, middle + PAGE),
        (middle + 1, middle + 1 + PAGE),
        (COUNT - PAGE, COUNT),
        (7 * PAGE, COUNT + PAGE),
        (COUNT - 1, COUNT),
        (0, COUNT),
        (COUNT, COUNT + PAGE),
    ]:
        assert [tx.pk for tx in listing[start:stop]] == expected[start:stop], (start, stop)


@pytest.mark.django_db
def test_every_page_of_the_transactions_list_is_the_newest_first_order(owner_client, owner):
    _history(owner)
    expected = _newest_first(owner)
    pages = -(-COUNT // PAGE)
    for number in range(1, pages + 1):
        response = owner_client.get(f"/billing/transactions/?page={number}")
        shown = [tx.pk for tx in response.context["transactions"]]
        assert shown == expected[(number - 1) * PAGE : number * PAGE], number
    assert len(shown) == COUNT % PAGE


@pytest.mark.django_db
def test_every_offset_of_the_transactions_api_is_the_newest_first_order(owner_api, owner):
    _history(owner)
    public_ids = dict(LedgerTransaction.objects.filter(user=owner).values_list("pk", "public_id"))
    expected = [str(public_ids[pk]) for pk in _newest_first(owner)]
    for offset in [0, 1, COUNT // 2 - 1, COUNT // 2, COUNT // 2 + 1, COUNT - PAGE, COUNT - 13, COUNT - 1, COUNT]:
        body = owner_api.get(f"/api/v1/transactions?offset={offset}&limit={PAGE}").json()
        assert body["count"] == COUNT
        assert [row["id"] for row in body["results"]] == expected[offset : offset + PAGE], offset


@pytest.mark.django_db
def test_a_filtered_deep_page_is_read_the_same_way(owner_client, owner):
    _history(owner)
    expected = list(
        LedgerTransaction.objects.filter(user=owner, kind=TransactionKind.ADJUSTMENT)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)
    )
    for number in range(1, 6):
        response = owner_client.get(f"/billing/transactions/?kind=adjustment&page={number}")
        shown = [tx.pk for tx in response.context["transactions"]]
        assert shown == expected[(number - 1) * PAGE : number * PAGE], number


def test_a_listing_without_a_total_order_is_refused():
    with pytest.raises(ValueError, match="total order"):
        BothEnds(LedgerTransaction.objects.order_by("-created_at"))


@pytest.mark.parametrize("query", ["until=9999-12-31", "since=0001-01-01", "since=2026-01-01&until=2100-01-01"])
def test_a_filter_date_out_of_this_century_is_refused_on_the_page_and_in_the_api(owner_client, owner_api, query):
    owner_client.cookies["django_language"] = "en"
    page = owner_client.get(f"/billing/transactions/?{query}")
    assert page.status_code == 400 and "Give a date from 2000-01-01 to 2099-12-31." in page.content.decode()
    owner_client.cookies["django_language"] = "zh-hans"
    assert (
        "请填写 2000-01-01 至 2099-12-31 之间的日期。"
        in owner_client.get(f"/billing/transactions/?{query}").content.decode()
    )
    answer = owner_api.get(f"/api/v1/transactions?{query}")
    assert answer.status_code == 400 and "2099-12-31" in str(answer.json())
