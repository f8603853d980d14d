"""How an event is sent to each kind of channel, in the format its receiver documents.

- Signed webhook: POST the event as JSON with ``X-GPUCloud-Timestamp`` and ``X-GPUCloud-Signature`` (signing.py).
- 企业微信 group robot: ``{"msgtype": "markdown", "markdown": {"content": …}}``.
- 钉钉 custom robot: ``{"msgtype": "markdown", "markdown": {"title": …, "text": …}}``; with a secret, ``&timestamp=``
  (milliseconds) and ``&sign=`` are added to the URL.
- 飞书 custom bot: ``{"msg_type": "text", "content": {"text": …}}``; with a secret, the body also carries
  ``"timestamp"`` (seconds, a string) and ``"sign"``.
- E-mail: Django's mail to the channel's address.

Every URL is checked (destinations.check) right before the POST and the connection goes to the address that was
checked; redirects are not followed, only the start of an answer is read and the timeout is short: a slow or
hostile receiver delays nobody else's notifications.
"""

import json
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import certifi
import urllib3
from django.core.mail import send_mail

from accounts.account_adapter import email_subject

from . import destinations, signing
from .choices import ChannelKind
from .events import Event
from .models import RESPONSE_EXCERPT_CHARS, Channel

TIMEOUT_SECONDS = 5
# How much of an answer is read: the log keeps an excerpt, and a receiver cannot make a worker read a gigabyte.
RESPONSE_READ_BYTES = 4096
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


def _robot_error(excerpt: str) -> str:
    """The robots answer HTTP 200 with an error code in the body (企业微信/钉钉 ``errcode``, 飞书 ``code``)."""
    try:
        body = json.loads(excerpt)
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    code = body.get("errcode", body.get("code", 0))
    return "" if code in (0, None) else f"{code}: {body.get('errmsg') or body.get('msg') or ''}".strip()


def _pool(target: destinations.Destination) -> urllib3.HTTPConnectionPool:
    """A connection to the checked address; for HTTPS the certificate is still checked against the URL's host."""
    timeout = urllib3.Timeout(total=TIMEOUT_SECONDS)
    if target.scheme == "https":
        return urllib3.HTTPSConnectionPool(
            target.address,
            target.port,
            timeout=timeout,
            retries=False,
            server_hostname=target.host,
            assert_hostname=target.host,
            cert_reqs="CERT_REQUIRED",
            ca_certs=certifi.where(),
        )
    return urllib3.HTTPConnectionPool(target.address, target.port, timeout=timeout, retries=False)


def _exchange(target: destinations.Destination, url: str, body: bytes, headers: dict) -> tuple[int, str]:
    """POST once, without following redirects; the status and the start of the answer (never more is read)."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = f"[{target.host}]" if ":" in target.host else target.host
    default_port = 443 if target.scheme == "https" else 80
    headers = {**headers, "Host": host if target.port == default_port else f"{host}:{target.port}"}
    with _pool(target) as pool:
        response = pool.urlopen(
            "POST", path, body=body, headers=headers, redirect=False, retries=False, preload_content=False
        )
        try:
            start = response.read(RESPONSE_READ_BYTES)
        finally:
            response.release_conn()
    return response.status, start.decode("utf-8", "replace")[:RESPONSE_EXCERPT_CHARS]


def post(channel: Channel, event: Event, now: float) -> Outcome:
    url, body, headers = BUILDERS[ChannelKind(channel.kind)](channel, event, now)
    try:
        target = destinations.check(url)
    except destinations.RefusedDestination as exc:
        return Outcome(ok=False, error=str(exc.message), permanent=True)
    headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT, **headers}
    try:
        status, excerpt = _exchange(target, url, body, headers)
    except urllib3.exceptions.HTTPError as exc:
        return Outcome(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
    if not 200 <= status < 300:
        return Outcome(ok=False, status_code=status, excerpt=excerpt, error=f"HTTP {status}")
    robot_error = _robot_error(excerpt) if channel.kind != ChannelKind.WEBHOOK else ""
    return Outcome(ok=not robot_error, status_code=status, excerpt=excerpt, error=robot_error[:300])


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
