"""What a first visit notices: unit prices shown exactly, amounts to the fen, refusals that state the true reason."""

import pytest

from billing import wallet
from billing.models import Price
from storage.models import CloudDisk
from teams import services as teams

pytestmark = pytest.mark.django_db


def test_the_pricing_page_shows_the_per_minute_price_exactly_not_rounded_to_the_fen(client, catalog):
    client.cookies["django_language"] = "en"
    page = client.get("/catalog/pricing/").content.decode()  # the calculator opens on one 910B card, by the minute
    # ¥1.90 a card-hour less the 10% Xinchuang subsidy is ¥1.71 an hour: ¥0.0285 a minute, not ¥0.03.
    assert "¥0.0285 per minute" in page
    assert "¥0.03 per minute" not in page


def test_a_disk_refused_for_want_of_cash_states_its_true_price_not_zero(client, stranger, catalog):
    wallet.grant_trial_credit(stranger, stranger.email)  # the trial credit pays for compute only
    client.force_login(stranger)
    client.cookies["django_language"] = "en"
    response = client.post("/storage/disks/new/", {"name": "journey-disk", "size_gb": "5", "zone": "cn-east-xc"})
    text = response.content.decode()
    # 5 GB at ¥0.01 a GB-day is ¥0.05 a day: ¥0.002083 an hour.
    assert "This needs ¥0.002083 for its first hour and your cash balance is ¥0.00." in text
    assert "needs ¥0.00 " not in text
    assert "paid from cash" in text
    assert not CloudDisk.objects.filter(owner=stranger).exists()


@pytest.mark.parametrize("url", ["/catalog/pricing/", "/catalog/estimator/", "/instances/new/"])
def test_a_chip_without_a_price_is_offered_nowhere_a_chip_is_chosen(client, owner, catalog, url):
    client.force_login(owner)
    client.cookies["django_language"] = "en"
    page = client.get(url).content.decode()
    assert 'value="ascend-910b"' in page or "Ascend 910B" in page
    # The seeded RTX 4090 has no price: it is neither an option nor an estimate row.
    assert 'value="rtx-4090"' not in page
    if url != "/catalog/pricing/":  # the price list names it, as not published yet
        assert "RTX 4090" not in page


def test_a_chip_is_offered_once_staff_publish_its_price(client, owner, catalog):

    Price.objects.create(chip=catalog["rtx-4090"], per_hour="2.50", effective_from="2026-01-01T00:00:00+08:00")
    client.force_login(owner)
    assert 'value="rtx-4090"' in client.get("/instances/new/").content.decode()


def test_the_footer_s_status_link_leads_to_a_page_a_person_reads(client):
    home = client.get("/").content.decode()
    assert 'href="/console/status/"' in home and 'href="/healthz"' not in home
    page = client.get("/console/status/")
    assert page["Content-Type"].startswith("text/html")
    html = page.content.decode()
    assert "服务状态" in html and "数据库" in html and '"database": {' not in html
    assert client.get("/healthz")["Content-Type"] == "application/json"  # probes keep their JSON


def test_the_back_office_user_list_shows_people_not_teams_internal_accounts(client, ops_user, owner):

    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    client.force_login(ops_user)
    page = client.get("/ops/users/").content.decode()
    assert owner.email in page
    assert team.account.email not in page


def test_staff_roles_read_as_names_on_the_chinese_back_office(client, ops_user, finance_user):
    client.force_login(ops_user)
    overview = client.get("/ops/").content.decode()
    assert '<span class="badge text-bg-dark me-1">运维</span>' in overview
    detail = client.get(f"/ops/users/{finance_user.public_id}/").content.decode()
    assert '<span class="badge text-bg-dark">财务</span>' in detail
    assert ">ops<" not in overview and ">finance<" not in detail


def test_a_refusal_on_a_chinese_page_names_the_chip_in_chinese(client, catalog):
    query = {"chip": "a100-80g", "cards": "1", "zone": "cn-east-xc", "plan": "payg", "term": "1", "term_unit": "hours"}
    error = client.get("/catalog/pricing/", query).content.decode().split('id="quote-error">')[1].split("<")[0]
    assert "英伟达 A100" in error and "A100 80GB SXM" not in error


def test_real_name_verification_asks_for_a_person_s_name_not_a_resource_s(owner_client):
    page = owner_client.get("/console/real-name/").content.decode()
    label = page.split('for="id_real_name"')[1].split("</label>")[0]
    assert "姓名" in label and "名称" not in label
