"""SPEC §12: pages stay fast for a user with a long history. `make bench` measures p95 for 1,000 instances and
10,000 ledger entries; here the same pages are opened for a short and a longer history, and each must answer with
the same few queries, within the budget the benchmark also enforces."""

import json
import math

import pytest
from django.test import Client

from bench import heavy_user

pytestmark = pytest.mark.django_db


def _visit(history: heavy_user.HeavyUser) -> dict[str, heavy_user.PageRun]:
    client = Client()
    client.force_login(history.user)
    return {label: heavy_user.open_page(client, url) for label, url in history.pages()}


def test_every_page_runs_the_same_few_queries_however_long_the_history(catalog):
    short = heavy_user.build("short@example.com", instances=8, transactions=20)
    long = heavy_user.build("long@example.com", instances=130, transactions=600)
    assert long.instances == 130 and long.transactions >= 600

    few, many = _visit(short), _visit(long)
    assert set(few) == set(heavy_user.QUERY_BUDGET)
    for label, run in many.items():
        assert run.status == 200, (label, run.body[:300])
        assert run.queries <= few[label].queries, f"{label}: {few[label].queries} queries grew to {run.queries}"
        assert run.queries <= heavy_user.QUERY_BUDGET[label], f"{label}: {run.queries} queries"


def test_the_long_history_is_what_the_pages_show(catalog):
    history = heavy_user.build("history@example.com", instances=70, transactions=160)
    runs = _visit(history)
    # 70 instances: 2 running, 2 stopped and 2 released for real, and 64 copies of the stopped and released ones;
    # released instances leave the list, so it shows 2 + 2 + 32 on its first page of 50
    assert runs["instance list"].body.decode().count("data-instance=") == 36
    assert runs["instance detail"].body.decode().count(str(history.running.public_id)) >= 1
    # every transaction is on a page: 50 a page, the rest on the last one
    remainder = history.transactions - 50 * (math.ceil(history.transactions / 50) - 1)
    assert runs["transactions, last page"].body.decode().count('<td class="text-nowrap">') == remainder
    api = json.loads(runs["API: transactions"].body)
    assert api["count"] == history.transactions and len(api["results"]) == 50


def test_a_teams_pages_run_one_query_more_in_its_context_however_many_members_and_instances(catalog):
    small = heavy_user.build_team("small-lab", members=3, instances=8, transactions=20)
    large = heavy_user.build_team("large-lab", members=50, instances=130, transactions=600)
    few, many = _visit_team(small), _visit_team(large)
    assert set(few) == set(heavy_user.TEAM_QUERY_BUDGET)
    for label, run in many.items():
        assert run.status == 200, (label, run.body[:300])
        assert run.queries <= few[label].queries, f"{label}: {few[label].queries} queries grew to {run.queries}"
        assert run.queries <= heavy_user.TEAM_QUERY_BUDGET[label], f"{label}: {run.queries} queries"
    # The pages are the team's: its instances, its wallet, its members.
    assert many["instance list"].body.decode().count("data-instance=") == 50
    assert many["members' spending"].body.decode().count('id="spend-') == 50
    assert json.loads(many["API: instances"].body)["count"] > 50


def _visit_team(history: heavy_user.HeavyUser) -> dict[str, heavy_user.PageRun]:
    clients = history.clients()
    return {label: history.open(clients, url) for label, url in history.pages()}
