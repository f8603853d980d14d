"""Student verification: a code mailed to a .edu.cn address, typed back; then the student programme's prices in
every quote (the pricing page, the API), within its cap; one address per account; bad input as clear errors."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts import students
from accounts.models import StudentVerification
from core.errors import Conflict, ServiceError
from teams import services as teams
from tests.fixtures.factories import UserFactory
from tests.fixtures.personas import _token_client

pytestmark = pytest.mark.django_db
QUOTE = {"chip": "a100-80g", "cards": 1, "hours": "10"}  # a chip no other programme covers


def _browser(user) -> Client:
    client = Client()
    client.cookies["django_language"] = "en"
    client.force_login(user)
    return client


def _mailed_code() -> str:
    return re.search(r"\b(\d{6})\b", mail.outbox[-1].body).group(1)


@pytest.mark.parametrize(
    "address", ["me@gmail.com", "me@edu.cn", "me@pku.edu.cn.evil.com", "not an address", "", "a@b@pku.edu.cn"]
)
def test_only_a_university_address_under_edu_cn_is_accepted(owner, address):
    with pytest.raises(ServiceError) as refused:
        students.send_code(owner, address)
    assert refused.value.code == "invalid_student_address" and ".edu.cn" in str(refused.value.message)
    assert mail.outbox == []


def test_a_student_verifies_on_the_page_and_gets_the_student_price_in_quotes(
    owner, catalog, django_capture_on_commit_callbacks
):
    api = _token_client(owner)
    before = api.post("/api/v1/quotes", QUOTE, format="json").json()
    assert before["subsidy_programme"] is None

    page = _browser(owner)
    with django_capture_on_commit_callbacks(execute=True):
        sent = page.post(reverse("console:student"), {"email": "Li.Hua@Mails.Tsinghua.edu.cn"})
    assert sent.status_code == 302
    assert mail.outbox[-1].to == ["li.hua@mails.tsinghua.edu.cn"]
    assert 'id="student-code-form"' in page.get(reverse("console:student")).content.decode()
    assert _mailed_code() not in StudentVerification.objects.get(user=owner).code_hash  # only a keyed hash is kept

    done = page.post(reverse("console:student"), {"code": _mailed_code()})
    assert done.status_code == 302
    status = page.get(reverse("console:student")).content.decode()
    assert 'id="student-status"' in status and "li.hua@mails.tsinghua.edu.cn" in status

    after = api.post("/api/v1/quotes", QUOTE, format="json").json()
    assert after["subsidy_programme"]["slug"] == "student-2026"
    assert Decimal(after["payable_total"]) == Decimal(before["payable_total"]) * Decimal("0.8")
    pricing = page.get(reverse("catalog:pricing")).content.decode()
    assert 'id="programme-student-2026"' in pricing and "verified students" in pricing
    # Programmes do not stack: on a Xinchuang chip the larger discount (the student's 20%) counts.
    xinchuang = api.post("/api/v1/quotes", {"chip": "ascend-910b"}, format="json").json()
    assert xinchuang["subsidy_programme"]["slug"] == "student-2026"
    # Someone else still pays the list price.
    other = _token_client(UserFactory(email="other@example.com")).post("/api/v1/quotes", QUOTE, format="json").json()
    assert other["subsidy_programme"] is None


def test_the_api_verifies_and_wrong_or_late_codes_are_refused(owner, django_capture_on_commit_callbacks):
    api = _token_client(owner)
    api.credentials(HTTP_AUTHORIZATION=api._credentials["HTTP_AUTHORIZATION"], HTTP_ACCEPT_LANGUAGE="en")
    assert api.get("/api/v1/student").status_code == 404
    with django_capture_on_commit_callbacks(execute=True):
        asked = api.post("/api/v1/student", {"email": "wang@pku.edu.cn"}, format="json")
    assert asked.status_code == 202 and asked.json()["verified"] is False
    again = api.post("/api/v1/student", {"email": "wang@pku.edu.cn"}, format="json")
    assert again.status_code == 429 and again.json()["code"] == "too_soon"

    wrong = api.post(
        "/api/v1/student/confirm", {"code": "000000" if _mailed_code() != "000000" else "111111"}, format="json"
    )
    assert (
        wrong.status_code == 400 and wrong.json()["code"] == "wrong_code" and "4 tries left" in wrong.json()["message"]
    )
    assert "code" in wrong.json()["errors"]
    garbage = api.post("/api/v1/student/confirm", {"code": ["x"]}, format="json")
    assert garbage.status_code == 400

    with time_machine.travel(timezone.now() + timedelta(minutes=students.CODE_MINUTES + 1)):
        late = api.post("/api/v1/student/confirm", {"code": _mailed_code()}, format="json")
        assert late.status_code == 409 and late.json()["code"] == "code_expired"
    assert not students.is_verified(owner)

    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        with django_capture_on_commit_callbacks(execute=True):
            assert api.post("/api/v1/student", {"email": "wang@pku.edu.cn"}, format="json").status_code == 202
        ok = api.post("/api/v1/student/confirm", {"code": _mailed_code()}, format="json")
        assert ok.status_code == 200 and ok.json()["verified"] is True
        assert students.is_verified(owner)


def test_too_many_wrong_codes_end_the_code(owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        students.send_code(owner, "zhang@fudan.edu.cn")
    code = _mailed_code()
    wrong = "123456" if code != "123456" else "654321"
    for _attempt in range(students.MAX_ATTEMPTS):
        with pytest.raises(ServiceError):
            students.confirm(owner, wrong)
    with pytest.raises(ServiceError) as ended:
        students.confirm(owner, code)  # even the right one: ask for a new code
    assert ended.value.code == "code_expired"


def test_one_address_verifies_one_account_and_a_verification_expires(
    owner, settings, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        students.send_code(owner, "chen@zju.edu.cn")
    students.confirm(owner, _mailed_code())
    other = UserFactory(email="other@example.com")
    with pytest.raises(Conflict) as taken:
        students.send_code(other, "CHEN@zju.edu.cn")
    assert taken.value.code == "student_address_taken"

    with time_machine.travel(timezone.now() + timedelta(days=settings.STUDENT_VERIFIED_DAYS + 1)):
        assert not students.is_verified(owner)
        page = _browser(owner).get(reverse("console:student")).content.decode()
        assert 'id="student-expired"' in page


def test_asking_a_code_for_someone_elses_address_reserves_nothing(owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        students.send_code(owner, "me@sjtu.edu.cn")
    students.confirm(owner, _mailed_code())
    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        with django_capture_on_commit_callbacks(execute=True):
            students.send_code(owner, "victim@sjtu.edu.cn")  # never confirmed
    assert students.status(owner).email == "me@sjtu.edu.cn"  # still the verified one

    victim = UserFactory(email="victim@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        students.send_code(victim, "victim@sjtu.edu.cn")
    assert students.confirm(victim, _mailed_code()).email == "victim@sjtu.edu.cn"
    assert students.is_verified(victim)


def test_a_mailbox_gets_only_so_many_codes_a_day_whoever_asks(django_capture_on_commit_callbacks):
    for n in range(students.CODES_PER_ADDRESS):
        with django_capture_on_commit_callbacks(execute=True):
            students.send_code(UserFactory(email=f"sybil{n}@example.com"), "target@pku.edu.cn")
    with pytest.raises(ServiceError) as refused:
        students.send_code(UserFactory(email="one-more@example.com"), "target@pku.edu.cn")
    assert refused.value.status == 429
    assert len(mail.outbox) == students.CODES_PER_ADDRESS


def test_in_a_teams_context_the_pricing_page_shows_the_teams_prices_not_the_students(
    owner, catalog, django_capture_on_commit_callbacks
):

    with django_capture_on_commit_callbacks(execute=True):
        students.send_code(owner, "me@ruc.edu.cn")
    students.confirm(owner, _mailed_code())
    teams.create_team(owner, name="Lab", slug="lab")
    page = _browser(owner)
    assert "−20%" in page.get(reverse("catalog:pricing")).content.decode()
    page.post(reverse("teams:switch"), {"team": "lab"})
    assert (
        "−20%" not in page.get(reverse("catalog:pricing")).content.decode()
    )  # the team's launch gets no student price
