"""The starter catalogue (load_hub), synthetic items (generate_hub_items) and the mount counter."""

import hashlib
import re
from decimal import Decimal

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.management import CommandError, call_command
from django.db import models

from marketplace import seed as catalog
from marketplace.hub import services
from marketplace.hub.search import HubQuery
from marketplace.models import HubFile, HubItem
from marketplace.seed import entries

pytestmark = pytest.mark.django_db


def test_load_hub_creates_the_starter_items_once_and_keeps_counters(owner):
    call_command("load_hub", stdout=None)
    total = HubItem.objects.count()
    assert total == 34 and HubItem.objects.filter(kind="dataset").count() == 13  # the tiny model, two built datasets
    chatglm = HubItem.objects.get(repo="THUDM/chatglm3-6b")
    services.like(owner, chatglm)
    services.record_mount(chatglm)
    call_command("load_hub", "--update")
    call_command("load_hub")
    chatglm.refresh_from_db()
    assert HubItem.objects.count() == total and (chatglm.likes_count, chatglm.mount_count) == (1, 1)


def test_starter_cards_drive_the_filters_and_describe_the_facts():
    call_command("load_hub")
    chatglm = HubItem.objects.get(repo="THUDM/chatglm3-6b")
    # Task, licence, languages and tags come only from the generated card's front matter.
    assert (chatglm.task, chatglm.licence) == ("text-generation", "ChatGLM3 model license")
    assert chatglm.languages == ["zh", "en"]
    assert "对话" in chatglm.tags and chatglm.parameters_b == Decimal("6.200")
    assert chatglm.chips == ["npu", "mlu", "dcu", "cuda"]  # pytorch and mindspore builds
    # The card holds the title and both summaries; the facts and the mount path are the page's translated sidebar.
    assert "<h1>chatglm3-6b</h1>" in chatglm.card_html and "第三代 ChatGLM" in chatglm.card_html
    assert "Use it on this platform" not in chatglm.card and "| Parameters |" not in chatglm.card
    assert chatglm.mount_path == "/root/public/THUDM/chatglm3-6b"
    ernie = HubItem.objects.get(repo="PaddlePaddle/ernie-3.0-base-zh")
    assert ernie.chips == ["npu", "cuda"]
    imagenet = HubItem.objects.get(repo="ILSVRC/imagenet-1k")
    assert imagenet.chips == ["npu", "mlu", "dcu", "cuda"]
    assert imagenet.mount_path == "/root/datasets/ILSVRC/imagenet-1k"


def test_the_chinese_hub_page_shows_no_english_platform_text(client):
    call_command("load_hub")
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    html = client.get("/marketplace/hub/THUDM/chatglm3-6b").content.decode()
    lead = re.search(r'<p class="lead fs-6">(.*?)</p>', html, re.S).group(1)
    assert lead == "智谱 AI 与清华 KEG 发布的第三代 ChatGLM 中英双语对话模型。"
    card = re.search(r'id="hub-card">(.*?)</div></article>', html, re.S).group(1)
    for english in ("Use it on this platform", "Read its licence", "Parameters", "Weights", "Licence"):
        assert english not in card
    assert "/root/public/THUDM/chatglm3-6b" in html  # in the sidebar, in Chinese
    assert "商用前请阅读其许可证。" in html


def test_load_hub_refreshes_cards_it_wrote_before_but_keeps_staff_edits(monkeypatch):
    call_command("load_hub")
    old_card = "---\nlicense: apache-2.0\n---\n# chatglm3-6b\n\n## Use it on this platform\n"
    HubItem.objects.filter(repo="THUDM/chatglm3-6b").update(card=old_card)
    HubItem.objects.filter(repo="Qwen/Qwen2.5-7B-Instruct").update(card="# Edited by staff\n")
    fingerprint = hashlib.sha256(old_card.strip().encode()).hexdigest()[:16]
    monkeypatch.setattr(catalog, "PLATFORM_SECTION_CARDS", frozenset({fingerprint}))
    call_command("load_hub")
    chatglm = HubItem.objects.get(repo="THUDM/chatglm3-6b")
    assert "Use it on this platform" not in chatglm.card and "第三代 ChatGLM" in chatglm.card_html
    assert chatglm.chips == ["npu", "mlu", "dcu", "cuda"] and chatglm.kind == "model"
    assert HubItem.objects.get(repo="Qwen/Qwen2.5-7B-Instruct").card == "# Edited by staff\n"


def test_starter_file_lists_add_up_to_the_published_size():
    call_command("load_hub")
    for repo, size_gb in (("Qwen/Qwen2.5-72B-Instruct", 145), ("Skywork/SkyPile-150B", 620)):
        item = HubItem.objects.get(repo=repo)
        shards = HubFile.objects.filter(item=item, path__regex=r"(safetensors|parquet)$")
        assert sum(f.size_bytes for f in shards) == size_gb * 10**9 == item.size_bytes


def test_the_starter_catalogue_is_searchable_in_chinese_and_english():
    call_command("load_hub")

    def found(**kw):
        return {i.repo for i in services.search_items(AnonymousUser(), HubQuery(**kw))}

    assert {"THUDM/chatglm3-6b", "thu-coai/lccc", "BelleGroup/train_0.5M_CN"} <= found(q="对话")
    assert {"hfl/chinese-alpaca-2-13b", "thu-coai/lccc"} <= found(q="中文对话")
    assert found(q="chatglm") == {"THUDM/chatglm3-6b"}
    assert "Qwen/Qwen2.5-7B-Instruct" in found(q="qwen 7b")
    assert found(q="文本生成", kind="dataset") >= {"shibing624/alpaca-zh"}  # the task's Chinese name
    assert found(framework="mindspore", kind="model") >= {"THUDM/chatglm3-6b", "Qwen/Qwen2.5-7B-Instruct"}


def test_generated_items_are_realistic_labelled_and_searchable():
    call_command("generate_hub_items", "--count", "300", stdout=None)
    items = HubItem.objects.all()
    assert items.count() == 300 and all("synthetic" in i.tags for i in items)
    assert all(i.summary.startswith("Synthetic entry") for i in items)
    assert len({i.repo for i in items}) == 300
    hits = services.search_items(AnonymousUser(), HubQuery(q="医疗"))
    assert hits.exists() and all("医疗" in i.summary_zh or "医疗" in i.tags for i in hits)


def test_generate_refuses_a_silly_count():
    with pytest.raises(CommandError, match="--count"):
        call_command("generate_hub_items", "--count", "0")


def test_record_mount_counts_mounts_for_the_most_mounted_order(chat_models):
    qwen = chat_models["qwen"]
    services.record_mount(qwen)
    services.record_mount(qwen)
    assert services.refresh_counts(qwen).mount_count == 2
    first = services.search_items(AnonymousUser(), HubQuery()).first()
    assert first.repo == "Qwen/Qwen2.5-7B-Instruct"


@pytest.mark.parametrize("repo", ["no-slash", "a/b/c", "../etc", "org/", "/name", "org/na me", "组织/模型"])
def test_bad_repository_names_are_refused(make_item, repo):
    with pytest.raises(services.ServiceError, match="org/name"):
        make_item(repo)
    assert not HubItem.objects.exists()


def test_a_name_taken_by_someone_else_is_a_conflict(make_item, owner, stranger):
    make_item("shared/name", owner=owner)
    with pytest.raises(services.Conflict):
        make_item("shared/name", owner=stranger)
    with pytest.raises(services.Conflict):
        make_item("shared/name")  # not even the platform catalogue takes a user's name


def test_unknown_chip_families_are_refused(make_item):
    with pytest.raises(services.ServiceError, match="npu, mlu, dcu or cuda"):
        make_item("org/model", chips=["tpu"])


def test_every_starter_entry_fits_its_columns_on_every_database():
    """SQLite keeps a text of any length; PostgreSQL refuses one past the column's size."""

    sizes = {f.name: f.max_length for f in HubItem._meta.fields if isinstance(f, models.CharField)}
    too_long = [
        (entry["repo"], name, len(value))
        for entry in entries()
        for name, value in entry.items()
        if isinstance(value, str) and name in sizes and len(value) > sizes[name]
    ]
    assert too_long == []
