"""Fixtures of the jobs tests: the simulated data centre with zero timings and the real money side (the instances
app's ``lifecycle``), and ``drive``: what the worker and the beats do, run here until the jobs settle."""

import pytest

from instances.tests.fixtures import settle
from jobs import running, services
from jobs.services import JobRequest
from marketplace.tests.registry_fixtures import registry, tiny_mlu_image  # noqa: F401 (the tests' registry)


def drive(rounds: int = 6) -> None:
    """The jobs beat and the instances' reconcile, taken in turns: placement, provisioning, watching, release."""
    for _round in range(rounds):
        running.watch_active()
        running.place_queued()
        settle()


@pytest.fixture
def submit(owner, lifecycle):
    """Submit for the owner (or ``user=``): ``submit(backend="dcu", command="python train.py")``."""

    def run(user=None, **fields):
        fields.setdefault("name", "train")
        fields.setdefault("image", "pytorch-2.2-cuda12")
        fields.setdefault("command", "python train.py")
        return services.submit(user or owner, JobRequest(**fields))

    return run


@pytest.fixture
def english(client, owner):
    """The owner's browser, in English."""
    client.force_login(owner)
    client.cookies["django_language"] = "en"
    return client


@pytest.fixture
def cli(cli, lifecycle):
    """The shared ``cli`` (``tests.fixtures.services``), with the machines' simulated lifecycle these tests need."""
    return cli
