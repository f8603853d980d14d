"""Benchmarks of the jobs queue: many accounts' jobs over four chip families on a fixed number of cards."""

import logging
import os
import random
import statistics
import time
import uuid
from decimal import Decimal

from django.conf import settings
from django.db.models import F

from accounts.models import User
from bench import benchmark, size
from billing import price_version, wallet
from catalog import services as catalog_services
from catalog.models import Chip, Node, Zone
from config.celery import app
from instances import lifecycle
from instances.models import AccountLimit
from jobs import exits, running, services
from jobs.choices import State
from jobs.models import Job

JOBS, ACCOUNTS = size(1000, 120), size(100, 12)
CARDS_PER_FAMILY = 16  # two 8-card nodes of each family: 64 cards in all
# family → (chip, zone): NVIDIA cards are not offered in the Xinchuang zone.
FAMILIES = {
    "npu": ("ascend-910b", "cn-east-xc"),
    "mlu": ("mlu370-x8", "cn-east-xc"),
    "dcu": ("dcu-z100", "cn-east-xc"),
    "cuda": ("a800-80g", "cn-east-a"),
}
RUN_ROUNDS = (1, 6)  # each job runs for a whole number of rounds, drawn in this range


def _accounts(count: int) -> list:
    accounts = []
    for n in range(count):
        user = User.objects.create(email=f"bench-jobs-{uuid.uuid4().hex[:8]}-{n}@example.com")
        wallet.adjust_balance(
            user=user, amount=Decimal("100000"), reason="bench", staff=None, idempotency_key=f"bench:{uuid.uuid4()}"
        )
        AccountLimit.objects.update_or_create(account=user, defaults={"max_machines": 10_000, "max_cpu_only": 10_000})
        accounts.append(user)
    return accounts


def _only_fresh_nodes() -> tuple[list[int], list[int]]:
    """Drain every node and add two fresh 8-card nodes per family: (the drained ones, the fresh ones)."""
    drained = list(Node.objects.filter(drained=False).values_list("pk", flat=True))
    Node.objects.filter(pk__in=drained).update(drained=True)
    fresh = []
    for chip_slug, zone_slug in FAMILIES.values():
        chip, zone = Chip.objects.get(slug=chip_slug), Zone.objects.get(slug=zone_slug)
        for _n in range(CARDS_PER_FAMILY // 8):
            fresh.append(
                catalog_services.add_node(zone=zone, chip=chip, name=f"jobs-{uuid.uuid4().hex[:8]}", cards=8).pk
            )
    price_version.bump()  # an update() sends no signal; quotes must see where the chips are offered now
    return drained, fresh


@benchmark(f"Jobs: {JOBS:,} queued jobs from {ACCOUNTS} accounts over four families on {CARDS_PER_FAMILY * 4} cards")
def jobs_queue(report):
    """Every account submits its share of jobs at once, one family after another; then, round after round, what the
    beat does: jobs whose command ended (after 1–5 rounds, drawn) are released, and a placement pass starts queued
    jobs on the cards that freed. Measured: each placement pass, the waits in rounds per account (fairness), and a
    card freed → the next job placed. A node holding more cards than it has fails the benchmark."""
    timings = {
        "INSTANCES_SIM_PULL_SECONDS": "0",
        "INSTANCES_SIM_BOOT_SECONDS": "0",
        "INSTANCES_STOP_GRACE_SECONDS": "0",
    }
    kept = {name: os.environ.get(name) for name in timings}
    os.environ.update(timings)
    eager, mail, celery_level = app.conf.task_always_eager, settings.EMAIL_BACKEND, logging.getLogger("celery").level
    # Thousands of job notifications are sent in this process: kept in memory, and each task's log line left out.
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    logging.getLogger("celery").setLevel(logging.WARNING)
    drained, fresh = _only_fresh_nodes()
    try:
        _run(report)
    finally:
        app.conf.task_always_eager = eager
        for name, value in kept.items():  # the benchmarks after this one see the timings they had
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        settings.EMAIL_BACKEND = mail
        logging.getLogger("celery").setLevel(celery_level)
        app.control.purge()  # the placement requests the submissions queued: the rounds below did their work
        Node.objects.filter(pk__in=drained).update(drained=False)
        Node.objects.filter(pk__in=fresh).update(drained=True)
        price_version.bump()


def _run(report) -> None:
    draw = random.Random(7)
    accounts = _accounts(ACCOUNTS)
    families = list(FAMILIES)
    began = time.perf_counter()
    for n in range(JOBS):
        owner = accounts[n % ACCOUNTS]
        request = services.JobRequest(
            name=f"train-{n}",
            image="pytorch-2.2-cuda12",
            command="python train.py",
            backend=families[(n // ACCOUNTS) % len(families)],
        )
        services.submit(owner, request)
    submitted = time.perf_counter() - began
    app.conf.task_always_eager = True  # from here provisioning and release run in this process, as the worker would
    lengths: dict[int, int] = {}  # job id → rounds it runs
    placed_at: dict[int, int] = {}  # job id → the round it was placed in
    passes, frees = [], []
    placed = 0
    round_ = 0
    while Job.objects.filter(state__in=[State.QUEUED, State.STARTING, State.RUNNING]).exists():
        if round_ > JOBS:
            raise RuntimeError("the queue stopped moving")
        running.watch_active()
        lifecycle.reconcile()
        # Commands that have run their length end now; their machines are released by the next watch.
        ended = 0
        for job in Job.objects.filter(state=State.RUNNING).select_related("instance"):
            if round_ - placed_at[job.pk] >= lengths[job.pk]:
                exits.report_exit(job.instance, 0)
                ended += 1
        freed = time.perf_counter()
        running.watch_active()
        start = time.perf_counter()
        placed += running.place_queued()
        passes.append(time.perf_counter() - start)
        if ended:
            frees.append(time.perf_counter() - freed)
        for pk in Job.objects.exclude(state=State.QUEUED).exclude(pk__in=placed_at).values_list("pk", flat=True):
            placed_at[pk] = round_
            lengths[pk] = draw.randint(*RUN_ROUNDS)
        if Node.objects.filter(cards_reserved__gt=F("cards")).exists():
            raise RuntimeError(f"a node held more cards than it has in round {round_}")
        lifecycle.reconcile()
        round_ += 1
    succeeded = Job.objects.filter(state=State.SUCCEEDED).count()
    if succeeded != JOBS:
        others = list(Job.objects.exclude(state=State.SUCCEEDED).values_list("state", "detail")[:5])
        raise RuntimeError(f"{succeeded} of {JOBS} jobs succeeded; others: {others}")
    waits: dict[int, list[int]] = {}
    for pk, owner_id in Job.objects.values_list("pk", "owner_id"):
        waits.setdefault(owner_id, []).append(placed_at[pk])
    per_account = [statistics.mean(rounds) for rounds in waits.values()]
    mean = statistics.mean(per_account)
    report.add("submitted", submitted, unit="s", note=f"{JOBS:,} jobs through the submit service")
    # Here a pass also runs each new machine's (simulated) provisioning, which the worker does in a task of its own.
    report.add_latencies(
        "one placement pass", passes, note=f"{len(passes)} rounds; with the simulated provisioning of what it started"
    )
    report.add("placement per job started", sum(passes) / max(placed, 1) * 1000, unit="ms", note=f"{placed:,} started")
    report.add_latencies(
        "card freed → next job placed",
        frees,
        note=f"the watch that releases, then the placement pass; the beat runs every {settings.JOBS_TICK_SECONDS} s",
    )
    report.add(
        "longest mean wait of an account ÷ mean of all",
        max(per_account) / mean if mean else 1.0,
        unit="×",
        note=f"waits in rounds; mean {mean:.1f}, {round_} rounds; 1.0 is perfectly fair",
    )
    report.add("nodes oversold", 0, unit="", note="checked after every placement pass")
