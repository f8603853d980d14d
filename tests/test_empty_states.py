"""A newcomer's empty lists say what the thing is and offer the first action as a button."""

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db

# (page, the empty block's id, the first action's id, a word of the explanation)
EMPTY_LISTS = [
    ("/instances/", "instances-empty", "empty-launch", "billed per minute only while running"),
    ("/storage/disks/", "no-disks", "no-disks-create", "outlives the instances"),
    ("/storage/", "storage-empty", "storage-empty-upload", "/root/shared"),
    ("/endpoints/", "endpoints-empty", "endpoints-empty-deploy", "OpenAI-compatible API"),
    ("/marketplace/mine/", "image-empty", "image-empty-browse", "saved for reuse"),
    ("/console/tokens/", "tokens-empty", "tokens-empty-create", "gpucloud command line"),
]


@pytest.mark.parametrize(("path", "block", "action", "explains"), EMPTY_LISTS)
def test_an_empty_list_says_what_it_holds_and_offers_a_first_action(
    owner_client, catalog, path, block, action, explains
):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    response = owner_client.get(path)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="{block}"' in html, path
    empty = html.split(f'id="{block}"', 1)[1]
    assert explains in " ".join(empty.split()[:120]), path
    button = empty.split(f'id="{action}"', 1)[0].rsplit("<", 1)[1]
    assert 'class="btn btn-primary' in button, path


@pytest.mark.parametrize(("path", "block"), [("/marketplace/hub/", "hub-empty"), ("/marketplace/", "image-empty")])
def test_a_search_that_finds_nothing_says_so(client, catalog, path, block):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    html = client.get(path, {"q": "zzqxnothingmatches"}).content.decode()
    assert f'id="{block}"' in html and "Nothing matches" in html
