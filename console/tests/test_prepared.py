"""Queries built once per database: the rows each call's arguments give, the session and the user read that way."""

import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.core.paginator import Paginator
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing import ledger
from billing.choices import AccountKind
from billing.models import Account, UsageSession
from console.models import User
from console.prepared import Prepared

pytestmark = pytest.mark.django_db


def _session(user, label, started_at, per_hour="1.25"):
    return UsageSession.objects.create(
        user=user,
        kind="instance",
        resource_id=uuid.uuid4(),
        label=label,
        started_at=started_at,
        plan_slug="payg",
        chip_slug="mlu370-x8",
        cards=1,
        zone_slug="cn-east",
        list_per_hour=Decimal(per_hour),
        payable_per_hour=Decimal(per_hour),
        subsidy_per_hour=Decimal("0"),
    )


def test_each_call_gives_the_rows_its_own_arguments_give_with_the_values_converted():
    ada = User.objects.create_user("ada@example.com")
    bob = User.objects.create_user("bob@example.com")
    t0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    _session(ada, "early", t0)
    _session(ada, "late", t0 + timedelta(hours=2), per_hour="3.50")
    _session(bob, "bob's", t0 + timedelta(hours=1))
    since = Prepared(
        lambda user_id, after: (
            UsageSession.objects.filter(user_id=user_id, started_at__gte=after)
            .select_related("user")
            .order_by("started_at")
        ),
        int,
        datetime,
    )
    assert [(s.label, s.user.email) for s in since(ada.pk, t0)] == [
        ("early", "ada@example.com"),
        ("late", "ada@example.com"),
    ]
    late = since(ada.pk, t0 + timedelta(minutes=1))
    assert [s.label for s in late] == ["late"]
    assert late[0].payable_per_hour == Decimal("3.50") and late[0].started_at == t0 + timedelta(hours=2)
    assert isinstance(late[0].resource_id, uuid.UUID)
    assert [s.label for s in since(bob.pk, t0)] == ["bob's"]
    # The same queryset run by Django gives the same rows: what it builds is the queryset's own SQL.
    mine = UsageSession.objects.filter(user_id=ada.pk, started_at__gte=t0).order_by("started_at")
    assert [(s.pk, s.charged, s.started_at) for s in since(ada.pk, t0)] == [
        (s.pk, s.charged, s.started_at) for s in mine
    ]


def test_values_and_values_list_rows_and_a_uuid_or_text_argument():
    ada = User.objects.create_user("ada@example.com")
    session = _session(ada, "one", timezone.now())
    by_resource = Prepared(lambda rid: UsageSession.objects.filter(resource_id=rid).values("label", "cards"), uuid.UUID)
    assert by_resource(session.resource_id) == [{"label": "one", "cards": 1}]
    assert by_resource(uuid.uuid4()) == []
    by_label = Prepared(
        lambda label: UsageSession.objects.filter(label=label).values_list("user__email", flat=True), str
    )
    assert by_label("one") == ["ada@example.com"] and by_label("two") == []


def test_a_change_in_the_database_shows_on_the_next_call():
    ada = User.objects.create_user("ada@example.com")
    accounts = ledger.user_accounts([ada.pk])[ada.pk]
    balance = Prepared(lambda pk: Account.objects.filter(pk=pk).values_list("balance", flat=True), int)
    cash = accounts[AccountKind.USER_CASH].pk
    assert balance(cash) == [Decimal("0.00")]
    Account.objects.filter(pk=cash).update(balance=Decimal("12.34"))
    assert balance(cash) == [Decimal("12.34")]


def test_prefetched_relations_are_read_as_the_queryset_would():
    ada = User.objects.create_user("ada@example.com")
    _session(ada, "a", timezone.now())
    _session(ada, "b", timezone.now())
    users = Prepared(lambda pk: User.objects.filter(pk=pk).prefetch_related("usage_sessions"), int)
    (user,) = users(ada.pk)
    with CaptureQueriesContext(connection) as read:
        labels = sorted(s.label for s in user.usage_sessions.all())
    assert labels == ["a", "b"] and len(read.captured_queries) == 0


def test_an_argument_that_does_not_reach_the_sql_as_a_parameter_is_refused_on_the_first_call():
    contains = Prepared(lambda text: User.objects.filter(email__contains=text), str)
    with pytest.raises(ImproperlyConfigured, match="do not reach"):
        contains("ada")
    with pytest.raises(TypeError, match="takes 1 arguments"):
        Prepared(lambda pk: User.objects.filter(pk=pk), int)(1, 2)
    with pytest.raises(ImproperlyConfigured):
        Prepared(lambda amount: User.objects.all(), Decimal)


def test_a_user_read_by_primary_key_is_current_and_a_missing_one_is_an_error():
    ada = User.objects.create_user("ada@example.com")
    assert User.objects.get(pk=ada.pk).email == "ada@example.com"
    User.objects.filter(pk=ada.pk).update(first_name="Ada")
    assert User.objects.get(pk=str(ada.pk)).first_name == "Ada"
    with pytest.raises(User.DoesNotExist):
        User.objects.get(pk=ada.pk + 1000)
    with pytest.raises(ValueError):
        User.objects.get(pk="not-a-number")  # as Django's own look-up
    assert User.objects.get(email="ada@example.com").pk == ada.pk


def test_a_signed_in_person_stays_signed_in_until_the_session_expires_or_they_are_deactivated(client):
    ada = User.objects.create_user("ada@example.com")
    client.force_login(ada)
    assert client.get("/instances/").status_code == 200
    key = client.cookies["sessionid"].value
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    caches[settings.SESSION_CACHE_ALIAS].clear()  # a cached copy (cached_db) expires with the session: its timeout
    gone = client.get("/instances/")
    assert gone.status_code == 302 and "/accounts/login/" in gone["Location"]
    client.force_login(ada)
    assert client.get("/instances/").status_code == 200
    User.objects.filter(pk=ada.pk).update(is_active=False)
    assert client.get("/instances/").status_code == 302


def test_a_window_and_a_count_are_the_querysets_slice_and_count():
    ada = User.objects.create_user("ada@example.com")
    t0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    for n in range(7):
        _session(ada, f"s{n}", t0 + timedelta(minutes=n))
    mine = Prepared(lambda user_id: UsageSession.objects.filter(user_id=user_id).order_by("-started_at"), int)
    labels = [s.label for s in UsageSession.objects.filter(user_id=ada.pk).order_by("-started_at")]
    for offset in range(9):
        for limit in range(0, 4):
            window = mine.window(ada.pk, offset=offset, limit=limit)
            assert [s.label for s in window] == labels[offset : offset + limit]
    assert mine.count(ada.pk) == 7 and mine.count(ada.pk + 1000) == 0
    with pytest.raises(ImproperlyConfigured, match="plain"):
        Prepared(lambda user_id: UsageSession.objects.filter(user_id=user_id).distinct(), int).count(ada.pk)
    with pytest.raises(ImproperlyConfigured, match="not sliced"):
        Prepared(lambda user_id: UsageSession.objects.filter(user_id=user_id)[:3], int).window(
            ada.pk, offset=0, limit=2
        )


def test_a_date_argument_and_a_paginator_over_the_bound_rows():
    ada = User.objects.create_user("ada@example.com")
    t0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    for n in range(5):
        _session(ada, f"s{n}", t0 + timedelta(days=n))
    since = Prepared(
        lambda user_id, day: (
            UsageSession.objects.filter(user_id=user_id, started_at__date__gte=day)
            .order_by("started_at")
            .values_list("label", flat=True)
        ),
        int,
        date,
    )
    assert since(ada.pk, date(2026, 11, 3)) == ["s2", "s3", "s4"]
    pages = Paginator(since.bind(ada.pk, date(2026, 11, 2)), 3)
    assert pages.count == 4 and list(pages.page(1)) == ["s1", "s2", "s3"] and list(pages.page(2)) == ["s4"]


def test_a_users_wildcards_and_out_of_range_keys_match_nothing_they_would_not_in_django():
    User.objects.create_user("ada@example.com")
    iexact = Prepared(lambda email: User.objects.filter(email__iexact=email), str)
    if connection.vendor == "sqlite":  # a LIKE pattern there, its argument escaped: refused, never a wildcard
        with pytest.raises(ImproperlyConfigured):
            iexact("%")
    else:
        assert iexact("%") == [] and iexact("ADA@example.com")[0].email == "ada@example.com"
    by_pk = Prepared(lambda pk: User.objects.filter(pk=pk), int)
    assert by_pk(2**70) == [] and by_pk.count(-(2**70)) == 0
    with pytest.raises(User.DoesNotExist):
        User.objects.get(pk=2**70)


def test_a_date_lookup_is_built_for_the_current_time_zone():
    from django.utils import timezone as tz

    ada = User.objects.create_user("ada@example.com")
    _session(ada, "late", datetime(2026, 11, 1, 20, 0, tzinfo=UTC))  # 2 November in Shanghai
    on_day = Prepared(
        lambda day: UsageSession.objects.filter(started_at__date=day).values_list("label", flat=True), date
    )
    with tz.override("UTC"):
        assert on_day(date(2026, 11, 1)) == ["late"]
    with tz.override("Asia/Shanghai"):
        assert on_day(date(2026, 11, 1)) == [] and on_day(date(2026, 11, 2)) == ["late"]
