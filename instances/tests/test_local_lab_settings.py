"""JupyterLab in a real machine of the local backend speaks the owner's language and shows no news pop-up: what
the lab serves its page (its settings, its language packs, its page config), read as the browser reads them."""

import json
import re

import httpx
import pytest
from django.utils import translation

from instances.backends import get_backend, local_lab


def lab_client(instance):
    server = get_backend("local").jupyter(instance)
    headers = {"Authorization": f"token {server.token}"}
    client = httpx.Client(transport=httpx.HTTPTransport(uds=server.socket), headers=headers, timeout=30)
    return client, f"http://localhost{server.base_path}"


@pytest.mark.sandbox
@pytest.mark.django_db(transaction=True)
def test_a_chinese_owners_jupyterlab_is_in_chinese_without_the_news_pop_up(on_local, running):
    with translation.override("zh-hans"):
        instance = running()
    lab, base = lab_client(instance)

    # The language JupyterLab starts with is Chinese (the setting's default: the owner may still pick another in
    # the Settings menu), and its Chinese pack is there to load.
    setting = lab.get(f"{base}lab/api/settings/{local_lab.TRANSLATION}").json()
    assert setting["schema"]["properties"]["locale"]["default"] == "zh_CN" and "locale" not in setting["settings"]
    packs = lab.get(f"{base}lab/api/translations/").json()["data"]
    assert "zh_CN" in packs
    chinese = lab.get(f"{base}lab/api/translations/zh_CN").json()
    assert chinese["message"] == "" and chinese["data"]

    # The page's configuration disables the announcements (news) plugin.
    page = lab.get(f"{base}lab").text
    config = json.loads(
        re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S).group(1)
    )
    assert local_lab.ANNOUNCEMENTS in config["disabledExtensions"]


def test_an_english_owners_jupyterlab_starts_in_english():
    # The machine's /etc as it is written for a start asked for in English (the lab reads it as above).
    with translation.override("en"):
        files = local_lab.etc_files("/opt/runtime/bin", local_lab.lab_locale())
    overrides = json.loads(files[f"{local_lab.LAB_SETTINGS}/overrides.json"])
    assert overrides[local_lab.TRANSLATION]["locale"] == "en"


@pytest.mark.sandbox
@pytest.mark.django_db(transaction=True)
def test_an_owner_who_switched_the_console_to_english_gets_an_english_lab(on_local, running, client, owner):
    client.force_login(owner)
    client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    with translation.override("zh-hans"):  # whatever the worker that starts it speaks
        instance = running()
    lab, base = lab_client(instance)

    setting = lab.get(f"{base}lab/api/settings/{local_lab.TRANSLATION}").json()
    assert setting["schema"]["properties"]["locale"]["default"] == "en"
