"""The 企业微信, 钉钉 and 飞书 robots: each receives its documented message format, and the signed-secret modes
carry the signature the vendor's documentation computes — recomputed here independently of the console's code.

钉钉 (加签): sign = urlencode(base64(HMAC-SHA256(key=secret, msg="<timestamp ms>\\n<secret>"))), appended to the URL
as ``&timestamp=…&sign=…``. 飞书 (签名校验): sign = base64(HMAC-SHA256(key="<timestamp s>\\n<secret>", msg="")), in
the body beside ``"timestamp"``.
"""

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
import time_machine

from billing import arrears
from billing.choices import NotificationKind
from notifications import services
from notifications.choices import ChannelKind, DeliveryStatus
from notifications.services import ChannelSpec

NOW = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


def _notify(owner):
    with time_machine.travel(NOW, tick=False):
        arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)


@pytest.mark.django_db(transaction=True)
def test_wecom_gets_a_markdown_message(owner, receiver):
    services.create_channel(
        owner, ChannelSpec(kind=ChannelKind.WECOM, name="企微", url=receiver.url("/cgi-bin/webhook/send?key=k1"))
    )
    _notify(owner)
    [request] = receiver.requests
    body = json.loads(request.body)
    assert request.path == "/cgi-bin/webhook/send" and request.query == {"key": ["k1"]}
    assert set(body) == {"msgtype", "markdown"} and body["msgtype"] == "markdown"
    assert set(body["markdown"]) == {"content"}
    assert "余额已用完" in body["markdown"]["content"] or "Out of balance" in body["markdown"]["content"]


@pytest.mark.django_db(transaction=True)
def test_dingtalk_gets_markdown_and_the_documented_signature_in_the_url(owner, receiver):
    secret = "SEC0123456789abcdef"
    services.create_channel(
        owner,
        ChannelSpec(
            kind=ChannelKind.DINGTALK, name="钉钉", url=receiver.url("/robot/send?access_token=t1"), secret=secret
        ),
    )
    _notify(owner)
    [request] = receiver.requests
    body = json.loads(request.body)
    assert body["msgtype"] == "markdown" and set(body["markdown"]) == {"title", "text"}
    timestamp = request.query["timestamp"][0]
    assert timestamp == str(int(NOW.timestamp() * 1000))  # milliseconds
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    # parse_qs has undone the URL encoding: what is left must be the base64 of the HMAC.
    assert request.query["sign"] == [base64.b64encode(digest).decode()]
    assert request.query["access_token"] == ["t1"]


@pytest.mark.django_db(transaction=True)
def test_feishu_gets_text_with_the_documented_timestamp_and_sign(owner, receiver):
    secret = "feishu-secret"
    services.create_channel(
        owner,
        ChannelSpec(kind=ChannelKind.FEISHU, name="飞书", url=receiver.url("/open-apis/bot/v2/hook/h1"), secret=secret),
    )
    receiver.reply = b'{"code":0,"msg":"success","data":{}}'
    _notify(owner)
    [request] = receiver.requests
    body = json.loads(request.body)
    assert body["msg_type"] == "text" and set(body["content"]) == {"text"}
    assert body["timestamp"] == str(int(NOW.timestamp()))  # seconds, as a string
    key = f"{body['timestamp']}\n{secret}".encode()
    assert body["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


@pytest.mark.django_db(transaction=True)
def test_a_robot_without_a_secret_sends_no_signature(owner, receiver):
    services.create_channel(owner, ChannelSpec(kind=ChannelKind.FEISHU, name="飞书", url=receiver.url()))
    _notify(owner)
    body = json.loads(receiver.requests[0].body)
    assert set(body) == {"msg_type", "content"}


@pytest.mark.django_db(transaction=True)
def test_a_robots_error_code_in_a_200_is_a_failed_attempt(owner, receiver):
    channel = services.create_channel(owner, ChannelSpec(kind=ChannelKind.DINGTALK, name="钉钉", url=receiver.url()))
    receiver.reply = b'{"errcode":310000,"errmsg":"sign not match"}'
    _notify(owner)
    delivery = channel.deliveries.get()
    assert delivery.status == DeliveryStatus.PENDING and delivery.attempts == 1
    assert delivery.response_code == 200 and "310000" in delivery.error
