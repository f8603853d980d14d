"""The gpucloud CLI against a real HTTP server: create with --backend, ls, show, stop, start, rm; strangers 404."""

import json

import pytest

from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(cli, lifecycle):
    """The shared ``cli`` (``tests.fixtures.services``), with the machines' simulated lifecycle these tests need."""
    return cli


def test_create_with_a_backend_then_ls_show_stop_start_rm(cli, owner):
    code, out, err = cli(
        owner,
        "--json",
        "instances",
        "create",
        "--backend",
        "mlu",
        "--cards",
        "2",
        "--image",
        "pytorch-2.2-neuware",
        "--name",
        "cli-mlu",
    )
    assert code == 0, err
    instance_id = json.loads(out)["id"]
    settle()

    code, out, _ = cli(owner, "instances", "ls")
    assert code == 0 and "cli-mlu" in out and "running" in out and "STATUS" in out
    code, out, _ = cli(owner, "instances", "show", instance_id)
    assert "(simulated)" in out and "starting → running" in out

    assert cli(owner, "stop", instance_id)[0] == 0
    settle()
    assert cli(owner, "start", instance_id)[0] == 0
    settle()
    assert Instance.objects.get().status == "running"
    assert cli(owner, "instances", "rm", instance_id)[0] == 0
    settle()
    assert Instance.objects.get().status == "released"


def test_a_stranger_gets_404_from_the_cli(cli, owner, stranger):
    code, out, _ = cli(
        owner,
        "--json",
        "instances",
        "create",
        "--chip",
        "mlu370-x8",
        "--image",
        "pytorch-2.2-neuware",
        "--name",
        "mine",
    )
    instance_id = json.loads(out)["id"]
    for argv in (["instances", "show", instance_id], ["stop", instance_id], ["rm", instance_id]):
        code, _, err = cli(stranger, *argv)
        assert code == 1 and "404" in err
    code, out, _ = cli(stranger, "ls")
    assert "mine" not in out


def test_an_illegal_transition_is_a_clear_cli_error(cli, owner):
    code, out, _ = cli(
        owner,
        "--json",
        "instances",
        "create",
        "--chip",
        "mlu370-x8",
        "--image",
        "pytorch-2.2-neuware",
        "--name",
        "busy",
    )
    settle()
    code, _, err = cli(owner, "start", json.loads(out)["id"])
    assert code == 1 and "409" in err and "cannot start" in err
