"""Public pages: the chip comparison and the training estimator."""

import json

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from catalog.models import Chip, ScalingFigure

pytestmark = pytest.mark.django_db
CHIPS_MAX_QUERIES = 12


def _english(client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return client


def test_the_comparison_has_a_chart_and_a_table_for_every_figure(client, catalog):
    response = _english(client).get(reverse("catalog:chips"))

    html = response.content.decode()
    assert response.status_code == 200
    for slug in ("tflops", "bandwidth", "interconnect", "scaling", "mfu", "price", "tokens", "images"):
        assert f'data-chart="chart-data-{slug}"' in html
        assert f'id="table-{slug}"' in html
    assert "not published" in html
    assert "instances/charts.js" in html


def test_chart_data_holds_decimal_strings_and_only_chips_with_the_figure(client, catalog):
    response = client.get(reverse("catalog:chips"))
    html = response.content.decode()

    start = html.index('<script id="chart-data-tflops" type="application/json">') + len(
        '<script id="chart-data-tflops" type="application/json">'
    )
    data = json.loads(html[start : html.index("</script>", start)])
    assert len(data["labels"]) == 3  # 910B, A100 and the reference chip published TFLOPS
    assert data["datasets"][0]["data"] == ["280", "312", None]
    assert all(isinstance(v, str | None) for v in data["datasets"][1]["data"])


def test_cost_per_100m_tokens_uses_the_subsidised_price(client, catalog):
    html = _english(client).get(reverse("catalog:chips")).content.decode()

    # 10^8 tokens ÷ 1,680 tokens/s = 16.53 card-hours × ¥1.71 = ¥28.27
    assert "¥28.27" in html


def test_the_comparison_page_renders_in_chinese(client, catalog):
    assert "昇腾 910B" in client.get(reverse("catalog:chips")).content.decode()


def test_the_comparison_query_count_does_not_grow_with_chips(client, catalog, django_assert_max_num_queries):
    url = reverse("catalog:chips")
    with CaptureQueriesContext(connection) as before:
        client.get(url)
    for i in range(5):
        chip = Chip.objects.create(slug=f"more-{i}", name=f"More {i}", vendor="X", backend="cuda", tflops_bf16=100)
        ScalingFigure.objects.create(chip=chip, cards=16, efficiency="0.9")

    with django_assert_max_num_queries(CHIPS_MAX_QUERIES):
        response = client.get(url)

    assert "More 4" in response.content.decode()
    assert len(before) <= CHIPS_MAX_QUERIES


def test_the_estimator_explains_its_numbers(client, catalog):
    html = _english(client).get(reverse("catalog:estimator")).content.decode()

    assert "6 × N × D" in html
    assert "16 bytes per parameter" in html
    assert 'id="estimate-table"' in html
    assert "has not published" in html  # chips without peak TFLOPS or MFU


def test_the_estimator_asks_for_enough_cards_to_hold_a_large_model(client, catalog):
    query = {"params_b": "70", "tokens_b": "10", "deadline_days": "", "budget_cny": ""}

    html = _english(client).get(reverse("catalog:estimator"), query).content.decode()

    row = html[html.index('id="estimate-ascend-910b"') :]
    row = row[: row.index("</tr>")]
    assert '<td class="text-end">17</td>' in row
    assert '<td class="text-end fw-semibold">24</td>' in row


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"params_b": "-7"}, "must be greater than zero"),
        ({"params_b": "0"}, "must be greater than zero"),
        ({"tokens_b": "lots"}, "Enter a number"),
        ({"tokens_b": "1e999"}, "can be at most"),
        ({"budget_cny": "-1"}, "must be greater than zero"),
        ({"params_b": ""}, "required"),
    ],
)
def test_bad_estimator_input_gets_a_clear_message_never_a_500(client, catalog, query, message):
    full = {"params_b": "7", "tokens_b": "100", "deadline_days": "30", "budget_cny": "100000"} | query

    response = _english(client).get(reverse("catalog:estimator"), full)
    partial = client.get(reverse("catalog:estimator"), full, HTTP_HX_REQUEST="true")

    assert response.status_code == 400
    assert message in response.content.decode()
    assert partial.status_code == 200 and "estimate-errors" in partial.content.decode()
