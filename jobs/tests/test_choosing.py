"""``auto`` picks the chip that is cheapest per unit of work under the price ceiling, and says why."""

from decimal import Decimal

import pytest

from catalog.models import Chip
from core.field_errors import FieldError


def test_auto_picks_the_cheapest_per_unit_of_work(submit):
    # At the seeded prices after subsidy: DCU Z100 ¥1.44/h at 7,650 img/s is ¥0.52 per 10 M images, MLU370 ¥1.53
    # at 7,800 is ¥0.54, A800 ¥3.80 at 8,100 is ¥1.30.
    job = submit(backend="auto", max_price_per_hour=Decimal("3.00"))
    assert (job.family, job.chip.slug, job.image) == ("dcu", "dcu-z100", "pytorch-2.2-dtk24")
    assert job.choice_reason == (
        "DCU Z100: ¥1.44/h at 7,650 img/s — ¥0.52 per 10 M images, the cheapest of 2 families under your ¥3.00/h "
        "ceiling."
    )


def test_auto_weighs_throughput_not_only_the_hourly_price(submit):
    # A DCU half as fast: still the cheapest hour, no longer the cheapest work.
    Chip.objects.filter(slug="dcu-z100").update(resnet50_images_per_s=3800)
    job = submit(backend="auto")
    assert job.chip.slug == "mlu370-x8"
    assert "¥0.54 per 10 M images" in job.choice_reason and "of 3 families" in job.choice_reason


def test_nothing_under_the_ceiling_is_refused_naming_the_field(submit):
    with pytest.raises(FieldError) as refused:
        submit(backend="auto", max_price_per_hour=Decimal("1.00"))
    assert refused.value.field == "max_price_per_hour"


def test_a_named_family_above_the_ceiling_is_refused(submit):
    with pytest.raises(FieldError) as refused:
        submit(backend="cuda", max_price_per_hour=Decimal("2.00"))
    assert "above your ceiling" in refused.value.message
