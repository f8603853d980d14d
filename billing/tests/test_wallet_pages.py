"""The wallet pages and API: balances, top-up, transactions (filters, pages, CSV), statements, the cap."""

import uuid
from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine

from billing import statements, wallet
from billing.arrears import notify
from billing.metering import close_usage, open_usage
from billing.quote import quote

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 2, 9, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


def _usage(user, catalog, *, minutes=60, chip="mlu370-x8", cards=1, label="train"):
    resource = uuid.uuid4()
    q = quote(chip=catalog[chip], cards=cards, at=START)
    open_usage(user=user, kind="instance", resource_id=resource, quote=q, started_at=START, label=label)
    with time_machine.travel(START + timedelta(minutes=minutes), tick=False):
        close_usage(resource_id=resource, ended_at=START + timedelta(minutes=minutes))
    return resource


def test_the_wallet_page_shows_cash_trial_with_its_expiry_and_the_arrears_policy(owner_client, owner, fund):
    wallet.grant_trial_credit(owner, owner.email)
    fund(owner, "20")

    html = owner_client.get("/billing/").content.decode()

    assert "¥20.00" in html and "¥10.00" in html and "¥30.00" in html
    assert 'id="wallet-trial-expiry"' in html
    assert 'id="arrears-policy"' in html and 'id="spend-chart"' in html


def test_the_dashboard_shows_the_trial_credit_and_the_spend_chart(owner_client, owner):
    wallet.grant_trial_credit(owner, owner.email)
    html = owner_client.get("/console/").content.decode()
    assert 'id="wallet-trial"' in html and "¥10.00" in html and 'id="spend-data"' in html


def test_the_pricing_page_publishes_the_arrears_policy(client, catalog):
    assert 'id="arrears-policy"' in client.get("/catalog/pricing/").content.decode()


def test_wallet_pages_need_a_login(client):
    for url in ["/billing/", "/billing/transactions/", "/billing/statements/"]:
        assert client.get(url).status_code == 302


@pytest.mark.parametrize("amount, message", [("abc", "number of yuan"), ("5", "between"), ("1.234", "two decimal")])
def test_a_bad_top_up_amount_is_shown_on_the_page(owner_client, amount, message):
    owner_client.cookies["django_language"] = "en"
    response = owner_client.post("/billing/topup/", {"amount": amount})
    assert response.status_code == 400 and message in response.content.decode()


def test_the_spending_cap_is_set_on_the_wallet_page_and_bad_input_is_explained(owner_client, owner):
    assert owner_client.post("/billing/spending-cap/", {"spending_cap": "-1"}).status_code == 400
    assert owner_client.post("/billing/spending-cap/", {"spending_cap": "500"}).status_code == 302
    assert wallet.summary(owner).spending_cap == Decimal("500")
    owner_client.post("/billing/spending-cap/", {"spending_cap": ""})
    assert wallet.summary(owner).spending_cap is None


def test_the_wallet_page_shows_a_saved_cap_as_it_was_written_in_yuan_and_fen(owner_client, owner):
    owner_client.post("/billing/spending-cap/", {"spending_cap": "1234.56"})
    assert wallet.summary(owner).spending_cap == Decimal("1234.56")
    html = owner_client.get("/billing/").content.decode()
    assert 'value="1234.56"' in html.split('id="id_spending_cap"')[1].split(">")[0]
    # sent back unchanged, it saves
    assert owner_client.post("/billing/spending-cap/", {"spending_cap": "1234.56"}).status_code == 302


def test_the_kept_forms_of_the_wallet_page_show_the_saved_cap_and_never_an_earlier_error(owner_client):
    owner_client.cookies["django_language"] = "en"

    def cap_input(html: str) -> str:
        return html.split('id="id_spending_cap"')[1].split(">")[0]

    owner_client.get("/billing/")
    assert 'value=""' in cap_input(owner_client.get("/billing/").content.decode())  # kept by now
    owner_client.post("/billing/spending-cap/", {"spending_cap": "500"})
    assert 'value="500' in cap_input(owner_client.get("/billing/").content.decode())
    refused = owner_client.post("/billing/spending-cap/", {"spending_cap": "-1"}).content.decode()
    assert "is-invalid" in cap_input(refused) and 'value="-1"' in cap_input(refused)
    refused_topup = owner_client.post("/billing/topup/", {"amount": "abc"}).content.decode()
    assert "number of yuan" in refused_topup
    again = owner_client.get("/billing/").content.decode()
    assert "is-invalid" not in again and 'value="500' in cap_input(again) and "number of yuan" not in again


def test_the_transaction_list_does_not_grow_in_queries_with_rows(
    owner_client, owner, fund, django_assert_max_num_queries
):
    owner_client.cookies["django_language"] = "en"
    fund(owner, "1")
    with django_assert_max_num_queries(8):
        owner_client.get("/billing/transactions/")
    for _ in range(60):
        fund(owner, "1")
    with django_assert_max_num_queries(8):
        response = owner_client.get("/billing/transactions/")
    assert "Page 1 of 2" in response.content.decode()
    filtered = owner_client.get("/billing/transactions/?kind=adjustment").content.decode()
    assert "?kind=adjustment&amp;page=2" in filtered  # the next page keeps the filter


def test_transactions_filter_by_kind_and_date_and_export_csv(owner_client, owner, fund):
    owner_client.cookies["django_language"] = "en"
    fund(owner, "5")
    wallet.grant_trial_credit(owner, owner.email)

    adjustments = owner_client.get("/billing/transactions/?kind=adjustment").content.decode()
    assert "¥5.00" in adjustments and "¥10.00" not in adjustments
    future = owner_client.get("/billing/transactions/?since=2099-01-01").content.decode()
    assert "No transactions yet." in future
    bad = owner_client.get("/billing/transactions/?since=2026-05-01&until=2026-04-01")
    assert bad.status_code == 400 and "end date" in bad.content.decode()
    csv = owner_client.get("/billing/transactions/?format=csv")
    assert csv["Content-Type"].startswith("text/csv") and csv.content.decode().count("\n") == 3


def test_a_statement_groups_the_month_by_resource_with_subsidy_totals(owner_client, owner, catalog, fund):
    fund(owner, "100")
    with time_machine.travel(START, tick=False):
        _usage(owner, catalog, minutes=60, label="llama-finetune")  # 1.7 list, 1.53 payable, 0.17 subsidy
        _usage(owner, catalog, minutes=120, label="eval")

    html = owner_client.get("/billing/statements/?month=2026-03").content.decode()
    assert "llama-finetune" in html and "eval" in html
    assert 'id="statement-total">¥4.59<' in html and 'id="statement-subsidy">¥0.51<' in html
    csv = owner_client.get("/billing/statements/?month=2026-03&format=csv").content.decode()
    assert "llama-finetune" in csv and "4.59" in csv
    assert owner_client.get("/billing/statements/?month=2026-13").status_code == 400


def test_a_long_statement_pages_its_lines_and_keeps_the_months_totals(owner_client, owner, catalog, fund):
    owner_client.cookies["django_language"] = "en"
    fund(owner, "1000")
    with time_machine.travel(START, tick=False):
        for i in range(55):
            _usage(owner, catalog, minutes=60 + i, label=f"run-{i:02d}")  # the later, the longer and dearer

    first = owner_client.get("/billing/statements/?month=2026-03").content.decode()
    second = owner_client.get("/billing/statements/?month=2026-03&page=2").content.decode()
    assert first.count("<tr><td>run-") == 50 and second.count("<tr><td>run-") == 5
    assert "run-54" in first and "run-00" in second  # the most charged first
    assert "55 resources, the most charged first" in first and "Page 2 of 2" in second
    assert "?month=2026-03&amp;page=2" in first and "?month=2026-03&amp;page=1" in second
    total = sum(line.charged for line in statements.month_statement(owner, START.date().replace(day=1)).lines)
    for html in (first, second):
        assert f'id="statement-total">¥{total:,}<' in html
    csv = owner_client.get("/billing/statements/?month=2026-03&format=csv").content.decode()
    assert csv.count("run-") == 55


def test_a_resource_run_several_times_is_one_line_named_by_its_latest_run(owner_client, owner, catalog, fund):
    owner_client.cookies["django_language"] = "en"
    fund(owner, "100")
    resource = uuid.uuid4()
    # Renamed and moved to another chip between runs; the runs are opened out of order of their starts.
    for hours, label, chip in (
        (3, "third-name", "mlu370-x8"),
        (0, "first-name", "mlu370-x8"),
        (1, "second-name", "ascend-910b"),
    ):
        started = START + timedelta(hours=hours)
        q = quote(chip=catalog[chip], cards=1, at=started)
        open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=started, label=label)
        with time_machine.travel(started + timedelta(minutes=30), tick=False):
            close_usage(resource_id=resource, ended_at=started + timedelta(minutes=30))

    html = owner_client.get("/billing/statements/?month=2026-03").content.decode()
    assert html.count("<tr><td>") == 1 and "<tr><td>third-name<" in html
    assert "first-name" not in html and "second-name" not in html
    assert "MLU370" in html.split("<tr><td>third-name<")[1].split("</tr>")[0]


def test_the_spend_chart_puts_each_charge_on_its_local_day(owner, catalog, fund):
    fund(owner, "100")
    late = datetime(2026, 3, 9, 23, 30, tzinfo=ZoneInfo("Asia/Shanghai"))  # 15:30 UTC: still the 9th in Beijing
    early = datetime(2026, 3, 10, 0, 30, tzinfo=ZoneInfo("Asia/Shanghai"))  # 16:30 UTC on the 9th
    for at, minutes in ((late, 20), (early, 40)):
        resource = uuid.uuid4()
        q = quote(chip=catalog["mlu370-x8"], cards=1, at=at)
        open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=at)
        with time_machine.travel(at + timedelta(minutes=minutes), tick=False):
            close_usage(resource_id=resource, ended_at=at + timedelta(minutes=minutes))

    with time_machine.travel(datetime(2026, 3, 11, 12, 0, tzinfo=ZoneInfo("Asia/Shanghai")), tick=False):
        days = dict(wallet.daily_spend(owner))
    assert len(days) == 30 and days[date(2026, 3, 8)] == 0 and not str(days[date(2026, 3, 8)]).startswith("-")
    assert days[date(2026, 3, 9)] == Decimal("0.51")  # 20 min × ¥1.53/h
    assert days[date(2026, 3, 10)] == Decimal("1.02")  # 40 min


def test_another_users_charges_never_appear_on_my_pages(client, owner, stranger, catalog, fund):
    fund(owner, "100")
    with time_machine.travel(START, tick=False):
        _usage(owner, catalog, label="owners-secret-run")
    client.force_login(stranger)
    for url in ["/billing/", "/billing/transactions/", "/billing/statements/?month=2026-03"]:
        assert "owners-secret-run" not in client.get(url).content.decode()


# --- API ------------------------------------------------------------------------------------------------------------


def test_the_wallet_api_shows_balances_as_decimal_strings(owner_api, owner, fund):
    wallet.grant_trial_credit(owner, owner.email)
    fund(owner, "12.5")
    data = owner_api.get("/api/v1/wallet").json()
    assert data["cash"] == "12.50" and data["trial"] == "10.00" and data["compute_balance"] == "22.50"
    assert data["trial_expires_at"]


def test_the_spending_cap_can_be_set_through_the_api(owner_api, teammate_api):
    assert owner_api.patch("/api/v1/wallet", {"spending_cap": "300"}, format="json").json()["spending_cap"] == "300.00"
    bad = owner_api.patch("/api/v1/wallet", {"spending_cap": "-3"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    assert teammate_api.patch("/api/v1/wallet", {"spending_cap": "1"}, format="json").status_code == 403


def test_transactions_and_statements_through_the_api_are_the_callers_only(owner_api, stranger_api, owner, fund):
    fund(owner, "7")
    assert owner_api.get("/api/v1/transactions").json()["results"][0]["amount"] == "7.00"
    assert stranger_api.get("/api/v1/transactions").json()["results"] == []
    assert owner_api.get("/api/v1/transactions?kind=nonsense").status_code == 400
    assert owner_api.get("/api/v1/statements?month=2026-03").json()["month"] == "2026-03"
    assert owner_api.get("/api/v1/statements?month=March").status_code == 400


def test_a_top_up_through_the_api_returns_the_checkout_url(owner_api, stranger_api, teammate_api, anon_api):
    owner_api.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"
    response = owner_api.post("/api/v1/topups", {"amount": "50"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["amount"] == "50.00" and "/billing/topup/sandbox/" in body["checkout_url"]
    assert stranger_api.get(f"/api/v1/topups/{body['id']}").status_code == 404
    assert teammate_api.post("/api/v1/topups", {"amount": "50"}, format="json").status_code == 403
    assert anon_api.get("/api/v1/wallet").status_code == 401
    bad = owner_api.post("/api/v1/topups", {"amount": "1"}, format="json")
    assert bad.status_code == 400 and "between" in bad.json()["message"]


def test_notifications_read_in_the_pages_language(owner_client, owner):

    notify(owner.pk, "arrears", days=15)
    notify(owner.pk, "disk_reminder", disk="data", date="2026-03-20")
    chinese = owner_client.get("/console/").content.decode()  # pages are Chinese by default
    assert "云硬盘和存储将保留 15 天" in chinese and "云硬盘“data”将于 2026-03-20 删除" in chinese
    owner_client.cookies["django_language"] = "en"
    english = owner_client.get("/console/").content.decode()
    assert "disks and storage are kept for 15 days" in english and "“data” will be deleted on 2026-03-20" in english
    notify(owner.pk, "spot_preempted", name="spot-1", notice=60, path="/instances/abc/")
    linked = owner_client.get("/console/").content.decode()
    assert "Spot instance “spot-1” was reclaimed" in linked and 'href="/instances/abc/"' in linked
