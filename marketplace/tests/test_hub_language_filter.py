"""The hub page's language menu: names in the page's language, values that filter by the card's languages."""

import re

CARD = """---
language:
  - fr
license: mit
---
# Un modèle
"""


def _options(html: str) -> list[tuple[str, str]]:
    menu = re.search(r'<select name="language".*?</select>', html, re.S).group(0)
    return re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', menu)


def test_the_language_menu_shows_names_not_the_language_switchs_data(chat_models, english, client):
    options = _options(english.get("/marketplace/hub/").content.decode())
    assert options[:4] == [("", "Any language"), ("zh", "Chinese"), ("en", "English"), ("multilingual", "Multilingual")]
    client.cookies["django_language"] = "zh-hans"
    assert _options(client.get("/marketplace/hub/").content.decode())[1:4] == [
        ("zh", "中文"),
        ("en", "英文"),
        ("multilingual", "多语言"),
    ]


def test_filtering_by_language_then_searching_keeps_answering(chat_models, make_item, english):
    make_item("mistral/le-modele", summary="A French model.", card=CARD)
    english_only = english.get("/marketplace/hub/", {"language": "en"}, HTTP_HX_REQUEST="true")
    assert english_only.status_code == 200
    html = english_only.content.decode()
    assert "meta-llama/Meta-Llama-3-8B-Instruct" in html and "thu-coai/lccc" not in html
    searched = english.get("/marketplace/hub/", {"language": "en", "q": "llama"}, HTTP_HX_REQUEST="true")
    assert searched.status_code == 200 and "Meta-Llama-3-8B" in searched.content.decode()
    assert "THUDM/chatglm3-6b" not in searched.content.decode()

    # A language from a card's front matter that the menu does not offer is still a filter, shown by its name
    page = english.get("/marketplace/hub/", {"language": "fr"}).content.decode()
    assert "mistral/le-modele" in page and "THUDM/chatglm3-6b" not in page
    assert ("fr", "French") in _options(page)
