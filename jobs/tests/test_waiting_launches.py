"""Instances launched with "wait for a card": when no card is free they wait in the jobs' queue (one fair order for
both), show their place and an estimate, start on the next placement pass after a card frees, tell their owner,
and leave the queue when the balance can no longer pay their first hour."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db.models import F
from django.utils import timezone

from billing.models import Notification
from catalog.models import Node
from core.errors import ServiceError
from instances import launching, queue, waiting
from instances import lifecycle as machines
from instances.capacity import CapacityError
from instances.choices import Status
from instances.models import Instance, WaitingLaunch
from jobs import running, services
from jobs.choices import State
from jobs.models import Job
from teams import services as teams
from teams.models import Membership, TeamEvent
from teams.roles import Role
from tests.fixtures.factories import UserFactory, top_up

from .conftest import drive
from .helpers import fresh


def _one_dcu_card() -> None:
    """One DCU card in the whole data centre."""
    Node.objects.filter(chip__slug="dcu-z100").exclude(name="xc-dcu-01").update(drained=True)
    Node.objects.filter(name="xc-dcu-01").update(cards=1, cards_reserved=0)


def _request(**fields) -> launching.LaunchRequest:
    fields.setdefault("name", "notebook")
    fields.setdefault("image", "pytorch-2.2-dtk24")
    fields.setdefault("chip", "dcu-z100")
    return launching.LaunchRequest(**fields)


def _place(entry: WaitingLaunch) -> queue.Place | None:
    return queue.places({(queue.LAUNCH, entry.pk)}, now=timezone.now()).get((queue.LAUNCH, entry.pk))


def test_a_launch_that_waits_for_a_card_starts_when_one_frees_and_its_owner_is_told(owner, lifecycle):
    _one_dcu_card()
    holder = launching.launch(owner, _request(name="holder"))
    # Given every card taken, a launch without "wait" is refused as before...
    with pytest.raises(CapacityError):
        waiting.launch_or_wait(owner, _request())
    # ...and one with it waits in the queue, first in line, billed nothing.
    entry = waiting.launch_or_wait(owner, _request(), wait=True)
    assert isinstance(entry, WaitingLaunch) and entry.state == WaitingLaunch.State.WAITING
    assert _place(entry).position == 1
    assert not Instance.objects.filter(name="notebook").exists()
    drive()
    assert fresh(entry).state == WaitingLaunch.State.WAITING

    # When the card frees, the next placement pass launches it as it was asked.
    machines.release(fresh(holder))
    drive()
    entry = fresh(entry)
    assert entry.state == WaitingLaunch.State.STARTED
    assert entry.instance.name == "notebook" and entry.instance.chip.slug == "dcu-z100"
    assert entry.instance.status == Status.RUNNING
    notice = Notification.objects.get(user=owner, kind="queue_started")
    assert notice.params["instance"] == str(entry.instance.public_id)
    assert "waited for a card and is starting now" in notice.message


def test_waiting_launches_and_jobs_share_one_fair_queue(submit, owner, stranger, lifecycle):
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))  # every DCU card is taken
    jobs = [submit(backend="dcu", name=f"mine-{i}") for i in range(2)]
    entry = waiting.launch_or_wait(stranger, _request(), wait=True)
    drive(rounds=1)
    # The stranger's launch comes before the owner's second job: one queue, one rule.
    assert services.queue_positions(jobs) == {jobs[0].pk: 1, jobs[1].pk: 3}
    assert _place(entry).position == 2
    assert [(e.kind, e.pk) for e in queue.order()] == [
        (queue.JOB, jobs[0].pk),
        (queue.LAUNCH, entry.pk),
        (queue.JOB, jobs[1].pk),
    ]


def test_a_teams_members_each_take_their_own_place_in_the_queue(submit, owner, stranger, lifecycle):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    colleague = UserFactory(email="colleague@example.com")
    Membership.objects.create(team=team, user=colleague, role=Role.DEVELOPER)
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))
    mine = [
        services.submit(
            team.account,
            services.JobRequest(name=f"m{i}", image="pytorch-2.2-cuda12", command="true", backend="dcu"),
            by=owner,
        )
        for i in range(3)
    ]
    theirs = services.submit(
        team.account,
        services.JobRequest(name="c", image="pytorch-2.2-cuda12", command="true", backend="dcu"),
        by=colleague,
    )
    other = submit(user=stranger, backend="dcu", name="s")
    order = services.queue_positions([*mine, theirs, other])
    # One place per member: the colleague's one job is not behind the owner's backlog, and the team does not
    # crowd out the stranger's account either.
    assert [order[j.pk] for j in (mine[0], theirs, other, mine[1], mine[2])] == [1, 2, 3, 4, 5]


def test_a_waiting_launch_leaves_the_queue_when_the_balance_cannot_pay_its_first_hour(owner, lifecycle):
    _one_dcu_card()
    holder = launching.launch(owner, _request(name="holder"))
    entry = waiting.launch_or_wait(owner, _request(), wait=True)
    machines.release(fresh(holder))
    lifecycle.balances[owner.pk] = Decimal("0.10")
    drive()
    entry = fresh(entry)
    assert entry.state == WaitingLaunch.State.LEFT and entry.instance is None
    assert "cannot start" in entry.detail
    notice = Notification.objects.get(user=owner, kind="queue_left")
    assert "left the queue without starting" in notice.message


def test_the_estimate_is_the_deadline_of_the_job_on_the_card(submit, owner, lifecycle):
    _one_dcu_card()
    with time_machine.travel(timezone.now(), tick=False):
        job = submit(backend="dcu", timeout_seconds=3600)
        drive()
        job = fresh(job)
        assert job.state == State.RUNNING
        entry = waiting.launch_or_wait(owner, _request(), wait=True)
        place = _place(entry)
        assert place.position == 1 and place.expected_by == running.deadline(job)


def test_the_estimate_waits_for_the_cards_to_free_on_one_node(submit, owner, lifecycle):
    # Three DCU cards on two nodes (one and two), all taken: two jobs that end at their timeouts and a machine
    # that has no end; a launch of two cards waits
    Node.objects.filter(chip__slug="dcu-z100").exclude(name__in=["xc-dcu-01", "xc-dcu-02"]).update(drained=True)
    Node.objects.filter(name="xc-dcu-01").update(cards=1, cards_reserved=0)
    Node.objects.filter(name="xc-dcu-02").update(cards=2, cards_reserved=0)
    one, two = Node.objects.get(name="xc-dcu-01"), Node.objects.get(name="xc-dcu-02")
    with time_machine.travel(timezone.now(), tick=False):
        holder = launching.launch(owner, _request(name="open-ended"))
        soon, later = (submit(backend="dcu", timeout_seconds=seconds, name=f"j{seconds}") for seconds in (600, 1200))
        drive()
        soon, later = fresh(soon), fresh(later)
        entry = waiting.launch_or_wait(owner, _request(cards=2), wait=True)

        def on(instance_id, node):
            Instance.objects.filter(pk=instance_id).update(node=node)

        # Two cards are freed by the later deadline, but one on each node: no machine of two cards fits there
        on(holder.pk, two), on(soon.instance_id, one), on(later.instance_id, two)
        assert _place(entry) == queue.Place(position=1, expected_by=None)

        # Both jobs on the two-card node: by the later deadline, two cards are free there
        on(holder.pk, one), on(soon.instance_id, two)
        assert _place(entry).expected_by == running.deadline(later)


def test_without_a_machine_that_must_end_the_estimate_is_unknown(owner, lifecycle):
    _one_dcu_card()
    launching.launch(owner, _request(name="open-ended"))  # no timeout, no auto-shutdown
    entry = waiting.launch_or_wait(owner, _request(), wait=True)
    assert _place(entry) == queue.Place(position=1, expected_by=None)


def test_the_page_shows_the_place_and_the_estimate_and_follows_the_instance_once_started(english, owner, lifecycle):
    _one_dcu_card()
    holder = launching.launch(owner, _request(name="holder", auto_shutdown_at=timezone.now() + timedelta(hours=2)))
    entry = waiting.launch_or_wait(owner, _request(), wait=True)
    page = english.get(entry.get_absolute_url()).content.decode()
    assert "Place 1 in the queue" in page and "Expected by" in page
    machines.release(fresh(holder))
    drive()
    response = english.get(entry.get_absolute_url())
    assert response.status_code == 302 and response.url == fresh(entry).instance.get_absolute_url()


def test_the_launch_wizard_with_wait_for_a_card_opens_the_waiting_page(english, owner, lifecycle):
    _one_dcu_card()
    launching.launch(owner, _request(name="holder"))
    form = {
        "name": "notebook",
        "chip": "dcu-z100",
        "cards": "1",
        "image": "pytorch-2.2-dtk24",
        "plan": "payg",
        "term_end_action": "continue",
        "wait_for_card": "on",
    }
    response = english.post("/instances/new/", form)
    entry = WaitingLaunch.objects.get(owner=owner)
    assert response.status_code == 302 and response.url == entry.get_absolute_url()
    page = english.get(entry.get_absolute_url()).content.decode()
    assert "No estimate" in page  # the holder has no set end
    # Leaving the queue is the owner's button.
    english.post(f"/instances/waiting/{entry.public_id}/cancel/")
    assert fresh(entry).state == WaitingLaunch.State.LEFT


def test_the_api_waits_with_wait_for_card_and_cancels(owner_api, owner, lifecycle):
    _one_dcu_card()
    launching.launch(owner, _request(name="holder"))
    body = {"name": "notebook", "image": "pytorch-2.2-dtk24", "chip": "dcu-z100"}
    assert owner_api.post("/api/v1/instances", body, format="json").status_code == 503
    response = owner_api.post("/api/v1/instances", {**body, "wait_for_card": True}, format="json")
    assert response.status_code == 202, response.json()
    waited = response.json()
    assert waited["state"] == "waiting" and waited["queue_position"] == 1 and waited["queue_expected_by"] is None
    assert [w["id"] for w in owner_api.get("/api/v1/instances/waiting").json()] == [waited["id"]]
    cancelled = owner_api.delete(f"/api/v1/instances/waiting/{waited['id']}")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "left"
    assert owner_api.delete(f"/api/v1/instances/waiting/{waited['id']}").status_code == 409


def test_a_waiting_launch_behind_one_that_found_no_room_still_leaves_when_the_balance_runs_out(
    owner, stranger, lifecycle
):
    _one_dcu_card()
    launching.launch(owner, _request(name="holder"))
    first = waiting.launch_or_wait(stranger, _request(), wait=True)
    second = waiting.launch_or_wait(owner, _request(name="second"), wait=True)
    lifecycle.balances[owner.pk] = Decimal("0.10")
    drive(rounds=1)
    # The first found no room, so the second was not tried; it left all the same, saying why.
    assert fresh(first).state == WaitingLaunch.State.WAITING
    assert fresh(second).state == WaitingLaunch.State.LEFT and "cannot start" in fresh(second).detail


def test_the_instances_list_loads_the_waiting_launches_with_their_places(english, owner, stranger, lifecycle):
    _one_dcu_card()
    launching.launch(owner, _request(name="holder"))
    entry = waiting.launch_or_wait(owner, _request(), wait=True)
    waiting.launch_or_wait(stranger, _request(name="theirs"), wait=True)
    assert 'hx-get="/instances/waiting/"' in english.get("/instances/").content.decode()
    panel = english.get("/instances/waiting/").content.decode()
    assert entry.get_absolute_url() in panel and "place 1 in the queue" in panel and "theirs" not in panel


def test_a_queued_jobs_page_list_and_api_show_its_place_and_estimate(submit, english, owner_api, owner, lifecycle):
    _one_dcu_card()
    running_job = submit(backend="dcu", name="first", timeout_seconds=1800)
    drive()
    queued = submit(backend="dcu", name="second")
    drive(rounds=1)
    by = running.deadline(fresh(running_job))
    page = english.get(queued.get_absolute_url()).content.decode()
    assert "Place 1 in the queue" in page and f"Expected by {timezone.localtime(by):%Y-%m-%d %H:%M}" in page
    listing = english.get("/jobs/").content.decode()
    assert "place 1 in the queue" in listing and f"by {timezone.localtime(by):%m-%d %H:%M}" in listing
    body = owner_api.get(f"/api/v1/jobs/{queued.public_id}").json()
    assert body["queue_position"] == 1 and body["queue_expected_by"].startswith(
        timezone.localtime(by).strftime("%Y-%m-%dT%H:%M")
    )


def test_a_launch_no_node_could_ever_take_is_refused_instead_of_waiting(owner, owner_api, english, lifecycle):
    Node.objects.filter(chip__slug="dcu-z100").update(cards=2, cards_reserved=2)  # two cards a node, all taken
    # Four cards where no node holds more than two: it would never start.
    with pytest.raises(ServiceError, match="the most on one node is 2") as refused:
        waiting.launch_or_wait(owner, _request(cards=4), wait=True)
    assert refused.value.code == "never_fits"
    # Through the API: a clear 400, nothing queued.
    body = {"name": "notebook", "image": "pytorch-2.2-dtk24", "chip": "dcu-z100", "cards": 4, "wait_for_card": True}
    response = owner_api.post("/api/v1/instances", body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 400 and response.json()["code"] == "never_fits", response.json()
    assert "would wait for ever" in response.json()["message"]
    chinese = owner_api.post("/api/v1/instances", body, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert "单个节点最多 2 张" in chinese["message"]
    # From the wizard: the form says why, in the page.
    form = {"name": "notebook", "chip": "dcu-z100", "cards": "4", "image": "pytorch-2.2-dtk24", "plan": "payg"}
    page = english.post("/instances/new/", {**form, "term_end_action": "continue", "wait_for_card": "on"})
    assert page.status_code == 400 and "would wait for ever" in page.content.decode()
    assert not WaitingLaunch.objects.exists()
    # For a family, the family is named as the console names it.
    with pytest.raises(ServiceError, match="4 cards of Hygon DCU \\(DTK\\) together"):
        waiting.launch_or_wait(owner, _request(chip="", backend="dcu", cards=4), wait=True)
    # Two cards still wait: a node of two frees one day.
    assert isinstance(waiting.launch_or_wait(owner, _request(cards=2), wait=True), WaitingLaunch)


def test_why_a_launch_waits_or_left_is_written_in_the_language_of_who_asked(owner, stranger, lifecycle):
    # The owner reads the console in Chinese, the stranger in English; the pass runs in neither's request.
    owner.language, stranger.language = "zh-hans", "en"
    owner.save(update_fields=["language"])
    stranger.save(update_fields=["language"])
    _one_dcu_card()
    holder = launching.launch(owner, _request(name="holder"))
    mine = waiting.launch_or_wait(owner, _request(name="mine"), wait=True)
    theirs = waiting.launch_or_wait(stranger, _request(name="theirs"), wait=True)
    drive()
    assert "No free cards" in fresh(theirs).detail
    assert "没有空闲" in fresh(mine).detail or "空闲卡" in fresh(mine).detail, fresh(mine).detail

    machines.release(fresh(holder))
    lifecycle.balances[owner.pk] = Decimal("0.10")
    drive()
    assert fresh(mine).state == WaitingLaunch.State.LEFT
    assert fresh(mine).detail.startswith("无法启动")


def test_a_teams_launch_started_from_the_queue_is_in_the_teams_log_under_who_asked(owner, lifecycle):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    top_up(team.account)
    colleague = UserFactory(email="colleague@example.com")
    Membership.objects.create(team=team, user=colleague, role=Role.DEVELOPER)
    _one_dcu_card()
    holder = launching.launch(team.account, _request(name="holder"), by=owner)
    entry = waiting.launch_or_wait(team.account, _request(name="queued"), by=colleague, wait=True)
    machines.release(fresh(holder))
    drive()
    assert fresh(entry).state == WaitingLaunch.State.STARTED
    assert TeamEvent.objects.filter(
        team=team, actor=colleague, action=TeamEvent.Action.LAUNCHED, subject="queued"
    ).exists()


def test_a_queued_job_behind_one_that_found_no_room_still_leaves_when_the_balance_runs_out(
    submit, owner, stranger, lifecycle
):
    _one_dcu_card()
    launching.launch(owner, _request(name="holder"))
    first = submit(user=stranger, backend="dcu", name="first")
    second = submit(backend="dcu", name="second")
    lifecycle.balances[owner.pk] = Decimal("0.10")
    drive(rounds=1)
    # The first found no room, so the second was not tried; it left all the same, saying why.
    assert fresh(first).state == State.QUEUED
    second = fresh(second)
    assert second.state == State.FAILED and second.instance is None
    assert second.state_detail.startswith("Left the queue") and "balance" in second.state_detail.lower()


def test_an_alike_job_whose_check_could_not_run_does_not_spare_the_next_from_its_check(
    submit, owner, stranger, lifecycle
):
    _one_dcu_card()
    launching.launch(owner, _request(name="holder"))
    submit(user=stranger, backend="dcu", name="first")
    unknown = submit(backend="dcu", name="image-gone")
    Job.objects.filter(pk=unknown.pk).update(image="no-such-image")  # its check fails for another reason
    second = submit(backend="dcu", name="second")
    lifecycle.balances[owner.pk] = Decimal("0.10")
    drive(rounds=1)
    assert fresh(unknown).state == State.QUEUED  # its turn says what is wrong
    assert fresh(second).state == State.FAILED and fresh(second).state_detail.startswith("Left the queue")
