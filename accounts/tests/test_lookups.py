"""``field__among``: the same rows as ``field__in``, however the values are given, on either database."""

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from billing.ledger import user_accounts
from billing.models import Account


@pytest.fixture
def people(db):
    return [User.objects.create_user(email=f"among-{n}@example.com", password="x") for n in range(12)]


@pytest.mark.django_db
def test_among_finds_the_rows_in_finds_by_key_relation_uuid_and_text(people):

    chosen = people[1:11]
    ids = [u.pk for u in chosen]
    user_accounts([u.pk for u in people])
    assert set(User.objects.filter(pk__among=ids)) == set(chosen)
    assert set(Account.objects.filter(user_id__among=ids)) == set(Account.objects.filter(user_id__in=ids))
    assert set(Account.objects.filter(user__among=ids)) == set(Account.objects.filter(user__in=ids))
    assert Account.objects.filter(user_id__among=ids).count() == 2 * len(ids)
    assert set(User.objects.filter(email__among=[u.email for u in chosen])) == set(chosen)
    # Repeated values and None are ignored, as IN does; a model instance is its key; the values are read once
    assert User.objects.filter(pk__among=[*ids, *ids, None]).count() == len(ids)
    assert set(Account.objects.filter(user__among=chosen)) == set(Account.objects.filter(user__in=chosen))
    once = User.objects.filter(pk__among=(u.pk for u in chosen))
    assert once.count() == once.count() == len(chosen)
    # A subquery is a subquery; a key past the column's range matches nothing
    assert set(User.objects.filter(pk__among=User.objects.filter(pk__in=ids).values("pk"))) == set(chosen)
    assert User.objects.filter(pk__among=[ids[0], 2**70]).count() == 1


@pytest.mark.django_db
def test_among_nothing_matches_nothing_without_a_query_and_drops_out_of_an_or(people):
    with CaptureQueriesContext(connection) as queries:
        assert list(User.objects.filter(pk__among=[])) == []
    assert len(queries) == 0
    assert list(User.objects.filter(Q(pk__among=[]) | Q(pk=people[0].pk))) == [people[0]]
    assert not User.objects.filter(pk__among=[max(u.pk for u in people) + 1000]).exists()


@pytest.mark.django_db
def test_among_sends_one_array_on_postgresql(people):
    ids = [u.pk for u in people] + list(range(10**6, 10**6 + 2000))
    with CaptureQueriesContext(connection) as queries:
        assert User.objects.filter(pk__among=ids).count() == len(people)
    sql = queries[0]["sql"]
    if connection.vendor == "postgresql":
        assert "ANY(" in sql and " IN (" not in sql
    else:
        assert " IN (" in sql
