"""An image's description in the reader's language: official images carry English and Chinese descriptions, the
Chinese page shows the Chinese one and the English page the English one; a user's image shows its one
description in both languages."""

import re

import pytest
from django.conf import settings

from marketplace.images import catalog, services
from marketplace.models import Image

pytestmark = pytest.mark.django_db

CJK = re.compile(r"[\u4e00-\u9fff]")


def _description(client, language, slug):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    html = client.get(f"/marketplace/images/{slug}/").content.decode()
    return re.search(r'id="image-description">(.*?)</div></article>', html, re.S).group(1)


def test_the_chinese_image_page_shows_the_chinese_description_only(client, official_images):
    text = _description(client, "zh-hans", "mindspore-2.3")
    assert "昇腾官方镜像" in text and "npu-smi info" in text
    assert "Start in JupyterLab" not in text and "on Ascend</h2>" not in text


def test_the_english_image_page_shows_the_english_description_only(client, official_images):
    text = _description(client, "en", "mindspore-2.3")
    assert "Start in JupyterLab" in text and not CJK.search(text)


def test_a_case_study_in_chinese_keeps_the_published_figures(client, official_images):
    text = _description(client, "zh-hans", "case-gov-knowledge-graph")
    assert "64 卡 A100" in text and "80 卡昇腾 910B" in text and "58%" in text
    assert "运营方公布的数据" in text and "Figures are the operator's" not in text


def test_a_users_image_shows_its_one_description_in_both_languages(client, owner, official_images):
    image = services.clone_to_mine(owner, official_images["pytorch-2.2"], name="Team PyTorch")
    image.description, image.description_zh = "Team notes: 训练脚本在 `/root/work`。", ""
    services.save_edits(image)
    client.force_login(owner)
    for language in ("zh-hans", "en"):
        assert "Team notes: 训练脚本在 <code>/root/work</code>。" in _description(client, language, image.slug)


def test_every_official_image_has_an_english_and_a_chinese_description(official_images):
    for entry in catalog.entries()["image"]:
        assert not CJK.search(entry["description"]), entry["slug"]
        assert CJK.search(entry["description_zh"]), entry["slug"]
    image = Image.objects.get(slug="ubuntu-22.04")
    assert "无卡模式" in image.description_zh and "无卡模式" in image.description_zh_html


def test_loading_splits_a_description_an_earlier_catalogue_left_but_keeps_staff_edits(official_images):
    # Before the split, an image's description was one text and description_zh empty; the Ubuntu image's text
    # was the English one it has now. An edited description is the staff's and stays as it is.
    Image.objects.filter(slug="ubuntu-22.04").update(description_zh="", description_zh_html="")
    Image.objects.filter(slug="vllm-0.6").update(description="Edited by staff", description_zh="")
    catalog.load()
    assert "无卡模式" in Image.objects.get(slug="ubuntu-22.04").description_zh_html
    vllm = Image.objects.get(slug="vllm-0.6")
    assert (vllm.description, vllm.description_zh) == ("Edited by staff", "")


def test_the_api_gives_both_descriptions(anon_api, official_images):
    detail = anon_api.get("/api/v1/images/mindspore-2.3").json()
    assert detail["description"].startswith("## MindSpore 2.3") and not CJK.search(detail["description"])
    assert "昇腾官方镜像" in detail["description_zh"] and "昇腾官方镜像" in detail["description_zh_html"]
