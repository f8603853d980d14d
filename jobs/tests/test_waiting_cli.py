"""`gpucloud instances create --wait`, `instances waiting` and `instances leave-queue` against a real HTTP server."""

import json

import pytest

from catalog.models import Node
from instances import launching
from instances.models import WaitingLaunch

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_launch_with_wait_waits_shows_its_place_and_leaves_the_queue(cli, owner):
    Node.objects.filter(chip__slug="dcu-z100").exclude(name="xc-dcu-01").update(drained=True)
    Node.objects.filter(name="xc-dcu-01").update(cards=1, cards_reserved=0)
    launching.launch(owner, launching.LaunchRequest(name="holder", image="pytorch-2.2-dtk24", chip="dcu-z100"))
    create = ("instances", "create", "--name", "nb", "--image", "pytorch-2.2-dtk24", "--chip", "dcu-z100")

    code, out, err = cli(owner, *create)
    assert code != 0 and "No free cards" in err  # without --wait: refused as before

    code, out, err = cli(owner, "--json", *create, "--wait")
    assert code == 0, err
    waited = json.loads(out)
    assert waited["state"] == "waiting" and waited["queue_position"] == 1
    assert WaitingLaunch.objects.get().public_id.hex == waited["id"].replace("-", "")

    code, out, err = cli(owner, "instances", "waiting")
    assert code == 0 and "nb" in out and "waiting" in out

    code, out, err = cli(owner, "instances", "leave-queue", waited["id"])
    assert code == 0 and "state: left" in out
