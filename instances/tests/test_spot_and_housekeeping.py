"""Spot preemption, auto-shutdown, prepaid terms and the release countdown."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db.models import Sum
from django.db.models.signals import post_init
from django.utils import timezone

from billing import ledger, metering, tasks
from billing.models import LedgerTransaction, Notification
from billing.money import summed
from catalog.models import Node
from instances import housekeeping
from instances import lifecycle as instance_lifecycle
from instances.backends import simulated
from instances.capacity import CapacityError
from instances.choices import Reason, Status
from instances.costs import cost_so_far
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def test_a_spot_preemption_stops_billing_at_the_preemption_minute(launch, lifecycle, settings):
    settings.INSTANCES_SPOT_NOTICE_SECONDS = 60
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch(spot=True)
        settle()
        clock.shift(timedelta(minutes=7, seconds=30))
        simulated.preempt(instance)
        preempted_at = timezone.now()
        clock.shift(timedelta(minutes=2))  # reconcile notices two minutes later, after the notice window
        settle()
        instance = fresh(instance)
        [session] = lifecycle.sessions_of(instance)
        assert instance.status == Status.PREEMPTED and session.ended_at == preempted_at
        # 7 min 30 s = 8 started minutes at the spot rate, not 10
        assert lifecycle.charged(instance) == (session.per_hour * 8 / 60).quantize(Decimal("0.01"))
        assert instance.reserved_cards == 0  # the notice window is over: the cards are back
        assert instance.events.filter(reason=Reason.PREEMPTED).exists()  # the owner's notification

    # One click relaunches it, as spot again
    instance_lifecycle.start(instance)
    settle()
    instance = fresh(instance)
    assert instance.status == Status.RUNNING and instance.spot and len(lifecycle.sessions_of(instance)) == 2


def test_a_reclaim_noticed_after_the_beat_charged_past_it_costs_what_the_instance_page_shows(
    launch, lifecycle, settings
):

    settings.INSTANCES_SPOT_NOTICE_SECONDS = 60
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch(spot=True)
        settle()
        for _minute in range(7):
            clock.shift(timedelta(minutes=1))
            metering.meter()
        clock.shift(timedelta(seconds=30))
        simulated.preempt(instance)  # reclaimed at 7 min 30 s: 8 started minutes
        for _minute in range(3):  # the metering beat runs on; reconcile notices three minutes later
            clock.shift(timedelta(minutes=1))
            metering.meter()
        settle()
        instance = fresh(instance)
        [session] = lifecycle.sessions_of(instance)
        charges = LedgerTransaction.objects.filter(usage_session__resource_id=instance.public_id)
        paid = -summed(charges.aggregate(t=Sum("user_amount"))["t"])
        assert instance.status == Status.PREEMPTED
        assert paid == cost_so_far(instance) == (session.per_hour * 8 / 60).quantize(Decimal("0.01"))
        assert ledger.check() == []


def test_the_notice_window_keeps_the_cards_until_it_ends(launch, lifecycle, settings):
    settings.INSTANCES_SPOT_NOTICE_SECONDS = 60
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch(spot=True)
        settle()
        simulated.preempt(instance)
        settle()
        assert fresh(instance).status == Status.PREEMPTED and fresh(instance).reserved_cards == 1
        clock.shift(timedelta(seconds=61))
        settle()
        assert fresh(instance).reserved_cards == 0


def test_a_relaunch_in_the_notice_window_holds_its_cards_once(launch, lifecycle, settings):
    settings.INSTANCES_SPOT_NOTICE_SECONDS = 60
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch(spot=True)
        settle()
        simulated.preempt(instance)
        settle()
        assert fresh(instance).status == Status.PREEMPTED and fresh(instance).reserved_cards == 1
        instance_lifecycle.start(fresh(instance))  # one click, while the old machine still has its notice window
        settle()
        clock.shift(timedelta(seconds=61))
        settle()
        instance = fresh(instance)
        assert instance.status == Status.RUNNING and instance.reserved_cards == 1
        node = Node.objects.get(pk=instance.node_id)
        held = Instance.objects.filter(node=node).aggregate(n=Sum("reserved_cards"))["n"]
        assert node.cards_reserved == held == 1
        instance_lifecycle.stop(instance)
        settle()
    node.refresh_from_db()
    assert node.cards_reserved == 0  # nothing leaked


def test_auto_shutdown_at_a_time_stops_the_instance(launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch(auto_shutdown_at=timezone.now() + timedelta(hours=1))
        settle()
        housekeeping.housekeeping()
        assert fresh(instance).status == Status.RUNNING
        clock.shift(timedelta(hours=1, minutes=1))
        housekeeping.housekeeping()
        settle()
    instance = fresh(instance)
    assert instance.status == Status.STOPPED and instance.events.filter(reason=Reason.AUTO_SHUTDOWN_TIME).exists()


def test_a_restart_after_the_auto_shutdown_time_keeps_running(launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch(auto_shutdown_at=timezone.now() + timedelta(hours=1))
        settle()
        clock.shift(timedelta(hours=1, minutes=1))
        housekeeping.housekeeping()
        settle()
        assert fresh(instance).status == Status.STOPPED and fresh(instance).auto_shutdown_at is None
        instance_lifecycle.start(fresh(instance))
        settle()
        clock.shift(timedelta(minutes=1))
        housekeeping.housekeeping()
        settle()
    instance = fresh(instance)
    assert instance.status == Status.RUNNING
    assert instance.events.filter(reason=Reason.AUTO_SHUTDOWN_TIME).count() == 1


def test_auto_shutdown_after_idle_minutes_reads_the_metrics(launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        busy = launch(name="busy", idle_shutdown_minutes=10)
        idle = launch(name="idle", idle_shutdown_minutes=10)
        settle()
        simulated.set_idle(idle)
        clock.shift(timedelta(minutes=12))
        housekeeping.housekeeping()
        settle()
    assert fresh(idle).status == Status.STOPPED and fresh(busy).status == Status.RUNNING
    assert fresh(idle).events.filter(reason=Reason.AUTO_SHUTDOWN_IDLE).exists()


def test_a_daily_plan_is_paid_up_front_and_continues_pay_as_you_go_at_the_end(launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch(plan="daily")
        settle()
        assert len(lifecycle.upfront) == 1 and lifecycle.sessions == []
        clock.shift(timedelta(days=1, minutes=1))
        housekeeping.housekeeping()
        housekeeping.housekeeping()  # an overlapping beat changes nothing
    instance = fresh(instance)
    assert instance.plan.slug == "payg" and instance.status == Status.RUNNING
    [session] = lifecycle.sessions_of(instance)
    assert session.started_at == instance.events.get(reason=Reason.TERM_CONTINUED).at


def test_a_daily_plan_can_stop_at_the_end_of_the_term(launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch(plan="daily", term_end_action="stop")
        settle()
        clock.shift(timedelta(days=1, minutes=1))
        housekeeping.housekeeping()
        settle()
    assert fresh(instance).status == Status.STOPPED and lifecycle.sessions == []


def test_a_stopped_instance_gets_reminders_then_is_released_after_15_days(launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch()
        settle()
        instance_lifecycle.stop(fresh(instance))
        settle()
        clock.shift(timedelta(days=12, hours=1))
        housekeeping.housekeeping()
        housekeeping.housekeeping()
        assert fresh(instance).events.filter(reason=Reason.RELEASE_REMINDER).count() == 1
        clock.shift(timedelta(days=2))
        housekeeping.housekeeping()
        assert fresh(instance).events.filter(reason=Reason.RELEASE_REMINDER).count() == 2
        reminders = Notification.objects.filter(user=instance.owner, kind="release_reminder")
        assert reminders.count() == 2 and "train-1" in reminders.first().message
        clock.shift(timedelta(days=1))
        housekeeping.housekeeping()
        settle()
    instance = fresh(instance)
    assert instance.status == Status.RELEASED and instance.status_reason == Reason.RELEASED
    assert instance.events.filter(reason=Reason.AUTO_RELEASE).exists()


def test_an_instance_started_meanwhile_gets_no_stale_release_reminder(launch, lifecycle):

    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch()
        settle()
        instance_lifecycle.stop(fresh(instance))
        settle()
        clock.shift(timedelta(days=12, hours=1))

        def started_meanwhile(sender, instance=None, **kwargs):
            # The owner starts it between the reminder beat's query and its compare-and-set.
            post_init.disconnect(started_meanwhile, sender=Instance)
            Instance.objects.filter(pk=instance.pk).update(
                status=Status.STARTING, release_at=None, release_reminders_sent=0
            )

        post_init.connect(started_meanwhile, sender=Instance)
        try:
            assert housekeeping.housekeeping()["reminders"] == 0
        finally:
            post_init.disconnect(started_meanwhile, sender=Instance)
    assert not fresh(instance).events.filter(reason=Reason.RELEASE_REMINDER).exists()
    assert not Notification.objects.filter(user=instance.owner, kind="release_reminder").exists()


# On-demand launches reclaim spot cards (SPEC §4: spot is preemptible) --------------------------------------------


def _one_node_of(chip_slug="dcu-z100"):
    """Leave one 8-card node of the chip schedulable (the others drained): a full node means a full chip."""
    nodes = Node.objects.filter(chip__slug=chip_slug).order_by("pk")
    nodes.exclude(pk=nodes.first().pk).update(drained=True)
    return nodes.first()


def test_an_on_demand_launch_reclaims_the_newest_spot_instance_when_no_card_is_free(
    launch, lifecycle, settings, stranger, django_capture_on_commit_callbacks
):
    settings.INSTANCES_SPOT_NOTICE_SECONDS = 60
    node = _one_node_of()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        spots = []
        for i in range(8):
            spots.append(launch(user=stranger, chip="dcu-z100", spot=True, name=f"spot-{i}"))
            clock.shift(timedelta(seconds=1))
        settle()
        assert all(fresh(s).status == Status.RUNNING for s in spots)

        reclaimed_at = timezone.now()
        with django_capture_on_commit_callbacks(execute=True):  # the spot machine is signalled on commit
            on_demand = launch(chip="dcu-z100", name="on-demand")
        settle()

        newest = fresh(spots[-1])
        assert newest.status == Status.PREEMPTED and "reclaimed" in newest.status_detail
        told = Notification.objects.get(user=stranger, kind="spot_preempted")
        assert "spot-7" in told.message and told.params["path"] == newest.get_absolute_url()
        assert [fresh(s).status for s in spots[:-1]] == [Status.RUNNING] * 7  # only as many as needed
        [session] = lifecycle.sessions_of(newest)
        assert session.ended_at == reclaimed_at  # its billing stopped at once
        node.refresh_from_db()
        assert node.cards_reserved == 8 and fresh(on_demand).reserved_cards == 1 and newest.reserved_cards == 0
        # the spot machine gets its notice window to checkpoint; the on-demand one boots after it
        job = simulated.SimulatedJob.objects.get(instance_id=newest.public_id)
        assert job.signalled_at == reclaimed_at and job.stop_at == reclaimed_at + timedelta(seconds=60)
        assert fresh(on_demand).status in (Status.CREATING, Status.STARTING)
        clock.shift(timedelta(seconds=61))
        settle()
        assert fresh(on_demand).status == Status.RUNNING
        assert not lifecycle.sessions_of(on_demand)[0].started_at < reclaimed_at + timedelta(seconds=60)


def test_a_spot_launch_never_reclaims_and_a_full_node_of_on_demand_cannot_be_reclaimed(launch, lifecycle, stranger):

    _one_node_of()
    for i in range(4):
        launch(user=stranger, chip="dcu-z100", name=f"od-{i}")
    for i in range(4):
        launch(user=stranger, chip="dcu-z100", spot=True, name=f"spot-{i}")
    settle()
    with pytest.raises(CapacityError):
        launch(chip="dcu-z100", spot=True, name="late-spot")
    with pytest.raises(CapacityError):
        launch(chip="dcu-z100", cards=8, name="whole-node")  # 4 spot cards are not 8
    launch(chip="dcu-z100", cards=4, name="half-node")  # all four spot instances give way
    settle()
    assert Instance.objects.filter(spot=True, status=Status.PREEMPTED).count() == 4
    assert Instance.objects.filter(spot=False, status=Status.RUNNING).count() == 5


def test_a_late_beat_sends_one_release_reminder_by_e_mail_with_the_instances_link(
    launch, lifecycle, mailoutbox, monkeypatch, django_capture_on_commit_callbacks, settings
):

    monkeypatch.setattr(tasks.email_notification, "delay", lambda pk: tasks.email_notification(pk))
    settings.SITE_URL = "https://console.example.com"
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch()
        settle()
        instance_lifecycle.stop(fresh(instance))
        settle()
        clock.shift(timedelta(days=14, hours=1))  # the beat was down on day 12: both thresholds have passed
        with django_capture_on_commit_callbacks(execute=True):
            housekeeping.housekeeping()
            housekeeping.housekeeping()
    assert fresh(instance).events.filter(reason=Reason.RELEASE_REMINDER).count() == 1
    [mail] = mailoutbox
    assert instance.owner.email in mail.to
    assert f"https://console.example.com/instances/{instance.public_id}/" in mail.body


def test_the_release_countdown_and_the_pricing_page_follow_the_operators_setting(launch, lifecycle, settings, client):
    settings.STOPPED_RELEASE_DAYS = 7
    instance = launch()
    settle()
    instance_lifecycle.stop(Instance.objects.with_related().get(pk=instance.pk))
    settle()

    instance.refresh_from_db()
    assert instance.release_at - instance.stopped_at == timedelta(days=7)
    client.cookies["django_language"] = "en"
    assert "released after 7 days stopped" in client.get("/catalog/pricing/").content.decode()
