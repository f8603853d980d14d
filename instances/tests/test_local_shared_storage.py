"""``/root/shared`` inside a real sandbox is the account's cloud storage: one truth for the storage page, the API,
``gpucloud cp`` and every machine. What the owner notices: a file written inside is listed by the storage API with
its size and counted in the usage at once; an uploaded file is read inside, and a rename or delete in the console
shows inside at once; writing past the quota fails inside with "No space left on device" and the usage counts what
was written; bytes written inside are billed past the free tier like uploads; the host never promises more disk
than it has.
"""

import os
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from billing.models import LedgerTransaction, StoragePrice
from instances.backends import BackendError, local_volumes
from instances.models import Instance
from storage import charges as storage_charges
from storage import tree
from storage.tests.fixtures import store_file, tus_upload

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

MB = 1024 * 1024
WRITE = "import sys; open(sys.argv[1], 'wb').write(b'x' * ({mb} << 20))"
FILL = (
    "import os, sys\n"
    "n = 0\n"
    "f = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY)\n"
    "try:\n"
    "    while True:\n"
    "        n += os.write(f, b'y' * (1 << 20))\n"
    "        os.fsync(f)\n"
    "except OSError as e:\n"
    "    print(n, e.strerror)\n"
)


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def listing(api, path="/"):
    response = api.get("/api/v1/storage/entries", {"path": path})
    assert response.status_code == 200, response.content
    return {e["name"]: e for e in response.json()["results"]}


def used(api) -> int:
    response = api.get("/api/v1/storage/usage")
    assert response.status_code == 200, response.content
    return response.json()["used"]


def test_the_same_files_inside_the_machine_in_the_api_and_on_the_storage_page(
    on_local, running, owner, owner_api, owner_client
):
    # Uploaded before any machine existed: the account's tree is a plain folder, which the first machine's start
    # turns into a size-limited image with the same files.
    store_file(owner, "/docs/before.txt", b"uploaded before\n")
    instance = running()
    assert on_local.run(instance, "cat /root/shared/docs/before.txt").stdout == "uploaded before\n"

    # Written inside: listed by the API with its size, counted in the usage, downloadable.
    write = f'mkdir -p /root/shared/results && python -c "{WRITE.format(mb=3)}" /root/shared/results/out.bin'
    done = on_local.run(instance, write)
    assert done.returncode == 0, done.stderr
    assert listing(owner_api, "/results")["out.bin"]["size"] == 3 * MB
    assert used(owner_api) == 3 * MB + len(b"uploaded before\n")
    page = owner_client.get("/storage/")
    assert page.status_code == 200 and "results" in page.content.decode()

    # Uploaded while it runs: read inside at once. Renamed, moved and deleted in the console: the same inside.
    assert tus_upload(owner_api, b"from the console\n", "live.txt", "/docs").status_code == 204
    assert on_local.run(instance, "cat /root/shared/docs/live.txt").stdout == "from the console\n"
    live = listing(owner_api, "/docs")["live.txt"]
    assert owner_api.patch(f"/api/v1/storage/entries/{live['id']}", {"name": "renamed.txt"}).status_code == 200
    assert owner_api.patch(f"/api/v1/storage/entries/{live['id']}", {"folder": "/results"}).status_code == 200
    assert on_local.run(instance, "cat /root/shared/results/renamed.txt").stdout == "from the console\n"
    assert on_local.run(instance, "ls /root/shared/docs").stdout.split() == ["before.txt"]
    results = listing(owner_api, "/")["results"]
    assert owner_api.delete(f"/api/v1/storage/entries/{results['id']}").status_code == 204
    assert on_local.run(instance, "ls /root/shared").stdout.split() == ["docs"]
    assert used(owner_api) == len(b"uploaded before\n")

    # Deleted inside: gone from the listing and the usage.
    on_local.run(instance, "rm -r /root/shared/docs")
    assert listing(owner_api) == {} and used(owner_api) == 0


def test_writing_past_the_quota_inside_fails_with_enospc_and_the_usage_counts_what_was_written(
    on_local, running, owner, owner_api, settings
):
    settings.STORAGE_MAX_GB = 48 / 1024  # 48 MiB
    instance = running()
    done = on_local.run(instance, f'python -c "{FILL}" /root/shared/fill.bin', timeout=120)
    written, why = done.stdout.split(" ", 1)
    assert why.strip() == "No space left on device", done.stdout + done.stderr
    assert 30 * MB < int(written) <= 48 * MB
    size = int(on_local.run(instance, "stat -c %s /root/shared/fill.bin").stdout)
    assert used(owner_api) == size >= int(written)
    # The host's own disk was never the limit: the account's image is what filled.
    assert (tree.location() / f"{owner.public_id}.img").stat().st_size <= 48 * MB


def test_bytes_written_inside_are_billed_past_the_free_tier_like_uploads(on_local, running, owner, settings):
    settings.STORAGE_FREE_GB = 1 / 1024  # 1 MiB free
    instance = running()
    write = f'python -c "{WRITE.format(mb=12)}" /root/shared/weights.bin'
    assert on_local.run(instance, write).returncode == 0
    StoragePrice.objects.filter(resource="storage").update(per_gb_day=Decimal("100.00"))
    now = datetime(2026, 3, 2, 1, 0, tzinfo=UTC)
    assert storage_charges.charge_day(date(2026, 3, 1), now=now) == 1
    charge = LedgerTransaction.objects.get(user=owner, kind="storage")
    assert charge.user_amount == Decimal("-2.00")  # 11 MiB past the free tier: 0.02 GB (rounded up) × ¥100


def test_a_host_without_room_refuses_a_storage_image_and_says_why(on_local, owner, settings):
    settings.LOCAL_HOST_RESERVE_GB = 10**6
    folder = tree.location() / str(owner.public_id)
    with pytest.raises(BackendError, match="cannot hold"):
        local_volumes.ensure(folder, tree.sandbox_uid(owner), 1.0, adopt=True)
    assert not folder.with_name(f"{owner.public_id}.img").exists()
    # With room, the image is the quota's size, not more.
    settings.LOCAL_HOST_RESERVE_GB = 1
    settings.STORAGE_MAX_GB = 0.5
    local_volumes.ensure(folder, tree.sandbox_uid(owner), settings.STORAGE_MAX_GB, adopt=True)
    assert folder.with_name(f"{owner.public_id}.img").stat().st_size == 512 * MB


def test_files_a_machine_wrote_before_shared_was_cloud_storage_are_kept_and_listed(on_local, running, owner, owner_api):
    # The earlier /root/shared: an image of its own under the sandbox root, never seen by the console.
    earlier = on_local.root / "shared" / str(owner.public_id)
    local_volumes.ensure(earlier, tree.sandbox_uid(owner), 1)
    (earlier / "checkpoints").mkdir()
    (earlier / "checkpoints" / "step-100.pt").write_bytes(b"w" * 1000)
    for path in (earlier / "checkpoints", earlier / "checkpoints" / "step-100.pt"):  # as the machine wrote them
        os.chown(path, tree.sandbox_uid(owner), tree.sandbox_uid(owner))
    local_volumes.unmount_all(on_local.root)

    instance = running()
    assert on_local.run(instance, "stat -c %s /root/shared/checkpoints/step-100.pt").stdout.strip() == "1000"
    assert listing(owner_api, "/checkpoints")["step-100.pt"]["size"] == 1000
    assert not earlier.exists() and not earlier.with_name(f"{owner.public_id}.img").exists()
