"""A member's monthly budget in a team holds for jobs and for launches that wait for a card as it holds for a launch:
a job past the budget is refused when submitted (nothing queues), and one that waits leaves the queue, saying why,
once the budget can no longer pay its first hour — without waiting for a card to free."""

from decimal import Decimal

import pytest
from django.db.models import F

from billing import wallet
from catalog.models import Node
from instances import launching, waiting
from instances.models import WaitingLaunch
from jobs import services
from jobs.choices import State
from jobs.models import Job
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from teams.tests.test_team_tokens import _team_client
from tests.fixtures.factories import UserFactory, top_up

from .conftest import drive
from .helpers import fresh

pytestmark = pytest.mark.django_db

JOB = {
    "name": "train",
    "image": "pytorch-2.2-dtk24",
    "command": "python3 train.py",
    "backend": "dcu",
    "cards": 1,
    "timeout_seconds": 3600,
}


@pytest.fixture
def team(owner):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    top_up(team.account, "5000")
    return team


@pytest.fixture
def developer(team):
    user = UserFactory(email="developer@example.com")
    Membership.objects.create(team=team, user=user, role=Role.DEVELOPER)
    return user


def _set_budget(team, owner, member, value: str) -> None:
    teams.set_budget(Membership.objects.get(team=team, user=owner), member.public_id, value)


def _every_dcu_card_taken() -> None:
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))


def test_a_job_past_the_members_budget_is_refused_when_submitted_and_nothing_queues(lifecycle, team, owner, developer):
    _set_budget(team, owner, developer, "0.01")
    api = _team_client(developer)

    refused = api.post("/api/v1/jobs/", JOB, format="json")

    assert refused.status_code == 402, refused.json()
    assert refused.json()["code"] == "budget_exceeded"
    assert "monthly budget in 视觉实验室" in refused.json()["message"]
    assert not Job.objects.exists()
    # Within a budget that pays its first hour, the same job is queued on the team's wallet.
    _set_budget(team, owner, developer, "500")
    made = api.post("/api/v1/jobs/", JOB, format="json")
    assert made.status_code == 201, made.json()
    assert Job.objects.get().owner == team.account


def test_a_queued_job_leaves_the_queue_when_its_members_budget_can_no_longer_pay(lifecycle, team, owner, developer):
    _every_dcu_card_taken()
    request = services.JobRequest(name="theirs", image="pytorch-2.2-dtk24", command="true", backend="dcu")
    ahead = services.submit(team.account, request, by=owner)  # first in line: a pass tries it and finds no card
    job = services.submit(team.account, request, by=developer)
    drive(1)
    assert fresh(job).state == State.QUEUED  # waits for a card while the budget pays

    # The budget is lowered while no card is free: the job is not tried, and still leaves, saying why.
    _set_budget(team, owner, developer, "0.01")
    drive(1)

    job = fresh(job)
    assert job.state == State.FAILED, job.state_detail
    assert "Left the queue" in job.state_detail and "monthly budget" in job.state_detail
    assert fresh(ahead).state == State.QUEUED  # the owner has no budget in their team: theirs waits on


def test_a_launch_waiting_for_a_card_leaves_when_its_members_budget_can_no_longer_pay(
    lifecycle, team, owner, developer
):
    _every_dcu_card_taken()
    request = launching.LaunchRequest(name="notebook", image="pytorch-2.2-dtk24", chip="dcu-z100")
    ahead = waiting.launch_or_wait(team.account, request, by=owner, wait=True)
    entry = waiting.launch_or_wait(team.account, request, by=developer, wait=True)
    assert isinstance(ahead, WaitingLaunch) and isinstance(entry, WaitingLaunch)
    drive(1)
    assert fresh(entry).state == WaitingLaunch.State.WAITING

    _set_budget(team, owner, developer, "0.01")
    drive(1)

    entry = fresh(entry)
    assert entry.state == WaitingLaunch.State.LEFT
    assert "monthly budget" in entry.detail
    assert fresh(ahead).state == WaitingLaunch.State.WAITING


def test_a_waiting_launchs_new_data_disk_counts_against_the_members_budget_in_the_queue(
    lifecycle, team, owner, developer
):
    _every_dcu_card_taken()
    request = launching.LaunchRequest(name="notebook", image="pytorch-2.2-dtk24", chip="dcu-z100", data_disk_gb=2000)
    ahead = waiting.launch_or_wait(team.account, request, by=owner, wait=True)
    entry = waiting.launch_or_wait(team.account, request, by=developer, wait=True)
    assert isinstance(ahead, WaitingLaunch) and isinstance(entry, WaitingLaunch)

    # A budget that pays the machine's first hour but not that and its new disk's, as the launch will need
    machine = wallet.needed_to_launch(launching.preview(team.account, request, by=developer))
    disk = launching.data_disk_per_hour(request)
    assert disk >= Decimal("0.02")
    _set_budget(team, owner, developer, str((machine + disk / 2).quantize(Decimal("0.01"))))
    drive(1)

    entry = fresh(entry)
    assert entry.state == WaitingLaunch.State.LEFT, entry.detail
    assert "monthly budget" in entry.detail
