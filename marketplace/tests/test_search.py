"""Hub search: Chinese and English words, repo prefixes, filters and sorts, on SQLite (FTS5) and PostgreSQL."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection

from marketplace.hub import search, services, synthetic
from marketplace.hub.search import HubQuery
from marketplace.models import HubItem

pytestmark = pytest.mark.django_db


def repos(query=None, user=None, sort="mounts", **filters):
    query = query if isinstance(query, HubQuery) else HubQuery(q=query or "", **filters)
    return [item.repo for item in services.search_items(user or AnonymousUser(), query, sort)]


def test_chinese_text_is_indexed_as_overlapping_bigrams_and_unigrams():
    tokens = search.index_tokens("ChatGLM3 中文对话模型")
    assert {"chatglm3", "中文", "文对", "对话", "话模", "模型", "中", "型"} <= set(tokens)


def test_a_chinese_query_needs_the_bigrams_that_cover_it_and_english_words_are_prefixes():
    assert search.query_terms("中文对话") == [search.Term("中文", False), search.Term("对话", False)]
    assert [t.token for t in search.query_terms("大模型")] == ["大模", "模型"]
    assert search.query_terms("Qwen 7B") == [search.Term("qwen", True), search.Term("7b", True)]
    assert search.query_terms("图") == [search.Term("图", False)]


def test_two_character_chinese_words_find_chinese_chat_items(chat_models):
    assert set(repos("对话")) == {"THUDM/chatglm3-6b", "thu-coai/lccc"}
    assert set(repos("中文")) == {"THUDM/chatglm3-6b", "thu-coai/lccc"}
    assert set(repos("中文对话")) == {"THUDM/chatglm3-6b", "thu-coai/lccc"}
    assert repos("中文对话", kind="model") == ["THUDM/chatglm3-6b"]
    assert repos("医疗") == ["shanghai-med-lab/yiliao-qa-7b"]


def test_english_words_and_repo_prefixes_find_items(chat_models):
    assert repos("chatglm") == ["THUDM/chatglm3-6b"]
    assert repos("CHATGLM3") == ["THUDM/chatglm3-6b"]
    assert repos("qwen 7b") == ["Qwen/Qwen2.5-7B-Instruct"]
    assert repos("THUDM/chat") == ["THUDM/chatglm3-6b"]
    assert repos("meta-ll") == ["meta-llama/Meta-Llama-3-8B-Instruct"]
    assert set(repos("instruct")) == {"Qwen/Qwen2.5-7B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct"}


def test_words_of_different_scripts_must_all_match(chat_models):
    assert repos("chatglm 对话") == ["THUDM/chatglm3-6b"]
    assert repos("qwen 对话") == []


def test_a_query_of_only_punctuation_finds_nothing_and_an_empty_one_everything(chat_models):
    assert repos("!!! ///") == []
    assert len(repos("")) == len(chat_models)


def test_every_filter_narrows_the_list(chat_models):
    assert set(repos(kind="dataset")) == {"thu-coai/lccc"}
    assert set(repos(task="question-answering")) == {"shanghai-med-lab/yiliao-qa-7b"}
    assert set(repos(licence="apache 2.0")) == {"Qwen/Qwen2.5-7B-Instruct"}  # case and punctuation ignored
    assert set(repos(language="en")) == {
        "THUDM/chatglm3-6b",
        "Qwen/Qwen2.5-7B-Instruct",
        "meta-llama/Meta-Llama-3-8B-Instruct",
    }
    assert set(repos(framework="mindspore")) == {"THUDM/chatglm3-6b", "shanghai-med-lab/yiliao-qa-7b"}
    assert set(repos(chip="mlu")) == {"THUDM/chatglm3-6b", "thu-coai/lccc"}
    assert set(repos(tag="医疗")) == {"shanghai-med-lab/yiliao-qa-7b"}


def test_filters_combine_with_words(chat_models):
    assert repos("对话", kind="model") == ["THUDM/chatglm3-6b"]
    assert repos("对话", chip="mlu", kind="dataset") == ["thu-coai/lccc"]
    assert repos("chatglm", chip="cuda", licence="MIT") == []


def test_a_filter_value_never_matches_as_a_search_word(chat_models):
    # Facet tokens live in their own column: searching for one finds nothing.
    token = search.facet_token("chip", "npu")
    assert repos(token) == []


def test_sorts_order_by_mounts_likes_newest_and_name(chat_models, owner, stranger):
    for _ in range(3):
        services.record_mount(chat_models["llama"])
    services.record_mount(chat_models["qwen"])
    services.like(owner, chat_models["medical"])
    services.like(stranger, chat_models["medical"])
    services.like(owner, chat_models["lccc"])
    assert repos()[:2] == ["meta-llama/Meta-Llama-3-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"]
    assert repos(sort="likes")[:2] == ["shanghai-med-lab/yiliao-qa-7b", "thu-coai/lccc"]
    assert repos(sort="newest")[0] == "thu-coai/lccc"
    assert repos(sort="name") == sorted(repos(sort="name"))


def test_an_unknown_sort_is_a_clear_error(chat_models):
    with pytest.raises(services.ServiceError, match="Unknown sort order"):
        repos(sort="random")


def test_private_items_are_found_only_by_their_owner(chat_models, make_item, owner, stranger, teammate):
    make_item("owner-lab/secret-chat", owner=owner, visibility="private", summary_zh="私有对话模型")
    assert "owner-lab/secret-chat" in repos("对话", user=owner)
    for other in (stranger, teammate, None):
        assert "owner-lab/secret-chat" not in repos("对话", user=other)
        assert "owner-lab/secret-chat" not in repos(user=other)


def test_editing_an_item_updates_the_index(chat_models, make_item):
    make_item("THUDM/chatglm3-6b", summary_zh="金融问答模型", tags=[], chips=["npu"])
    assert "THUDM/chatglm3-6b" not in repos("对话")
    assert repos("金融") == ["THUDM/chatglm3-6b"]
    assert "THUDM/chatglm3-6b" not in repos(chip="mlu")


def test_deleted_items_leave_the_search(chat_models, make_item, owner):
    make_item("owner-lab/tmp-data", owner=owner, kind="dataset", summary_zh="临时对话数据")
    services.delete_item(owner, "owner-lab/tmp-data")
    assert "owner-lab/tmp-data" not in repos("对话", user=owner)


def test_sqlite_search_goes_through_the_fts5_index(chat_models):
    if connection.vendor != "sqlite":
        pytest.skip("the FTS5 path is SQLite's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM marketplace_hubitem_fts WHERE marketplace_hubitem_fts MATCH '\"对话\"'")
        assert cursor.fetchone()[0] == 2
    sql = str(services.search_items(AnonymousUser(), HubQuery(q="对话")).query)
    assert "marketplace_hubitem_fts MATCH" in sql


BROAD_QUERIES = [HubQuery(q="模型"), HubQuery(q="对话"), HubQuery(q="q"), HubQuery(chip="mlu", kind="dataset")]


def _pages(users):
    return {
        (query, sort, str(user)): [item.repo for item in services.search_items(user, query, sort)[:25]]
        for query in BROAD_QUERIES
        for sort in ("mounts", "likes", "newest", "name")
        for user in users
    }


def test_a_broad_query_finds_the_same_items_in_the_same_order_as_a_narrow_one(
    chat_models, make_item, owner, monkeypatch
):
    # given: synthetic items (ties in mounts and likes fall to the id) and a private item of the owner's
    synthetic.generate(150)
    make_item("owner-lab/secret-chat", owner=owner, visibility="private", summary_zh="私有对话模型")
    users = [AnonymousUser(), owner]
    as_narrow = _pages(users)
    # when: the cap is so low that every query counts as broad (SQLite then walks the sort order's index)
    monkeypatch.setattr(services, "RESULT_COUNT_CAP", 3)
    items = services.search_items(owner, HubQuery(q="模型"))
    if connection.vendor == "sqlite":
        assert '+"marketplace_hubitem"."id" IN' in str(items.query)
    # then: the same items come back in the same order, and the count stops at the cap
    assert _pages(users) == as_narrow
    assert services.count_matches(items) == (3, False)


def test_a_search_is_counted_once_and_read_once(chat_models, django_assert_max_num_queries):
    for query in (HubQuery(q="对话"), HubQuery(q="中文", chip="npu"), HubQuery(), HubQuery(q="!!")):
        with django_assert_max_num_queries(2):
            items = services.search_items(AnonymousUser(), query)
            count, exact = services.count_matches(items)
            page = list(items[:20])
        assert (count, exact) == (len(page), True)


@pytest.mark.postgres
def test_postgres_search_uses_the_generated_tsvector_and_its_gin_index(chat_models):
    assert connection.vendor == "postgresql"
    assert set(repos("对话")) == {"THUDM/chatglm3-6b", "thu-coai/lccc"}
    assert repos("qwen 7b") == ["Qwen/Qwen2.5-7B-Instruct"]
    assert repos("医疗", chip="npu") == ["shanghai-med-lab/yiliao-qa-7b"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'hub_item_search_gin'")
        assert "gin (search_vector)" in cursor.fetchone()[0].lower()
        # A handful of rows would be scanned; tell the planner to prefer indexes, as it does at 100,000 rows.
        cursor.execute("SET enable_seqscan = off")
        items = HubItem.objects.matching(HubQuery(q="对话")).order_by().values("id")
        sql, params = items.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "hub_item_search_gin" in plan
