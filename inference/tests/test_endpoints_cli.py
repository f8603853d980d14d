"""`gpucloud endpoints …` against a real HTTP server: deploy, ls, keys create, stop, start, rm."""

import json

import pytest

from inference import services as endpoints
from inference.tests.fixtures import fund
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(cli, inference_catalog, instant):
    """The shared ``cli`` (``tests.fixtures.services``), with the inference catalog and instant machines."""
    return cli


def test_deploy_ls_keys_stop_start_rm(cli, owner, stranger):
    fund(owner)
    code, out, err = cli(owner, "--json", "endpoints", "deploy", "qwen2.5-0.5b-instruct-vllm", "--name", "cli-qwen")
    assert code == 0, err
    deployed = json.loads(out)
    assert endpoints.authenticate_key(deployed["key"]) is not None
    settle()

    code, out, _ = cli(owner, "endpoints", "ls")
    assert "cli-qwen" in out and "running" in out and "/v1" in out
    code, out, _ = cli(owner, "--json", "endpoints", "keys", "create", deployed["id"], "--name", "ci")
    assert json.loads(out)["key"].startswith("sk-")
    assert cli(stranger, "endpoints", "stop", deployed["id"])[0] != 0
    assert cli(owner, "endpoints", "stop", deployed["id"])[0] == 0
    settle()
    assert cli(owner, "endpoints", "start", deployed["id"])[0] == 0
    settle()
    assert Instance.objects.get().status == "running"
    assert cli(owner, "endpoints", "rm", deployed["id"])[0] == 0
    settle()
    assert Instance.objects.get().status == "released"
