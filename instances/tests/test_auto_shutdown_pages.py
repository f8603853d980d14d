"""Auto-shutdown from the pages: optional fields in the launch wizard (errors next to them) and a panel on the
instance page where the owner changes or clears it; ``shutdown.set_auto_shutdown`` applies the launch rule."""

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from core.errors import Conflict, ServiceError
from instances import lifecycle as instance_lifecycle
from instances import shutdown
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db

WIZARD = {
    "chip": "mlu370-x8",
    "cards": "1",
    "plan": "payg",
    "image": "pytorch-2.2-neuware",
    "name": "nightly",
    "term_end_action": "continue",
}


@pytest.fixture
def english(owner_client):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def _local(at) -> str:
    return timezone.localtime(at).strftime("%Y-%m-%dT%H:%M")


def test_the_wizard_launches_with_both_shutdowns(english, lifecycle):
    at = (timezone.now() + timedelta(hours=3)).replace(second=0, microsecond=0)
    english.post(reverse("instances:launch"), WIZARD | {"auto_shutdown_at": _local(at), "idle_shutdown_minutes": "30"})
    instance = Instance.objects.get()
    assert instance.auto_shutdown_at == at and instance.idle_shutdown_minutes == 30
    page = english.get(instance.get_absolute_url()).content.decode()
    assert "After 30 idle minutes" in page and timezone.localtime(at).strftime("%Y-%m-%d %H:%M") in page


def test_the_wizard_shows_shutdown_errors_beside_the_fields(english, lifecycle):
    past = _local(timezone.now() - timedelta(hours=1))
    response = english.post(
        reverse("instances:launch"), WIZARD | {"auto_shutdown_at": past, "idle_shutdown_minutes": "2"}
    )
    html = response.content.decode()
    assert response.status_code == 400 and not Instance.objects.exists()
    assert "The auto-shutdown time must be in the future." in html
    assert "Idle minutes must be between 5 and 10080 (a week)." in html
    # The price is still shown: it does not depend on the shutdown
    assert 'id="price-payable"' in html
    wizard = english.get(reverse("instances:launch")).content.decode()
    assert 'id="id_idle_shutdown_minutes"' in wizard and "Auto-shutdown (optional)" in wizard


def test_the_owner_changes_and_clears_it_on_a_running_instance(english, launch):
    instance = launch()
    settle()
    url = reverse("instances:auto-shutdown", args=[instance.public_id])
    panel = english.post(url, {"idle_shutdown_minutes": "45"}, HTTP_HX_REQUEST="true")
    assert panel.status_code == 200 and "After 45 idle minutes" in panel.content.decode()
    assert Instance.objects.get(pk=instance.pk).idle_shutdown_minutes == 45

    refused = english.post(url, {"auto_shutdown_at": "2020-01-01T08:00"}, HTTP_HX_REQUEST="true")
    assert "The auto-shutdown time must be in the future." in refused.content.decode()
    assert Instance.objects.get(pk=instance.pk).idle_shutdown_minutes == 45  # nothing written

    cleared = english.post(url, {"auto_shutdown_at": "", "idle_shutdown_minutes": ""})
    assert cleared.status_code == 302
    fresh = Instance.objects.get(pk=instance.pk)
    assert fresh.idle_shutdown_minutes is None and fresh.auto_shutdown_at is None


def test_set_auto_shutdown_uses_the_launch_rule_and_refuses_a_released_instance(launch):
    instance = launch()
    settle()
    at = timezone.now() + timedelta(hours=1)
    shutdown.set_auto_shutdown(instance, at, 10)
    assert Instance.objects.filter(pk=instance.pk, auto_shutdown_at=at, idle_shutdown_minutes=10).exists()
    with pytest.raises(ServiceError, match="must be in the future"):
        shutdown.set_auto_shutdown(instance, timezone.now() - timedelta(minutes=1), None)
    with pytest.raises(ServiceError, match="between 5 and 10080"):
        shutdown.set_auto_shutdown(instance, None, 4)
    instance_lifecycle.release(Instance.objects.with_related().get(pk=instance.pk))
    settle()
    with pytest.raises(Conflict):
        shutdown.set_auto_shutdown(Instance.objects.get(pk=instance.pk), None, None)


def test_the_kept_panel_shows_the_stored_shutdown_never_what_was_typed_and_refused(english, launch):
    instance = launch()
    settle()
    url = reverse("instances:auto-shutdown", args=[instance.public_id])

    def panel() -> str:
        page = english.get(instance.get_absolute_url()).content.decode()
        part = page.split('id="auto-shutdown"')[1].split("</section>")[0]
        return re.sub(r'name="csrfmiddlewaretoken" value="\w+"', "", part)  # each response's own token

    assert panel() == panel() and 'id="auto-shutdown-idle">Off' in panel()  # the second one is kept
    refused = english.post(url, {"idle_shutdown_minutes": "2"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'value="2"' in refused and "Idle minutes must be between 5 and 10080" in refused
    assert 'value="2"' not in panel() and "Idle minutes must be" not in panel()  # the typed form was not kept
    english.post(url, {"idle_shutdown_minutes": "45"}, HTTP_HX_REQUEST="true")
    assert "After 45 idle minutes" in panel() and 'value="45"' in panel()
    Instance.objects.filter(pk=instance.pk).update(idle_shutdown_minutes=None)  # no signal: the values are the key
    assert 'id="auto-shutdown-idle">Off' in panel() and 'value="45"' not in panel()
