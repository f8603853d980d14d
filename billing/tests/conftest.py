"""Fixtures for the money tests: wallets with cash, the arrears handler replaced by a recorder."""

import uuid
from decimal import Decimal

import pytest

from billing import arrears, tasks, wallet

ARREARS_CALLS: list[tuple[int, str]] = []


def record_arrears(user_id: int, reason: str) -> None:
    """Stands in for ``instances.lifecycle.stop_for_arrears`` until the instances side is connected."""
    ARREARS_CALLS.append((user_id, reason))


@pytest.fixture
def arrears_calls(monkeypatch):

    monkeypatch.setattr(arrears, "_handler", record_arrears)
    ARREARS_CALLS.clear()
    yield ARREARS_CALLS
    ARREARS_CALLS.clear()


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    # Notification e-mails are sent by a task after commit; tests send them inline.

    monkeypatch.setattr(tasks.email_notification, "delay", lambda pk: tasks.email_notification(pk))


@pytest.fixture
def fund():
    """Put cash in a wallet (a staff adjustment: the same ledger path as any credit)."""

    def fund(user, amount):
        return wallet.adjust_balance(
            user=user, amount=Decimal(amount), reason="test funds", staff=None, idempotency_key=f"fund:{uuid.uuid4()}"
        )

    return fund
