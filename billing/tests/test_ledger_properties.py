"""Hypothesis drives random sequences of top-ups, usage charges, prepaid plans, trial grants and expiries, vouchers
redeemed and expired, refunds, disputes, adjustments and withdrawals; afterwards `check_ledger` passes and the books
balance."""

import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing import ledger, metering, payments, vouchers, wallet
from billing.models import Account, Plan, TopUp
from billing.quote import quote
from core.errors import ServiceError
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 2, 9, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
steps = st.lists(
    st.one_of(
        st.tuples(st.just("topup"), st.integers(0, 1), st.integers(10, 900)),
        st.tuples(st.just("grant"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("run"), st.integers(0, 1), st.integers(1, 600)),
        st.tuples(st.just("tick"), st.integers(0, 1), st.integers(1, 240)),
        st.tuples(st.just("plan"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("expire"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("refund"), st.integers(0, 1), st.integers(1, 100)),
        st.tuples(st.just("dispute"), st.integers(0, 1), st.integers(1, 100)),
        st.tuples(st.just("adjust"), st.integers(0, 1), st.integers(-5000, 5000)),
        st.tuples(st.just("withdraw"), st.integers(0, 1), st.integers(1, 5000)),
        st.tuples(st.just("voucher"), st.integers(0, 1), st.integers(1, 3000)),
        st.tuples(st.just("voucher-expire"), st.integers(0, 1), st.just(0)),
    ),
    max_size=25,
)


class Rollback(Exception):
    pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_check_ledger_passes_after_any_sequence_of_money_movements(catalog, steps):
    try:
        with transaction.atomic():
            _play(catalog, steps)
            assert ledger.check() == []
            call_command("check_ledger")
            assert sum(a.balance for a in Account.objects.all()) == 0
            raise Rollback
    except Rollback:
        pass


def _play(catalog, steps):
    users = [UserFactory(email=f"p{i}-{uuid.uuid4().hex[:6]}@example.com") for i in range(2)]
    clock = {"now": START}
    for i, (op, who, n) in enumerate(steps):
        user = users[who]
        clock["now"] += timedelta(minutes=7)
        try:
            _step(catalog, op, user, n, i, clock)
        except ServiceError:
            pass  # refused (not enough balance, …): refusals must leave nothing half-written


def _step(catalog, op, user, n, i, clock):
    now = clock["now"]
    if op == "topup":
        topup = payments.start_topup(user, Decimal(n), base_url="http://testserver/")
        payments.credit_topup(topup.checkout_id, payment_reference=f"pi_{i}")
    elif op == "grant":
        wallet.grant_trial_credit(user, user.email)
    elif op == "run":
        q = quote(chip=catalog["mlu370-x8"], cards=3, at=START)
        resource = uuid.uuid4()
        metering.open_usage(user=user, kind="instance", resource_id=resource, quote=q, started_at=now)
        clock["now"] += timedelta(minutes=n)
        metering.close_usage(resource_id=resource, ended_at=clock["now"])
    elif op == "tick":
        q = quote(chip=catalog["a100-80g"], cards=1, at=START)
        metering.open_usage(user=user, kind="instance", resource_id=uuid.uuid4(), quote=q, started_at=now)
        clock["now"] += timedelta(minutes=n)
        metering.meter(clock["now"])
    elif op == "plan":
        q = quote(chip=catalog["dcu-z100"], cards=1, plan="daily", minutes=1440)
        wallet.charge_upfront(user=user, quote=q, resource_id=uuid.uuid4(), idempotency_key=f"plan-{i}")
    elif op == "expire":
        wallet.expire_trial_credits(datetime.now(ZoneInfo("UTC")) + timedelta(days=40))
    elif op in ("refund", "dispute"):
        topup = TopUp.objects.filter(user=user, status="paid").first()
        if topup is not None:
            fen = int(topup.amount * 100 * n / 100)
            if op == "refund":
                payments._charge_refunded(
                    {"id": f"ch_{i}", "payment_intent": topup.payment_reference, "amount_refunded": fen}
                )
            else:
                payments._dispute_created({"id": f"dp_{i}", "payment_intent": topup.payment_reference, "amount": fen})
    elif op == "adjust" and n:
        wallet.adjust_balance(user=user, amount=Decimal(n) / 100, reason="support", staff=None, idempotency_key=f"a{i}")
    elif op == "withdraw":
        wallet.withdraw_cash(user=user, amount=Decimal(n) / 100, idempotency_key=f"w{i}")
    elif op == "voucher":
        # Odd amounts cover only the MLU370 ("run"), even ones only daily plans of ¥20 or more ("plan").
        chips = [catalog["mlu370-x8"]] if n % 2 else []
        batch = vouchers.create_batch(
            name=f"v{i}",
            amount=Decimal(n) / 100,
            expires_at=datetime.now(ZoneInfo("UTC")) + timedelta(days=30),
            quantity=1,
            chips=chips,
            plans=[] if n % 2 else Plan.objects.filter(slug="daily"),
            min_spend=Decimal("0") if n % 2 else Decimal("20"),
        )
        vouchers.redeem(user, batch.codes.get().code, by=user)
    elif op == "voucher-expire":
        vouchers.expire_vouchers(datetime.now(ZoneInfo("UTC")) + timedelta(days=40))
