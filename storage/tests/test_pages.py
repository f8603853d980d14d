"""The web file browser at /storage/: listing, breadcrumbs, folders, rename, move, delete, usage bar."""

import pytest
from django.urls import reverse

from storage import services
from storage.models import Entry

from .fixtures import MB, store_file

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_storage_page_lists_the_root_with_the_usage_bar_and_upload_widget(owner_client, owner):
    store_file(owner, "/模型 权重.bin", b"x" * 2048)
    services.make_folders(owner, "/datasets")

    response = owner_client.get(reverse("storage:index"))

    html = response.content.decode()
    assert response.status_code == 200
    assert "模型 权重.bin" in html and "datasets" in html and "2.0\xa0KB" in html
    assert 'id="storage-usage"' in html and "tus-js-client/tus.min.js" in html and "storage/upload.js" in html
    assert 'data-endpoint="/api/v1/storage/uploads"' in html


def test_the_sidebar_links_to_storage(owner_client):
    html = owner_client.get(reverse("console:dashboard")).content.decode()
    assert 'href="/storage/"' in html


def test_a_folder_page_shows_breadcrumbs_and_uploads_into_that_folder(owner_client, owner):
    store_file(owner, "/a/b/c.txt")
    folder = Entry.objects.get(owner=owner, path="/a/b")

    html = owner_client.get(reverse("storage:folder", args=[folder.public_id])).content.decode()

    assert 'data-folder="/a/b"' in html
    crumbs = html[html.index('id="storage-breadcrumbs"') : html.index("</ol>")]
    assert ">a</a>" in crumbs and 'aria-current="page">b<' in crumbs and "c.txt" in html


def test_creating_a_folder_with_htmx_returns_the_refreshed_listing(owner_client, owner):
    owner_client.cookies["django_language"] = "en"
    response = owner_client.post(reverse("storage:create-folder"), {"name": "训练 集", "parent": ""}, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="storage-listing">')
    assert 'data-entry="训练 集"' in html and "Folder “训练 集” created." in html
    assert Entry.objects.filter(owner=owner, path="/训练 集", kind="folder").exists()


@pytest.mark.parametrize("name", ["../etc", "a/b", "..", "", "x" * 300])
def test_an_odd_folder_name_is_refused_on_the_page_with_a_message(owner_client, owner, name):
    owner_client.cookies["django_language"] = "en"
    response = owner_client.post(reverse("storage:create-folder"), {"name": name, "parent": ""}, **HTMX)
    assert response.status_code == 400
    assert 'id="storage-error"' in response.content.decode()
    assert not Entry.objects.exists()


def test_refusals_are_translated(owner_client, owner):
    response = owner_client.post(reverse("storage:create-folder"), {"name": "..", "parent": ""})
    assert response.status_code == 400 and 'id="storage-error"' in response.content.decode()


def test_rename_move_and_delete_from_the_page(owner_client, owner, django_capture_on_commit_callbacks):
    entry = store_file(owner, "/inbox/draft.txt")
    services.make_folders(owner, "/done")

    owner_client.post(reverse("storage:rename", args=[entry.public_id]), {"name": "最终版.txt"})
    response = owner_client.post(reverse("storage:move", args=[entry.public_id]), {"folder": "/done"}, **HTMX)
    assert 'data-entry="最终版.txt"' not in response.content.decode()  # it left the inbox listing
    assert Entry.objects.get(pk=entry.pk).path == "/done/最终版.txt"

    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post(reverse("storage:delete", args=[entry.public_id]))
    assert response.status_code == 302 and response["Location"] == reverse(
        "storage:folder", args=[Entry.objects.get(path="/done").public_id]
    )
    assert not Entry.objects.filter(pk=entry.pk).exists()


def test_a_clashing_rename_shows_the_message_and_changes_nothing(owner_client, owner):
    store_file(owner, "/a.txt")
    b = store_file(owner, "/b.txt")
    response = owner_client.post(reverse("storage:rename", args=[b.public_id]), {"name": "a.txt"}, **HTMX)
    assert response.status_code == 409 and 'id="storage-error"' in response.content.decode()
    assert Entry.objects.get(pk=b.pk).name == "b.txt"


def test_downloading_from_the_page_streams_the_file(owner_client, owner):
    entry = store_file(owner, "/说明.txt", "你好".encode())
    response = owner_client.get(reverse("storage:download", args=[entry.public_id]))
    assert response.status_code == 200 and b"".join(response.streaming_content) == "你好".encode()
    assert "filename*=utf-8''" in response["Content-Disposition"]


def test_the_usage_bar_shows_used_free_and_maximum(owner_client, owner_has_topped_up, owner, settings):
    settings.STORAGE_FREE_GB = 1 / 1024
    settings.STORAGE_MAX_GB = 4 / 1024
    owner_client.cookies["django_language"] = "en"
    store_file(owner, "/x.bin", b"x" * (2 * MB))

    html = owner_client.get(reverse("storage:index")).content.decode()

    assert "2.0\xa0MB of 4.0\xa0MB used" in html and "First 1.0\xa0MB free" in html
    assert 'data-width="25.000"' in html  # the free tier part of the bar: 1 MB of 4 MB (set by static/js/csp.js)


def _fill(owner, folder, n):
    for i in range(n):
        Entry.objects.create(
            owner=owner,
            parent=folder,
            kind="file",
            name=f"f{i:03}.txt",
            path=f"/big/f{i:03}.txt",
            size=i,
            storage_key=f"{owner.public_id}/f{i}",  # kept under a key (the earlier layout): no bytes in the tree
        )


def test_the_folder_page_query_count_does_not_grow_with_files(owner_client, owner, django_assert_max_num_queries):
    folder = services.make_folders(owner, "/big")
    url = reverse("storage:folder", args=[folder.public_id])
    _fill(owner, folder, 3)
    with django_assert_max_num_queries(10) as few:
        assert owner_client.get(url).status_code == 200
    Entry.objects.filter(parent=folder).delete()
    _fill(owner, folder, 60)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = owner_client.get(url)
    assert response.content.decode().count('class="entry-name"') == 60
