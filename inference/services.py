"""Inference endpoints (SPEC §9): deploy an inference template as an instance of kind "endpoint", its API keys,
the request log, and scale to zero.

An endpoint is launched, metered (``billing`` usage of kind "endpoint"), stopped, started and released by the same
operations as any instance (``instances.launching``, ``instances.lifecycle``); this module adds only what an
endpoint has on top. The OpenAI-compatible proxy that clients call is ``inference.proxy``.
"""

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Avg, Count, Q, Sum
from django.db.models.functions import TruncMinute
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts import identity
from billing.quote import load_price_book
from core import keys
from core.chart_time import minute_label
from core.errors import Conflict, NotFound, ServiceError
from inference import template_catalog as inference
from instances import launching, lifecycle
from instances.backends import get_backend
from instances.choices import Reason, Status
from instances.models import Instance
from teams.access import refuse_if_seen

from .models import Endpoint, EndpointKey, EndpointRequest

KEY_PREFIX = "sk-"
MAX_KEYS_PER_ENDPOINT = 20
LAST_USED_RESOLUTION = timedelta(seconds=30)


def rate_limit_per_minute() -> int:
    """Requests a key may make per minute (``INFERENCE_RATE_LIMIT_PER_MINUTE``)."""
    return int(getattr(settings, "INFERENCE_RATE_LIMIT_PER_MINUTE", 120))


def get_endpoint(user, public_id, action: str = "view") -> Endpoint:
    """The caller's endpoint; someone else's and a missing one are the same 404."""
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        key = None
    endpoint = Endpoint.objects.for_user(user, action).with_related().filter(public_id=key).first() if key else None
    if endpoint is None:
        if key:  # a team member whose role may only see the endpoint is told so
            refuse_if_seen(user, Endpoint.objects.all(), action, field="instance__owner", public_id=key)
        raise NotFound(_("No such endpoint."))
    return endpoint


def endpoints_of(account):
    """One account's endpoints that are not released, newest first (a fixed number of queries): a person's, or a
    team's in its context."""
    return Endpoint.objects.filter(instance__owner=account).with_related().exclude(instance__status=Status.RELEASED)


# What a row of the endpoints page shows: the instance's name, status, chip and rate, the template's model and
# framework (the columns of the page's one query; the API's list reads the whole endpoint).
LIST_FIELDS = (
    "public_id",
    "instance__name",
    "instance__status",
    "instance__cards",
    "instance__price_per_hour",
    "instance__chip__name",
    "instance__chip__name_zh",
    "template__framework",
    "template__model__repo",
)


def endpoint_rows(account):
    """:func:`endpoints_of` as the endpoints page lists them, reading only what a row shows."""
    related = ("instance__chip", "template__model")
    return endpoints_of(account).select_related(None).select_related(*related).only(*LIST_FIELDS)


# Deploy ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeployRequest:
    template: str
    chip: str = ""  # empty: the cheapest compatible chip with free cards
    name: str = ""
    idle_stop_minutes: int | None = None


MIN_IDLE_MINUTES, MAX_IDLE_MINUTES = 5, 7 * 24 * 60


def check_idle(minutes) -> None:
    if minutes is None:
        return
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not MIN_IDLE_MINUTES <= minutes <= MAX_IDLE_MINUTES:
        raise ServiceError(
            _("Scale to zero after 5 to 10080 idle minutes, or leave it empty."), code="invalid_idle_minutes"
        )


def _chip_order(user, template, chip: str) -> list[str]:
    """The chips to try, in order: the one asked for, else the compatible ones cheapest first."""
    if not template.needs_a_card:
        if chip:
            raise ServiceError(
                _("This template runs on the CPU, in the no-card mode: leave the chip empty."), code="incompatible_chip"
            )
        return [""]  # the no-card mode
    compatible = inference.chips_of(template)
    if chip:
        if chip not in {c.slug for c in compatible}:
            names = ", ".join(c.slug for c in compatible) or "—"
            raise ServiceError(
                _("This template runs on %(chips)s, not on “%(chip)s”.") % {"chips": names, "chip": chip},
                code="incompatible_chip",
            )
        return [chip]
    offers = inference.offers(template, load_price_book(user=user), user=user, chips=compatible)
    return [o.chip.slug for o in offers if o.per_hour is not None]


def deploy(user, request: DeployRequest, *, by=None) -> Endpoint:
    """Launch ``request.template`` as an endpoint of ``user`` (a person, or a team's account with ``by`` the
    member deploying it, whose budget it spends): an instance of kind endpoint running the template's image
    variant with its model mounted read-only, and the endpoint row beside it. The same checks as any launch
    (balance, budget, capacity) apply; on a full chip the next cheapest compatible one is tried; a CPU-only template
    runs in the no-card mode. A template whose model needs a card is refused (``needs_a_card``) where the machines
    have none. An endpoint is a public API, so the operator may ask for real-name verification first."""
    identity.require(by or user, "endpoint", account=user)

    try:
        template = inference.get_template(request.template)
    except NotFound as exc:
        raise NotFound(exc.message, code="unknown_template") from exc
    check_idle(request.idle_stop_minutes)
    refusal = inference.card_refusal(template)
    if refusal:
        raise ServiceError(refusal, code="needs_a_card")
    chips = _chip_order(user, template, request.chip)
    if not chips:
        raise ServiceError(_("No compatible chip is offered for this template right now."), code="no_chip")
    name = (request.name or template.served_name)[:64]
    problem = None
    for chip in chips:
        launch = launching.LaunchRequest(
            name=name,
            image=template.variant.slug,
            chip=chip,
            no_card=not chip,
            cards=template.cards if chip else 0,
            mounts=(template.model.repo,),
        )
        try:
            with transaction.atomic():
                instance = launching.launch(user, launch, by=by)
                # Same transaction as the launch: the provisioning task (on commit) sees the kind, so metering
                # opens an "endpoint" usage session.
                Instance.objects.filter(pk=instance.pk).update(kind=Instance.Kind.ENDPOINT)
                instance.kind = Instance.Kind.ENDPOINT
                return Endpoint.objects.create(
                    instance=instance,
                    template=template,
                    served_model=template.served_name,
                    idle_stop_minutes=request.idle_stop_minutes,
                )
        except ServiceError as exc:
            if exc.status != 503 or len(chips) == 1:
                raise
            problem = exc  # out of capacity on this chip: try the next cheapest
    raise problem


def set_idle_stop(endpoint: Endpoint, minutes) -> Endpoint:
    check_idle(minutes)
    Endpoint.objects.filter(pk=endpoint.pk).update(idle_stop_minutes=minutes)
    endpoint.idle_stop_minutes = minutes
    return endpoint


# Keys --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IssuedKey:
    key: EndpointKey
    plaintext: str


def create_key(endpoint: Endpoint, *, name: str = "", by=None) -> IssuedKey:
    """Issue a key of ``endpoint`` (made by ``by``); the plaintext is returned once and never stored. A team
    member's keys are revoked when they leave the team or their role stops operating (:func:`revoke_keys_of`)."""
    name = (name or "").strip() or _("default")
    if len(name) > 64:
        raise ServiceError(_("The key name can be at most 64 characters."), code="name_too_long")
    if endpoint.instance.status == Status.RELEASED:
        raise Conflict(_("This endpoint is released."), code="released")
    if endpoint.keys.filter(revoked_at__isnull=True).count() >= MAX_KEYS_PER_ENDPOINT:
        raise ServiceError(
            _("An endpoint has at most %(n)d active keys; revoke one first.") % {"n": MAX_KEYS_PER_ENDPOINT},
            code="too_many_keys",
        )
    issued = keys.issue(
        lambda prefix, digest: EndpointKey.objects.create(
            endpoint=endpoint, name=name, prefix=prefix, key_hash=digest, created_by=by
        ),
        prefix=KEY_PREFIX,
        hex_bytes=5,
        separator=".",
    )
    if issued is not None:
        return IssuedKey(key=issued[0], plaintext=issued[1])
    raise ServiceError(_("Could not issue a key, please try again."), code="key_collision")


def revoke_key(endpoint: Endpoint, key_id) -> EndpointKey:
    try:
        public_id = uuid.UUID(str(key_id))
    except ValueError:
        public_id = None
    key = endpoint.keys.filter(public_id=public_id).first() if public_id else None
    if key is None:
        raise NotFound(_("No such key."))
    if key.revoked_at is None:
        EndpointKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        key.refresh_from_db(fields=["revoked_at"])
    return key


def authenticate_key(plaintext: str) -> EndpointKey | None:
    """The active key matching ``plaintext`` with its endpoint, or None. Looked up by prefix, compared in constant
    time. The key names its endpoint, so a key can never reach another endpoint."""
    prefix = (plaintext or "").split(".", 1)[0]
    if not prefix.startswith(KEY_PREFIX) or len(prefix) > 16:
        return None
    key = (
        EndpointKey.objects.select_related("endpoint__instance__owner", "endpoint__template")
        .filter(prefix=prefix)
        .first()
    )
    if key is None or not keys.matches(key.key_hash, plaintext):
        return None
    if key.revoked_at is not None or not key.endpoint.instance.owner.is_active:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        EndpointKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


def allow_request(key: EndpointKey) -> bool:
    """A fixed-window counter per key and minute in the cache; False once the key made its share this minute."""
    window = int(timezone.now().timestamp() // 60)
    name = f"inference:rate:{key.pk}:{window}"
    cache.add(name, 0, timeout=120)
    try:
        count = cache.incr(name)
    except ValueError:  # evicted between add and incr
        cache.set(name, 1, timeout=120)
        count = 1
    return count <= rate_limit_per_minute()


# Serving -----------------------------------------------------------------------------------------------------


def wake(endpoint: Endpoint) -> bool:
    """A request reached an endpoint that is not running: start it when it rests. True when it is on its way up.

    Raises nothing: a start that cannot happen now (no balance, no capacity) leaves it stopped and the caller
    answers 503 with the reason."""
    instance = endpoint.instance
    if instance.status in (Status.CREATING, Status.STARTING):
        return True
    if instance.status in (Status.STOPPED, Status.PREEMPTED, Status.FAILED):
        lifecycle.start(instance)
        return True
    return False


def upstream_base(endpoint: Endpoint) -> str:
    """Where the endpoint's model server answers (``…/v1``): the address the backend reported for the instance, or
    "" when it reported none. Never derived from a request."""
    return ((endpoint.instance.access or {}).get("inference_url") or "").rstrip("/")


@dataclass(frozen=True)
class Upstream:
    """Where a request to the endpoint's model server goes: ``base`` (``…/v1``), over ``socket`` when it is set."""

    base: str
    socket: str = ""


SOCKET_BASE = "http://model-server/v1"  # the host name is not used: the request goes over the socket


def upstream(endpoint: Endpoint) -> Upstream | None:
    """The endpoint's model server: a Unix socket on this host (the local backend's machines), else the address the
    backend reported; None when there is neither. Never derived from a request."""
    socket = get_backend(endpoint.instance.backend_name).model_socket(endpoint.instance)
    if socket:
        return Upstream(SOCKET_BASE, socket)
    base = upstream_base(endpoint)
    return Upstream(base) if base else None


def is_simulated(endpoint: Endpoint) -> bool:
    """Whether the endpoint runs on the simulated backend, whose model is answered inside the console."""
    return endpoint.instance.backend_name == "simulated" and not upstream_base(endpoint)


def touch(endpoint: Endpoint) -> None:
    """Remember the last request (scale to zero counts idle time from it); one write per 30 s at most."""
    now = timezone.now()
    if endpoint.last_request_at is None or now - endpoint.last_request_at > LAST_USED_RESOLUTION:
        Endpoint.objects.filter(pk=endpoint.pk).update(last_request_at=now)
        endpoint.last_request_at = now


def log_request(endpoint: Endpoint, key, *, path, status_code, latency_ms, usage=None, stream=False, at=None):
    """Append one row to the endpoint's request log. ``usage`` comes from the model server, which the endpoint's
    owner controls: token counts that are not whole numbers in range count as 0."""
    usage = usage if isinstance(usage, dict) else {}
    return EndpointRequest.objects.create(
        endpoint=endpoint,
        key=key,
        at=at or timezone.now(),
        path=path[:64],
        status_code=status_code,
        latency_ms=max(int(latency_ms), 0),
        prompt_tokens=_tokens(usage.get("prompt_tokens")),
        completion_tokens=_tokens(usage.get("completion_tokens")),
        stream=stream,
    )


MAX_TOKENS_LOGGED = 2**31 - 1


def _tokens(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS_LOGGED else 0


def recent_requests(endpoint: Endpoint, limit: int = 20):
    return list(endpoint.requests.select_related("key").order_by("-at", "-id")[:limit])


def request_chart(endpoint: Endpoint, minutes: int = 60) -> dict:
    """Requests, errors, mean latency and tokens per minute over the last ``minutes`` (one query)."""
    since = timezone.now() - timedelta(minutes=minutes)
    rows = (
        endpoint.requests.filter(at__gte=since)
        .annotate(minute=TruncMinute("at"))
        .values("minute")
        .annotate(
            requests=Count("id"),
            errors=Count("id", filter=~Q(status_code__range=(200, 299))),
            latency=Avg("latency_ms"),
            tokens=Sum("completion_tokens"),
        )
        .order_by("minute")
    )
    return {
        "labels": [minute_label(r["minute"]) for r in rows],
        "requests": [r["requests"] for r in rows],
        "errors": [r["errors"] for r in rows],
        "latency_ms": [round(r["latency"] or 0) for r in rows],
        "tokens": [r["tokens"] or 0 for r in rows],
    }


def totals(endpoint: Endpoint) -> dict:
    return endpoint.requests.aggregate(
        requests=Count("id"),
        ok=Count("id", filter=Q(status_code__range=(200, 299))),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
    )


# Scale to zero -----------------------------------------------------------------------------------------------


def scale_to_zero() -> int:
    """Stop running endpoints that had no request for their idle minutes (billing stops with the stop). The next
    request starts them again. Safe when two beats overlap: ``stop`` is a guarded transition."""
    now = timezone.now()
    stopped = 0
    due = Endpoint.objects.with_related().filter(instance__status=Status.RUNNING, idle_stop_minutes__isnull=False)
    for endpoint in due:
        instance = endpoint.instance
        last = max(filter(None, [endpoint.last_request_at, instance.running_since]), default=None)
        if last is None or last > now - timedelta(minutes=endpoint.idle_stop_minutes):
            continue
        detail = _("no requests for %(minutes)s minutes") % {"minutes": endpoint.idle_stop_minutes}
        try:
            lifecycle.stop(instance, reason=Reason.AUTO_SHUTDOWN_IDLE, detail=detail)
        except Conflict:
            continue
        stopped += 1
    return stopped


def revoke_keys_of(*, team, user, **_signal) -> int:
    """``user`` can no longer operate ``team``'s resources: the keys they made of its endpoints stop working now
    (the team's own keys, made by others, stay)."""
    return EndpointKey.objects.filter(
        created_by=user, endpoint__instance__owner_id=team.account_id, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())
