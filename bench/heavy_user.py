"""A user with a long history (SPEC §12: 1,000 instances and 10,000 ledger entries), and the pages they open.

The data goes through the product's own code wherever that decides what a row looks like: a handful of instances
are launched, run, stopped and released by ``instances.lifecycle`` on the simulated backend, and every charge is
posted by the real metering tick. The bulk of the history is then copied from those real instances (the same
fields, events and usage sessions, under new ids), because launching a thousand instances one by one would
measure the launch path, not the pages. ``make bench`` builds the full size; the tests build a small one and
assert that each page's query count does not grow with it.
"""

import logging
import math
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from accounts import services as console_services
from accounts.models import User
from billing import wallet
from billing.metering import meter
from billing.models import LedgerTransaction, UsageSession
from catalog import services as catalog_services
from catalog.models import Chip, Zone
from config.celery import app
from instances import launching, lifecycle
from instances.choices import TRANSITIONAL
from instances.models import Instance, InstanceEvent
from teams import accounts, context
from teams.models import Membership, Team
from teams.roles import Role

# The instances launched for real: (chip, image, what happens to it afterwards).
TEMPLATES = [
    ("ascend-910b", "pytorch-2.2-cann8", "running"),
    ("mlu370-x8", "pytorch-2.2-neuware", "running"),
    ("dcu-z100", "pytorch-2.2-dtk24", "stopped"),
    ("ascend-910b", "pytorch-2.2-cann8", "released"),
    ("a800-80g", "pytorch-2.2-cuda12", "stopped"),
    ("a800-80g", "pytorch-2.2-cuda12", "released"),
]

INSTANT = {
    "INSTANCES_SIM_PULL_SECONDS": 0,
    "INSTANCES_SIM_BOOT_SECONDS": 0,
    "INSTANCES_STOP_GRACE_SECONDS": 0,
    "INSTANCES_SPOT_NOTICE_SECONDS": 0,
}


@dataclass
class HeavyUser:
    user: User  # who owns the history: a person, or a team's account
    instances: int
    transactions: int
    running: Instance
    team: Team | None = None
    person: User | None = None  # who opens the pages: the user, or a member of the team (its owner)

    def pages(self) -> list[tuple[str, str]]:
        """(label, URL) of what this user opens: the console pages and the API lists behind them."""
        last_instances = math.ceil(Instance.objects.filter(owner=self.user).visible().count() / 50)
        last_transactions = math.ceil(self.transactions / 50)
        return [
            ("dashboard", reverse("console:dashboard")),
            ("instance list", reverse("instances:list")),
            ("instance list, last page", reverse("instances:list") + f"?page={last_instances}"),
            ("instance detail", reverse("instances:detail", args=[self.running.public_id])),
            ("instance panel", reverse("storage:instance-panel", args=[self.running.public_id])),
            ("wallet", reverse("billing:wallet")),
            ("transactions", reverse("billing:transactions")),
            ("transactions, last page", reverse("billing:transactions") + f"?page={last_transactions}"),
            ("statement", reverse("billing:statements")),
            ("cloud disks", reverse("storage:disks")),
            ("API: instances", "/api/v1/instances"),
            ("API: transactions", "/api/v1/transactions"),
            ("API: wallet", "/api/v1/wallet"),
        ] + ([("members' spending", reverse("billing:members"))] if self.team else [])

    def clients(self):
        """(page client, API client) for the person who opens the pages: a session, and for a team the team's
        context in it and a token issued for the team (the API takes the team from the token)."""
        person = self.person or self.user
        pages = Client()
        pages.force_login(person)
        if self.team is None:
            return pages, pages
        session = pages.session
        session[context.SESSION_KEY] = self.team.slug
        session.save()
        token = console_services.create_api_token(person, name="bench", scope="read", team=self.team).plaintext
        return pages, Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def open(self, clients, url: str) -> "PageRun":
        pages, api = clients
        return open_page(api if url.startswith("/api/") else pages, url)


# The most queries each page may run, whatever the user's history (asserted by the tests and by `make bench`).
QUERY_BUDGET = {
    "dashboard": 8,
    "instance list": 6,
    "instance list, last page": 6,
    "instance detail": 5,
    "instance panel": 8,  # the instance page's disks and mounts, loaded after it
    "wallet": 7,
    "transactions": 6,
    "transactions, last page": 6,
    "statement": 7,  # its lines name chips, zones and plans in the reader's language: one look at the price version
    "cloud disks": 8,
    "API: instances": 8,
    "API: transactions": 6,
    "API: wallet": 7,
}
# In a team's context a page reads the person's membership once more (the context), and the API authenticates a
# team's token and reads the membership behind it; the team's statement also sums the month per member. Nothing
# grows with the members or the history.
TEAM_QUERY_BUDGET = {label: budget + 1 for label, budget in QUERY_BUDGET.items()} | {
    "members' spending": 8,
    "statement": QUERY_BUDGET["statement"] + 2,
    # A team's instance names who launched it, and the actions follow the member's role in the team.
    "instance detail": QUERY_BUDGET["instance detail"] + 2,
    # The first look at the team's cloud storage in a process reads its index once, to compare it with the tree
    # the machines write (storage.tree.sync); later looks compare fingerprints and read nothing.
    "instance panel": QUERY_BUDGET["instance panel"] + 2,
}


def build(email: str, *, instances: int = 1000, transactions: int = 10_000, user=None) -> HeavyUser:
    """Create ``email`` (or take ``user``) with ``instances`` instances (2 running) and at least ``transactions``
    ledger transactions of their own (metering charges, top-ups and the trial credit)."""
    user = user or User.objects.create_user(email=email, password=None)
    wallet.adjust_balance(
        user=user, amount=Decimal("100000"), reason="bench funding", staff=None, idempotency_key=f"heavy-fund:{user.pk}"
    )
    _make_room()
    eager, app.conf.task_always_eager = app.conf.task_always_eager, True  # the tasks run here, in order
    trace = logging.getLogger("celery.app.trace")
    level, trace.level = trace.level, logging.WARNING  # not a line per eager task
    try:
        with override_settings(**INSTANT):
            templates = [_real_instance(user, chip, image, fate, n) for n, (chip, image, fate) in enumerate(TEMPLATES)]
    finally:
        app.conf.task_always_eager, trace.level = eager, level
    copies = _copy_history(user, [t for t in templates if t.status != "running"], instances - len(templates))
    _charge(user, copies, transactions)
    _vacuum()
    running = next(t for t in templates if t.status == "running")
    count = LedgerTransaction.objects.filter(user=user).count()
    return HeavyUser(
        user=user, instances=Instance.objects.filter(owner=user).count(), transactions=count, running=running
    )


def build_team(slug: str, *, members: int = 50, instances: int = 1000, transactions: int = 10_000) -> HeavyUser:
    """A team of ``members`` (its owner first) whose account has the long history of :func:`build`; the owner opens
    the pages in the team's context."""
    owner = User.objects.create_user(email=f"{slug}-owner@example.com", password=None)
    team = Team.objects.create(slug=slug, name=f"Team {slug}", created_by=owner, account=accounts.new_account())
    people = [owner] + User.objects.bulk_create(
        [User(email=f"{slug}-member-{n}@example.com") for n in range(1, members)], batch_size=500
    )
    Membership.objects.bulk_create(
        [Membership(team=team, user=p, role=Role.OWNER if p == owner else Role.DEVELOPER) for p in people]
    )
    history = build("", instances=instances, transactions=transactions, user=team.account)
    history.team, history.person = team, owner
    return history


def _vacuum() -> None:
    """On PostgreSQL, what autovacuum does within a minute of such a load on a live console: planner statistics
    (without them a user's listing was planned for a handful of rows: a bitmap scan and a sort of all 100,000) and
    the visibility map (counting a user's transactions reads only the index). Not inside a test's transaction,
    where VACUUM cannot run."""
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")


def _make_room() -> None:
    """A free node for every template chip, so the real launches never wait for capacity."""
    zone_of = {"ascend-910b": "cn-east-xc", "mlu370-x8": "cn-east-xc", "dcu-z100": "cn-east-xc"}
    for slug in {chip for chip, _image, _fate in TEMPLATES}:
        chip = Chip.objects.get(slug=slug)
        zone = Zone.objects.get(slug=zone_of[slug]) if slug in zone_of else chip.nodes.first().zone
        catalog_services.add_node(zone=zone, chip=chip, name=f"heavy-{slug}-{uuid.uuid4().hex[:6]}", cards=8)


def _settle(instance: Instance) -> Instance:
    for _round in range(20):
        instance = Instance.objects.with_related().get(pk=instance.pk)
        if instance.status not in TRANSITIONAL:
            return instance
        lifecycle.advance(instance.pk)
    raise RuntimeError(f"{instance} did not settle: {instance.status}")


def _real_instance(user, chip: str, image: str, fate: str, n: int) -> Instance:
    request = launching.LaunchRequest(name=f"train-{n}", chip=chip, image=image)
    instance = _settle(launching.launch(user, request))
    if fate in ("stopped", "released"):
        instance = _settle(lifecycle.stop(instance))
    if fate == "released":
        instance = _settle(lifecycle.release(instance))
    if instance.status != fate:
        raise RuntimeError(f"{instance} is {instance.status}, not {fate}")
    return instance


def _copy_history(user, templates: list[Instance], count: int) -> list[Instance]:
    """``count`` copies of the stopped and released templates: fields, events and usage sessions."""
    events = {t.pk: list(InstanceEvent.objects.filter(instance=t)) for t in templates}
    sessions = {t.public_id: UsageSession.objects.filter(resource_id=t.public_id).first() for t in templates}
    skip = {"id", "public_id", "name", "created_at", "updated_at"}
    fields = [f.attname for f in Instance._meta.concrete_fields if f.attname not in skip]
    pairs = []  # (copy, the template it copies)
    for i in range(count):
        template = templates[i % len(templates)]
        copy = Instance(**{name: getattr(template, name) for name in fields})
        copy.public_id, copy.name = uuid.uuid4(), f"{template.name}-{i}"
        pairs.append((copy, template))
    with transaction.atomic():
        Instance.objects.bulk_create([copy for copy, _template in pairs], batch_size=500)  # sets their primary keys
        InstanceEvent.objects.bulk_create(
            [
                InstanceEvent(
                    instance=copy, old=e.old, new=e.new, reason=e.reason, detail=e.detail, data=e.data, at=e.at
                )
                for copy, template in pairs
                for e in events[template.pk]
            ],
            batch_size=1000,
        )
        started = timezone.now() - timedelta(days=1)
        UsageSession.objects.bulk_create(
            [
                UsageSession(
                    user=user,
                    kind=s.kind,
                    resource_id=copy.public_id,
                    label=copy.name,
                    started_at=started,
                    charge_due_at=started,
                    plan_slug=s.plan_slug,
                    prepaid=s.prepaid,
                    chip_slug=s.chip_slug,
                    cards=s.cards,
                    zone_slug=s.zone_slug,
                    spot=s.spot,
                    list_per_hour=s.list_per_hour,
                    payable_per_hour=s.payable_per_hour,
                    subsidy_per_hour=s.subsidy_per_hour,
                    programme_id=s.programme_id,
                )
                for copy, template in pairs
                for s in [sessions[template.public_id]]
            ],
            batch_size=1000,
        )
    return [copy for copy, _template in pairs]


def _charge(user, copies: list[Instance], transactions: int) -> None:
    """Metering ticks a minute apart over the copies' sessions, each posting a minute of every session, until the
    user has ``transactions`` charges; then the sessions end (the copies are stopped or released)."""
    sessions = UsageSession.objects.filter(user=user, resource_id__in=[c.public_id for c in copies])
    started = sessions.values_list("started_at", flat=True).first()
    ticks = math.ceil(max(transactions - LedgerTransaction.objects.filter(user=user).count(), 0) / max(len(copies), 1))
    with override_settings(METERING_POSTING_MINUTES=1):
        for minute in range(1, ticks + 1):
            meter(started + timedelta(minutes=minute))
    sessions.update(ended_at=started + timedelta(minutes=ticks))


@dataclass
class PageRun:
    status: int
    queries: int
    seconds: float
    body: bytes


def open_page(client, url: str) -> PageRun:
    """GET ``url`` as the client's user (Chinese pages, as a new user sees them), counting queries and time."""

    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        response = client.get(url)
        seconds = time.perf_counter() - start
    return PageRun(response.status_code, len(queries.captured_queries), seconds, response.content)
