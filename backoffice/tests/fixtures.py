"""Back-office personas: staff in the ops group, staff in the finance group, staff with no role, and a superuser.
Registered from the root conftest, so the browser tests use them too."""

import uuid
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group

from accounts.ops import roles
from billing import wallet
from tests.fixtures.factories import UserFactory

PASSWORD = "correct horse battery"


def _staff(email, *groups, superuser=False):
    roles.sync_groups()  # transactional tests flush the groups the migration made
    user = UserFactory(email=email, is_staff=True, is_superuser=superuser)
    for name in groups:
        user.groups.add(Group.objects.get(name=name))
    return user


@pytest.fixture
def ops_user(db):
    return _staff("ops@gpucloud.example", roles.OPS)


@pytest.fixture
def finance_user(db):
    return _staff("finance@gpucloud.example", roles.FINANCE)


@pytest.fixture
def plain_staff(db):
    return _staff("staff@gpucloud.example")


@pytest.fixture
def superuser(db):
    return _staff("root@gpucloud.example", superuser=True)


@pytest.fixture
def fund():
    """Credit a user's cash through the ledger: ``fund(user, "100")``."""

    def run(user, amount):
        return wallet.adjust_balance(
            user=user, amount=Decimal(amount), reason="test funds", staff=None, idempotency_key=str(uuid.uuid4())
        )

    return run
