"""Hub pages: the list (filters in the URL, htmx partials, bounded queries) and an item's page."""

import pytest
from django.urls import reverse

from billing.quote import load_price_book, quote
from instances.tests.fixtures import settle
from marketplace.hub import repos as hub_repos
from marketplace.hub import services
from storage.models import HubMount

pytestmark = pytest.mark.django_db


def test_the_hub_is_public_and_named_marketplace_hub(chat_models, client):
    assert reverse("marketplace:hub") == "/marketplace/hub/"
    response = client.get("/marketplace/hub/")
    assert response.status_code == 200 and "THUDM/chatglm3-6b" in response.content.decode()


def test_searching_in_chinese_on_the_page_lists_the_matches(chat_models, english):
    html = english.get("/marketplace/hub/", {"q": "对话", "kind": "model"}).content.decode()
    assert "THUDM/chatglm3-6b" in html and "thu-coai/lccc" not in html and "Qwen/Qwen2.5" not in html
    assert 'value="对话"' in html  # the search box keeps the query, which the URL carries
    assert "1 result" in html


def test_an_htmx_request_gets_only_the_results(chat_models, english):
    response = english.get("/marketplace/hub/", {"q": "chatglm"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<section id="hub-results"')
    assert "THUDM/chatglm3-6b" in html and "<html" not in html


def test_filters_appear_selected_from_the_url(chat_models, english):
    html = english.get("/marketplace/hub/", {"chip": "mlu", "sort": "likes", "licence": "MIT"}).content.decode()
    assert '<option value="mlu" selected>' in html and '<option value="likes" selected>' in html
    assert '<option value="MIT" selected>' in html
    assert "thu-coai/lccc" in html and "THUDM/chatglm3-6b" not in html


def test_bad_filters_get_a_clear_message_and_a_400(chat_models, english):
    response = english.get("/marketplace/hub/", {"chip": "tpu", "sort": "random"})
    html = response.content.decode()
    assert response.status_code == 400 and 'id="hub-error"' in html and "tpu" in html
    too_long = english.get("/marketplace/hub/", {"q": "对" * 201})
    assert too_long.status_code == 400 and "at most 200 characters" in too_long.content.decode()


def test_a_page_number_out_of_range_shows_the_last_page(make_item, english):
    for i in range(25):
        make_item(f"bulk-org/model-{i:02d}", summary="bulk")
    html = english.get("/marketplace/hub/", {"q": "bulk", "sort": "name", "page": "99"}).content.decode()
    assert "Page 2 of 2" in html and "bulk-org/model-24" in html and "bulk-org/model-00" not in html
    assert english.get("/marketplace/hub/", {"q": "bulk", "page": "abc"}).status_code == 200


def _list_queries(client, django_assert_max_num_queries, limit):
    with django_assert_max_num_queries(limit):
        assert client.get("/marketplace/hub/", {"q": "bulk"}).status_code == 200
    with django_assert_max_num_queries(limit):
        assert client.get("/marketplace/hub/", {"q": "bulk"}, HTTP_HX_REQUEST="true").status_code == 200


def test_the_list_page_runs_the_same_few_queries_however_many_items_match(
    make_item, owner, owner_client, django_assert_max_num_queries
):
    # Session and user (2), the count and the page (2), the licence menu on a cold cache (1).
    for i in range(3):
        make_item(f"bulk-org/model-{i:02d}", summary="bulk", owner=owner if i == 0 else None)
    _list_queries(owner_client, django_assert_max_num_queries, 5)
    for i in range(3, 40):
        make_item(f"bulk-org/model-{i:02d}", summary="bulk", owner=owner if i % 2 else None)
    _list_queries(owner_client, django_assert_max_num_queries, 5)


def test_the_item_page_shows_card_files_chips_prices_and_counts(catalog, make_item, english):
    make_item(
        "THUDM/chatglm3-6b",
        card="---\nlicense: other\npipeline_tag: text-generation\n---\n# ChatGLM3-6B\n\nA bilingual chat model.",
        chips=["npu", "cuda"],
        parameters_b="6.2",
        size_bytes=12_500_000_000,
        files=[("config.json", 1_000), ("model-00001-of-00002.safetensors", 10_000_000_000)],
    )
    html = english.get("/marketplace/hub/THUDM/chatglm3-6b").content.decode()
    assert "<h1>ChatGLM3-6B</h1>" in html and "model-00001-of-00002.safetensors" in html
    assert "10 GB" in html and "12.5 GB" in html and "6.2 billion" in html
    assert "from ¥" in html and "/card-hour on Ascend 910B" in html
    assert "/root/public/THUDM/chatglm3-6b" in html


def test_the_item_page_prices_come_from_the_quote_function(catalog, make_item):

    item = make_item("THUDM/chatglm3-6b", chips=["npu", "mlu", "dcu", "cuda"])
    rows = {row.family: row for row in services.chip_prices(item, load_price_book())}
    assert set(rows) == {"npu", "mlu", "dcu", "cuda"}
    npu = rows["npu"]
    assert npu.per_card_hour == quote(chip=npu.chip, cards=1).payable_per_card_hour


def _mount_cta(html):
    return html.split('id="mount-cta"', 1)[0].rsplit("<", 1)[1]


def test_an_anonymous_visitor_is_asked_to_log_in_to_mount(chat_models, english):
    html = english.get("/marketplace/hub/THUDM/chatglm3-6b").content.decode()
    assert _mount_cta(html).startswith('a class="btn btn-primary btn-sm" href="/accounts/login/?next=')


def test_without_instances_the_mount_button_opens_the_wizard_with_the_repo_preselected(chat_models, english, owner):
    english.force_login(owner)
    html = english.get("/marketplace/hub/THUDM/chatglm3-6b").content.decode()
    assert 'id="mount-choices"' not in html
    href = _mount_cta(html).split('href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert href.startswith("/instances/new/?") and "mounts=THUDM%2Fchatglm3-6b" in href
    wizard = english.get(href).content.decode()
    assert 'value="THUDM/chatglm3-6b"' in wizard  # the mounts field comes filled in


def test_with_instances_the_mount_button_offers_them_and_mounts_the_repo(chat_models, english, owner, launch):

    instance = launch(name="glm-box")
    settle()
    english.force_login(owner)
    html = english.get("/marketplace/hub/THUDM/chatglm3-6b").content.decode()
    picker = html.split('id="mount-choices"', 1)[1].split("</ul>", 1)[0]
    action = reverse("storage:instance-mount", args=[instance.public_id])
    assert "glm-box" in picker and f'action="{action}"' in picker

    response = english.post(action, {"repo": "THUDM/chatglm3-6b"})
    assert response.status_code == 302 and response["Location"].startswith(instance.get_absolute_url())
    assert HubMount.objects.filter(instance=instance, repo="THUDM/chatglm3-6b").exists()
    again = english.get("/marketplace/hub/THUDM/chatglm3-6b").content.decode().split('id="mount-choices"', 1)[1]
    assert "mount-into" not in again.split("</ul>", 1)[0]  # already mounted there: no second button


def test_a_private_item_page_is_the_same_404_as_a_missing_one(make_item, owner, owner_client, client):
    make_item("owner-lab/secret", owner=owner, visibility="private")
    assert owner_client.get("/marketplace/hub/owner-lab/secret").status_code == 200
    client.logout()  # the same test client, now anonymous
    assert client.get("/marketplace/hub/owner-lab/secret").status_code == 404
    assert client.get("/marketplace/hub/owner-lab/missing").status_code == 404


def test_a_taken_down_item_page_is_its_owners_alone_and_a_public_one_everyones(make_item, owner, stranger, client):
    item = make_item("owner-lab/doubtful", owner=owner)
    make_item("owner-lab/fine", owner=owner)
    hub_repos.take_down(item, "Licence complaint")
    for viewer in (None, stranger):
        client.logout()
        if viewer is not None:
            client.force_login(viewer)
        assert client.get("/marketplace/hub/owner-lab/doubtful").status_code == 404
        assert client.get("/marketplace/hub/owner-lab/fine").status_code == 200
    client.force_login(owner)
    assert client.get("/marketplace/hub/owner-lab/doubtful").status_code == 200  # told why, on its page


def test_strangers_and_teammates_get_404_for_a_private_item(make_item, owner, stranger, teammate, client):
    make_item("owner-lab/secret", owner=owner, visibility="private")
    for other in (stranger, teammate):
        client.force_login(other)
        assert client.get("/marketplace/hub/owner-lab/secret").status_code == 404
        assert client.post("/marketplace/hub/owner-lab/secret/like").status_code == 404


def test_the_page_speaks_chinese_by_default(chat_models, client):
    html = client.get("/marketplace/hub/THUDM/chatglm3-6b").content.decode()
    assert "ChatGLM3 中文对话模型" in html  # the Chinese summary
    assert "文本生成" in html  # the task's Chinese name
