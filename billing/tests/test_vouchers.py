"""Vouchers (代金券): redeemed once, paying for the compute they cover before the trial credit and cash, expiring into
the operator's account, and in the books (``check_ledger``)."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import services as console_services
from accounts.ops.models import AuditEntry
from billing import ledger, metering, vouchers, wallet
from billing.choices import AccountKind
from billing.models import (
    Account,
    LedgerEntry,
    LedgerTransaction,
    Notification,
    Plan,
    Voucher,
    VoucherBatch,
    VoucherCode,
)
from billing.quote import quote
from catalog.models import Chip
from core.errors import Conflict, PaymentRequired
from core.field_errors import FieldError
from teams import services as team_services
from teams.models import TeamEvent
from tests.fixtures.concurrency import race
from tests.fixtures.factories import UserFactory
from tests.fixtures.personas import _token_client

pytestmark = pytest.mark.django_db


def _batch(*, amount="50", days=30, quantity=3, chips=(), plans=(), min_spend="0", one_per_user=True, shared=""):
    return vouchers.create_batch(
        name="Ascend launch week",
        name_zh="昇腾体验周",
        amount=Decimal(amount),
        expires_at=timezone.now() + timedelta(days=days),
        quantity=quantity,
        min_spend=Decimal(min_spend),
        one_per_user=one_per_user,
        chips=Chip.objects.filter(slug__in=chips),
        plans=Plan.objects.filter(slug__in=plans),
        shared_code=shared,
    )


def _code(batch, n=0):
    return vouchers.display_code(batch.codes.order_by("pk")[n].code)


def _run(user, chip, minutes, *, cards=1):
    """Meter ``minutes`` of pay-as-you-go ``cards`` of ``chip`` and return the charge's transaction and quote."""
    start = timezone.now() - timedelta(minutes=minutes)
    q = quote(chip=Chip.objects.get(slug=chip), cards=cards)
    resource = uuid.uuid4()
    metering.open_usage(user=user, kind="instance", resource_id=resource, quote=q, started_at=start)
    metering.close_usage(resource_id=resource, ended_at=start + timedelta(minutes=minutes))
    return LedgerTransaction.objects.filter(resource_id=resource).get(), q


def _balances(user):
    return {
        a.kind if a.kind != AccountKind.USER_VOUCHER else f"voucher:{a.pk}": a.balance
        for a in Account.objects.filter(user=user)
    }


def test_a_code_redeems_a_voucher_shown_in_the_wallet_with_its_expiry(catalog):
    batch = _batch(chips=["ascend-910b"])
    user = UserFactory()
    voucher = vouchers.redeem(user, _code(batch).lower().replace("-", " "), by=user)  # typed loosely
    assert voucher.amount == Decimal("50.00") and voucher.account.balance == Decimal("50.00")
    summary = wallet.summary(user, list_vouchers=True)
    assert [(v.name, v.balance, v.expires_at) for v in summary.vouchers] == [
        ("Ascend launch week", Decimal("50.00"), batch.expires_at)
    ]
    assert "Ascend 910B" in summary.vouchers[0].covers
    assert summary.compute_balance == Decimal("50.00")
    call_command("check_ledger")


def test_bad_codes_are_refused_with_what_is_wrong(catalog):
    batch = _batch(quantity=1, one_per_user=False)
    alice, bob = UserFactory(), UserFactory()
    with pytest.raises(FieldError) as bad:
        vouchers.redeem(alice, "!!", by=alice)
    assert bad.value.field == "code" and bad.value.code == "invalid_voucher_code"
    with pytest.raises(FieldError) as unknown:
        vouchers.redeem(alice, "ZZZZ-ZZZZ-ZZZZ", by=alice)
    assert unknown.value.code == "unknown_voucher"
    vouchers.redeem(alice, _code(batch), by=alice)
    with pytest.raises(Conflict) as again:
        vouchers.redeem(alice, _code(batch), by=alice)
    assert again.value.code == "voucher_already_redeemed"
    with pytest.raises(Conflict) as used_up:
        vouchers.redeem(bob, _code(batch), by=bob)
    assert used_up.value.code == "voucher_used_up"
    expired = _batch(quantity=1)
    expired.expires_at = timezone.now() - timedelta(minutes=1)
    expired.save()
    with pytest.raises(FieldError) as late:
        vouchers.redeem(bob, _code(expired), by=bob)
    assert late.value.code == "voucher_expired"
    assert Voucher.objects.filter(redeemed_by=bob).count() == 0


def test_one_per_person_batches_refuse_a_second_code_and_a_shared_code_counts_its_uses(catalog):
    batch = _batch(quantity=2)
    user = UserFactory()
    vouchers.redeem(user, _code(batch, 0), by=user)
    with pytest.raises(Conflict) as second:
        vouchers.redeem(user, _code(batch, 1), by=user)
    assert second.value.code == "voucher_once_per_person"
    shared = _batch(quantity=2, shared="WELCOME2026")
    for _i in range(2):
        person = UserFactory()
        vouchers.redeem(person, "welcome2026", by=person)
    late = UserFactory()
    with pytest.raises(Conflict):
        vouchers.redeem(late, "WELCOME2026", by=late)
    assert VoucherCode.objects.get(batch=shared).redeemed == 2


def test_a_covered_run_is_paid_by_the_voucher_first_then_the_trial_credit_then_cash(catalog, fund):
    user = UserFactory()
    fund(user, "100")
    wallet.grant_trial_credit(user, user.email)
    vouchers.redeem(user, _code(_batch(amount="1", chips=["ascend-910b"])), by=user)
    before = _balances(user)
    tx, q = _run(user, "ascend-910b", 60, cards=8)
    paid = q.payable_per_hour.quantize(Decimal("0.01"))
    assert paid > Decimal("1.00") + Decimal("10.00")  # more than the voucher and the trial credit together
    after = _balances(user)
    changes = {k: after[k] - before[k] for k in after}
    voucher_key = next(k for k in after if k.startswith("voucher:"))
    assert changes[voucher_key] == Decimal("-1.00")
    assert changes[AccountKind.USER_TRIAL] == Decimal("-10.00")
    assert changes[AccountKind.USER_CASH] == -(paid - Decimal("11.00"))
    assert tx.user_amount == -paid
    assert ledger.check() == []


def test_an_uncovered_run_is_paid_from_cash_and_leaves_the_voucher(catalog, fund):
    user = UserFactory()
    fund(user, "100")
    voucher = vouchers.redeem(user, _code(_batch(chips=["ascend-910b"])), by=user)
    tx, _q = _run(user, "mlu370-x8", 30)
    voucher.account.refresh_from_db()
    assert voucher.account.balance == Decimal("50.00")
    assert wallet.summary(user).cash == Decimal("100.00") + tx.user_amount


def test_a_minimum_spend_limits_a_voucher_to_prepaid_plans_of_that_price(catalog, fund):
    user = UserFactory()
    fund(user, "500")
    voucher = vouchers.redeem(user, _code(_batch(amount="20", min_spend="30")), by=user)
    _run(user, "mlu370-x8", 30)  # pay-as-you-go: not covered
    voucher.account.refresh_from_db()
    assert voucher.account.balance == Decimal("20.00")
    daily = quote(chip=Chip.objects.get(slug="dcu-z100"), cards=1, plan="daily", minutes=1440)
    assert daily.payable_total >= Decimal("30")
    tx = wallet.charge_upfront(user=user, quote=daily, resource_id=uuid.uuid4(), idempotency_key="plan-1")
    voucher.account.refresh_from_db()
    assert voucher.account.balance == Decimal("0.00")
    cash_part = [e.amount for e in tx.entries.all() if e.account.kind == AccountKind.USER_CASH]
    assert cash_part == [-(daily.payable_total - Decimal("20.00"))]


def test_the_funds_gate_counts_a_voucher_only_for_what_it_covers(catalog):
    user = UserFactory()
    vouchers.redeem(user, _code(_batch(amount="200", chips=["ascend-910b"])), by=user)
    covered = quote(chip=Chip.objects.get(slug="ascend-910b"), cards=1)
    with transaction.atomic():
        wallet.check_launch_funds(user, covered)  # no cash, no trial credit: the voucher carries it
    uncovered = quote(chip=Chip.objects.get(slug="mlu370-x8"), cards=1)
    with pytest.raises(PaymentRequired), transaction.atomic():
        wallet.check_launch_funds(user, uncovered)


def test_a_voucher_only_wallet_runs_on_until_cash_goes_below_zero(
    catalog, arrears_calls, django_capture_on_commit_callbacks
):
    user = UserFactory()
    vouchers.redeem(user, _code(_batch(amount="200", chips=["ascend-910b"])), by=user)
    start = timezone.now() - timedelta(minutes=10)
    for chip in ("ascend-910b", "mlu370-x8"):  # the second is not covered: cash goes below zero
        q = quote(chip=Chip.objects.get(slug=chip), cards=1)
        metering.open_usage(user=user, kind="instance", resource_id=uuid.uuid4(), quote=q, started_at=start)
        with django_capture_on_commit_callbacks(execute=True):
            metering.meter()
        if chip == "ascend-910b":
            assert arrears_calls == []  # paid by the voucher; cash stays at zero
    assert [reason for _u, reason in arrears_calls] == ["arrears"]


def test_expiry_moves_what_is_left_to_the_operators_account_once(catalog):
    user = UserFactory()
    voucher = vouchers.redeem(user, _code(_batch(amount="50")), by=user)
    _run(user, "mlu370-x8", 5)
    voucher.account.refresh_from_db()
    left = voucher.account.balance
    assert Decimal("0") < left < Decimal("50")
    later = voucher.expires_at + timedelta(seconds=1)
    assert vouchers.expire_vouchers(later) == 1
    assert vouchers.expire_vouchers(later) == 0
    voucher.account.refresh_from_db()
    assert voucher.account.balance == 0
    assert ledger.system_account(AccountKind.VOUCHER_EXPIRED).balance == left
    assert Notification.objects.filter(user=user, kind="voucher_expired").count() == 1
    assert "expired" in Notification.objects.get(user=user, kind="voucher_expired").message
    assert vouchers.batch_stats([voucher.batch])[voucher.batch.pk]["expired"] == left
    call_command("check_ledger")


def test_an_expired_voucher_pays_for_nothing_even_before_its_expiry_is_booked(catalog, fund):
    user = UserFactory()
    fund(user, "10")
    voucher = vouchers.redeem(user, _code(_batch(amount="50")), by=user)
    Account.objects.filter(pk=voucher.account_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    Voucher.objects.filter(pk=voucher.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    tx, _q = _run(user, "mlu370-x8", 5)
    payers = {e.account.kind for e in tx.entries.all() if e.amount < 0 and e.account.user_id}
    assert payers == {AccountKind.USER_CASH}


def _tamper(kind, entries, at=None):
    """Book a balanced transaction straight into the tables, as a bug bypassing the ledger's rules would."""

    tx = LedgerTransaction.objects.create(
        kind=kind, idempotency_key=f"tamper:{uuid.uuid4()}", created_at=at or timezone.now()
    )
    for account, amount in entries:
        LedgerEntry.objects.create(transaction=tx, account=account, amount=amount, created_at=tx.created_at)
        Account.objects.filter(pk=account.pk).update(balance=account.balance + amount)
    return tx


def test_check_ledger_finds_voucher_money_moved_by_the_wrong_kind_or_after_expiry(catalog):
    user = UserFactory()
    voucher = vouchers.redeem(user, _code(_batch(amount="50")), by=user)
    assert ledger.check() == []
    adjustments = ledger.system_account(AccountKind.ADJUSTMENTS)
    tx = _tamper("withdrawal", [(voucher.account, Decimal("-20")), (adjustments, Decimal("20"))])
    problems = ledger.check()
    assert any(f"transaction {tx.pk}: a withdrawal moved money on a voucher" in p for p in problems), problems

    other = vouchers.redeem(user, _code(_batch(amount="30", one_per_user=False)), by=user)
    revenue = ledger.system_account(AccountKind.REVENUE)
    late = _tamper(
        "usage", [(other.account, Decimal("-5")), (revenue, Decimal("5"))], at=other.expires_at + timedelta(days=5)
    )
    assert any(f"transaction {late.pk}: a usage moved money on a voucher" in p for p in ledger.check())


def test_check_ledger_finds_a_voucher_holding_more_than_it_was_given(catalog):
    user = UserFactory()
    voucher = vouchers.redeem(user, _code(_batch(amount="50")), by=user)
    funding = ledger.system_account(AccountKind.VOUCHER_FUNDING)
    funding.refresh_from_db()
    _tamper("voucher_grant", [(funding, Decimal("-10")), (voucher.account, Decimal("10"))])
    problems = ledger.check()
    assert any("given 60.00 ≠ its amount 50.00" in p for p in problems), problems
    assert any("holds 60.00, more than 50.00" in p for p in problems), problems


def _twenty_redeem_one_code():
    batch = _batch(quantity=1, one_per_user=False)
    people = [UserFactory(email=f"racer-{i}@example.com") for i in range(20)]
    code = _code(batch)
    results = race([lambda p=p: vouchers.redeem(p, code, by=p) for p in people])
    won = [r for r in results if isinstance(r, Voucher)]
    assert len(won) == 1, results
    assert all(isinstance(r, Voucher | Conflict) for r in results), results
    assert Voucher.objects.filter(batch=batch).count() == 1
    assert VoucherCode.objects.get(batch=batch).redeemed == 1
    assert LedgerTransaction.objects.filter(kind="voucher_grant").count() == 1
    # One person racing themselves on a shared code also gets one voucher.
    shared = _batch(quantity=20, one_per_user=True, shared="RACE2026")
    person = UserFactory()
    results = race([lambda: vouchers.redeem(person, "RACE2026", by=person) for _i in range(20)])
    assert sum(isinstance(r, Voucher) for r in results) == 1, results
    assert VoucherCode.objects.get(batch=shared).redeemed == 1
    call_command("check_ledger")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_redemptions_of_one_code_give_one_voucher_on_postgresql(catalog):
    assert connection.vendor == "postgresql"
    _twenty_redeem_one_code()


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_redemptions_of_one_code_give_one_voucher_on_sqlite(catalog):
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL twin of this test runs there")
    _twenty_redeem_one_code()


# --- The pages, the API and the back office -------------------------------------------------------------------------


def _browser(user):

    client = Client()
    client.cookies["django_language"] = "en"
    client.force_login(user)
    return client


def test_the_wallet_page_redeems_a_code_and_says_what_is_wrong_with_a_bad_one(catalog):
    user = UserFactory()
    batch = _batch(chips=["ascend-910b"])
    page = _browser(user)
    unknown = page.post("/billing/vouchers/redeem/", {"code": "ZZZZ-ZZZZ-ZZZZ"})
    assert unknown.status_code == 404 and "No voucher has this code" in unknown.content.decode()
    empty = page.post("/billing/vouchers/redeem/", {"code": ""})
    assert empty.status_code == 400 and "Enter the voucher" in empty.content.decode()
    done = page.post("/billing/vouchers/redeem/", {"code": _code(batch)})
    assert done.status_code == 302
    wallet_page = page.get("/billing/").content.decode()
    assert "Ascend launch week" in wallet_page and "¥50.00" in wallet_page and "Expires" in wallet_page
    again = page.post("/billing/vouchers/redeem/", {"code": _code(batch)})
    assert again.status_code == 409 and "already redeemed" in again.content.decode()
    chinese = _chinese(user).get("/billing/").content.decode()
    assert "昇腾体验周" in chinese and "代金券" in chinese


def _chinese(user):

    client = Client()
    client.force_login(user)
    return client


def test_the_api_redeems_and_lists_vouchers_with_errors_as_json(catalog):

    user = UserFactory()
    batch = _batch(amount="20")
    api = _token_client(user)
    api.credentials(HTTP_AUTHORIZATION=api._credentials["HTTP_AUTHORIZATION"], HTTP_ACCEPT_LANGUAGE="en")
    bad = api.post("/api/v1/vouchers", {"code": "nope!"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_voucher_code"
    garbage = api.post("/api/v1/vouchers", {"code": {"a": 1}}, format="json")
    assert garbage.status_code == 400
    made = api.post("/api/v1/vouchers", {"code": _code(batch)}, format="json")
    assert made.status_code == 201 and made.json()["balance"] == "20.00"
    assert [v["amount"] for v in api.get("/api/v1/vouchers").json()["results"]] == ["20.00"]
    body = api.get("/api/v1/wallet").json()
    assert body["voucher_balance"] == "20.00" and body["compute_balance"] == "20.00"
    used = api.post("/api/v1/vouchers", {"code": _code(batch)}, format="json")
    assert used.status_code == 409 and used.json()["code"] == "voucher_already_redeemed"


def test_finance_creates_a_batch_and_exports_its_codes_audited_and_spreadsheet_safe(catalog, finance_user):

    page = _browser(finance_user)
    assert page.get("/ops/vouchers/").status_code == 200
    expires = (timezone.localtime() + timedelta(days=10)).strftime("%Y-%m-%dT%H:%M")
    ascend = Chip.objects.get(slug="ascend-910b")
    bad = page.post("/ops/vouchers/", {"name": "Spring", "amount": "-1", "expires_at": expires, "quantity": "5"})
    assert bad.status_code == 400
    made = page.post(
        "/ops/vouchers/",
        {
            "name": "Spring",
            "name_zh": "春季",
            "amount": "25",
            "expires_at": expires,
            "quantity": "5",
            "one_per_user": "on",
            "chips": [ascend.pk],
        },
    )
    assert made.status_code == 302
    batch = VoucherBatch.objects.get(name="Spring")
    assert batch.codes.count() == 5 and list(batch.chips.all()) == [ascend]
    listed = page.get("/ops/vouchers/").content.decode()
    assert "Spring" in listed and "0 / 5" in listed
    csv_text = page.get(f"/ops/vouchers/{batch.public_id}/codes.csv").content.decode()
    lines = csv_text.strip().splitlines()
    assert lines[0] == "code,uses,redeemed" and len(lines) == 6
    person = UserFactory()
    vouchers.redeem(person, lines[1].split(",")[0], by=person)
    assert "1 / 5" in page.get("/ops/vouchers/").content.decode()
    actions = set(AuditEntry.objects.filter(actor=finance_user).values_list("action", flat=True))
    assert {"voucher_batch_created", "voucher_codes_exported"} <= actions
    formula = vouchers.create_batch(
        name="x", amount=Decimal("1"), expires_at=timezone.now() + timedelta(days=1), quantity=1, shared_code="ABCDEF"
    )
    VoucherCode.objects.filter(batch=formula).update(code="=HYPERLINK(1)")
    assert "'=HYPERLINK" in page.get(f"/ops/vouchers/{formula.public_id}/codes.csv").content.decode()


def test_staff_without_the_role_cannot_create_or_export_and_others_do_not_see_the_page(catalog, plain_staff):
    batch = _batch()
    assert _browser(plain_staff).get("/ops/vouchers/").status_code == 403
    assert _browser(plain_staff).get(f"/ops/vouchers/{batch.public_id}/codes.csv").status_code == 403
    assert _browser(UserFactory()).get("/ops/vouchers/").status_code == 404


def test_a_voucher_for_other_chips_does_not_hold_back_the_low_balance_warning(
    catalog, fund, arrears_calls, django_capture_on_commit_callbacks
):
    user = UserFactory()
    fund(user, "1")
    vouchers.redeem(user, _code(_batch(amount="500", chips=["ascend-910b"])), by=user)
    q = quote(chip=Chip.objects.get(slug="mlu370-x8"), cards=1)
    metering.open_usage(
        user=user, kind="instance", resource_id=uuid.uuid4(), quote=q, started_at=timezone.now() - timedelta(minutes=20)
    )
    with django_capture_on_commit_callbacks(execute=True):
        metering.meter()
    assert Notification.objects.filter(user=user, kind="low_balance").count() == 1


def test_guessing_codes_is_limited_per_person(catalog):
    user = UserFactory()
    for _i in range(vouchers.REDEEM_ATTEMPTS_PER_HOUR):
        with pytest.raises(FieldError):
            vouchers.redeem(user, "WRONG-CODE-0000", by=user)
    with pytest.raises(vouchers.TooManyAttempts) as limited:
        vouchers.redeem(user, "WRONG-CODE-0000", by=user)
    assert limited.value.status == 429


def test_a_voucher_redeemed_with_a_teams_token_goes_to_the_teams_wallet_and_its_log(catalog):

    owner = UserFactory()
    team = team_services.create_team(owner, name="Voucher lab", slug="voucher-lab")
    token = console_services.create_api_token(owner, name="t", scope="read_write", team=team).plaintext
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT_LANGUAGE="en")
    batch = _batch(amount="30", quantity=2)
    assert api.post("/api/v1/vouchers", {"code": _code(batch, 0)}, format="json").status_code == 201
    assert Voucher.objects.get(batch=batch).user == team.account
    assert TeamEvent.objects.filter(team=team, action="voucher_redeemed", actor=owner).exists()
    again = api.post("/api/v1/vouchers", {"code": _code(batch, 1)}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "voucher_once_per_person"
