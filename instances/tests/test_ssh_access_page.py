"""The SSH command on the instance page and at /api/v1/instances/{id}/ssh: shown while the instance can be
entered, never for the simulated backend, with the host users reach the console on."""

import pytest
from django.conf import settings
from django.urls import reverse

from accounts import ssh_keys
from instances import lifecycle
from instances.models import Instance
from instances.tests.fixtures import settle
from instances.tests.ssh_fixtures import make_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def english(owner_client):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def _page(client, instance, host="console.example.com:8443") -> str:
    return client.get(reverse("instances:detail", args=[instance.public_id]), HTTP_HOST=host).content.decode()


@pytest.fixture(autouse=True)
def _hosts(settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "console.example.com"]


def test_a_running_instance_shows_the_ssh_command_with_the_consoles_host(english, running_instance, owner, tmp_path):
    ssh_keys.add_ssh_key(owner, public_key=make_key(tmp_path, "k").public_text)
    html = _page(english, running_instance)
    command = f"ssh -p {settings.SSH_GATEWAY_PORT} {running_instance.public_id}@console.example.com"
    assert f'value="{command}"' in html and 'data-copy-target="#ssh-command"' in html
    assert 'id="ssh-no-keys"' not in html and 'id="no-machine"' not in html


def test_without_ssh_keys_the_page_links_the_keys_page(english, running_instance):
    html = _page(english, running_instance)
    assert 'id="ssh-no-keys"' in html and reverse("console:ssh-keys") in html


def test_the_public_host_setting_wins(english, running_instance, settings):
    settings.SSH_GATEWAY_PUBLIC_HOST = "ssh.example.com"
    settings.SSH_GATEWAY_PORT = 22022
    assert f"ssh -p 22022 {running_instance.public_id}@ssh.example.com" in _page(english, running_instance)


def test_the_simulated_backend_shows_no_command(english, launch):
    instance = launch()
    settle()
    html = _page(english, instance)
    assert "Simulated: there is no machine to enter" in html
    assert "ssh -p" not in html and 'id="ssh-command"' not in html


def test_a_stopped_instance_shows_no_command(english, running_instance):
    lifecycle.stop(Instance.objects.with_related().get(pk=running_instance.pk))
    settle()
    assert 'id="ssh-command"' not in _page(english, running_instance)


def test_the_api_gives_the_command_to_the_owner_only(owner_api, stranger_api, running_instance):
    url = f"/api/v1/instances/{running_instance.public_id}/ssh"
    body = owner_api.get(url, HTTP_HOST="console.example.com").json()
    assert body == {
        "host": "console.example.com",
        "port": settings.SSH_GATEWAY_PORT,
        "user": str(running_instance.public_id),
        "command": f"ssh -p {settings.SSH_GATEWAY_PORT} {running_instance.public_id}@console.example.com",
    }
    assert stranger_api.get(url).status_code == 404


def test_the_api_says_why_a_simulated_instance_cannot_be_entered(owner_api, launch):
    instance = launch()
    settle()
    response = owner_api.get(f"/api/v1/instances/{instance.public_id}/ssh", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 409
    assert response.json() == {"code": "not_enterable", "message": "Simulated: there is no machine to enter."}
