"""Chinese by default, English by the switch; every catalogued string has a Chinese translation."""

import re
from pathlib import Path

import polib
import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


def test_pages_are_in_chinese_by_default_even_for_an_english_browser(client):
    html = client.get("/", HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9").content.decode()
    assert '<html lang="zh-hans">' in html and "信创算力云" in html


def test_the_language_switch_turns_the_console_english(owner_client):
    response = owner_client.post("/i18n/setlang/", {"language": "en", "next": "/console/"}, follow=True)
    html = response.content.decode()
    assert '<html lang="en">' in html and "Dashboard" in html and "控制台" not in html


def test_a_signed_in_persons_language_choice_is_kept_on_their_account(owner_client, owner, client):
    owner_client.post("/i18n/setlang/", {"language": "en", "next": "/console/"})
    owner.refresh_from_db()
    assert owner.language == "en"
    owner_client.post("/i18n/setlang/", {"language": "xx", "next": "/console/"})  # not a console language
    owner.refresh_from_db()
    assert owner.language == "en"
    assert client.post("/i18n/setlang/", {"language": "en", "next": "/"}).status_code == 302  # a visitor: cookie only


def test_an_unknown_language_cookie_falls_back_to_chinese(client):
    client.cookies["django_language"] = "xx"
    assert '<html lang="zh-hans">' in client.get("/").content.decode()


def test_every_message_has_a_chinese_translation():
    po = polib.pofile(str(Path(settings.BASE_DIR) / "locale/zh_Hans/LC_MESSAGES/django.po"))
    untranslated = [e.msgid for e in po if e.obsolete is False and (not e.translated() or e.fuzzy)]
    assert untranslated == []


def test_the_language_choice_is_kept_when_the_browser_closes(client):
    response = client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    cookie = response.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert cookie.value == "en" and int(cookie["max-age"]) >= 30 * 24 * 60 * 60  # a lasting cookie, not a session one


def test_chinese_uses_one_word_per_concept_and_addresses_the_reader_politely():
    po = polib.pofile(str(Path(settings.BASE_DIR) / "locale/zh_Hans/LC_MESSAGES/django.po"))
    texts = [e.msgstr for e in po if not e.obsolete] + [s for e in po for s in e.msgstr_plural.values()]
    assert [t for t in texts if "你" in t] == []  # 您, never 你
    assert [t for t in texts if "试用金" in t] == []  # the trial credit is 体验金 everywhere


def test_mail_comes_from_the_product_s_chinese_name():
    assert settings.DEFAULT_FROM_EMAIL.startswith("信创算力云 <")


def test_chinese_sentences_use_chinese_punctuation():
    po = polib.pofile(str(Path(settings.BASE_DIR) / "locale/zh_Hans/LC_MESSAGES/django.po"))
    texts = [e.msgstr for e in po if not e.obsolete] + [s for e in po for s in e.msgstr_plural.values()]
    # After a Chinese character: ，；：！？ and 。, and （…） around Chinese words — never their ASCII forms.
    ascii_after_chinese = re.compile(r"[\u4e00-\u9fff][,;:!?.](\s|$)|[\u4e00-\u9fff] ?\([^)]*[\u4e00-\u9fff][^)]*\)")
    assert [t for t in texts if ascii_after_chinese.search(t)] == []
