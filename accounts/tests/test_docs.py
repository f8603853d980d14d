"""The documentation site as a reader meets it at /docs/: built by MkDocs from docs/, served by the console, linked
from every page's menu in both languages; and the operator's guide names every setting the console reads."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

ROOT = Path(django_settings.BASE_DIR)


def text(response) -> str:
    return b"".join(response.streaming_content).decode()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    site = tmp_path_factory.mktemp("docs-site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]  # --strict: a broken link fails the build
    return site


@pytest.fixture
def site(built, settings):
    settings.DOCS_SITE_DIR = str(built)
    return built


def test_the_site_opens_with_the_guide_in_chinese_and_in_english(client, site):
    home = client.get("/docs/")
    front = text(home)
    assert home.status_code == 200 and "用户指南" in front and "User's guide" in front
    chinese = text(client.get("/docs/zh/guide/"))
    english = text(client.get("/docs/en/guide/"))
    assert "体验金" in chinese and "ssh -p 2222" in chinese
    assert "trial credit" in english and "ssh -p 2222" in english
    assert client.get("/docs/zh/guide").status_code in (301, 302)  # to the folder's address, as a static server does
    style = re.search(r'href="([^"]+\.css)"', front).group(1)
    css = client.get(f"/docs/{style}")
    assert css.status_code == 200 and css["Content-Type"].startswith("text/css")


def test_the_pages_load_nothing_from_elsewhere_and_only_they_may_run_inline_scripts(client, site):
    page = client.get("/docs/en/guide/")
    html = text(page)
    assert "fonts.googleapis" not in html and "fonts.gstatic" not in html
    assert "'unsafe-inline'" in page["Content-Security-Policy"]
    assert (
        "'unsafe-inline'"
        not in client.get("/").get("Content-Security-Policy", "").split("script-src")[-1].split(";")[0]
    )


@pytest.mark.parametrize("path", ["../config/settings.py", "..%2Fconfig%2Fsettings.py", "/etc/passwd", "nothing/"])
def test_nothing_outside_the_site_is_served(client, site, path):
    assert client.get(f"/docs/{path}").status_code == 404


def test_without_a_built_site_the_page_says_how_to_build_it(client, settings, tmp_path):
    settings.DOCS_SITE_DIR = str(tmp_path / "not-built")
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    page = client.get("/docs/")
    assert page.status_code == 503 and "make docs" in page.content.decode() and "帮助文档" in page.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(("language", "label"), [("zh-hans", "帮助文档"), ("en", "Docs")])
def test_every_pages_menu_links_the_docs(client, settings, language, label):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    html = client.get("/").content.decode()
    assert re.search(rf'<a class="nav-link" id="docs-link" href="/docs/">{label}</a>', html)


def test_the_operators_guide_has_every_setting_in_its_table():
    read = set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z][A-Z0-9_]+)"', (ROOT / "config/settings.py").read_text()))
    guide = (ROOT / "docs/operators/index.md").read_text()
    named = set(
        re.findall(r"`([A-Z][A-Z0-9_]+)`", "\n".join(r.split(" | ")[0] for r in guide.splitlines() if r[:3] == "| `"))
    )
    assert sorted(read - named) == []


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
