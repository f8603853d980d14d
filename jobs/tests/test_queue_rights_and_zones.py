"""The queue and who may still launch, and where: a member who lost the right to launch in a team no longer has a
waiting launch or a queued job start on the team's wallet when a card frees, and a waiting launch that asked for one
zone does not hold up the launches behind it that could start elsewhere."""

from django.db.models import F

from catalog.models import Node
from instances import launching, waiting
from instances import lifecycle as machines
from instances.models import Instance, WaitingLaunch
from jobs import services
from jobs.choices import State
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

from .conftest import drive
from .helpers import fresh


def _one_dcu_card() -> None:
    Node.objects.filter(chip__slug="dcu-z100").exclude(name="xc-dcu-01").update(drained=True)
    Node.objects.filter(name="xc-dcu-01").update(cards=1, cards_reserved=0)


def _request(**fields) -> launching.LaunchRequest:
    fields.setdefault("name", "notebook")
    fields.setdefault("image", "pytorch-2.2-dtk24")
    fields.setdefault("chip", "dcu-z100")
    return launching.LaunchRequest(**fields)


def test_a_removed_members_waiting_launch_does_not_start_on_the_teams_wallet(owner, lifecycle):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    colleague = UserFactory(email="colleague@example.com")
    Membership.objects.create(team=team, user=colleague, role=Role.DEVELOPER)
    _one_dcu_card()
    holder = launching.launch(owner, _request(name="holder"))
    entry = waiting.launch_or_wait(team.account, _request(name="theirs"), by=colleague, wait=True)
    assert isinstance(entry, WaitingLaunch)
    # Given the colleague was removed from the team while their launch waited...
    teams.remove_member(Membership.objects.get(team=team, user=owner), colleague.public_id)
    # ...when the card frees, no machine starts for them on the team's account.
    machines.release(fresh(holder))
    drive()
    assert not Instance.objects.filter(owner=team.account, launched_by=colleague).exists()
    assert fresh(entry).state == WaitingLaunch.State.LEFT


def test_a_member_made_read_only_has_their_waiting_launch_leave_the_queue(owner, lifecycle):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    colleague = UserFactory(email="colleague@example.com")
    Membership.objects.create(team=team, user=colleague, role=Role.DEVELOPER)
    _one_dcu_card()
    holder = launching.launch(owner, _request(name="holder"))
    entry = waiting.launch_or_wait(team.account, _request(name="theirs"), by=colleague, wait=True)
    assert isinstance(entry, WaitingLaunch)
    teams.change_role(Membership.objects.get(team=team, user=owner), colleague.public_id, Role.READ_ONLY)
    machines.release(fresh(holder))
    drive()
    assert not Instance.objects.filter(owner=team.account, launched_by=colleague).exists()


def test_a_launch_waiting_for_a_full_zone_does_not_hold_up_one_that_fits_in_another(owner, stranger, lifecycle):
    # Every Ascend card is taken: the stranger's launch waits for one in cn-east-a, the owner's for any zone.
    Node.objects.filter(chip__slug="ascend-910b").update(cards_reserved=F("cards"))
    npu = {"chip": "", "backend": "npu", "image": "pytorch-2.2-cann8"}
    pinned = waiting.launch_or_wait(stranger, _request(name="pinned", zone="cn-east-a", **npu), wait=True)
    anywhere = waiting.launch_or_wait(owner, _request(name="anywhere", **npu), wait=True)
    assert isinstance(pinned, WaitingLaunch) and isinstance(anywhere, WaitingLaunch)
    # When a card frees in cn-east-xc (none in cn-east-a), the owner's launch, which can use it, starts.
    Node.objects.filter(name="xc-910b-01").update(cards_reserved=0)
    drive()
    assert fresh(pinned).state == WaitingLaunch.State.WAITING
    assert fresh(anywhere).state == WaitingLaunch.State.STARTED


def test_a_removed_members_queued_job_does_not_start_on_the_teams_wallet(owner, lifecycle):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    colleague = UserFactory(email="colleague@example.com")
    Membership.objects.create(team=team, user=colleague, role=Role.DEVELOPER)
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))
    job = services.submit(
        team.account,
        services.JobRequest(name="theirs", image="pytorch-2.2-cuda12", command="true", backend="dcu"),
        by=colleague,
    )
    teams.remove_member(Membership.objects.get(team=team, user=owner), colleague.public_id)
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=0)
    drive()
    job.refresh_from_db()
    assert job.state == State.FAILED and "may no longer launch" in job.state_detail
    assert not Instance.objects.filter(owner=team.account, launched_by=colleague).exists()
