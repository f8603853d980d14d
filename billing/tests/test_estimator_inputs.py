"""The estimator takes a chip and a card count (page and API) and every error names its field."""

import pytest
from django.conf import settings
from django.urls import reverse

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimate/training"


def _english(client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return client


def test_the_page_estimates_one_chip_on_the_cards_chosen(client, catalog):
    query = {"params_b": "7", "tokens_b": "100", "chip": "a100-80g", "cards": "64"}

    html = _english(client).get(reverse("catalog:estimator"), query).content.decode()

    assert 'id="id_chip"' in html and 'id="id_cards"' in html
    assert 'id="estimate-a100-80g"' in html and 'id="estimate-ascend-910b"' not in html
    row = html[html.index('id="estimate-a100-80g"') :]
    assert '<td class="text-end fw-semibold">64</td>' in row[: row.index("</tr>")]


def test_a_bad_card_count_is_shown_beside_the_field_in_chinese(client, catalog):
    query = {"params_b": "7", "tokens_b": "100", "chip": "a100-80g", "cards": "abc"}

    response = client.get(reverse("catalog:estimator"), query)

    html = response.content.decode()
    assert response.status_code == 400
    beside = html[html.index('id="id_cards-error"') :]
    assert "请输入整数卡数" in beside[: beside.index("</div>")]
    assert '<a href="#id_cards">卡数</a>' in html


def test_cards_without_a_chip_ask_for_the_chip(client, catalog):
    html = _english(client).get(reverse("catalog:estimator"), {"params_b": "7", "tokens_b": "1", "cards": "8"})

    assert "Choose a chip to estimate on a given number of cards." in html.content.decode()


@pytest.mark.parametrize(
    ("query", "field", "code"),
    [
        ({"chip": "h100"}, "chip", "unknown_chip"),
        ({"chip": "domestic-midrange-reference"}, "chip", "not_rentable"),
        ({"chip": "mlu370-x8"}, "chip", "not_published"),
        ({"cards": "0"}, "cards", "invalid"),
        ({"params_b": "-1"}, "params_b", "invalid"),
    ],
)
def test_api_errors_are_keyed_by_the_field(anon_api, catalog, query, field, code):
    response = anon_api.get(URL, {"params_b": "7", "tokens_b": "100", "chip": "ascend-910b"} | query)

    body = response.json()
    assert response.status_code == (404 if code == "unknown_chip" else 400) and body["code"] == code
    assert list(body["errors"]) == [field] and body["errors"][field][0]
