"""Billing benchmarks: the metering tick over 10,000 running instances (SPEC §12: < 5 s on 2 cores).

``BENCH_METERING_SESSIONS`` sets how many sessions the tick charges instead (``make bench`` runs PostgreSQL with
100,000: the tick must charge that many in under 10 s there); unset, the usual ``size()`` applies.

The first ticks post a minute of every session (``METERING_POSTING_MINUTES=1``: the most a tick can have to do),
then five more run at the default five-minute cadence once the sessions' postings have spread over the ticks, as a
live console's do.
"""

import os
import uuid
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.hashers import make_password
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from accounts.models import User
from bench import benchmark, size
from billing import ledger
from billing.choices import AccountKind, TransactionKind
from billing.metering import meter
from billing.models import UsageSession
from billing.quote import quote
from catalog.models import Chip

SESSIONS = int(os.environ.get("BENCH_METERING_SESSIONS") or size(10_000, 1_000))
PER_USER = 4


def _setup(started_at):
    """``SESSIONS / 4`` funded users (2,500 by default) with four running instances each, opened at ``started_at``."""
    password = make_password(None)
    User.objects.bulk_create(
        [User(email=f"bench-meter-{i}@example.com", password=password) for i in range(SESSIONS // PER_USER)],
        ignore_conflicts=True,
        batch_size=1000,
    )
    users = list(User.objects.filter(email__startswith="bench-meter-").values_list("pk", flat=True))
    accounts = ledger.user_accounts(users)
    adjustments = ledger.system_account(AccountKind.ADJUSTMENTS)
    with transaction.atomic():
        ledger.post_batch(
            [
                ledger.Posting(
                    kind=TransactionKind.ADJUSTMENT,
                    idempotency_key=f"bench-fund:{uid}:{uuid.uuid4()}",
                    entries=(
                        (adjustments.pk, Decimal("-1000")),
                        (accounts[uid][AccountKind.USER_CASH].pk, Decimal("1000")),
                    ),
                    user_id=uid,
                )
                for uid in users
            ]
        )
    chips = [Chip.objects.get(slug=slug) for slug in ("mlu370-x8", "a100-80g")]  # subsidised and not
    quotes = [quote(chip=chip, cards=cards) for chip in chips for cards in (1, 8)]
    UsageSession.objects.bulk_create(
        [
            UsageSession(
                user_id=users[i // PER_USER],
                kind="instance",
                resource_id=uuid.uuid4(),
                label=f"bench-{i}",
                started_at=started_at,
                charge_due_at=started_at,
                plan_slug="payg",
                chip_slug=q.chip_slug,
                cards=q.cards,
                zone_slug=q.zone_slug,
                list_per_hour=q.list_per_hour,
                payable_per_hour=q.payable_per_hour,
                subsidy_per_hour=q.subsidy_per_hour,
                programme_id=q.programme.id if q.programme else None,
            )
            for i in range(SESSIONS)
            for q in [quotes[i % len(quotes)]]
        ],
        batch_size=1000,
    )
    if connection.vendor == "postgresql":
        # What autovacuum does within a minute of such a load, and what a live console's tables always have:
        # planner statistics. Without them the tick's first queries are planned for an empty table.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE billing_usagesession, billing_account, console_user")


@benchmark(f"Metering tick (meter), {SESSIONS:,} running instances")
def metering_tick(report):
    started = timezone.now() - timedelta(hours=1)
    _setup(started)
    with override_settings(METERING_POSTING_MINUTES=1):
        for label, minutes in [("first tick (every session charged)", 61), ("next tick (one minute more)", 62)]:
            with report.timer() as t:
                result = meter(started + timedelta(minutes=minutes, seconds=5))
            report.add(label, t.seconds, unit="s", note=f"{result.charged:,} sessions charged")
        with report.timer() as t:
            result = meter(started + timedelta(minutes=62, seconds=30))
    report.add("tick with nothing new due", t.seconds, unit="s", note=f"{result.sessions:,} sessions read")
    _five_minute_cadence(report, started)
    problems = ledger.check()
    report.add("check_ledger problems after the ticks", len(problems), unit="")


def _five_minute_cadence(report, started):
    """Every session posted every five minutes: one tick spreads them (each is due as the next minute of its phase),
    then five ticks each post about a fifth of them."""
    with override_settings(METERING_POSTING_MINUTES=5):
        meter(started + timedelta(minutes=63, seconds=5))
        times, charged = [], 0
        for minute in range(64, 69):
            with report.timer() as t:
                charged += meter(started + timedelta(minutes=minute, seconds=5)).charged
            times.append(t.seconds)
    note = f"slowest of 5 ticks; {charged / 5:,.0f} sessions charged a tick, mean {sum(times) / 5:.1f} s"
    report.add("tick posting every 5 minutes (METERING_POSTING_MINUTES=5)", max(times), unit="s", note=note)
