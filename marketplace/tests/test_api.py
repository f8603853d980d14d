"""The hub API: public search and detail, decimals as strings, clear 400s, private items as 404."""

import pytest

from marketplace.hub import services

pytestmark = pytest.mark.django_db


def test_anyone_can_search_the_hub_in_chinese(chat_models, anon_api):
    body = anon_api.get("/api/v1/hub", {"q": "对话", "kind": "model"}).json()
    assert body["count"] == 1 and body["count_exact"] is True
    item = body["results"][0]
    assert item["repo"] == "THUDM/chatglm3-6b" and item["chips"] == ["npu", "mlu", "dcu", "cuda"]
    assert item["url"].endswith("/marketplace/hub/THUDM/chatglm3-6b") and item["mine"] is False


def test_filters_sort_and_pagination(chat_models, anon_api):
    body = anon_api.get("/api/v1/hub", {"chip": "npu", "sort": "name", "limit": 2}).json()
    assert body["count"] == 4
    assert [r["repo"] for r in body["results"]] == ["Qwen/Qwen2.5-7B-Instruct", "THUDM/chatglm3-6b"]
    rest = anon_api.get(body["next"]).json()
    assert [r["repo"] for r in rest["results"]] == ["shanghai-med-lab/yiliao-qa-7b", "thu-coai/lccc"]


def test_decimals_are_strings(catalog, make_item, anon_api):
    make_item("THUDM/chatglm3-6b", parameters_b="6.2", chips=["npu"])
    listed = anon_api.get("/api/v1/hub").json()["results"][0]
    assert listed["parameters_b"] == "6.200"
    detail = anon_api.get("/api/v1/hub/THUDM/chatglm3-6b").json()
    price = detail["chip_prices"][0]
    assert price["family"] == "npu" and price["chip"] == "ascend-910b" and isinstance(price["per_card_hour"], str)


def test_the_detail_has_the_card_files_and_whether_i_like_it(make_item, owner, owner_api):
    item = make_item("THUDM/chatglm3-6b", card="# Card\n\n<script>x</script>", files=[("config.json", 1000)])
    services.like(owner, item)
    body = owner_api.get("/api/v1/hub/THUDM/chatglm3-6b/").json()
    assert body["files"] == [{"path": "config.json", "size_bytes": 1000}] and body["liked"] is True
    assert body["card"].startswith("# Card") and "<script>" not in body["card_html"]


@pytest.mark.parametrize(
    "params, field",
    [({"kind": "image"}, "kind"), ({"chip": "tpu"}, "chip"), ({"sort": "random"}, "sort"), ({"q": "x" * 201}, "q")],
)
def test_bad_parameters_are_a_400_with_a_clear_message(anon_api, params, field):
    response = anon_api.get("/api/v1/hub", params, HTTP_ACCEPT_LANGUAGE="en")
    body = response.json()
    assert response.status_code == 400 and body["code"] == "invalid" and field in body["errors"]
    assert body["message"].startswith(f"{field}:")


def test_a_private_item_is_listed_and_shown_to_its_owner_only(
    make_item, owner, owner_api, stranger_api, teammate_api, anon_api
):
    make_item("owner-lab/secret-chat", owner=owner, visibility="private", summary_zh="私有对话模型")
    mine = owner_api.get("/api/v1/hub", {"q": "对话"}).json()["results"]
    assert [r["repo"] for r in mine] == ["owner-lab/secret-chat"] and mine[0]["mine"] is True
    assert owner_api.get("/api/v1/hub/owner-lab/secret-chat").status_code == 200
    for other in (stranger_api, teammate_api, anon_api):
        assert other.get("/api/v1/hub", {"q": "对话"}).json()["count"] == 0
        hidden = other.get("/api/v1/hub/owner-lab/secret-chat", HTTP_ACCEPT_LANGUAGE="en")
        missing = other.get("/api/v1/hub/owner-lab/no-such", HTTP_ACCEPT_LANGUAGE="en")
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["code"] == missing.json()["code"] == "not_found"


def test_a_broad_search_counts_up_to_the_cap(make_item, anon_api, monkeypatch):
    monkeypatch.setattr(services, "RESULT_COUNT_CAP", 3)
    for i in range(5):
        make_item(f"org/model-{i}", summary="broad")
    body = anon_api.get("/api/v1/hub", {"q": "broad", "limit": 2}).json()
    assert body["count"] == 3 and body["count_exact"] is False and len(body["results"]) == 2


def test_the_list_api_runs_the_same_few_queries_however_many_items(make_item, anon_api, django_assert_max_num_queries):
    make_item("org/model-0", summary="bulk")
    with django_assert_max_num_queries(2):
        assert anon_api.get("/api/v1/hub", {"q": "bulk"}).status_code == 200
    for i in range(1, 30):
        make_item(f"org/model-{i}", summary="bulk")
    with django_assert_max_num_queries(2):
        assert anon_api.get("/api/v1/hub", {"q": "bulk"}).json()["count"] == 30


def test_the_hub_is_in_the_openapi_schema(anon_api):
    paths = anon_api.get("/api/schema/", {"format": "json"}).json()["paths"]
    assert {"/api/v1/hub/", "/api/v1/hub/{org}/{name}/", "/api/v1/hub/{org}/{name}/like/"} <= set(paths)
    assert {"post", "delete"} <= set(paths["/api/v1/hub/{org}/{name}/like/"])
