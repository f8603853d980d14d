"""The official image catalogue, its search in Chinese and English, and sanitised descriptions."""

import tomllib
from pathlib import Path

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.management import call_command

from marketplace.images import catalog, services
from marketplace.images.search import ImageQuery
from marketplace.models import Image, ImageVariant

pytestmark = pytest.mark.django_db


def _slugs(query=None, user=None, sort="popular"):
    images = services.search_images(user or AnonymousUser(), query or ImageQuery(), sort)
    return [image.slug for image in images]


def test_load_images_is_idempotent_and_covers_every_chip_family(catalog, capsys):
    before = (Image.objects.count(), ImageVariant.objects.count())
    call_command("load_images")
    call_command("load_images")
    assert (Image.objects.count(), ImageVariant.objects.count()) == before
    assert "0 created" in capsys.readouterr().out
    families = set(ImageVariant.objects.values_list("family", flat=True))
    assert families == {"npu", "mlu", "dcu", "cuda", ""}
    pytorch = Image.objects.get(slug="pytorch-2.2")
    assert sorted(pytorch.variants.values_list("family", flat=True)) == ["cuda", "dcu", "mlu", "npu"]
    # the slugs instances recorded before the marketplace existed are variants now
    legacy = ["pytorch-2.2-cann8", "mindspore-2.3-cann8", "ubuntu-22.04"]
    assert ImageVariant.objects.filter(slug__in=legacy).count() == 3


def test_the_case_studies_quote_the_published_figures(official_images):
    texts = {slug: official_images[slug].description_html for slug in official_images if slug.startswith("case-")}
    assert "58%" in texts["case-gov-knowledge-graph"] and "80 Ascend 910B" in texts["case-gov-knowledge-graph"]
    assert "38 ms" in texts["case-bank-antifraud"] and "21%" in texts["case-bank-antifraud"]
    assert "62%" in texts["case-176b-pretrain-dcu"] and "176" in texts["case-176b-pretrain-dcu"]
    assert {official_images[s].variants.get().family for s in texts} == {"npu", "mlu", "dcu"}


def test_a_staff_edit_is_kept_unless_update_is_asked(official_images):
    Image.objects.filter(slug="vllm-0.6").update(name="Edited by staff")
    catalog.load()
    assert Image.objects.get(slug="vllm-0.6").name == "Edited by staff"
    catalog.load(update=True)
    assert Image.objects.get(slug="vllm-0.6").name == "vLLM 0.6 inference server"


def test_search_finds_images_in_chinese_and_english(official_images):
    assert _slugs(ImageQuery(q="昇腾"))[0] == "mindspore-2.3"
    assert "case-bank-antifraud" in _slugs(ImageQuery(q="反欺诈"))
    assert "case-gov-knowledge-graph" in _slugs(ImageQuery(q="知识图谱"))
    assert _slugs(ImageQuery(q="mindfor")) == ["mindspore-2.3", "case-gov-knowledge-graph"]  # an English prefix
    assert _slugs(ImageQuery(q="vllm")) == ["vllm-0.6"]
    assert _slugs(ImageQuery(q="!!!")) == []


def test_filters_by_category_family_framework_and_os(official_images):
    xinchuang = _slugs(ImageQuery(category="xinchuang"))
    assert "mindspore-2.3" in xinchuang and "vllm-0.6" not in xinchuang
    mlu = _slugs(ImageQuery(family="mlu"))
    assert set(mlu) == {"pytorch-2.2", "magicmind-1.10", "case-bank-antifraud"}
    assert set(_slugs(ImageQuery(framework="MindSpore"))) == {"mindspore-2.3", "case-gov-knowledge-graph"}
    kylin = _slugs(ImageQuery(os="kylin"))
    assert "magicmind-1.10" in kylin and "mindspore-2.3" not in kylin
    assert _slugs(ImageQuery(family="cpu")) == ["ubuntu-22.04"]


def test_sorting_by_usage_newest_and_rating(official_images):
    Image.objects.filter(slug="vllm-0.6").update(usage_count=50)
    Image.objects.filter(slug="magicmind-1.10").update(rating_average="4.50", rating_count=2)
    assert _slugs()[0] == "vllm-0.6"
    assert _slugs(sort="rating")[0] == "magicmind-1.10"
    assert _slugs(sort="newest")[0] == Image.objects.order_by("-created_at", "-id").first().slug


def test_markdown_with_a_script_is_neutralised(owner, official_images):
    evil = (
        "# Hi\n\n<script>alert('x')</script>\n\n[click](javascript:alert(1)) "
        '<img src=x onerror="alert(1)">\n\n**bold**'
    )
    image = services.clone_to_mine(owner, official_images["pytorch-2.2"])
    image.description = evil
    services.save_edits(image)
    html = Image.objects.get(pk=image.pk).description_html
    # the script, the image with its handler and the javascript: link survive only as harmless text
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    assert "&lt;script&gt;" in html and "<strong>bold</strong>" in html
    assert "<script" not in services.render_description("<script>alert(1)</script>")


def test_an_official_image_shows_a_translated_badge_and_an_earlier_english_publisher_is_replaced(
    official_images, client
):
    image = Image.objects.get(slug="pytorch-2.2")
    Image.objects.filter(pk=image.pk).update(publisher=catalog.FORMER_PUBLISHER)  # a database loaded before
    call_command("load_images")
    image.refresh_from_db()
    assert image.publisher == "星宇智算"

    client.cookies["django_language"] = "zh-hans"
    page = client.get(f"/marketplace/images/{image.slug}/").content.decode()
    assert 'id="official-badge">官方<' in page and "· official" not in page


def test_an_image_with_an_earlier_releases_description_gets_the_current_one_and_a_staff_edit_is_kept(
    official_images,
):

    earlier = """
## MindSpore 2.3 + MindFormers on Ascend

The Xinchuang zone's flagship image: CANN 8.0 with MindSpore 2.3 and the MindFormers suite (GLM, Baichuan,
Qwen and LLaMA recipes), on openEuler 22.03 LTS.

- Start in JupyterLab or over SSH; `npu-smi info` shows your cards.
- `/root/shared` is your cloud storage, `/root/public` the hub's models mounted read-only.
- The quick-start notebook trains a small model and writes its loss curve, charted on the instance page.
"""
    earlier_zh = """
## 昇腾官方镜像：MindSpore 2.3 + MindFormers

信创专区主力镜像：CANN 8.0 + MindSpore 2.3 + MindFormers 套件（内置 GLM、Baichuan、Qwen、LLaMA 训练脚本），\
基于 openEuler 22.03 LTS。

- 通过 JupyterLab 或 SSH 开始使用；`npu-smi info` 可查看你的加速卡。
- `/root/shared` 是你的云存储，`/root/public` 是以只读方式挂载的模型库模型。
- 快速上手 notebook 会训练一个小模型并写出 loss 曲线，曲线显示在实例页面上。
"""
    Image.objects.filter(slug="mindspore-2.3").update(description=earlier.strip(), description_zh=earlier_zh.strip())
    Image.objects.filter(slug="openeuler-cann8").update(description="Edited by staff.")
    call_command("load_images")

    current = {e["slug"]: e for e in tomllib.loads(Path(catalog.CATALOG_FILE).read_text())["image"]}
    mindspore = Image.objects.get(slug="mindspore-2.3")
    assert mindspore.description_zh == current["mindspore-2.3"]["description_zh"].strip()
    assert "你" not in mindspore.description_zh and "quickstart.ipynb" in mindspore.description
    assert Image.objects.get(slug="openeuler-cann8").description == "Edited by staff."
