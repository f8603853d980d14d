"""How an event is sent to each kind of channel, in the format its receiver documents.

- Signed webhook: POST the event as JSON with ``X-GPUCloud-Timestamp`` and ``X-GPUCloud-Signature`` (signing.py).
- 企业微信 group robot: ``{"msgtype": "markdown", "markdown": {"content": …}}``.
- 钉钉 custom robot: ``{"msgtype": "markdown", "markdown": {"title": …, "text": …}}``; with a secret, ``&timestamp=``
  (milliseconds) and ``&sign=`` are added to the URL.
- 飞书 custom bot: ``{"msg_type": "text", "content": {"text": …}}``; with a secret, the body also carries
  ``"timestamp"`` (seconds, a string) and ``"sign"``.
- E-mail: Django's mail to the channel's address.

Every URL is checked (destinations.check) right before the POST, redirects are not followed and the timeout is
short: a slow receiver delays nobody else's notifications.
"""

import json
import time
from dataclasses import dataclass

import requests
from django.core.mail import send_mail

from console.account_adapter import email_subject

from . import destinations, signing
from .choices import ChannelKind
from .events import Event
from .models import RESPONSE_EXCERPT_CHARS, Channel

TIMEOUT_SECONDS = 5
USER_AGENT = "GPUCloud-Notifications/1"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status_code: int | None = None
    excerpt: str = ""
    error: str = ""
    permanent: bool = False  # not worth retrying (a refused destination)


def _title(event: Event) -> str:
    """The robot message's title, with the site's name first (a robot set to require a keyword can require it)."""
    return email_subject(event.title)


def _text(event: Event) -> str:
    return f"{_title(event)}\n{event.text}"


def webhook_request(channel: Channel, event: Event, now: float) -> tuple[str, bytes, dict]:
    body = json.dumps(event.as_json(), ensure_ascii=False, separators=(",", ":")).encode()
    timestamp = int(now)
    headers = {signing.TIMESTAMP_HEADER: str(timestamp)}
    if channel.has_secret:
        headers[signing.SIGNATURE_HEADER] = signing.webhook_signature(channel.secret, timestamp, body)
    return channel.url, body, headers


def wecom_request(channel: Channel, event: Event, now: float) -> tuple[str, bytes, dict]:
    payload = {"msgtype": "markdown", "markdown": {"content": f"**{_title(event)}**\n{event.text}"}}
    return channel.url, json.dumps(payload, ensure_ascii=False).encode(), {}


def dingtalk_request(channel: Channel, event: Event, now: float) -> tuple[str, bytes, dict]:
    title = _title(event)
    payload = {"msgtype": "markdown", "markdown": {"title": title, "text": f"#### {title}\n\n{event.text}"}}
    url = channel.url
    if channel.has_secret:
        timestamp_ms = int(now * 1000)
        url += (
            "&" if "?" in url else "?"
        ) + f"timestamp={timestamp_ms}&sign={signing.dingtalk_sign(channel.secret, timestamp_ms)}"
    return url, json.dumps(payload, ensure_ascii=False).encode(), {}


def feishu_request(channel: Channel, event: Event, now: float) -> tuple[str, bytes, dict]:
    payload: dict = {"msg_type": "text", "content": {"text": _text(event)}}
    if channel.has_secret:
        timestamp = int(now)
        payload = {"timestamp": str(timestamp), "sign": signing.feishu_sign(channel.secret, timestamp), **payload}
    return channel.url, json.dumps(payload, ensure_ascii=False).encode(), {}


BUILDERS = {
    ChannelKind.WEBHOOK: webhook_request,
    ChannelKind.WECOM: wecom_request,
    ChannelKind.DINGTALK: dingtalk_request,
    ChannelKind.FEISHU: feishu_request,
}


def _robot_error(response: requests.Response) -> str:
    """The robots answer HTTP 200 with an error code in the body (企业微信/钉钉 ``errcode``, 飞书 ``code``)."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    code = body.get("errcode", body.get("code", 0))
    return "" if code in (0, None) else f"{code}: {body.get('errmsg') or body.get('msg') or ''}".strip()


def post(channel: Channel, event: Event, now: float) -> Outcome:
    url, body, headers = BUILDERS[ChannelKind(channel.kind)](channel, event, now)
    try:
        destinations.check(url)
    except destinations.RefusedDestination as exc:
        return Outcome(ok=False, error=str(exc.message), permanent=True)
    headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT, **headers}
    try:
        response = requests.post(url, data=body, headers=headers, timeout=TIMEOUT_SECONDS, allow_redirects=False)
    except requests.RequestException as exc:
        return Outcome(ok=False, error=type(exc).__name__ + ": " + str(exc)[:200])
    excerpt = response.text[:RESPONSE_EXCERPT_CHARS]
    if not 200 <= response.status_code < 300:
        return Outcome(
            ok=False, status_code=response.status_code, excerpt=excerpt, error=f"HTTP {response.status_code}"
        )
    robot_error = _robot_error(response) if channel.kind != ChannelKind.WEBHOOK else ""
    return Outcome(ok=not robot_error, status_code=response.status_code, excerpt=excerpt, error=robot_error[:300])


def mail(channel: Channel, event: Event) -> Outcome:
    try:
        send_mail(email_subject(event.title), event.text, None, [channel.email])
    except OSError as exc:  # smtplib's errors are OSErrors
        return Outcome(ok=False, error=str(exc)[:300])
    return Outcome(ok=True)


def send(channel: Channel, event: Event, now: float | None = None) -> Outcome:
    """Send ``event`` to ``channel`` once and say how it went."""
    if channel.kind == ChannelKind.EMAIL:
        return mail(channel, event)
    return post(channel, event, time.time() if now is None else now)
