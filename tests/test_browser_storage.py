"""Cloud storage in real Chromium: upload several MB with a progress bar, lose the connection, resume, see the file."""

import hashlib
import os
import re

import pytest
from playwright.sync_api import expect

from storage.models import Entry, Upload
from teams import services as teams
from tests.fixtures.factories import top_up
from tests.fixtures.services import screenshot, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
MB = 1024 * 1024


def _log_in(page, live_server, user):
    # English pages and API messages, so the assertions do not depend on the state of the translations.
    page.context.add_cookies([{"name": "django_language", "value": "en", "url": live_server.url}])
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=login]", user.email)
    page.fill("input[name=password]", "correct horse battery")
    page.locator("form button[type=submit]").last.click()
    page.wait_for_url("**/console/**")


def test_an_interrupted_upload_resumes_after_a_reload_and_the_file_is_listed(
    page, live_server, owner, cloud_storage, tmp_path
):
    data = os.urandom(8 * MB + 4321)
    local = tmp_path / "训练数据 part1.bin"
    local.write_bytes(data)
    _log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/storage/")
    expect(page.locator("#storage-empty")).to_be_visible()

    # Given an upload whose connection drops after two of its 2 MB chunks…
    patches = []

    def drop_after_two_chunks(route):
        if route.request.method == "PATCH":
            patches.append(route.request.headers.get("upload-offset"))
            if len(patches) > 2:
                return route.abort("connectionreset")
        return route.continue_()

    page.route("**/api/v1/storage/uploads/**", drop_after_two_chunks)
    page.set_input_files("#storage-file-input", str(local))

    item = page.locator("#upload-list .upload-item").first
    expect(item.locator(".upload-message")).to_contain_text("Choose the same file again", timeout=20_000)
    expect(item).to_have_class("mb-2 upload-item upload-failed")
    expect(item.locator(".progress")).to_have_attribute("aria-valuenow", re.compile(r"^[1-9][0-9]?$"))  # part-way
    screenshot(page, "storage-upload-interrupted")
    upload = Upload.objects.get(owner=owner)
    assert upload.offset == 4 * MB and not Entry.objects.filter(owner=owner, kind="file").exists()

    # …when the user reloads the page (the connection is back) and picks the same file again…
    page.unroute("**/api/v1/storage/uploads/**")
    resumed_offsets = []
    page.on(
        "request",
        lambda r: (
            resumed_offsets.append(r.headers.get("upload-offset"))
            if r.method == "PATCH" and "/storage/uploads/" in r.url
            else None
        ),
    )
    page.reload()
    page.set_input_files("#storage-file-input", str(local))

    # …then it continues from the server's offset, shows its progress, and the complete file is listed.
    item = page.locator("#upload-list .upload-item").first
    expect(item.locator(".upload-message")).to_contain_text("4.0 MB")
    expect(item).to_have_class("mb-2 upload-item upload-done", timeout=20_000)
    expect(item.locator(".progress-bar")).to_have_text("100%")
    row = page.locator('#storage-table tr[data-entry="训练数据 part1.bin"]')
    expect(row).to_be_visible()
    expect(row.locator(".entry-size")).to_have_attribute("data-bytes", str(len(data)))
    page.wait_for_timeout(800)  # let the progress bar's CSS transition finish before the screenshot
    screenshot(page, "storage-upload-resumed")

    assert resumed_offsets and resumed_offsets[0] == str(4 * MB)  # no byte before the offset was sent again
    entry = wait_until(lambda: Entry.objects.filter(owner=owner, name="训练数据 part1.bin").first())
    assert entry.size == len(data) and entry.checksum == hashlib.sha256(data).hexdigest()
    assert cloud_storage.staged() == []


def test_over_quota_upload_shows_the_message_and_leaves_nothing(
    page, live_server, owner, cloud_storage, settings, tmp_path
):
    settings.STORAGE_MAX_GB = 1 / 1024
    local = tmp_path / "too big.bin"
    local.write_bytes(b"x" * (2 * MB))
    _log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/storage/")

    page.set_input_files("#storage-file-input", str(local))

    message = page.locator("#upload-list .upload-item .upload-message").first
    expect(message).to_contain_text("Not enough storage space")
    expect(page.locator("#upload-list .upload-item.upload-failed")).to_be_visible()
    screenshot(page, "storage-over-quota")
    assert not Upload.objects.exists() and cloud_storage.staged() == [] and cloud_storage.files() == []


def test_folders_rename_and_delete_in_the_browser(page, live_server, owner, cloud_storage):
    _log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/storage/")

    page.fill("#new-folder-form input[name=name]", "实验 结果")
    page.click("#new-folder-form button[type=submit]")
    folder_row = page.locator('#storage-table tr[data-entry="实验 结果"]')
    expect(folder_row).to_be_visible()

    folder_row.locator("summary", has_text="Rename").click()
    folder_row.locator("input[name=name]").fill("results")
    folder_row.locator("details.entry-action").first.locator("button[type=submit]").click()
    expect(page.locator('#storage-table tr[data-entry="results"]')).to_be_visible()

    page.on("dialog", lambda dialog: dialog.accept())
    page.locator('#storage-table tr[data-entry="results"] .btn-outline-danger').click()
    expect(page.locator("#storage-empty")).to_be_visible()
    screenshot(page, "storage-folders")
    assert not Entry.objects.exists()


def test_in_a_teams_context_an_upload_lands_in_the_teams_folder_not_ones_own(
    page, live_server, owner, cloud_storage, tmp_path
):

    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    top_up(team.account, "10")  # cloud storage is paid from the team's cash at the price list's storage price
    local = tmp_path / "标注.csv"
    local.write_bytes(b"id,label\n1,cat\n")
    _log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/teams/")
    page.locator("#work-in-vision-lab").click()
    expect(page.locator("#context-team")).to_contain_text("视觉实验室")

    page.goto(f"{live_server.url}/storage/")
    page.set_input_files("#storage-file-input", str(local))
    expect(page.locator('#storage-table tr[data-entry="标注.csv"]')).to_be_visible(timeout=20_000)
    entry = Entry.objects.get(name="标注.csv")
    assert entry.owner == team.account and entry.size == len(local.read_bytes())

    # Back in the personal context, one's own folder does not have it; the team's still does.
    page.locator("#context-personal").click()
    expect(page.locator("#context-team")).to_have_count(0)
    page.goto(f"{live_server.url}/storage/")
    expect(page.locator("#storage-empty")).to_be_visible()
    assert not Entry.objects.filter(owner=owner).exists()
