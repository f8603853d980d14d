"""The verification e-mail names the product in the reader's language, never the request's host."""

import pytest
from django.conf import settings
from django.core import mail

pytestmark = pytest.mark.django_db

SIGNUP = "/accounts/signup/"


def _sign_up(client):
    password = "Shengteng-910B!"
    client.post(SIGNUP, {"email": "new@example.com", "password1": password, "password2": password})
    assert len(mail.outbox) == 1
    return mail.outbox[0]


def test_the_verification_email_names_the_product_in_chinese(client):
    message = _sign_up(client)

    assert message.subject.startswith("[信创算力云] ")
    assert message.body.startswith("您好，这里是信创算力云！")
    assert "感谢您使用 信创算力云" in message.body and "Hello" not in message.body
    assert "testserver" not in message.subject


def test_the_verification_email_names_the_product_in_english(client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"

    message = _sign_up(client)

    assert message.subject.startswith("[Xinchuang GPU Cloud] ")
    assert "Hello from Xinchuang GPU Cloud!" in message.body
    assert "Hello from testserver" not in message.body
