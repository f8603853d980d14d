"""/api/v1/disks and /api/v1/instances/{id}/mounts: the owner can do everything; a stranger gets the same 404 as
for something that does not exist; the read-only teammate token cannot change anything; bad input is a 400."""

import uuid

import pytest

from catalog.models import Zone
from instances.tests.fixtures import settle
from marketplace.hub import services as hub_services
from storage import disks
from storage import mounts as hub_mounts
from storage.models import CloudDisk, HubMount

pytestmark = pytest.mark.usefixtures("owner_has_topped_up")


@pytest.fixture
def instance(launch):
    made = launch(zone="cn-east-xc")
    settle()
    made.refresh_from_db()
    return made


@pytest.fixture
def disk(owner, catalog):

    return disks.create(owner, name="data", size_gb=100, zone=Zone.objects.get(slug="cn-east-xc"))


@pytest.fixture
def chatglm(db):
    return hub_services.save_item(repo="THUDM/chatglm3-6b", summary_zh="中文对话模型")


def test_the_owner_creates_attaches_grows_detaches_and_deletes_a_disk(owner_api, instance):
    created = owner_api.post("/api/v1/disks", {"name": "ckpt", "size_gb": 100, "zone": "cn-east-xc"}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["status"] == "available" and body["per_gb_day"] == "0.010000" and body["per_month"] == "30.00"
    url = f"/api/v1/disks/{body['id']}"

    attached = owner_api.post(f"{url}/attach", {"instance": str(instance.public_id)}, format="json")
    assert attached.status_code == 200 and attached.json()["instance"] == str(instance.public_id)
    assert owner_api.delete(url).status_code == 409  # attached: detach first
    grown = owner_api.post(f"{url}/grow", {"size_gb": 150}, format="json")
    assert grown.status_code == 200 and grown.json()["size_gb"] == 150
    shrunk = owner_api.post(f"{url}/grow", {"size_gb": 10}, format="json")
    assert shrunk.status_code == 400 and shrunk.json()["code"] == "grow_only"
    assert owner_api.post(f"{url}/detach").json()["status"] == "available"
    assert owner_api.delete(url).status_code == 204
    assert owner_api.get(url).status_code == 404
    assert owner_api.get("/api/v1/disks").json()["results"] == []


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "size_gb": 0, "zone": "cn-east-xc"},
        {"name": "x", "size_gb": "lots", "zone": "cn-east-xc"},
        {"name": "", "size_gb": 10, "zone": "cn-east-xc"},
        {"size_gb": 10},
    ],
)
def test_bad_input_is_a_400_with_a_message_and_creates_nothing(owner_api, catalog, body):
    response = owner_api.post("/api/v1/disks", body, format="json")
    assert response.status_code == 400
    assert {"code", "message"} <= response.json().keys()
    assert not CloudDisk.objects.exists()


def test_an_unknown_zone_is_a_404_and_creates_nothing(owner_api, catalog):
    response = owner_api.post("/api/v1/disks", {"name": "x", "size_gb": 10, "zone": "mars-1"}, format="json")
    assert response.status_code == 404 and response.json()["code"] == "unknown_zone"
    assert not CloudDisk.objects.exists()


def test_a_size_out_of_range_keeps_its_code(owner_api, catalog):
    response = owner_api.post("/api/v1/disks", {"name": "x", "size_gb": 0, "zone": "cn-east-xc"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_size"


def test_a_duplicate_name_is_a_conflict(owner_api, disk):
    response = owner_api.post("/api/v1/disks", {"name": "data", "size_gb": 10, "zone": "cn-east-xc"}, format="json")
    assert response.status_code == 409


def test_a_stranger_cannot_list_read_attach_grow_detach_or_delete_anothers_disk(
    stranger_api, stranger, disk, instance, launch
):
    url = f"/api/v1/disks/{disk.public_id}"
    assert stranger_api.get("/api/v1/disks").json()["results"] == []
    assert stranger_api.get(url).status_code == 404
    theirs = launch(user=stranger, name="theirs", zone="cn-east-xc")
    assert stranger_api.post(f"{url}/attach", {"instance": str(theirs.public_id)}, format="json").status_code == 404
    assert stranger_api.post(f"{url}/grow", {"size_gb": 500}, format="json").status_code == 404
    assert stranger_api.post(f"{url}/detach").status_code == 404
    assert stranger_api.delete(url).status_code == 404
    missing = f"/api/v1/disks/{uuid.uuid4()}"
    assert stranger_api.get(missing).json()["code"] == stranger_api.get(url).json()["code"]
    disk.refresh_from_db()
    assert disk.size_gb == 100 and disk.status == "available"


def test_an_owner_cannot_attach_to_someone_elses_instance(owner_api, stranger, disk, launch):
    theirs = launch(user=stranger, name="theirs", zone="cn-east-xc")
    response = owner_api.post(f"/api/v1/disks/{disk.public_id}/attach", {"instance": str(theirs.public_id)})
    assert response.status_code == 404
    assert CloudDisk.objects.get(pk=disk.pk).instance is None


def test_the_read_only_teammate_token_cannot_change_disks(teammate_api, catalog):
    response = teammate_api.post("/api/v1/disks", {"name": "x", "size_gb": 10, "zone": "cn-east-xc"}, format="json")
    assert response.status_code in (403, 404)
    assert not CloudDisk.objects.exists()


def test_mounts_api_lists_adds_and_removes_hub_items(owner_api, instance, chatglm):
    url = f"/api/v1/instances/{instance.public_id}/mounts"
    assert [m["target"] for m in owner_api.get(url).json()] == ["/root/shared"]
    added = owner_api.post(url, {"repo": "THUDM/chatglm3-6b"}, format="json")
    assert added.status_code == 201 and added.json()["target"] == "/root/public/THUDM/chatglm3-6b"
    listed = owner_api.get(url).json()
    assert [m["repo"] for m in listed] == ["", "THUDM/chatglm3-6b"] and listed[1]["read_only"] is True
    assert owner_api.post(url, {"repo": "nobody/nothing"}, format="json").status_code == 400
    assert owner_api.delete(f"{url}/THUDM/chatglm3-6b").status_code == 204
    assert owner_api.delete(f"{url}/THUDM/chatglm3-6b").status_code == 404
    assert not HubMount.objects.exists()


def test_a_stranger_cannot_list_add_or_remove_mounts_of_anothers_instance(owner, stranger_api, instance, chatglm):

    hub_mounts.mount(owner, instance, "THUDM/chatglm3-6b")
    url = f"/api/v1/instances/{instance.public_id}/mounts"
    assert stranger_api.get(url).status_code == 404
    assert stranger_api.post(url, {"repo": "THUDM/chatglm3-6b"}, format="json").status_code == 404
    assert stranger_api.delete(f"{url}/THUDM/chatglm3-6b").status_code == 404
    assert HubMount.objects.count() == 1


def test_launching_through_the_api_accepts_a_data_disk_and_a_list_of_repos(owner_api, catalog, lifecycle, chatglm):
    body = {
        "name": "api-1",
        "image": "pytorch-2.2-cann8",
        "chip": "ascend-910b",
        "zone": "cn-east-xc",
        "data_disk_gb": 200,
        "mounts": ["THUDM/chatglm3-6b"],
    }
    response = owner_api.post("/api/v1/instances", body, format="json")
    assert response.status_code == 201, response.json()
    instance_id = response.json()["id"]
    assert CloudDisk.objects.get(instance__public_id=instance_id).size_gb == 200
    mounts = owner_api.get(f"/api/v1/instances/{instance_id}/mounts").json()
    assert "/root/public/THUDM/chatglm3-6b" in [m["target"] for m in mounts]
    bad = owner_api.post("/api/v1/instances", body | {"name": "api-2", "mounts": "THUDM/chatglm3-6b"}, format="json")
    assert bad.status_code == 400


def test_the_disk_list_costs_the_same_queries_for_1_or_20_disks(
    owner_api, owner, catalog, django_assert_max_num_queries
):

    zone = Zone.objects.get(slug="cn-east-xc")
    disks.create(owner, name="d0", size_gb=10, zone=zone)
    with django_assert_max_num_queries(8) as one:
        owner_api.get("/api/v1/disks")
    for i in range(1, 20):
        disks.create(owner, name=f"d{i}", size_gb=10 + i, zone=zone)
    with django_assert_max_num_queries(len(one.captured_queries)):
        assert len(owner_api.get("/api/v1/disks").json()["results"]) == 20
