"""Resumable uploads over tus 1.0.0: chunks, resume, quota before and during, clean-up, protocol details."""

import hashlib
import os
from datetime import timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from storage import services
from storage.models import Entry, Upload

from .fixtures import MB, TUS, store_file, tus_create, tus_patch, tus_upload

pytestmark = pytest.mark.django_db


def _entry(owner, path):
    return Entry.objects.get(owner=owner, path=path)


def test_a_multi_megabyte_file_uploaded_in_chunks_is_stored_whole(owner_api, owner, cloud_storage):
    data = os.urandom(6 * MB + 12345)

    response = tus_upload(owner_api, data, "weights.bin", chunk=MB)

    entry = _entry(owner, "/weights.bin")
    assert entry.size == len(data)
    assert entry.checksum == hashlib.sha256(data).hexdigest()
    assert response["Storage-Entry-Id"] == str(entry.public_id)
    [on_disk] = cloud_storage.files()
    assert on_disk.read_bytes() == data
    assert str(owner.public_id) in str(on_disk)
    assert cloud_storage.staged() == []


def test_an_interrupted_upload_resumes_from_the_offset_the_server_reports(owner_api, owner):
    data = os.urandom(5 * MB)
    url = tus_create(owner_api, len(data), "数据集 v1.tar")["Location"]
    for offset in (0, MB, 2 * MB):
        assert tus_patch(owner_api, url, offset, data[offset : offset + MB]).status_code == 204

    # The connection dropped; the client asks where to continue.
    head = owner_api.head(url, **TUS)
    assert head.status_code == 200 and head["Upload-Offset"] == str(3 * MB) and head["Upload-Length"] == str(5 * MB)
    assert head["Cache-Control"] == "no-store"
    # Sending from the wrong place is refused, and changes nothing.
    stale = tus_patch(owner_api, url, MB, data[MB : 2 * MB])
    assert stale.status_code == 409 and stale.json()["code"] == "offset_mismatch"

    for offset in (3 * MB, 4 * MB):
        tus_patch(owner_api, url, offset, data[offset : offset + MB])

    entry = _entry(owner, "/数据集 v1.tar")
    assert entry.checksum == hashlib.sha256(data).hexdigest()


def test_a_chunk_cut_off_mid_transfer_keeps_the_bytes_that_arrived(owner):
    class Dropping:
        """A request body whose connection drops after 300 KB."""

        sent = 0

        def read(self, n):
            if self.sent >= 300 * 1024:
                raise ConnectionResetError("client went away")
            self.sent += min(n, 100 * 1024)
            return b"x" * min(n, 100 * 1024)

    upload = services.create_upload(owner, folder_path="/", filename="big.bin", length=MB)
    upload = services.write_chunk(owner, upload.public_id, offset=0, stream=Dropping(), content_length=MB)

    assert upload.offset == 300 * 1024
    assert Upload.objects.get(pk=upload.pk).offset == 300 * 1024


def test_over_quota_is_refused_before_the_upload_starts(owner_api, owner, settings, cloud_storage):
    settings.STORAGE_MAX_GB = 1 / 1024  # 1 MB
    owner_api.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"
    response = tus_create(owner_api, 2 * MB, "too-big.bin")

    assert response.status_code == 413
    body = response.json()
    assert body["code"] == "quota_exceeded" and "Not enough storage space" in body["message"]
    assert not Upload.objects.exists() and not Entry.objects.exists()
    assert cloud_storage.staged() == [] and cloud_storage.files() == []


def test_over_quota_during_the_upload_stops_it_and_leaves_nothing_behind(owner_api, owner, settings, cloud_storage):
    url = tus_create(owner_api, 3 * MB, "grows.bin")["Location"]
    assert tus_patch(owner_api, url, 0, b"a" * MB).status_code == 204
    assert len(cloud_storage.staged()) == 1

    # Meanwhile the operator lowers the ceiling below what this upload needs.
    settings.STORAGE_MAX_GB = 2 / 1024
    response = tus_patch(owner_api, url, MB, b"b" * MB)

    assert response.status_code == 413 and response.json()["code"] == "quota_exceeded"
    assert not Upload.objects.exists() and not Entry.objects.exists()
    assert cloud_storage.staged() == [] and cloud_storage.files() == []
    assert owner_api.head(url, **TUS).status_code == 404


def test_uploads_in_progress_hold_their_space_so_parallel_uploads_cannot_overfill(owner_api, settings):
    settings.STORAGE_MAX_GB = 3 / 1024  # 3 MB
    assert tus_create(owner_api, 2 * MB, "one.bin").status_code == 201
    second = tus_create(owner_api, 2 * MB, "two.bin")
    assert second.status_code == 409 and second.json()["code"] == "quota_exceeded"  # it fits, but not now


def test_a_name_already_taken_gets_a_number(owner_api, owner):
    tus_upload(owner_api, b"first", "report.pdf")
    response = tus_upload(owner_api, b"second", "report.pdf")
    tus_upload(owner_api, b"third", "report.pdf")

    names = set(Entry.objects.filter(owner=owner).values_list("name", flat=True))
    assert names == {"report.pdf", "report (1).pdf", "report (2).pdf"}
    assert response["Storage-Entry-Path"] == "/report%20%281%29.pdf"


def test_an_upload_goes_into_the_folder_named_in_its_metadata(owner_api, owner):
    services.make_folders(owner, "/模型/chatglm")
    tus_upload(owner_api, b"config", "config.json", folder="/模型/chatglm")
    assert _entry(owner, "/模型/chatglm/config.json").parent.path == "/模型/chatglm"


def test_an_upload_into_a_missing_folder_is_a_404(owner_api):
    response = tus_create(owner_api, 10, "a.txt", folder="/nowhere")
    assert response.status_code == 404 and not Upload.objects.exists()


@pytest.mark.parametrize(
    "filename",
    ["../escape.txt", "/etc/passwd", "a\\b.txt", "..", ".", "", "nul\x00.txt", "line\nbreak", "x" * 256, " padded"],
)
def test_odd_file_names_are_refused_before_any_byte_is_stored(owner_api, filename, cloud_storage):
    response = tus_create(owner_api, 10, filename)
    assert response.status_code == 400 and response.json()["code"] == "invalid_path"
    assert response.json()["message"]
    assert not Upload.objects.exists() and cloud_storage.staged() == []


@pytest.mark.parametrize("folder", ["../..", "/a/../b", "a//b", "C:\\Windows"])
def test_odd_folder_paths_in_upload_metadata_are_refused(owner_api, folder):
    response = tus_create(owner_api, 10, "ok.txt", folder=folder)
    assert response.status_code == 400 and response.json()["code"] == "invalid_path"


def test_a_cancelled_upload_frees_its_bytes(owner_api, cloud_storage):
    url = tus_create(owner_api, 2 * MB, "cancel.bin")["Location"]
    tus_patch(owner_api, url, 0, b"z" * MB)

    response = owner_api.delete(url, **TUS)

    assert response.status_code == 204
    assert not Upload.objects.exists() and cloud_storage.staged() == []
    assert owner_api.head(url, **TUS).status_code == 404


def test_an_empty_file_is_complete_on_creation(owner_api, owner):
    response = tus_create(owner_api, 0, "empty.txt")
    assert response.status_code == 201 and response["Upload-Offset"] == "0"
    assert _entry(owner, "/empty.txt").size == 0


def test_idle_uploads_expire_with_their_bytes(owner, cloud_storage, capsys):
    stale = services.create_upload(owner, folder_path="/", filename="stale.bin", length=10)
    store_file(owner, "/kept.txt", b"kept")

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        fresh = services.create_upload(owner, folder_path="/", filename="fresh.bin", length=10)
        call_command("expire_uploads")

    assert "expired upload(s) removed" in capsys.readouterr().out
    assert list(Upload.objects.values_list("public_id", flat=True)) == [fresh.public_id]
    assert [p.stem for p in cloud_storage.staged()] == [str(fresh.public_id)]
    assert str(stale.public_id) not in str(cloud_storage.staged())
    assert Entry.objects.filter(path="/kept.txt").exists() and len(cloud_storage.files()) == 1
    # Running it again is harmless.
    assert services.expire_stale_uploads() == 0


def test_tus_requests_without_the_protocol_version_are_refused(owner_api):
    response = owner_api.post("/api/v1/storage/uploads", HTTP_UPLOAD_LENGTH="10")
    assert response.status_code == 412 and response["Tus-Version"] == "1.0.0"


def test_a_method_the_upload_addresses_do_not_answer_is_a_405_with_or_without_the_tus_header(owner_api):
    for headers in ({}, {"HTTP_TUS_RESUMABLE": "1.0.0"}):
        assert owner_api.put("/api/v1/storage/uploads", **headers).status_code == 405
        assert owner_api.get("/api/v1/storage/uploads", **headers).status_code == 405


def test_tus_discovery_lists_the_supported_extensions(anon_api):
    response = anon_api.options("/api/v1/storage/uploads")
    assert response.status_code == 204
    assert response["Tus-Version"] == "1.0.0" and response["Tus-Extension"] == "creation,termination"
    assert int(response["Tus-Max-Size"]) > 0


def test_chunks_must_be_sent_as_offset_octet_streams(owner_api):
    url = tus_create(owner_api, 10, "a.txt")["Location"]
    response = owner_api.generic("PATCH", url, data=b"x", content_type="text/plain", HTTP_UPLOAD_OFFSET="0", **TUS)
    assert response.status_code == 415


def test_more_bytes_than_declared_are_refused(owner_api):
    url = tus_create(owner_api, 4, "a.txt")["Location"]
    response = tus_patch(owner_api, url, 0, b"12345")
    assert response.status_code == 400 and response.json()["code"] == "exceeds_length"
    assert owner_api.head(url, **TUS)["Upload-Offset"] == "0"


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_UPLOAD_LENGTH": "-1", "HTTP_UPLOAD_METADATA": "filename YS50eHQ="},
        {"HTTP_UPLOAD_LENGTH": "ten", "HTTP_UPLOAD_METADATA": "filename YS50eHQ="},
        {"HTTP_UPLOAD_METADATA": "filename YS50eHQ="},
        {"HTTP_UPLOAD_LENGTH": "10", "HTTP_UPLOAD_METADATA": "filename %%%"},
        {"HTTP_UPLOAD_LENGTH": "10"},
    ],
)
def test_malformed_upload_headers_are_a_400(owner_api, headers):
    response = owner_api.post("/api/v1/storage/uploads", **headers, **TUS)
    assert response.status_code == 400 and response.json()["message"]


def test_a_read_only_token_cannot_upload(teammate_api):
    assert tus_create(teammate_api, 10, "a.txt").status_code == 403


def test_the_browser_session_uploads_with_the_csrf_header(client, owner):

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    page = browser.get("/storage/")
    token = page.cookies["csrftoken"].value
    refused = browser.post(
        "/api/v1/storage/uploads", HTTP_UPLOAD_LENGTH="1", HTTP_UPLOAD_METADATA="filename YQ==", **TUS
    )
    assert refused.status_code == 403
    accepted = browser.post(
        "/api/v1/storage/uploads",
        HTTP_UPLOAD_LENGTH="1",
        HTTP_UPLOAD_METADATA="filename YQ==",
        HTTP_X_CSRFTOKEN=token,
        **TUS,
    )
    assert accepted.status_code == 201
