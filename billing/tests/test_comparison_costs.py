"""The chip comparison's cost charts tell chips apart and compare only chips that are on sale."""

import json
import re
from decimal import Decimal

import pytest
from django.conf import settings
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _page(client) -> str:
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return client.get(reverse("catalog:chips")).content.decode()


def _chart(html: str, slug: str) -> dict:
    opening = f'<script id="chart-data-{slug}" type="application/json">'
    start = html.index(opening) + len(opening)
    return json.loads(html[start : html.index("</script>", start)])


def _table(html: str, slug: str) -> str:
    start = html.index(f'id="table-{slug}"')
    return html[start : html.index("</table>", start)]


def test_the_image_cost_chart_draws_different_bars_for_different_costs_and_the_table_agrees(client, catalog):
    html = _page(client)

    chart = _chart(html, "images")
    costs = dict(zip(chart["labels"], chart["datasets"][0]["data"], strict=True))

    domestic = [costs["MLU370-X8"], costs["DCU Z100"], costs["A800 80GB"]]
    assert len(set(domestic)) == 3
    assert "Cost per 10 M images" in html
    for value in domestic:
        assert f"¥{Decimal(value):.2f}<" in _table(html, "images")


def test_a_chip_not_for_sale_is_left_out_of_the_price_charts_and_marked_in_the_others(client, catalog):
    html = _page(client)

    for slug in ("price", "tokens", "images"):
        assert not any("mid-range" in label for label in _chart(html, slug)["labels"])
        assert "mid-range" not in _table(html, slug)
    assert "Unnamed domestic mid-range GPU (not for sale)" in _chart(html, "tflops")["labels"]


def test_prices_on_the_comparison_are_unit_prices_shown_exactly(client, catalog):
    # A card-hour price is a unit price: shown with as many decimals as it has (the spot ¥1.026), never rounded.
    table = _table(_page(client), "price")

    assert "¥1.026<" in table and "¥1.03<" not in table
    assert not re.search(r"¥\d+\.\d{7,}", table)
