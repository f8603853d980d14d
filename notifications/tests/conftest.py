"""Fixtures for the notification tests: a local receiver, loopback allowed, tasks run inline, a team."""

import pytest

from billing import tasks as billing_tasks
from notifications import tasks
from teams import services as teams
from teams.models import Membership
from tests.fixtures.factories import UserFactory

from .receiver import Receiver


@pytest.fixture
def receiver(settings):
    # Only the loopback receiver is allowed, and only because the test says so; every other private address stays
    # refused (see test_destinations).
    settings.NOTIFICATIONS_ALLOW_LOOPBACK = True
    with Receiver() as running:
        yield running


@pytest.fixture(autouse=True)
def _inline_tasks(monkeypatch):
    # Tasks run where the broker would run them, after the commit, in the test's thread.
    monkeypatch.setattr(tasks.deliver_notification, "delay", lambda pk: tasks.deliver_notification(pk))
    monkeypatch.setattr(billing_tasks.email_notification, "delay", lambda pk: billing_tasks.email_notification(pk))


@pytest.fixture
def team(owner):
    return teams.create_team(owner, name="视觉实验室", slug="vision-lab")


@pytest.fixture
def member(team):
    def member(role, email=None):
        user = UserFactory(email=email or f"{role}@example.com")
        Membership.objects.create(team=team, user=user, role=role)
        return user

    return member
