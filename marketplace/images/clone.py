"""One-click clone: run an image on the cheapest compatible chip with free cards.

One decision (:func:`clone_placement`) serves both ways in: the image page's button opens the launch wizard prefilled
with it (:func:`launch_url`), and the API launches it straight away (:func:`clone_and_launch`).
"""

from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.translation import gettext as _

from billing.quote import load_price_book
from core.errors import ServiceError
from instances.launching import LaunchRequest, launch
from instances.models import Instance

from ..models import Image
from .services import ChipOffer, chip_offers, get_image, team_private


def clone_offer(offers: list[ChipOffer]) -> ChipOffer | None:
    """Where a one-click clone lands: the cheapest priced chip with free cards, else the cheapest priced one."""
    priced = [o for o in offers if o.per_card_hour is not None]
    if not priced:
        return None
    return min(priced, key=lambda o: (o.free_cards == 0, o.per_card_hour, o.chip.sort_order))


@dataclass(frozen=True)
class ClonePlacement:
    """Where a clone boots: the image's variant on the clone offer's chip with one card, or, for an image that runs
    on no offered chip, its CPU-only variant in no-card mode (``chip`` empty)."""

    variant: str
    chip: str = ""

    @property
    def no_card(self) -> bool:
        return not self.chip

    @property
    def cards(self) -> int:
        return 0 if self.no_card else 1


def clone_placement(image: Image, offers: list[ChipOffer]) -> ClonePlacement | None:
    """The clone offer's chip (:func:`clone_offer`), else the CPU-only variant; None when the image runs nowhere yet."""
    offer = clone_offer(offers)
    if offer is not None:
        return ClonePlacement(offer.variant.slug, offer.chip.slug)
    cpu = next((v for v in image.variants.all() if v.is_cpu_only), None)
    return ClonePlacement(cpu.slug) if cpu is not None else None


def clone_name(image: Image) -> str:
    """The name a clone's instance gets unless the user gives one."""
    return image.slug[:56]


def launch_url(image: Image, offers: list[ChipOffer]) -> str | None:
    """The launch wizard prefilled with the image and the clone's chip (the no-card mode for a CPU-only image)."""
    placement = clone_placement(image, offers)
    if placement is None:
        return None
    params = {"cards": "1", "plan": "payg", "term_end_action": "continue", "name": clone_name(image)}
    if placement.no_card:
        params |= {"no_card": "on", "cards": "0", "image": placement.variant}
    else:
        params |= {"chip": placement.chip, "image": placement.variant}
    return f"{reverse('instances:launch')}?{urlencode(params)}"


def clone_and_launch(user, image_key, *, name: str = "", start_command: str = "", env=None, secrets=()) -> Instance:
    """Launch the image ``image_key`` that ``user`` may see, pay-as-you-go where :func:`clone_placement` puts it,
    named ``name`` (or after the image), booting with ``start_command``, the variables ``env`` and the user's
    ``secrets`` (names) as any launch does. The launch checks them and the balance, reserves the cards and counts
    the launch in the image's usage.

    A team's private image launches in the team: the team owns and pays for the instance, out of ``user``'s budget, and
    only a role that may operate the team's things may launch it (Forbidden otherwise).

    Raises NotFound for an image the user may not see, ServiceError (``not_offered``) when no chip it runs on is
    offered, and what the launch raises: PaymentRequired, CapacityError naming where cards are free."""
    image = get_image(user, image_key)
    account, by = user, None
    if team_private(user, image):
        image = get_image(user, image_key, action="change")
        account, by = image.owner, user
    placement = clone_placement(image, chip_offers(image, load_price_book(user=account, person=user)))
    if placement is None:
        raise ServiceError(_("No chip this image runs on is offered yet."), code="not_offered")
    request = LaunchRequest(
        name=name or clone_name(image),
        image=placement.variant,
        chip=placement.chip,
        no_card=placement.no_card,
        cards=placement.cards,
        start_command=start_command,
        env=env,
        secrets=secrets,
    )
    return launch(account, request, by=by)
