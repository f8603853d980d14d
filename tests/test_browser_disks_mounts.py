"""In real headless Chromium: search the hub in Chinese, mount ChatGLM3-6B into a running instance and see it listed
on the instance page; create a cloud disk, hot-plug it into the running instance and detach it again.

The instance runs on the simulated backend with zero timings (the lifecycle is driven in the test process with
``settle()``, so no worker is needed); mounting and attaching are synchronous calls to that backend. The
upload with resume is tested in ``tests/test_browser_storage.py``.
"""

import pytest
from django.conf import settings
from django.test import Client

from instances.models import SimulatedJob
from instances.tests.fixtures import settle
from marketplace import seed as hub_catalog
from marketplace.models import HubItem
from storage.models import CloudDisk, HubMount
from tests.fixtures.factories import top_up
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(page, live_server, user):
    client = Client()
    client.force_login(user)
    host = live_server.url.split("//", 1)[1].split(":")[0]
    page.context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "domain": host,
                "path": "/",
            },
            {"name": settings.LANGUAGE_COOKIE_NAME, "value": "en", "domain": host, "path": "/"},
        ]
    )


@pytest.fixture
def running_instance(launch, owner):
    top_up(owner, "100")  # disks are paid from cash
    instance = launch(name="glm-finetune", zone="cn-east-xc")
    settle()
    instance.refresh_from_db()
    assert instance.status == "running"
    return instance


def test_mount_a_hub_model_and_hot_plug_a_disk_into_a_running_instance(page, live_server, owner, running_instance):
    hub_catalog.load()
    instance = running_instance
    _log_in(page, live_server, owner)
    page.on("dialog", lambda dialog: dialog.accept())

    # Search the hub in Chinese and open ChatGLM3-6B; its page leads to the instances
    page.goto(f"{live_server.url}/marketplace/hub/")
    page.fill("#id_q", "对话")
    page.wait_for_url("**/marketplace/hub/?q=*")
    page.locator("#hub-items").get_by_role("link", name="THUDM/chatglm3-6b").click()
    page.wait_for_url("**/marketplace/hub/THUDM/chatglm3-6b")
    page.click("#mount-cta")
    page.get_by_role("link", name="glm-finetune").click()
    page.wait_for_selector('#instance-badge[data-status="running"]')

    # On the running instance: search the hub in Chinese again, mount ChatGLM3-6B, see it listed
    page.fill("#hub-search-input", "中文对话")
    result = page.locator('#hub-result-list [data-repo="THUDM/chatglm3-6b"]')
    result.wait_for()
    screenshot(page, "mounts-01-search-zh")
    result.locator(".mount-button").click()
    mounted = page.locator('#mount-list [data-repo="THUDM/chatglm3-6b"]')
    mounted.wait_for()
    assert "/root/public/THUDM/chatglm3-6b" in mounted.inner_text()
    assert "/root/shared" in page.locator("#shared-mount").inner_text()
    job = SimulatedJob.objects.get(instance_id=instance.public_id)
    assert "THUDM/chatglm3-6b:/root/public/THUDM/chatglm3-6b" in job.mounts  # handed to the backend, not copied
    assert HubItem.objects.get(repo="THUDM/chatglm3-6b").mount_count == 1
    page.reload()
    page.locator('#mount-list [data-repo="THUDM/chatglm3-6b"]').wait_for()  # the panel loads after the page
    screenshot(page, "mounts-02-mounted")

    # Create a disk on the disks page, in the instance's zone
    page.goto(f"{live_server.url}/storage/disks/")
    page.fill("#disk-name", "checkpoints")
    page.fill("#disk-size", "200")
    page.select_option("#disk-zone", "cn-east-xc")
    page.click("#disk-create-button")
    page.locator('#disk-table [data-disk="checkpoints"]').wait_for()
    assert "¥60.00" in page.locator('#disk-table [data-disk="checkpoints"]').inner_text()  # 200 GB × ¥0.01 × 30
    screenshot(page, "disks-01-created")

    # Hot-plug it into the running instance from the instance page, then detach it
    page.goto(f"{live_server.url}{instance.get_absolute_url()}")
    page.select_option("#attach-disk-select", label="checkpoints (200 GB)")
    page.click("#attach-disk-button")
    attached = page.locator('#attached-disks [data-disk="checkpoints"]')
    attached.wait_for()
    assert "/root/data/checkpoints" in attached.inner_text()
    disk = CloudDisk.objects.get(name="checkpoints")
    assert disk.status == "attached" and disk.instance_id == instance.pk
    assert SimulatedJob.objects.get(instance_id=instance.public_id).disks == [str(disk.public_id)]
    screenshot(page, "disks-02-attached")

    attached.locator(".detach-button").click()
    page.locator("#no-attached-disks").wait_for()
    disk.refresh_from_db()
    assert disk.status == "available" and disk.instance is None
    assert SimulatedJob.objects.get(instance_id=instance.public_id).disks == []
    assert HubMount.objects.filter(instance=instance).count() == 1
    screenshot(page, "disks-03-detached")
