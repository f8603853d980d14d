"""The ¥10 trial credit: granted once per verified address, expiring through the ledger."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from accounts import services as console_services
from billing import ledger, wallet
from billing.models import LedgerTransaction, Notification, TrialGrant
from billing.quote import quote
from core.errors import PaymentRequired
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_verifying_an_email_grants_ten_yuan_of_trial_credit_expiring_in_30_days(owner):
    console_services.on_email_verified(owner, owner.email)

    s = wallet.summary(owner)
    assert s.trial == Decimal("10.00") and s.cash == 0
    assert timedelta(days=29, hours=23) < s.trial_expires_at - timezone.now() <= timedelta(days=30)


def test_the_trial_credit_is_granted_once_per_address_and_once_per_user(owner):
    console_services.on_email_verified(owner, owner.email)
    console_services.on_email_verified(owner, owner.email)
    console_services.on_email_verified(owner, "second-address@example.com")
    # The same mailbox with a +tag or other case is the same address, even for a new account.
    newcomer = UserFactory(email="other@example.com")
    console_services.on_email_verified(newcomer, "Owner+again@Example.com")

    assert wallet.summary(owner).trial == Decimal("10.00")
    assert wallet.summary(newcomer).trial == 0
    assert TrialGrant.objects.count() == 1


def test_expiry_is_a_ledger_transaction_and_runs_once(owner):
    wallet.grant_trial_credit(owner, owner.email)
    later = timezone.now() + timedelta(days=31)

    assert wallet.expire_trial_credits(later) == 1
    assert wallet.expire_trial_credits(later) == 0

    assert wallet.summary(owner).trial == 0
    expiry = LedgerTransaction.objects.get(kind="trial_expiry")
    assert expiry.user_amount == Decimal("-10.00")
    assert Notification.objects.filter(user=owner, kind="trial_expired").exists()
    assert ledger.check() == []


def test_expired_trial_credit_no_longer_counts_even_before_the_expiry_task_runs(owner):
    wallet.grant_trial_credit(owner, owner.email)
    with time_machine.travel(timezone.now() + timedelta(days=31)):
        assert wallet.compute_balance(owner) == 0


def test_a_launch_needs_an_hour_of_balance_and_says_how_much(owner, catalog):

    wallet.grant_trial_credit(owner, owner.email)
    eight_a100 = quote(chip=catalog["a100-80g"], cards=8)  # ¥38.40 an hour
    with pytest.raises(PaymentRequired) as excinfo:
        wallet.check_launch_funds(owner, eight_a100)
    assert "38.40" in str(excinfo.value.message) and "10.00" in str(excinfo.value.message)
    wallet.check_launch_funds(owner, quote(chip=catalog["a100-80g"], cards=1))  # ¥4.80: the trial covers it


def test_a_prepaid_plan_is_charged_up_front_trial_first_then_cash(owner, catalog, fund):

    wallet.grant_trial_credit(owner, owner.email)
    fund(owner, "200")
    daily = quote(chip=catalog["a100-80g"], cards=1, plan="daily", minutes=1440)  # 4.8 × 24 × 0.9 = 103.68
    wallet.check_launch_funds(owner, daily)

    first = wallet.charge_upfront(user=owner, quote=daily, resource_id=None, idempotency_key="plan-1")
    again = wallet.charge_upfront(user=owner, quote=daily, resource_id=None, idempotency_key="plan-1")

    assert first.pk == again.pk and first.user_amount == Decimal("-103.68")
    s = wallet.summary(owner)
    assert (s.trial, s.cash) == (Decimal("0"), Decimal("106.32"))
    assert ledger.check() == []
