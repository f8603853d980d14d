"""The import page and an imported image's page: the owner imports and sees progress then what was found; a
stranger gets a 404 for the image and the page needs a login."""

import pytest

from marketplace.images import imports
from marketplace.models import Image
from marketplace.tests.registry_fixtures import PASSWORD, USER

pytestmark = pytest.mark.django_db


def test_the_owner_imports_from_the_form_and_sees_what_the_image_holds(
    owner_client, image_imports, tiny_image, eager_tasks, django_capture_on_commit_callbacks
):
    assert owner_client.get("/marketplace/import/").status_code == 200
    form = {"reference": tiny_image, "username": USER, "password": PASSWORD, "name": "Tiny"}
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post("/marketplace/import/", form)
    image = Image.objects.get()
    assert response.status_code == 302 and response["Location"] == image.get_absolute_url()
    page = owner_client.get(image.get_absolute_url()).content.decode()
    assert 'id="image-imported"' in page and tiny_image in page and PASSWORD not in page
    assert "/bin/sh" in page


def test_an_import_in_progress_polls_its_status(owner_client, owner, image_imports, tiny_image):
    image = imports.start_import(owner, tiny_image)  # the task has not run: still importing
    status = owner_client.get(image.get_absolute_url(), HTTP_HX_REQUEST="true").content.decode()
    assert 'data-status="importing"' in status and "hx-trigger" in status


def test_a_refused_reference_is_shown_on_the_form(owner_client, image_imports):
    response = owner_client.post("/marketplace/import/", {"reference": "10.0.0.1:5000/a/b:1"})
    assert response.status_code == 400 and 'id="import-error"' in response.content.decode()


def test_strangers_see_no_imported_image_and_visitors_must_log_in(client, stranger, owner, image_imports, tiny_image):
    image = imports.start_import(owner, tiny_image)
    assert client.get("/marketplace/import/").status_code == 302
    assert client.get(image.get_absolute_url()).status_code == 404
    client.force_login(stranger)
    assert client.get(image.get_absolute_url()).status_code == 404


def test_the_import_page_is_in_chinese_by_default(client, owner):
    client.force_login(owner)
    page = client.get("/marketplace/import/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "导入镜像" in page and "加密保存，之后不再显示。" in page
