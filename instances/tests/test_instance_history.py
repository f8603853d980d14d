"""What the instance pages show once an instance stops or is released: no hourly price while nothing is billed,
the released ones kept in a history tab with when they ran and what they cost, and the polled status bringing
the disks panel along when the status changes."""

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from instances import costs, lifecycle
from instances.models import Instance
from instances.tests.fixtures import settle
from tests.fixtures.factories import top_up

pytestmark = pytest.mark.django_db


@pytest.fixture
def english(owner_client):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def _row(html, name):
    return html.split(f">{name}</a>", 1)[1].split("</tr>", 1)[0]


def test_the_hourly_price_shows_only_while_an_instance_runs_or_is_on_its_way_up(english, launch):
    instance = launch(name="web-1")
    settle()
    list_url = reverse("instances:list")
    running = english.get(list_url).content.decode()
    assert "¥1.71" in _row(running, "web-1")  # one 910B card, less the Xinchuang subsidy

    lifecycle.stop(fresh(instance))
    settle()
    assert fresh(instance).price_per_hour is not None  # the last run's rate is kept…
    stopped = english.get(list_url).content.decode()
    assert "¥1.71" not in _row(stopped, "web-1") and "—" in _row(stopped, "web-1")  # …but not shown
    detail = english.get(instance.get_absolute_url()).content.decode()
    price = detail.split('id="price-per-hour"', 1)[1].split("</dd>", 1)[0]
    assert "¥1.71" not in price and "not billed while stopped" in price


def test_released_instances_are_listed_with_when_they_ran_and_what_they_cost(english, launch):
    instance = launch(name="old-run")
    settle()
    launch(name="still-here")
    lifecycle.release(fresh(instance))
    settle()
    current = english.get(reverse("instances:list")).content.decode()
    assert "old-run" not in current and "still-here" in current and 'id="released-tab"' in current

    html = english.get(reverse("instances:list"), {"show": "released"}).content.decode()
    assert "still-here" not in html
    row = _row(html, "old-run")
    expected = costs.cost_so_far(fresh(instance))
    assert f"¥{expected:.2f}" in row
    released_at = fresh(instance).events.filter(new="released").get().at
    assert released_at.astimezone().strftime("%Y-%m-%d") in row


def test_the_released_tab_query_count_does_not_grow_with_instances(english, launch):
    url = reverse("instances:list") + "?show=released"
    lifecycle.release(fresh(launch(name="r-0")))
    settle()
    with CaptureQueriesContext(connection) as one:
        english.get(url)
    for i in range(1, 8):
        lifecycle.release(fresh(launch(name=f"r-{i}")))
    settle()
    with CaptureQueriesContext(connection) as many:
        response = english.get(url)
    assert response.content.decode().count("data-instance=") == 8
    assert len(many.captured_queries) <= len(one.captured_queries)


def test_the_polled_status_brings_the_disks_panel_along_when_the_instance_is_released(english, launch, owner):
    top_up(owner, "1000")
    instance = launch(name="with-disk", data_disk_gb=20)
    settle()
    url = instance.get_absolute_url()
    unchanged = english.get(url, {"seen": "running"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="attachments"' not in unchanged  # nothing changed: the panels are left alone

    lifecycle.release(fresh(instance))
    settle()
    polled = english.get(url, {"seen": "running"}, HTTP_HX_REQUEST="true").content.decode()
    panel = polled.split('id="attachments"', 1)[1]
    assert 'hx-swap-oob="true"' in panel.split(">", 1)[0]  # swapped out of band, in place of the stale panel
    assert "detach-button" not in panel and 'id="no-attached-disks"' in panel
