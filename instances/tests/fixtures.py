"""Fixtures for the instance lifecycle: the real money side, zero timings, helpers.

The lifecycle tests take ``lifecycle``: the catalog, zero timings and the real billing — the funds gate, usage
sessions, up-front charges and the ledger. A user who launches or starts an instance is funded with ¥10,000 of cash
(a staff adjustment, through the ledger) just before the funds gate first looks at their wallet, so a launch is
refused only where a test sets the balance (``balances``); users who never launch keep the wallet the test gave
them. What the tests read about money (``sessions_of``, ``charged``,
``upfront``, ``balances``) is read from billing's own tables by :class:`Ledger`.
"""

import time
import uuid
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from billing import rules, wallet
from billing.choices import COMPUTE_KINDS, TransactionKind
from billing.models import LedgerTransaction, UsageSession
from catalog.models import Chip
from config.celery import app
from instances import charges as instances_charges
from instances import launching
from instances import lifecycle as instance_lifecycle
from instances.choices import TRANSITIONAL
from instances.models import Instance


class Session:
    """A usage session as the lifecycle tests read it: live, each attribute read from billing's table when asked,
    as a session is closed and charged after a test took hold of it."""

    def __init__(self, pk: int):
        self.pk = pk

    @classmethod
    def of(cls, row: UsageSession) -> "Session":
        return cls(row.pk)

    def _row(self) -> UsageSession:
        return UsageSession.objects.get(pk=self.pk)

    resource_id = property(lambda self: self._row().resource_id)
    user_id = property(lambda self: self._row().user_id)
    started_at = property(lambda self: self._row().started_at)
    ended_at = property(lambda self: self._row().ended_at)
    per_hour = property(lambda self: self._row().payable_per_hour)
    charged = property(lambda self: self._row().charged)

    def due(self, now=None) -> Decimal:
        """What the session costs up to its end (or ``now`` while open), by billing's own minute rule."""
        row = self._row()
        if row.ended_at is not None:
            return row.charged
        end = now or timezone.now()
        return rules.minutes_cost(row.payable_per_hour, rules.billed_minutes(row.started_at, end))

    def __eq__(self, other):
        return isinstance(other, Session) and other.pk == self.pk

    def __hash__(self):
        return hash(self.pk)

    def __repr__(self):
        return f"Session({self._row()!r})"


class Balances:
    """``ledger.balances[user_pk] = amount`` sets what the user may spend on compute, through a staff adjustment
    of their cash (the ledger's own path)."""

    def __init__(self, funded: set[int]):
        self.funded = funded

    def __setitem__(self, user_pk: int, amount) -> None:
        self.funded.add(user_pk)
        user = get_user_model().objects.get(pk=user_pk)
        delta = Decimal(amount) - wallet.compute_balance(user)
        if delta:
            wallet.adjust_balance(
                user=user,
                amount=delta,
                reason="test balance",
                staff=None,
                idempotency_key=f"test-balance:{uuid.uuid4()}",
            )

    def __getitem__(self, user_pk: int) -> Decimal:
        return wallet.compute_balance(get_user_model().objects.get(pk=user_pk))


class Ledger:
    default_balance = Decimal("10000")

    def __init__(self):
        self.funded: set[int] = set()  # users whose balance the test set: never funded
        self.balances = Balances(self.funded)

    def fund(self, user) -> None:
        wallet.adjust_balance(
            user=user,
            amount=self.default_balance,
            reason="test funds",
            staff=None,
            idempotency_key=f"test-funds:{user.pk}",
        )

    @property
    def sessions(self) -> list[Session]:
        """Every metered session of instances and endpoints (prepaid terms are up-front charges, not sessions)."""
        rows = UsageSession.objects.filter(kind__in=COMPUTE_KINDS).order_by("started_at", "pk")
        return [Session.of(row) for row in rows]

    @property
    def upfront(self) -> list[tuple]:
        rows = LedgerTransaction.objects.filter(kind=TransactionKind.UPFRONT).order_by("pk")
        return [(row.idempotency_key, row.resource_id) for row in rows]

    def sessions_of(self, instance) -> list[Session]:
        rows = UsageSession.objects.filter(resource_id=instance.public_id).order_by("started_at", "pk")
        return [Session.of(row) for row in rows]

    def open_sessions(self) -> list[Session]:
        return [Session.of(row) for row in UsageSession.objects.open().filter(kind__in=COMPUTE_KINDS).order_by("pk")]

    def charged(self, instance, now=None) -> Decimal:
        return sum((s.due(now) for s in self.sessions_of(instance)), Decimal("0"))


@pytest.fixture
def real_ledger(db, monkeypatch):
    """The real money side; a user is funded with ``Ledger.default_balance`` of cash before the funds gate first
    looks at their wallet, unless the test set their balance."""
    ledger = Ledger()
    gate = instances_charges.check_launch_funds

    def funded_gate(user, quote, **kwargs):
        # Inside the launch's transaction: a launch refused later rolls the funds back with it, and the next one
        # funds again (once per user: the adjustment's idempotency key).
        if user.pk not in ledger.funded:
            ledger.fund(user)
        return gate(user, quote, **kwargs)

    monkeypatch.setattr(instances_charges, "check_launch_funds", funded_gate)
    return ledger


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

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = before


def settle_until(until=None, *, timeout: float, message: str, describe=lambda: "") -> None:
    """Reconcile beats, as the worker runs them, until ``until()`` holds, or without it until no instance is on its
    way somewhere; a real backend takes its time, so this waits between beats and fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        instance_lifecycle.reconcile()
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
        instance_lifecycle.reconcile()
        if not Instance.objects.filter(status__in=[*TRANSITIONAL]).exists():
            return


@pytest.fixture
def lifecycle(catalog, real_ledger, instant):
    """The catalog, zero timings and the real money side with funded users: everything a lifecycle test needs."""
    return real_ledger


@pytest.fixture
def launch(owner, lifecycle):
    """Launch for the owner (or ``user=``): ``launch(chip="ascend-910b", cards=2)``."""

    def run(user=None, **fields):
        fields.setdefault("name", "train-1")
        fields.setdefault("image", _default_image(fields))
        if not any(k in fields for k in ("chip", "backend", "no_card")):
            fields["chip"] = "ascend-910b"
        return launching.launch(user or owner, launching.LaunchRequest(**fields))

    return run


def _default_image(fields) -> str:

    if fields.get("no_card"):
        return "ubuntu-22.04"
    chip = Chip.objects.filter(slug=fields.get("chip", "ascend-910b")).first()
    family = fields.get("backend") or (chip.backend if chip else "npu")
    return {"npu": "pytorch-2.2-cann8", "mlu": "pytorch-2.2-neuware", "dcu": "pytorch-2.2-dtk24"}.get(
        family, "pytorch-2.2-cuda12"
    )
