"""The set-based writes of a tick store exactly what the ORM would: text with quotes and braces, NULLs, fen."""

import uuid
from decimal import Decimal

import pytest
from django.utils import timezone

from billing import ledger
from billing.choices import AccountKind, TransactionKind
from billing.models import Account, LedgerEntry, LedgerTransaction, SpendLine

AWKWARD = ['quote " and \\ backslash', "braces {a,b} and, commas", "", "NULL", "名字 ✓"]


@pytest.mark.django_db
def test_a_batch_posting_stores_each_field_as_given(owner):
    accounts = ledger.user_accounts([owner.pk])[owner.pk]
    adjustments = ledger.system_account(AccountKind.ADJUSTMENTS)
    cash = accounts[AccountKind.USER_CASH]
    at = timezone.now()
    resources = [uuid.uuid4(), None, uuid.uuid4(), None, uuid.uuid4()]
    postings = [
        ledger.Posting(
            kind=TransactionKind.ADJUSTMENT,
            idempotency_key=f"bulk:{n}:{reference}",
            entries=((adjustments.pk, Decimal(f"-{n}.05")), (cash.pk, Decimal(f"{n}.05"))),
            user_id=owner.pk,
            reference=reference,
            resource_id=resources[n],
            minutes=n,
            at=at,
        )
        for n, reference in enumerate(AWKWARD)
    ]
    created = ledger.post_batch(postings)
    # The returned transactions are the stored ones, primary keys included.
    stored = {tx.pk: tx for tx in LedgerTransaction.objects.filter(user=owner)}
    assert [stored[tx.pk].idempotency_key for tx in created] == [p.idempotency_key for p in postings]
    for n, tx in enumerate(created):
        row = stored[tx.pk]
        assert (row.reference, row.resource_id, row.minutes, row.created_at) == (AWKWARD[n], resources[n], n, at)
        assert (row.member_id, row.topup_id, row.public_id) == (None, None, tx.public_id)
        assert row.user_amount == Decimal(f"{n}.05")
        assert sorted(LedgerEntry.objects.filter(transaction=row).values_list("amount", flat=True)) == [
            Decimal(f"-{n}.05"),
            Decimal(f"{n}.05"),
        ]
    assert Account.objects.get(pk=cash.pk).balance == sum(Decimal(f"{n}.05") for n in range(len(AWKWARD)))
    assert ledger.check() == []


@pytest.mark.django_db
def test_spend_added_twice_to_the_same_line_is_summed(owner):
    # Given a usage charge for a resource, booked in two batches
    accounts = ledger.user_accounts([owner.pk])[owner.pk]
    ledger.post(
        ledger.Posting(
            kind=TransactionKind.ADJUSTMENT,
            idempotency_key="bulk:fund",
            user_id=owner.pk,
            entries=(
                (ledger.system_account(AccountKind.ADJUSTMENTS).pk, Decimal("-10")),
                (accounts[AccountKind.USER_CASH].pk, Decimal("10")),
            ),
        )
    )
    revenue = ledger.system_account(AccountKind.REVENUE)
    resource = uuid.uuid4()
    for minute in (1, 2):
        ledger.post(
            ledger.Posting(
                kind=TransactionKind.USAGE,
                idempotency_key=f"bulk:usage:{minute}",
                entries=((accounts[AccountKind.USER_CASH].pk, Decimal("-0.10")), (revenue.pk, Decimal("0.10"))),
                user_id=owner.pk,
                resource_id=resource,
                minutes=1,
            )
        )
    line = SpendLine.objects.get(user=owner, resource_id=resource)
    assert (line.minutes, line.amount_fen) == (2, -20)
    assert ledger.check() == []


@pytest.mark.django_db
def test_a_batch_with_keys_already_booked_books_only_the_new_ones_and_returns_every_stored_transaction(owner):
    accounts = ledger.user_accounts([owner.pk])[owner.pk]
    adjustments = ledger.system_account(AccountKind.ADJUSTMENTS)
    cash = accounts[AccountKind.USER_CASH]

    def posting(n):
        return ledger.Posting(
            kind=TransactionKind.ADJUSTMENT,
            idempotency_key=f"again:{n}",
            user_id=owner.pk,
            entries=((adjustments.pk, Decimal("-1.50")), (cash.pk, Decimal("1.50"))),
        )

    first = ledger.post_batch([posting(0), posting(1)])
    # When the same postings come again beside a new one
    second = ledger.post_batch([posting(1), posting(2), posting(0)])
    # Then the old keys answer with the transactions booked before, the new one is booked, and money moved once each
    assert [tx.pk for tx in second[::2]] == [first[1].pk, first[0].pk]
    assert LedgerTransaction.objects.filter(user=owner).count() == 3
    assert Account.objects.get(pk=cash.pk).balance == Decimal("4.50")
    # and every transaction handed back is whole: each field as stored, none left to load
    for tx in second:
        stored = LedgerTransaction.objects.get(pk=tx.pk)
        assert tx.get_deferred_fields() == set()
        assert {f.attname: getattr(tx, f.attname) for f in LedgerTransaction._meta.concrete_fields} == {
            f.attname: getattr(stored, f.attname) for f in LedgerTransaction._meta.concrete_fields
        }
    assert ledger.check() == []
