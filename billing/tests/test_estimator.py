"""The training estimator: the formula, memory, deadline and budget, chips without figures, and its API."""

import math
from decimal import Decimal

import pytest

from billing.estimator import TrainingJob, estimate_chip, estimate_training, round_cards
from billing.quote import load_price_book
from core.errors import ServiceError

pytestmark = pytest.mark.django_db
URL = "/api/v1/estimate/training"


def test_wall_clock_days_follow_six_n_d_over_cards_peak_mfu_and_scaling(catalog):
    job = TrainingJob(params_b=Decimal(7), tokens_b=Decimal(100))

    row = estimate_chip(job, catalog["a100-80g"], cards=64, book=load_price_book())

    expected = Decimal(6) * 7 * 10**9 * 100 * 10**9 / (64 * Decimal(312) * 10**12 * Decimal("0.647") * Decimal("0.95"))
    assert row.days == (expected / 86400).quantize(Decimal("0.01"))
    assert row.card_hours == (expected / 86400 * 24 * 64).quantize(Decimal("0.01"))


def test_a_model_too_large_for_one_card_gets_enough_cards_to_hold_it(catalog):
    job = TrainingJob(params_b=Decimal(70), tokens_b=Decimal(1))

    row = estimate_chip(job, catalog["ascend-910b"], book=load_price_book())

    # 70 B parameters × 16 bytes = 1,120 GB of training state; a 910B holds 64 GiB.
    assert row.min_cards_for_memory == math.ceil(70 * 10**9 * 16 / (64 * 2**30)) == 17
    assert row.cards == 24  # rounded up to whole 8-card nodes
    assert row.fits_memory


def test_a_deadline_asks_for_more_cards_and_is_met(catalog):
    job = TrainingJob(params_b=Decimal(7), tokens_b=Decimal(300), deadline_days=Decimal(10))

    row = estimate_chip(job, catalog["ascend-910b"], book=load_price_book())

    assert row.cards == row.cards_for_deadline > row.min_cards_for_memory
    assert row.days <= 10
    assert row.fits_deadline


def test_the_cost_is_the_quote_after_subsidy(catalog):
    job = TrainingJob(params_b=Decimal(1), tokens_b=Decimal(10))

    row = estimate_chip(job, catalog["ascend-910b"], cards=8, book=load_price_book())

    assert row.quote.programme.slug == "xinchuang-2026"
    assert row.cost == row.quote.payable_total


def test_chips_without_published_figures_are_listed_but_not_estimated(catalog):
    result = estimate_training(TrainingJob(params_b=Decimal(7), tokens_b=Decimal(100)))

    rows = {row.chip.slug: row for row in result.rows}
    assert rows["mlu370-x8"].missing and rows["mlu370-x8"].days is None
    assert rows["ascend-910b"].days is not None and rows["a100-80g"].days is not None


def test_the_recommendation_is_the_cheapest_chip_within_deadline_and_budget(catalog):
    job = TrainingJob(params_b=Decimal(7), tokens_b=Decimal(300), deadline_days=Decimal(30), budget_cny=Decimal(10**7))

    result = estimate_training(job)

    assert result.recommended.chip.slug == "ascend-910b"


def test_no_recommendation_when_nothing_fits_the_budget(catalog):
    job = TrainingJob(params_b=Decimal(70), tokens_b=Decimal(1200), deadline_days=Decimal(30), budget_cny=Decimal(1))

    assert estimate_training(job).recommended is None


@pytest.mark.parametrize(
    "kwargs",
    [{"params_b": Decimal(0)}, {"params_b": Decimal(-7)}, {"tokens_b": Decimal("1e30")}, {"deadline_days": Decimal(0)}],
)
def test_bad_jobs_are_refused(kwargs):
    with pytest.raises(ServiceError):
        TrainingJob(**({"params_b": Decimal(7), "tokens_b": Decimal(1)} | kwargs))


def test_cards_come_as_specs_or_whole_nodes():
    assert [round_cards(n) for n in (1, 3, 5, 8, 9, 17)] == [1, 4, 8, 8, 16, 24]


def test_the_api_returns_hours_days_cost_cards_mfu_and_assumptions(anon_api, catalog):
    response = anon_api.get(URL, {"params_b": "70", "tokens_b": "1200", "chip": "ascend-910b"})

    body = response.json()
    assert response.status_code == 200
    for key in ("gpu_hours", "days", "cost_cny", "cards", "mfu", "assumptions"):
        assert key in body
    assert body["cards"] == 24
    assert body["mfu"] == "0.6130"
    assert body["assumptions"]["bytes_per_parameter"] == 16
    assert isinstance(body["cost_cny"], str)


def test_the_api_uses_the_cards_it_is_given(owner_api, catalog):
    body = owner_api.get(URL, {"params_b": "7", "tokens_b": "100", "chip": "a100-80g", "cards": "64"}).json()

    assert body["cards"] == 64
    assert body["scaling_efficiency"] == "0.9500"


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"params_b": "-1"}, "invalid"),
        ({"params_b": "0"}, "invalid"),
        ({"params_b": "seventy"}, "invalid"),
        ({"params_b": "1e9999"}, "invalid"),
        ({"tokens_b": "Infinity"}, "invalid"),
        ({"cards": "0"}, "invalid"),
        ({"cards": "1e12"}, "invalid"),
        ({"deadline_days": "-3"}, "invalid"),
        ({"chip": "h100"}, "unknown_chip"),
        ({"chip": "mlu370-x8"}, "not_published"),
        ({"chip": "domestic-midrange-reference"}, "not_rentable"),
    ],
)
def test_bad_api_input_is_a_400_json_error(anon_api, catalog, query, code):
    response = anon_api.get(URL, {"params_b": "7", "tokens_b": "100", "chip": "ascend-910b"} | query)

    assert response.status_code == (404 if code == "unknown_chip" else 400)  # a chip that is not there: 404
    assert response.json()["code"] == code
    assert response.json()["message"]


def test_the_api_requires_the_inputs(anon_api, catalog):
    response = anon_api.get(URL)

    assert response.status_code == 400
    assert set(response.json()["errors"]) >= {"params_b", "tokens_b", "chip"}
