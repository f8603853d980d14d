"""Model cards: front matter drives the filters, the body is rendered without anything executable."""

from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import AnonymousUser

from core.errors import ServiceError
from marketplace.hub import cards, services
from marketplace.hub.search import HubQuery
from marketplace.models import HubItem

pytestmark = pytest.mark.django_db

CARD = """---
license: apache-2.0
pipeline_tag: translation
library_name: transformers
language:
  - zh
  - en
tags: [翻译, nmt]
datasets:
  - wmt/wmt19
---
# 中英翻译模型

Translates between Chinese and English.
"""


def found(**filters):
    return [i.repo for i in services.search_items(AnonymousUser(), HubQuery(**filters))]


def test_front_matter_fills_the_filter_fields_of_an_item(make_item):
    item = make_item("nlp-lab/zh-en-translator", card=CARD)
    assert (item.licence, item.task, item.library_name) == ("apache-2.0", "translation", "transformers")
    assert item.languages == ["zh", "en"] and item.tags == ["翻译", "nmt"]
    for filters in (
        {"licence": "Apache-2.0"},
        {"task": "translation"},
        {"framework": "transformers"},
        {"language": "en"},
        {"tag": "翻译"},
        {"q": "翻译"},
    ):
        assert found(**filters) == ["nlp-lab/zh-en-translator"], filters


def test_fields_that_are_set_win_over_the_front_matter(make_item):
    item = make_item("nlp-lab/zh-en-translator", card=CARD, licence="MIT", tags=["mine"])
    assert item.licence == "MIT" and item.tags == ["mine"]
    assert item.task == "translation"  # empty, so the card's pipeline_tag fills it


def test_the_card_body_is_rendered_without_the_front_matter(make_item):
    item = make_item("nlp-lab/zh-en-translator", card=CARD)
    assert "<h1>中英翻译模型</h1>" in item.card_html and "pipeline_tag" not in item.card_html


class _Elements(HTMLParser):
    """Collects the real elements and attributes of rendered HTML (escaped text is not an element)."""

    def __init__(self, html):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def executable_parts(html: str) -> list[str]:
    found = []
    for tag, attrs in _Elements(html).elements:
        if tag in {"script", "iframe", "object", "embed", "style"}:
            found.append(tag)
        for name, value in attrs.items():
            if name.startswith("on") or (value or "").strip().lower().startswith(("javascript:", "data:", "vbscript:")):
                found.append(f"{tag}[{name}]")
    return found


@pytest.mark.parametrize(
    "markdown",
    [
        "<script>alert(1)</script>",
        "[click](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](<javascript:alert(1)>)",
        "![x](javascript:alert(1))",
        '<img src="x" onerror="alert(1)">',
        '<a href="https://example.com" onclick="steal()">x</a>',
        "<iframe src=https://evil.example></iframe>",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "<javascript:alert(1)>",
    ],
)
def test_nothing_executable_survives_in_a_rendered_card(markdown):
    html = cards.render(f"# Card\n\n{markdown}\n\ntext")
    assert executable_parts(html) == []
    assert "<h1>Card</h1>" in html and "<script" not in html


def test_a_script_in_a_saved_card_never_reaches_the_page(make_item, client):
    make_item("evil/card", card="# Hi\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1))")
    html = client.get("/marketplace/hub/evil/card").content.decode()
    card = html.split('id="hub-card">', 1)[1].split("</article>", 1)[0]
    assert executable_parts(card) == [] and "<h1>Hi</h1>" in card


def test_ordinary_markdown_keeps_links_tables_and_code():
    html = cards.render("[site](https://example.com)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\ncode\n```")
    assert 'href="https://example.com"' in html and 'rel="noopener noreferrer nofollow"' in html
    assert "<table>" in html and "<td>1</td>" in html and "<code>code\n</code>" in html


def test_invalid_front_matter_is_a_clear_error_and_writes_nothing(make_item):
    with pytest.raises(ServiceError, match="front matter is not valid YAML"):
        make_item("nlp-lab/broken", card="---\nlicense: [unclosed\n---\n# x")
    with pytest.raises(ServiceError, match="key: value"):
        make_item("nlp-lab/broken", card="---\n- just\n- a list\n---\n# x")
    assert not HubItem.objects.filter(repo="nlp-lab/broken").exists()


def test_license_other_uses_the_license_name():
    meta = cards.meta({"license": "other", "license_name": "qwen-research", "language": "zh", "tags": "single"})
    assert meta.licence == "qwen-research" and meta.languages == ["zh"] and meta.tags == ["single"]
