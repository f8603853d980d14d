"""A chip family's badge reads as a name in the page's language, never as the slug (npu, cuda, mlu, dcu)."""

import re

import pytest
from django.conf import settings

from tests.fixtures.catalog import load_hub

pytestmark = pytest.mark.django_db

SLUGS = ("npu", "cuda", "mlu", "dcu")


def _badges(html: str) -> list[str]:
    return re.findall(r'class="badge hub-chip[^"]*"[^>]*>([^<]*)<', html)


@pytest.mark.parametrize("url", ["/marketplace/", "/marketplace/images/pytorch-2.2/"])
def test_family_badges_on_a_chinese_page_are_chinese_names(client, official_images, url):
    badges = _badges(client.get(url).content.decode())
    assert badges and not set(badges) & set(SLUGS)
    assert set(badges) <= {"昇腾", "寒武纪", "海光", "英伟达", "仅 CPU"}


def test_family_badges_in_english_are_english_names(client, official_images):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    badges = _badges(client.get("/marketplace/").content.decode())
    assert "Ascend" in badges and not set(badges) & set(SLUGS)


def test_hub_frameworks_and_licences_read_as_names_on_the_chinese_page(client):

    load_hub()
    page = client.get("/marketplace/hub/").content.decode()
    options = re.findall(r"<option value=\"[^\"]+\"[^>]*>([^<]*)</option>", page)
    assert "PyTorch" in options and "pytorch" not in options
    assert "Llama 2 社区许可证" in options
    assert not [o for o in options if "license" in o or o == "unknown"]
