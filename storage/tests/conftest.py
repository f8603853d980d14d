import pytest


@pytest.fixture(autouse=True)
def _private_cloud_storage(cloud_storage):
    """Every storage test writes its bytes under its own tmp_path."""
    return cloud_storage
