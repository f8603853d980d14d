"""The instance pages: list with live status, the wizard, detail and actions, and who may see them."""

from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from catalog.models import Chip
from instances import costs
from instances import lifecycle as instance_lifecycle
from instances.backends.simulated import SimulatedBackend
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db


@pytest.fixture
def english(owner_client):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def test_the_list_polls_while_an_instance_is_on_its_way_and_stops_when_settled(english, launch):
    instance = launch(name="web-1")
    html = english.get(reverse("instances:list")).content.decode()
    assert "web-1" in html and 'hx-trigger="every 2s"' in html and 'data-status="creating"' in html

    settle()
    instance_lifecycle.stop(fresh(instance))
    settle()
    partial = english.get(reverse("instances:list"), HTTP_HX_REQUEST="true").content.decode()
    assert 'data-status="stopped"' in partial and "hx-trigger" not in partial
    assert "<html" not in partial


def test_the_list_query_count_does_not_grow_with_instances(english, launch, django_assert_max_num_queries, settings):
    settings.ACCOUNT_MAX_MACHINES = 16  # the list of 16 running machines: more than an account's default allows
    launch(name="one")
    url = reverse("instances:list")
    with CaptureQueriesContext(connection) as one:
        english.get(url)
    for i in range(15):
        launch(name=f"more-{i}", chip="a800-80g", image="pytorch-2.2-cuda12")
    with django_assert_max_num_queries(len(one.captured_queries)):
        response = english.get(url)
    assert response.content.decode().count("data-instance=") == 16


def test_a_kept_row_of_the_list_follows_the_instance_its_chip_and_the_language(english, launch):

    instance = launch(name="row-1")
    settle()
    url = reverse("instances:list")

    def row(client=english) -> str:
        html = client.get(url).content.decode()
        return html.split(f'data-instance="{instance.public_id}"')[1].split("</tr>")[0]

    assert "row-1" in row() and row() == row()  # the second is the kept one
    Instance.objects.filter(pk=instance.pk).update(name="row-renamed")  # no signal: the row's values are its key
    assert "row-renamed" in row()
    instance_lifecycle.stop(fresh(instance))
    settle()
    assert 'data-status="stopped"' in row() and "Not billed while stopped" in row()
    Chip.objects.filter(slug="ascend-910b").update(name="Ascend 910B2")
    assert "Ascend 910B2" in row()
    english.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    assert "关机期间不计费" in row() and "Not billed" not in row()


def test_the_wizard_shows_the_live_price_from_the_quote_function(english, lifecycle):
    response = english.get(
        reverse("instances:launch"), {"chip": "ascend-910b", "cards": "2", "plan": "payg"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200 and 'id="price-payable"' in html
    assert "¥3.42" in html  # 2 × ¥1.9 less the 10% Xinchuang subsidy
    assert "pytorch-2.2-cann8" in html and "pytorch-2.2-cuda12" not in html  # only compatible images


def test_the_wizard_explains_bad_input(english, lifecycle):
    response = english.post(
        reverse("instances:launch"),
        {
            "chip": "ascend-910b",
            "cards": "2",
            "plan": "daily",
            "spot": "on",
            "image": "pytorch-2.2-cann8",
            "name": "x",
            "term_end_action": "continue",
        },
    )
    assert response.status_code == 400
    assert "Spot instances are offered with pay-as-you-go only" in response.content.decode()
    assert not Instance.objects.exists()


def test_launching_from_the_wizard_redirects_to_the_instance(english, lifecycle):
    response = english.post(
        reverse("instances:launch"),
        {
            "chip": "mlu370-x8",
            "cards": "1",
            "plan": "payg",
            "image": "pytorch-2.2-neuware",
            "name": "from-page",
            "term_end_action": "continue",
        },
    )
    instance = Instance.objects.get()
    assert response.status_code == 302 and response["Location"] == instance.get_absolute_url()


def test_the_detail_page_labels_simulated_access_and_metrics(english, launch):
    instance = launch()
    settle()
    html = english.get(instance.get_absolute_url()).content.decode()
    assert "there is no machine to enter" in html and fresh(instance).access["node"] in html
    assert "ssh -p" not in html and 'id="ssh-command"' not in html and "jupyter.sim" not in html
    assert "instances/metrics.js" in html and "vendor/chartjs/chart.umd.min.js" in html
    data = english.get(reverse("instances:metrics", args=[instance.public_id])).json()
    assert data["simulated"] is True and len(data["labels"]) >= 1


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_the_chart_is_named_for_what_it_measures_cards_or_the_machines_cpu_and_memory(owner_client, launch, language):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    on_cards = launch(name="cards-1")
    on_host = launch(name="host-1")
    Instance.objects.filter(pk=on_host.pk).update(backend_name="local")  # a sandbox of this host: no card to read

    cards = owner_client.get(on_cards.get_absolute_url()).content.decode()
    machine = owner_client.get(on_host.get_absolute_url()).content.decode()

    title = {"zh-hans": ("卡利用率与显存", "本机 CPU 与内存"), "en": ("Card utilisation", "This machine's CPU")}
    assert title[language][0] in cards and title[language][1] not in cards
    assert title[language][1] in machine and title[language][0] not in machine
    assert ("CPU（%）" if language == "zh-hans" else "CPU (%)") in machine


def test_the_detail_page_shows_what_a_finished_run_cost(english, launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch()
        settle()
        clock.shift(timedelta(minutes=10))
        instance_lifecycle.stop(fresh(instance))
        settle()
        response = english.get(instance.get_absolute_url())
    charged = lifecycle.charged(instance)  # 10 minutes at the rate frozen when it started
    assert fresh(instance).status == "stopped" and charged > 0
    assert response.context["cost"] == charged  # the page lists events newest first; the sum does not care
    assert costs.cost_so_far(instance) == charged


def test_an_illegal_action_from_the_page_shows_a_message(english, launch):
    instance = launch(name="busy")
    settle()
    response = english.post(reverse("instances:start", args=[instance.public_id]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "you cannot start it now" in response.content.decode()


def test_the_kept_parts_of_the_detail_page_follow_the_instance(english, launch):

    def timeline(html: str) -> str:
        return html.split('id="events">')[1].split("</ol>")[0]

    instance = launch(name="facts-1")
    settle()
    url = reverse("instances:detail", args=[instance.public_id])
    english.get(url)
    running = english.get(url).content.decode()  # its parts kept by now
    assert 'id="stop-button"' in running and 'id="start-button"' not in running
    assert timeline(running).count("<li") == fresh(instance).events.count()
    instance_lifecycle.stop(fresh(instance))
    settle()
    stopped = english.get(url).content.decode()
    assert 'id="start-button"' in stopped and 'id="stop-button"' not in stopped and 'id="save-image-link"' in stopped
    assert "not billed while stopped" in stopped
    assert timeline(stopped).count("<li") == fresh(instance).events.count() > 3 and "Stopped" in timeline(stopped)
    Chip.objects.filter(slug=fresh(instance).chip.slug).update(name="Renamed Chip")
    assert "Renamed Chip" in english.get(url).content.decode()


def test_the_page_s_poll_offers_saving_a_stopped_instance_as_an_image_without_a_reload(english, launch):
    instance = launch(name="poll-save")
    settle()
    url = reverse("instances:detail", args=[instance.public_id])
    english.get(url)
    instance_lifecycle.stop(fresh(instance))
    settle()
    polled = english.get(url, {"seen": "running"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="start-button"' in polled and 'id="save-image-link"' in polled


def test_stop_and_start_from_the_page(english, launch):
    instance = launch()
    settle()
    english.post(reverse("instances:stop", args=[instance.public_id]))
    settle()
    assert fresh(instance).status == "stopped"
    english.post(reverse("instances:start", args=[instance.public_id]))
    settle()
    assert fresh(instance).status == "running"


@pytest.mark.parametrize("name", ["detail", "metrics", "start", "stop", "release"])
def test_a_stranger_gets_404_pages_for_someone_elses_instance(client, stranger, launch, name):
    instance = launch()
    settle()
    client.force_login(stranger)
    url = reverse(f"instances:{name}", args=[instance.public_id])
    response = client.get(url) if name in ("detail", "metrics") else client.post(url)
    assert response.status_code == 404
    assert fresh(instance).status == "running"


def test_the_list_needs_a_login(client):
    assert client.get(reverse("instances:list")).status_code == 302


def test_the_wizard_prices_the_new_data_disk_beside_the_compute(english, lifecycle):
    params = {"chip": "ascend-910b", "cards": "1", "plan": "payg", "data_disk_gb": "100"}
    html = english.get(reverse("instances:launch"), params, HTTP_HX_REQUEST="true").content.decode()
    # 100 GB × ¥0.01 a GB-day = ¥1.00 a day = ¥0.041667 an hour, on top of the 910B's subsidised ¥1.71 (exactly)
    assert 'id="price-disk">¥1.00 a day<' in html
    assert 'id="price-running-total">¥1.751667<' in html
    assert "also while the instance is stopped" in html
    without = english.get(reverse("instances:launch"), params | {"data_disk_gb": "0"}, HTTP_HX_REQUEST="true")
    assert 'id="price-disk"' not in without.content.decode()


def test_the_port_panel_lists_what_listens_and_opens_any_port_through_the_console(
    english, launch, monkeypatch, stranger
):

    instance = launch()
    settle()
    Instance.objects.filter(pk=instance.pk).update(access={**fresh(instance).access, "jupyter": "proxied"})
    monkeypatch.setattr(SimulatedBackend, "listening_ports", lambda self, instance: [6006, 8123])
    panel = english.get(reverse("instances:ports", args=[instance.public_id])).content.decode()

    assert f'href="/instances/{instance.public_id}/lab/proxy/6006/"' in panel and "TensorBoard · 6006" in panel
    assert 'data-port="8123"' in panel and "every 5s" in panel
    opened = english.get(reverse("instances:open-port", args=[instance.public_id]), {"port": "8123"})
    assert opened.status_code == 302 and opened["Location"].endswith(f"/instances/{instance.public_id}/lab/proxy/8123/")
    for bad in ("0", "65536", "http", "-1", ""):
        refused = english.get(reverse("instances:open-port", args=[instance.public_id]), {"port": bad}, follow=True)
        assert "A port is a whole number from 1 to 65535." in refused.content.decode()
    silent = english.get(reverse("instances:open-port", args=[instance.public_id]), {"port": "9000"}, follow=True)
    assert "Nothing listens on port 9000 inside the machine yet" in silent.content.decode()
    assert silent.redirect_chain[-1][0] == instance.get_absolute_url()
    other = Client()
    other.force_login(stranger)
    assert other.get(reverse("instances:ports", args=[instance.public_id])).status_code == 404

    monkeypatch.setattr(SimulatedBackend, "listening_ports", lambda self, instance: [])
    empty = english.get(reverse("instances:ports", args=[instance.public_id])).content.decode()
    assert 'id="ports-empty"' in empty
