"""In real headless Chromium: a user creates a repository, uploads two files, edits the card's YAML (licence,
language, chips) and finds the repository by a two-character Chinese word of its card."""

import pytest
from django.conf import settings
from django.test import Client

from marketplace.models import HubItem
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

README = """# 昇腾小模型

一个在昇腾上推理的微型语言模型。
"""
CARD = """---
license: mit
language: [zh]
chips: [npu]
---
# 昇腾小模型

一个在昇腾上推理的微型语言模型。
"""


def test_a_user_publishes_a_repository_from_the_browser_and_finds_it_in_chinese(page, live_server, owner, tmp_path):
    session = Client()
    session.force_login(owner)
    host = live_server.url.split("//", 1)[1].split(":")[0]
    page.context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": session.cookies[settings.SESSION_COOKIE_NAME].value,
                "domain": host,
                "path": "/",
            },
            {"name": settings.LANGUAGE_COOKIE_NAME, "value": "en", "domain": host, "path": "/"},
        ]
    )

    page.goto(f"{live_server.url}/marketplace/hub/")
    page.locator("#hub-new").click()
    page.fill("#id_namespace", "lab")
    page.fill("#id_name", "ascend-tiny")
    page.locator("#hub-create").click()
    page.wait_for_url("**/marketplace/hub/lab/ascend-tiny")

    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    (tmp_path / "config.json").write_text('{"model_type": "gpt2", "n_layer": 2}\n')
    page.set_input_files("#id_files", [str(tmp_path / "README.md"), str(tmp_path / "config.json")])
    page.fill("#id_upload_message", "First two files")
    page.locator("#hub-upload").click()
    page.wait_for_selector("#hub-files")
    listed = page.locator("#hub-files").inner_text()
    assert "README.md" in listed and "config.json" in listed
    assert "First two files" in page.locator("#hub-commits").inner_text()
    assert page.locator("#hub-card h1").inner_text() == "昇腾小模型"
    screenshot(page, "hub-publish-01-uploaded")

    page.locator("#edit-card").click()
    page.fill("#id_card", CARD)
    page.fill("#id_message", "Card: licence, language, chips")
    page.locator("#card-save").click()
    page.wait_for_url("**/marketplace/hub/lab/ascend-tiny")
    item = HubItem.objects.get(repo="lab/ascend-tiny")
    assert (item.licence, item.languages, item.chips) == ("mit", ["zh"], ["npu"])
    assert "Card: licence, language, chips" in page.locator("#hub-commits").inner_text()

    # A bad card is refused with what is wrong, and nothing is committed.
    page.locator("#edit-card").click()
    page.fill("#id_card", "---\nlicense: [unclosed\n---\n")
    page.locator("#card-save").click()
    assert "not valid YAML" in page.locator("#card-error").inner_text()
    assert item.commits.count() == 2

    page.goto(f"{live_server.url}/marketplace/hub/")
    page.fill("#id_q", "昇腾")
    page.wait_for_url("**/marketplace/hub/?q=*")
    assert page.locator("#hub-items").get_by_role("link", name="lab/ascend-tiny").is_visible()
    screenshot(page, "hub-publish-02-found")
