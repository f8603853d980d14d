"""The disks page and the instance page's disks-and-mounts panel: what the owner sees and does, clear refusals,
404 for a stranger, and query counts that do not grow with rows."""

import pytest

from catalog.models import Zone
from instances.models import SimulatedJob
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
def zone(catalog):
    return Zone.objects.get(slug="cn-east-xc")


def test_the_disks_page_creates_a_disk_and_states_the_price(owner_client, catalog):
    page = owner_client.get("/storage/disks/")
    assert page.status_code == 200 and "¥0.01" in page.content.decode()
    response = owner_client.post("/storage/disks/new/", {"name": "ckpt", "size_gb": "100", "zone": "cn-east-xc"})
    assert response.status_code == 302
    page = owner_client.get("/storage/disks/").content.decode()
    assert "ckpt" in page and "¥30.00" in page  # per month


def test_a_refused_action_on_the_disks_page_says_why_and_changes_nothing(owner_client, owner, zone):
    owner_client.cookies["django_language"] = "en"
    disk = disks.create(owner, name="ckpt", size_gb=100, zone=zone)
    response = owner_client.post(f"/storage/disks/{disk.public_id}/grow/", {"size_gb": "50"})
    assert response.status_code == 400 and "only grows" in response.content.decode()
    response = owner_client.post("/storage/disks/new/", {"name": "x", "size_gb": "0", "zone": "cn-east-xc"})
    assert response.status_code == 400 and "whole number of GB" in response.content.decode()
    assert CloudDisk.objects.get(pk=disk.pk).size_gb == 100


def test_a_stranger_gets_404_for_anothers_disk_actions(client, stranger, owner, zone, instance):
    disk = disks.create(owner, name="ckpt", size_gb=100, zone=zone)
    client.force_login(stranger)
    for action in ("grow", "attach", "detach", "delete"):
        assert client.post(f"/storage/disks/{disk.public_id}/{action}/", {"size_gb": "500"}).status_code == 404
    assert "ckpt" not in client.get("/storage/disks/").content.decode()
    base = f"/storage/instances/{instance.public_id}"
    assert client.post(f"{base}/disks/attach/", {"disk": str(disk.public_id)}).status_code == 404
    assert client.post(f"{base}/mounts/add/", {"repo": "THUDM/chatglm3-6b"}).status_code == 404
    assert client.get(f"{base}/attachments/").status_code == 404  # the instance page's panel
    assert CloudDisk.objects.get(pk=disk.pk).status == "available"


def test_the_instance_page_lists_mounts_and_disks_and_hot_plugs_from_the_panel(owner_client, owner, zone, instance):
    hub_services.save_item(repo="THUDM/chatglm3-6b", summary_zh="中文对话模型")
    disk = disks.create(owner, name="ckpt", size_gb=100, zone=zone)
    base = f"/storage/instances/{instance.public_id}"
    page = owner_client.get(f"/instances/{instance.public_id}/").content.decode()
    assert f'hx-get="{base}/attachments/"' in page  # the panel loads after the page
    panel = owner_client.get(f"{base}/attachments/").content.decode()
    assert "/root/shared" in panel and "ckpt" in panel  # a spare disk of the zone to attach

    results = owner_client.get("/marketplace/hub/search/", {"q": "对话", "instance": str(instance.public_id)})
    assert "THUDM/chatglm3-6b" in results.content.decode()
    owner_client.post(f"{base}/mounts/add/", {"repo": "THUDM/chatglm3-6b"}, HTTP_HX_REQUEST="true")
    panel = owner_client.post(f"{base}/disks/attach/", {"disk": str(disk.public_id)}, HTTP_HX_REQUEST="true")
    html = panel.content.decode()
    assert "/root/public/THUDM/chatglm3-6b" in html and "/root/data/ckpt" in html
    job = SimulatedJob.objects.get(instance_id=instance.public_id)
    assert job.disks == [str(disk.public_id)] and any("chatglm3-6b" in m for m in job.mounts)

    owner_client.post(f"{base}/disks/detach/", {"disk": str(disk.public_id)}, HTTP_HX_REQUEST="true")
    owner_client.post(f"{base}/mounts/remove/", {"repo": "THUDM/chatglm3-6b"}, HTTP_HX_REQUEST="true")
    assert CloudDisk.objects.get(pk=disk.pk).instance is None and not HubMount.objects.exists()


def test_the_wizard_launches_with_a_data_disk_and_mounts(owner_client, owner, catalog, lifecycle):
    hub_services.save_item(repo="THUDM/chatglm3-6b", summary_zh="中文对话模型")
    form = {
        "chip": "ascend-910b",
        "cards": "1",
        "zone": "cn-east-xc",
        "image": "pytorch-2.2-cann8",
        "plan": "payg",
        "term_end_action": "continue",
        "name": "wiz",
        "data_disk_gb": "300",
        "mounts": "THUDM/chatglm3-6b",
    }
    page = owner_client.get("/instances/new/").content.decode()
    assert 'name="data_disk_gb"' in page and 'id="wizard-hub-search"' in page
    response = owner_client.post("/instances/new/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert CloudDisk.objects.get(owner=owner).size_gb == 300
    assert HubMount.objects.get().target == "/root/public/THUDM/chatglm3-6b"
    refused = owner_client.post("/instances/new/", form | {"name": "wiz-2", "mounts": "nobody/nothing"})
    assert refused.status_code == 400 and "nobody/nothing" in refused.content.decode()


def test_the_disks_page_costs_the_same_queries_for_1_or_20_disks(
    owner_client, owner, zone, instance, django_assert_max_num_queries
):
    disks.create(owner, name="d0", size_gb=10, zone=zone)
    with django_assert_max_num_queries(20) as one:
        first = owner_client.get("/storage/disks/")
    assert first.status_code == 200 and "d0" in first.content.decode()
    for i in range(1, 20):
        disks.create(owner, name=f"d{i}", size_gb=10 + i, zone=zone, instance=instance if i < 5 else None)
    with django_assert_max_num_queries(len(one.captured_queries)):
        many = owner_client.get("/storage/disks/")
    assert many.status_code == 200 and "d19" in many.content.decode()


def test_the_instance_panel_costs_the_same_queries_for_1_or_10_mounts_and_disks(
    owner_client, owner, zone, instance, django_assert_max_num_queries
):
    for i in range(10):
        hub_services.save_item(repo=f"org/model-{i}")
    hub_mounts.mount(owner, instance, "org/model-0")
    disks.create(owner, name="d0", size_gb=10, zone=zone, instance=instance)
    panel_url = f"/storage/instances/{instance.public_id}/attachments/"
    with django_assert_max_num_queries(60) as one:
        first = owner_client.get(panel_url)
    assert first.status_code == 200 and "org/model-0" in first.content.decode()
    for i in range(1, 10):
        hub_mounts.mount(owner, instance, f"org/model-{i}")
        disks.create(owner, name=f"d{i}", size_gb=10, zone=zone, instance=instance)
    with django_assert_max_num_queries(len(one.captured_queries)):
        many = owner_client.get(panel_url)
    assert many.status_code == 200 and "org/model-9" in many.content.decode() and "d9" in many.content.decode()


def test_the_pricing_page_states_the_disk_and_storage_prices(client, catalog):
    client.cookies["django_language"] = "en"  # pages follow the language switch, not Accept-Language
    page = client.get("/catalog/pricing/").content.decode()
    assert "Cloud disks: ¥0.01 per GB-day" in page
    assert "the first 50 GB free, then ¥0.01 per GB-day" in page


def test_the_attach_menus_offer_instances_not_inference_endpoints(owner, owner_client, deploy):
    endpoint = deploy(owner)
    disk = disks.create(owner, name="weights", size_gb=10, zone=endpoint.instance.zone)

    assert list(disks.attachable_instances(owner, disk)) == []
    html = owner_client.get("/storage/disks/").content.decode()
    assert endpoint.instance.name not in html.split("weights", 1)[1]
