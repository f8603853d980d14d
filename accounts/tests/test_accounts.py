"""Sign-up with e-mail verification, login, errors in both languages, rate limits, Argon2."""

import re
from io import StringIO

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth.hashers import identify_hasher
from django.core import mail
from django.core.management import call_command
from django.test import override_settings

from accounts.models import User
from billing import wallet

pytestmark = pytest.mark.django_db

SIGNUP = "/accounts/signup/"
LOGIN = "/accounts/login/"


def sign_up(client, email="new@example.com", password="Shengteng-910B!", **extra):
    data = {"email": email, "password1": password, "password2": password} | extra
    return client.post(SIGNUP, data)


def test_sign_up_sends_a_verification_email_and_login_waits_for_it(client):
    response = sign_up(client)
    assert response.status_code == 302
    assert len(mail.outbox) == 1
    link = re.search(r"/accounts/confirm-email/\S+/", mail.outbox[0].body).group(0)
    client.logout()
    blocked = client.post(LOGIN, {"login": "new@example.com", "password": "Shengteng-910B!"})
    assert blocked.status_code == 302 and "confirm-email" in blocked["Location"]  # verification pending
    client.post(link)
    assert EmailAddress.objects.get(email="new@example.com").verified


def test_verified_user_logs_in_and_sees_the_dashboard(client):
    sign_up(client)
    EmailAddress.objects.filter(email="new@example.com").update(verified=True)
    client.logout()
    response = client.post(LOGIN, {"login": "new@example.com", "password": "Shengteng-910B!"}, follow=True)
    assert response.redirect_chain[-1][0] == "/console/"
    assert "控制台" in response.content.decode()


def test_email_verification_calls_the_service_hook(client, monkeypatch):
    seen = []
    monkeypatch.setattr("accounts.services.on_email_verified", lambda user, email: seen.append(email))
    sign_up(client)
    link = re.search(r"/accounts/confirm-email/\S+/", mail.outbox[0].body).group(0)
    client.post(link)
    assert seen == ["new@example.com"]


def test_passwords_are_hashed_with_argon2(client, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.Argon2PasswordHasher"]
    sign_up(client)
    assert identify_hasher(User.objects.get().password).algorithm == "argon2"


@pytest.mark.parametrize(
    "data, chinese, english",
    [
        ({"email": "not-an-email"}, "合法的邮件地址", "valid email address"),
        ({"password2": "something-else-123"}, "密码必须相同", "same password"),
        ({"password1": "123", "password2": "123"}, "密码太短", "too short"),
    ],
)
def test_bad_sign_up_input_is_explained_in_both_languages(client, data, chinese, english):
    response = sign_up(client, **data) if "email" not in data else sign_up(client, email=data["email"])
    assert response.status_code == 200 and chinese in response.content.decode()
    client.cookies["django_language"] = "en"
    response = sign_up(client, **data) if "email" not in data else sign_up(client, email=data["email"])
    assert english in response.content.decode()
    assert not User.objects.exists()


def test_a_duplicate_email_is_refused_without_revealing_the_account(client, owner):
    client.cookies["django_language"] = "en"
    response = sign_up(client, email=owner.email)
    # allauth's enumeration protection: the page looks like a normal sign-up, but no second account appears
    # and the existing owner gets a notice instead of a new verification.
    assert response.status_code in (200, 302)
    assert User.objects.filter(email=owner.email).count() == 1


def test_wrong_password_is_explained_in_both_languages(client, owner):
    response = client.post(LOGIN, {"login": owner.email, "password": "wrong"})
    assert response.status_code == 200 and "不正确" in response.content.decode()
    client.cookies["django_language"] = "en"
    response = client.post(LOGIN, {"login": owner.email, "password": "wrong"})
    assert "not correct" in response.content.decode()


@override_settings(ACCOUNT_RATE_LIMITS={"login_failed": "3/m/ip"})
def test_repeated_failed_logins_are_rate_limited(client, owner):
    for _ in range(3):
        client.post(LOGIN, {"login": owner.email, "password": "wrong"})
    response = client.post(LOGIN, {"login": owner.email, "password": "correct horse battery"})
    # Even the right password is refused until the window passes, and the page says why.
    assert "登录失败次数过多" in response.content.decode()
    assert "_auth_user_id" not in client.session


@override_settings(ACCOUNT_RATE_LIMITS={"signup": "2/h/ip"})
def test_sign_ups_are_rate_limited_per_ip(client):
    sign_up(client, email="a@example.com")
    client.logout()
    sign_up(client, email="b@example.com")
    client.logout()
    response = sign_up(client, email="c@example.com")
    assert response.status_code == 429
    assert not User.objects.filter(email="c@example.com").exists()


def test_pages_need_a_login(client):
    response = client.get("/console/")
    assert response.status_code == 302 and response["Location"].startswith(LOGIN)


def test_the_demo_account_is_verified_and_has_the_trial_credit(db):

    call_command("seed_demo", stdout=StringIO())
    call_command("seed_demo", stdout=StringIO())  # idempotent: still one grant
    demo = User.objects.get(email="demo@gpucloud.local")
    assert EmailAddress.objects.get(user=demo).verified
    assert wallet.compute_balance(demo) == 10
