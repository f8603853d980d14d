"""The agent's report endpoint: the instance's own token and nothing else opens it."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from instances import heartbeats as reports
from instances.backends.slurm import agent_token
from instances.models import AgentReport

pytestmark = pytest.mark.django_db

REPORT = {
    "event": "heartbeat",
    "job_id": "31",
    "restart_count": 0,
    "cards": [0, 1],
    "metrics": {
        "source": "cnmon",
        "card_utilisation": 80.0,
        "memory_used": 74.6,
        "cards": [{"index": 0, "utilisation": 78, "memory_used": 74.6}],
    },
    "checkpoint": None,
}


def url(instance):
    return f"/api/v1/agent/instances/{instance.public_id}/reports"


def agent_client(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {token}")
    return client


def test_the_agent_reports_with_its_instances_token_and_learns_what_the_owner_wants(launch):
    instance = launch(chip="mlu370-x8", cards=2, image="pytorch-2.2-neuware")
    response = agent_client(agent_token(instance.public_id)).post(url(instance), REPORT, format="json")
    assert response.status_code == 200 and response.json() == {"wanted": "running"}
    report = reports.latest(instance)
    assert (report.job_id, report.source, report.card_utilisation) == ("31", "cnmon", 80.0)
    assert report.data["cards"] == [0, 1] and report.data["per_card"][0]["index"] == 0


def test_a_checkpoint_report_keeps_the_marker(launch):
    instance = launch()
    body = REPORT | {
        "event": "checkpoint",
        "checkpoint": {"signal": "SIGUSR1", "at": "2026-11-29T10:00:00+00:00", "job_id": "31", "restart_count": 0},
    }
    agent_client(agent_token(instance.public_id)).post(url(instance), body, format="json")
    assert reports.latest(instance).data["checkpoint"]["signal"] == "SIGUSR1"


def test_another_instances_token_a_wrong_token_and_a_missing_instance_are_the_same_404(launch):
    mine, other = launch(name="a"), launch(name="b")
    for client, target in [
        (agent_client(agent_token(other.public_id)), mine),
        (agent_client("gca_" + "0" * 64), mine),
        (agent_client(agent_token(mine.public_id)), type("Gone", (), {"public_id": "not-a-uuid"})),
    ]:
        response = client.post(url(target), REPORT, format="json")
        assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert not AgentReport.objects.exists()


def test_a_users_api_token_or_session_does_not_open_the_agent_endpoint(launch, owner_api, owner_client):
    instance = launch()
    assert owner_api.post(url(instance), REPORT, format="json").status_code == 401
    assert owner_client.post(url(instance), REPORT, content_type="application/json").status_code == 401
    assert not AgentReport.objects.exists()


@pytest.mark.parametrize(
    "change",
    [
        {"event": "reboot"},
        {"metrics": {"source": "cnmon", "card_utilisation": 180, "memory_used": 1}},
        {"metrics": {"source": "made-up", "card_utilisation": 1, "memory_used": 1}},
        {"cards": ["x"]},
    ],
)
def test_a_bad_report_is_refused_with_a_message_and_nothing_is_stored(launch, change):
    instance = launch()
    response = agent_client(agent_token(instance.public_id)).post(url(instance), REPORT | change, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and body["message"] and body["errors"]
    assert not AgentReport.objects.exists()


def test_reports_older_than_a_day_are_dropped_as_new_ones_arrive(launch):
    instance = launch()
    old = reports.record(instance, REPORT)
    AgentReport.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=2))
    agent_client(agent_token(instance.public_id)).post(url(instance), REPORT, format="json")
    assert list(AgentReport.objects.values_list("pk", flat=True)) != [old.pk]
    assert AgentReport.objects.count() == 1
