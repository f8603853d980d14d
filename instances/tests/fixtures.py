"""Fixtures for the instance lifecycle: a fake of the money side of the billing contract, zero timings, helpers.

The lifecycle tests that take ``lifecycle`` (or ``fake_billing``) are about the state machine, the backends and
capacity, not money: they run against ``FakeBilling``, put in place of the ``billing.wallet`` and
``billing.metering`` functions that ``instances.billing`` calls. It follows the contract: per-minute sessions at
the rate frozen at ``open_usage``, billed minutes = ceil((end − start) / 60 s), charged = to_cents(rate × minutes
/ 60). The contract itself runs against the real ledger in ``test_billing_contract.py`` and
``tests/test_funds_gate.py``.
"""

import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.money import to_cents
from console.errors import PaymentRequired
from instances import billing as instances_billing
from instances import services
from instances.choices import TRANSITIONAL
from instances.models import Instance


@dataclass
class FakeSession:
    resource_id: object
    user_id: int
    started_at: datetime
    per_hour: Decimal
    ended_at: datetime | None = None

    def charged(self, now=None) -> Decimal:
        end = self.ended_at or now or timezone.now()
        minutes = math.ceil(max((end - self.started_at).total_seconds(), 0) / 60)
        return to_cents(self.per_hour * minutes / 60)


class FakeBilling:
    def __init__(self):
        self.balances: dict[int, Decimal] = {}
        self.default_balance = Decimal("10000")
        self.sessions: list[FakeSession] = []
        self.upfront: list[tuple] = []
        self.lock = threading.Lock()

    def balance(self, user) -> Decimal:
        return self.balances.get(user.pk, self.default_balance)

    def check_launch_funds(self, user, quote, *, pending_per_hour=0):
        need = quote.payable_per_hour if quote.plan_slug == "payg" else quote.payable_total
        if self.balance(user) < need:
            raise PaymentRequired(
                _("Launching needs ¥%(need)s; your balance is ¥%(balance)s.")
                % {"need": need, "balance": self.balance(user)}
            )

    def open_usage(self, *, user, kind, resource_id, quote, started_at, label=""):
        with self.lock:
            for s in self.sessions:
                if s.resource_id == resource_id and s.started_at == started_at:
                    return s
            session = FakeSession(resource_id, user.pk, started_at, quote.payable_per_hour)
            self.sessions.append(session)
            return session

    def close_usage(self, *, resource_id, ended_at):
        with self.lock:
            for s in self.sessions:
                if s.resource_id == resource_id and s.ended_at is None:
                    s.ended_at = ended_at
                    return s
        return None

    def charge_upfront(self, *, user, quote, resource_id, idempotency_key, kind="instance"):
        with self.lock:
            if idempotency_key not in {u[0] for u in self.upfront}:
                self.upfront.append((idempotency_key, resource_id, quote.payable_total))

    # What tests look at
    def sessions_of(self, instance) -> list[FakeSession]:
        return [s for s in self.sessions if s.resource_id == instance.public_id]

    def open_sessions(self) -> list[FakeSession]:
        return [s for s in self.sessions if s.ended_at is None]

    def charged(self, instance, now=None) -> Decimal:
        return sum((s.charged(now) for s in self.sessions_of(instance)), Decimal("0"))


@pytest.fixture
def fake_billing(monkeypatch):
    fake = FakeBilling()
    functions = {"open_usage": fake.open_usage, "close_usage": fake.close_usage}
    money_side = SimpleNamespace(
        lock_wallet=lambda user: None, check_launch_funds=fake.check_launch_funds, charge_upfront=fake.charge_upfront
    )
    monkeypatch.setattr(instances_billing, "wallet", money_side)
    monkeypatch.setattr(instances_billing, "metering", SimpleNamespace(**functions))
    return fake


@pytest.fixture
def instant(settings):
    """The simulated data centre without waiting: no pull, boot, grace or notice time."""
    settings.INSTANCES_SIM_PULL_SECONDS = 0
    settings.INSTANCES_SIM_BOOT_SECONDS = 0
    settings.INSTANCES_STOP_GRACE_SECONDS = 0
    settings.INSTANCES_SPOT_NOTICE_SECONDS = 0
    return settings


@pytest.fixture
def eager_tasks():
    """Celery tasks run in the caller's process when enqueued (on commit)."""
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = before


def settle_until(until=None, *, timeout: float, message: str, describe=lambda: "") -> None:
    """Reconcile beats, as the worker runs them, until ``until()`` holds, or without it until no instance is on its
    way somewhere; a real backend takes its time, so this waits between beats and fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        services.reconcile()
        if until is not None and until():
            return
        if until is None and not Instance.objects.filter(status__in=[*TRANSITIONAL]).exists():
            return
        time.sleep(0.2)
    states = list(Instance.objects.values_list("name", "status", "status_detail"))
    raise AssertionError(f"timed out waiting for {message}: {states}{describe()}")


def settle(rounds: int = 10) -> None:
    """What the worker and the reconcile beat do, run here until no instance is on its way somewhere."""
    for _round in range(rounds):
        services.reconcile()
        if not Instance.objects.filter(status__in=[*TRANSITIONAL]).exists():
            return


@pytest.fixture
def lifecycle(catalog, fake_billing, instant):
    """The catalog, zero timings and the fake money side: everything a lifecycle test needs."""
    return fake_billing


@pytest.fixture
def launch(owner, lifecycle):
    """Launch for the owner (or ``user=``): ``launch(chip="ascend-910b", cards=2)``."""

    def run(user=None, **fields):
        fields.setdefault("name", "train-1")
        fields.setdefault("image", _default_image(fields))
        if not any(k in fields for k in ("chip", "backend", "no_card")):
            fields["chip"] = "ascend-910b"
        return services.launch(user or owner, services.LaunchRequest(**fields))

    return run


def _default_image(fields) -> str:
    from catalog.models import Chip

    if fields.get("no_card"):
        return "ubuntu-22.04"
    chip = Chip.objects.filter(slug=fields.get("chip", "ascend-910b")).first()
    family = fields.get("backend") or (chip.backend if chip else "npu")
    return {"npu": "pytorch-2.2-cann8", "mlu": "pytorch-2.2-neuware", "dcu": "pytorch-2.2-dtk24"}.get(
        family, "pytorch-2.2-cuda12"
    )
