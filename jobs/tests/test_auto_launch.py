"""An instance launched with ``--backend auto`` runs on the chip that is cheapest per unit of work — the rule jobs
use — and its page and the API say which and why."""

import pytest

from catalog.models import Chip, Node
from core.field_errors import FieldError
from instances import launching, waiting

# At the seeded prices: DCU Z100 ¥1.44/h at 7,650 img/s is ¥0.52 per 10 M images; the cheapest of 3 families.
REASON = "DCU Z100: ¥1.44/h at 7,650 img/s — ¥0.52 per 10 M images, the cheapest of 3 families."


def _auto(**fields) -> launching.LaunchRequest:
    return launching.LaunchRequest(name="nb", image="pytorch-2.2-cuda12", backend="auto", **fields)


def test_an_auto_launch_picks_the_cheapest_chip_per_unit_of_work_and_keeps_why(owner, lifecycle, english):
    instance = waiting.launch_or_wait(owner, _auto())
    assert instance.chip.slug == "dcu-z100" and instance.image == "pytorch-2.2-dtk24"
    assert instance.choice["rule"] == "cheapest_per_work"
    page = english.get(instance.get_absolute_url()).content.decode()
    assert "Why this chip" in page and REASON in page


def test_an_auto_launch_weighs_throughput_not_only_the_hourly_price(owner, lifecycle):
    Chip.objects.filter(slug="dcu-z100").update(resnet50_images_per_s=3800)
    assert waiting.launch_or_wait(owner, _auto()).chip.slug == "mlu370-x8"


def test_auto_passes_over_a_chip_no_node_holds_that_many_cards_of(owner, lifecycle):
    # Every DCU node shrunk to two cards, all taken: four DCU cards could never start, so auto waits for another chip.
    Node.objects.filter(chip__slug="dcu-z100").update(cards=2, cards_reserved=2)
    chosen = waiting.launch_or_wait(owner, _auto(cards=4), wait=True)
    assert chosen.chip.slug != "dcu-z100"
    assert waiting.launch_or_wait(owner, _auto(cards=2), wait=True).chip.slug == "dcu-z100"  # two still wait there


def test_auto_with_a_chip_is_refused_naming_the_field(owner, lifecycle):
    with pytest.raises(FieldError) as refused:
        waiting.launch_or_wait(owner, _auto(chip="dcu-z100"))
    assert refused.value.field == "backend"


def test_the_api_launches_with_auto_and_says_why(owner_api, lifecycle):
    body = {"name": "nb", "image": "pytorch-2.2-cuda12", "backend": "auto"}
    response = owner_api.post("/api/v1/instances", body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 201, response.json()
    assert response.json()["chip"] == "dcu-z100"
    detail = owner_api.get(f"/api/v1/instances/{response.json()['id']}", HTTP_ACCEPT_LANGUAGE="en").json()
    assert detail["choice_reason"] == REASON


def test_the_wizard_prices_and_launches_auto(english, owner, lifecycle):
    form = {"name": "nb", "backend": "auto", "cards": "1", "image": "pytorch-2.2-cann8", "plan": "payg"}
    wizard = english.get("/instances/new/", form).content.decode()
    assert "¥1.44" in wizard  # the price of the chip auto picks
    response = english.post("/instances/new/", {**form, "term_end_action": "continue"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert owner.instances.get().chip.slug == "dcu-z100"
