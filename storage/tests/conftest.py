import pytest

from tests.fixtures.factories import top_up


@pytest.fixture(autouse=True)
def _private_cloud_storage(cloud_storage):
    """Every storage test writes its bytes under its own tmp_path."""
    return cloud_storage


@pytest.fixture
def owner_has_topped_up(owner):
    """Disks pass billing's funds gate, which has tests of its own (billing/tests/test_funds_gate.py): in the
    modules about what disks do, the owner has ¥1,000 of cash."""
    top_up(owner)
    return owner
