"""An instance's daily stop and start (定时开关机), with the clock held still: each time acts once a day in its
zone, a time already past acts from tomorrow, a refused start is on the timeline, and the instance page saves it
for those who may operate the instance only."""

from datetime import UTC, datetime, time, timedelta

import pytest
import time_machine
from django.db.models import F

from catalog.models import Node
from core.errors import Conflict
from core.field_errors import FieldError
from instances import daily_power, housekeeping
from instances import lifecycle as instance_lifecycle
from instances.choices import Reason, Status
from instances.models import DailyPowerSchedule, Instance, InstanceEvent
from instances.tests.fixtures import settle
from teams import services as teams
from teams.context import SESSION_KEY
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

# 2026-03-02 20:00 in Shanghai.
EVENING = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def at(when):
    return time_machine.travel(when, tick=False)


def status(instance) -> str:
    return Instance.objects.get(pk=instance.pk).status


def test_it_stops_at_23_and_starts_at_8_in_shanghai_once_a_day(launch, lifecycle):
    with at(EVENING):
        instance = launch()
        settle()
        daily_power.set_daily(instance, time(23, 0), time(8, 0))
        housekeeping.housekeeping()
    assert status(instance) == Status.RUNNING  # 08:00 has passed today: the start acts from tomorrow

    with at(EVENING + timedelta(hours=3, minutes=1)):  # 23:01
        housekeeping.housekeeping()
        settle()
    assert status(instance) == Status.STOPPED
    event = InstanceEvent.objects.filter(instance=instance, new=Status.STOPPING).get()
    assert event.reason == Reason.AUTO_SHUTDOWN_TIME

    with at(EVENING + timedelta(hours=12)):  # 08:00 the next day
        housekeeping.housekeeping()
        settle()
    assert status(instance) == Status.RUNNING
    with at(EVENING + timedelta(hours=12, minutes=1)):
        instance_lifecycle_stop(instance)
        housekeeping.housekeeping()  # started once today: stopping it by hand sticks
        settle()
    assert status(instance) == Status.STOPPED


def instance_lifecycle_stop(instance):
    instance_lifecycle.stop(Instance.objects.get(pk=instance.pk))


def test_a_zone_with_daylight_saving_stops_at_its_own_wall_clock(launch, lifecycle):
    # 18:00 in Berlin is 17:00 UTC in winter and 16:00 UTC from 29 March 2026.
    with at(datetime(2026, 3, 28, 12, 0, tzinfo=UTC)):
        instance = launch()
        settle()
        daily_power.set_daily(instance, time(18, 0), None, "Europe/Berlin")
    with at(datetime(2026, 3, 29, 16, 1, tzinfo=UTC)):
        housekeeping.housekeeping()
    assert status(instance) == Status.STOPPING


def test_a_beat_that_was_down_acts_once_for_the_latest_time_it_missed(launch, lifecycle):
    with at(EVENING):
        instance = launch()
        settle()
        daily_power.set_daily(instance, time(23, 0), time(8, 0))
    # The beat was down from 20:00 until 00:30: the 23:00 stop acts then, once.
    with at(EVENING + timedelta(hours=4, minutes=30)):
        assert daily_power.apply_due() == 1
        assert daily_power.apply_due() == 0
    assert status(instance) == Status.STOPPING
    settle()
    # Down again from 00:31 until 09:00 two days later: both times passed twice; the latest is a start.
    with at(EVENING + timedelta(days=1, hours=13)):
        assert daily_power.apply_due() == 1
        assert daily_power.apply_due() == 0
        settle()
    assert status(instance) == Status.RUNNING


def test_a_start_refused_for_no_free_card_is_on_the_timeline(launch, lifecycle):
    with at(EVENING):
        instance = launch()
        settle()
        daily_power.set_daily(instance, None, time(20, 30))
        instance_lifecycle_stop(instance)
        settle()
        Node.objects.update(cards_reserved=F("cards"))  # every card taken meanwhile
    with at(EVENING + timedelta(minutes=31)):
        daily_power.apply_due()
    assert status(instance) == Status.STOPPED
    assert InstanceEvent.objects.filter(instance=instance, detail__contains="daily start").exists()


def test_bad_values_are_refused_and_empty_times_turn_it_off(launch, lifecycle):
    instance = launch()
    with pytest.raises(FieldError):
        daily_power.set_daily(instance, time(8, 0), None, "Mars/Olympus")
    with pytest.raises(FieldError):
        daily_power.set_daily(instance, time(8, 0), time(8, 0))
    daily_power.set_daily(instance, time(8, 0), None)
    daily_power.set_daily(instance, None, None)
    assert not DailyPowerSchedule.objects.exists()


def test_a_released_instance_has_no_daily_times(launch, lifecycle):
    instance = launch()
    Instance.objects.filter(pk=instance.pk).update(status=Status.RELEASED)
    with pytest.raises(Conflict):
        daily_power.set_daily(Instance.objects.get(pk=instance.pk), time(8, 0), None)


def test_the_instance_page_saves_the_daily_times(client, owner, launch, lifecycle):
    instance = launch()
    client.force_login(owner)
    client.cookies["django_language"] = "en"
    response = client.post(
        f"/instances/{instance.public_id}/daily-power/", {"stop_at": "23:00", "start_at": "08:00", "timezone": ""}
    )
    assert response.status_code == 302
    page = client.get(instance.get_absolute_url()).content.decode()
    assert "Stops every day at 23:00 · starts every day at 08:00 (Asia/Shanghai)" in page


def test_a_teams_read_only_member_cannot_set_them_and_a_stranger_gets_a_404(client, owner, stranger, launch):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    viewer = UserFactory(email="viewer@example.com")
    Membership.objects.create(team=team, user=viewer, role=Role.READ_ONLY)
    instance = launch(user=team.account)
    url = f"/instances/{instance.public_id}/daily-power/"
    client.force_login(viewer)
    session = client.session
    session[SESSION_KEY] = team.slug
    session.save()
    assert client.post(url, {"stop_at": "23:00"}).status_code == 403
    client.force_login(stranger)
    assert client.post(url, {"stop_at": "23:00"}).status_code == 404
    assert not DailyPowerSchedule.objects.exists()


def test_the_api_reads_sets_and_clears_the_daily_times(owner_api, launch, lifecycle):
    instance = launch()
    url = f"/api/v1/instances/{instance.public_id}/daily-power"
    assert owner_api.get(url).json() == {"stop_at": None, "start_at": None, "timezone": ""}
    saved = owner_api.put(url, {"stop_at": "23:00", "start_at": "08:30"}, format="json")
    assert saved.status_code == 200
    assert saved.json() == {"stop_at": "23:00", "start_at": "08:30", "timezone": "Asia/Shanghai"}
    bad = owner_api.put(url, {"stop_at": "23:00", "timezone": "Mars/Olympus"}, format="json")
    assert bad.status_code == 400 and "timezone" in bad.json()["errors"]
    owner_api.put(url, {"stop_at": None, "start_at": None}, format="json")
    assert not DailyPowerSchedule.objects.exists()


def test_someone_elses_instance_has_no_daily_times_for_them(stranger_api, launch, lifecycle):
    instance = launch()
    url = f"/api/v1/instances/{instance.public_id}/daily-power"
    assert stranger_api.get(url).status_code == 404
    assert stranger_api.put(url, {"stop_at": "23:00"}, format="json").status_code == 404
