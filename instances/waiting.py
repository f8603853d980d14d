"""Launches that wait for a card: a launch that asked to wait and found no card free joins the console's one queue
(``instances.queue``), the placement pass launches it as it was asked when a card of its kind frees, and its owner
is told. It leaves the queue when cancelled or when the balance can no longer pay its first hour, saying so.

Every change of state is a compare-and-set on the waiting row, which the placement pass also locks with
``SELECT … FOR UPDATE SKIP LOCKED`` (on SQLite, which has no row locks, the compare-and-set alone), so two passes
never launch one entry twice."""

import dataclasses
import logging
import uuid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Max
from django.utils import timezone, translation
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from billing import arrears
from billing.choices import NotificationKind
from catalog.choices import Backend
from catalog.models import Chip, Node
from core.errors import Conflict, NotFound, PaymentRequired, ServiceError
from teams.access import reaches, refuse_if_seen
from teams.models import TeamEvent
from teams.services import record

from . import charges, choosing, launching
from .capacity import COMPUTE_SHORTAGE, CapacityError
from .models import Instance, WaitingLaunch
from .queue import LEFT, NO_ROOM, PLACED

logger = logging.getLogger(__name__)
User = get_user_model()


def launch_or_wait(user, request: launching.LaunchRequest, *, by=None, wait: bool = False):
    """Launch now (an ``Instance``; ``auto`` picks the chip cheapest per unit of work first); with ``wait``, a
    launch that finds no card free waits in the queue instead (a ``WaitingLaunch``). Every other refusal (bad
    input, the balance) is raised as for a launch."""
    request = choosing.resolve(user, request)
    try:
        return launching.launch(user, request, by=by)
    except CapacityError as exc:
        if not wait or exc.code in COMPUTE_SHORTAGE or request.no_card:
            raise
        _refuse_if_it_never_fits(request)
        return _join(user, request, by or user, exc)


def _refuse_if_it_never_fits(request: launching.LaunchRequest) -> None:
    """A launch that no node could ever take, free or not (no node of its chip or family where it asked, or none
    with that many cards), is refused instead of waiting for ever. A drained node counts: it takes machines again
    when the operator brings it back."""
    nodes = Node.objects.filter(zone__active=True)
    if request.chip:
        nodes = nodes.filter(chip__slug=request.chip)
        what = Chip.objects.filter(slug=request.chip).first()
        what = what.label if what else request.chip
    else:
        nodes = nodes.filter(chip__backend=request.backend)
        what = Backend(request.backend).label if request.backend in Backend.values else request.backend
    if request.zone:
        nodes = nodes.filter(zone__slug=request.zone)
    most = nodes.aggregate(most=Max("cards"))["most"]
    if most is None:
        message = _(
            "No node offers %(what)s where you asked, so this launch would wait for ever. Choose another chip or zone."
        ) % {"what": what}
    elif most < request.cards:
        message = _(
            "No node holds %(cards)s cards of %(what)s together where you asked (the most on one node is "
            "%(most)s), so this launch would wait for ever. Ask for %(most)s cards or fewer, or choose another chip "
            "or zone."
        ) % {"cards": request.cards, "what": what, "most": most}
    else:
        return
    raise ServiceError(message, code="never_fits")


def _join(user, request: launching.LaunchRequest, by, exc: CapacityError) -> WaitingLaunch:
    chip = Chip.objects.filter(slug=request.chip).first() if request.chip else None
    return WaitingLaunch.objects.create(
        owner=user,
        launched_by=by,
        name=request.name,
        request=_as_data(request),
        chip=chip,
        family=chip.backend if chip else request.backend,
        cards=request.cards,
        spot=request.spot,
        detail=exc.message[:255],
        queued_at=timezone.now(),
    )


def _as_data(request: launching.LaunchRequest) -> dict:
    data = dataclasses.asdict(request)
    data["auto_shutdown_at"] = request.auto_shutdown_at.isoformat() if request.auto_shutdown_at else None
    data["mounts"] = list(request.mounts) if not isinstance(request.mounts, str) else request.mounts
    data["secrets"] = list(request.secrets)
    return data


def _as_request(data: dict) -> launching.LaunchRequest:
    fields = {field.name for field in dataclasses.fields(launching.LaunchRequest)}
    data = {name: value for name, value in data.items() if name in fields}
    if data.get("auto_shutdown_at"):
        data["auto_shutdown_at"] = parse_datetime(data["auto_shutdown_at"])
    return launching.LaunchRequest(**data)


def place(pk: int) -> str:
    """Launch the waiting entry ``pk`` if a card of its kind is free: PLACED; NO_ROOM when none is free anywhere;
    LEFT otherwise (it still waits for cards free only where this account may not launch, it left the queue, or
    another pass holds it)."""
    with transaction.atomic():
        waiting = (
            WaitingLaunch.objects.select_for_update(skip_locked=True)
            .filter(pk=pk, state=WaitingLaunch.State.WAITING)
            .first()
        )
        if waiting is None:
            return LEFT
        with translation.override(language_of(waiting.launched_by_id or waiting.owner_id)):
            try:
                with transaction.atomic():
                    instance = launching.launch(waiting.owner, _as_request(waiting.request), by=waiting.launched_by)
            except CapacityError as exc:
                _note(waiting, exc.message)
                # Cards of its kind free somewhere it cannot go (another zone than the one it named, a zone this
                # account may not launch in): a launch behind it may still fit there.
                free_elsewhere = any(
                    of_its_kind(free.chip, waiting.chip_id, waiting.family) and free.largest >= waiting.cards
                    for free in exc.alternatives
                )
                return LEFT if free_elsewhere else NO_ROOM
            except ServiceError as exc:
                leave(waiting, _("It cannot start: %(why)s") % {"why": exc.message}, notify=True)
                return LEFT
        _started(waiting, instance)
    return PLACED


def language_of(person_id: int) -> str:
    """The language the person chose to read the console in: what a pass writes for them (why their launch or job
    waits, left the queue, ended) is written in it, whichever process writes it. Until they choose one, the
    process's own (a worker's is the console's default)."""
    return reading_language(User.objects.filter(pk=person_id).values_list("language", flat=True).first())


def reading_language(chosen: str | None) -> str:
    """:func:`language_of` for a person's ``language`` field already read."""
    try:
        return translation.get_supported_language_variant(chosen or translation.get_language() or "")
    except LookupError:
        return settings.LANGUAGE_CODE


def of_its_kind(chip, chip_id: int | None, family: str) -> bool:
    """Whether ``chip`` is what a launch or a job asked for: ``chip_id``, or without one, any chip of ``family``."""
    return chip.pk == chip_id if chip_id else chip.backend == family


def leave_if_unaffordable(pk: int) -> bool:
    """For a waiting launch that was not tried in a pass (no card of its kind was free): take it out of the queue,
    saying so, when the balance can no longer pay its first hour. Returns whether it left."""
    with transaction.atomic():
        waiting = (
            WaitingLaunch.objects.select_for_update(skip_locked=True)
            .filter(pk=pk, state=WaitingLaunch.State.WAITING)
            .first()
        )
        if waiting is None:
            return False
        with translation.override(language_of(waiting.launched_by_id or waiting.owner_id)):
            try:
                request = _as_request(waiting.request)
                quote = launching.preview(waiting.owner, request, by=waiting.launched_by)
                extra = launching.data_disk_per_hour(request)
                charges.check_launch_funds(waiting.owner, quote, by=waiting.launched_by_id, extra_per_hour=extra)
            except PaymentRequired as exc:
                leave(waiting, _("It cannot start: %(why)s") % {"why": exc.message}, notify=True)
                return True
            except ServiceError:
                return False  # anything else is for its turn to say
    return False


def _note(waiting: WaitingLaunch, detail: str) -> None:
    if waiting.detail != detail[:255]:
        WaitingLaunch.objects.filter(pk=waiting.pk, state=waiting.state).update(detail=detail[:255])


def _started(waiting: WaitingLaunch, instance: Instance) -> None:
    moved = WaitingLaunch.objects.filter(pk=waiting.pk, state=WaitingLaunch.State.WAITING).update(
        state=WaitingLaunch.State.STARTED, instance=instance, ended_at=timezone.now(), detail=""
    )
    if not moved:  # cancelled meanwhile: the launch is rolled back with this transaction
        raise Conflict(_("The waiting launch changed meanwhile; try again."), code="concurrent_change")
    # A team's audit log names who launched it, as for a launch that found a card at once.
    if waiting.launched_by is not None:
        record(instance, waiting.launched_by, TeamEvent.Action.LAUNCHED, subject=instance.name)
    arrears.notify(
        waiting.owner_id,
        NotificationKind.QUEUE_STARTED,
        name=instance.name,
        instance=str(instance.public_id),
        waited=int((timezone.now() - waiting.queued_at).total_seconds()),
    )


def leave(waiting: WaitingLaunch, detail: str, *, notify: bool = False) -> WaitingLaunch:
    """Take ``waiting`` out of the queue (cancelled by its owner, or refused at its turn: ``notify`` tells the
    owner why). Conflict when it no longer waits."""
    now = timezone.now()
    moved = WaitingLaunch.objects.filter(pk=waiting.pk, state=WaitingLaunch.State.WAITING).update(
        state=WaitingLaunch.State.LEFT, detail=detail[:255], ended_at=now
    )
    if not moved:
        raise Conflict(_("This launch is no longer waiting for a card."), code="invalid_transition")
    waiting.state, waiting.detail, waiting.ended_at = WaitingLaunch.State.LEFT, detail[:255], now
    if notify:
        arrears.notify(waiting.owner_id, NotificationKind.QUEUE_LEFT, name=waiting.name, why=detail)
    return waiting


def cancel(waiting: WaitingLaunch) -> WaitingLaunch:
    return leave(waiting, _("Cancelled"))


def get_waiting(user, public_id, action: str = "view") -> WaitingLaunch:
    """The caller's waiting launch (or their team's); a missing one and someone else's are the same 404, and a
    teammate whose role may see it but not act on it gets a 403."""
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        key = None
    waiting = WaitingLaunch.objects.select_related("chip", "instance").filter(public_id=key).first() if key else None
    if waiting is not None and not reaches(user, waiting.owner_id, action):
        waiting = None
    if waiting is None:
        if key:
            refuse_if_seen(user, WaitingLaunch.objects.all(), action, public_id=key)
        raise NotFound(_("No such waiting launch."))
    return waiting
