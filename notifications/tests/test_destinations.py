"""SSRF: a channel's URL must be a public HTTPS address, checked when it is saved and again before each send.

Nothing here ever opens a connection to a private address: every refusal happens before a socket is made, and the
tests make any attempt to connect fail loudly.
"""

import socket

import pytest
import urllib3

from billing import arrears
from billing.choices import NotificationKind
from core.field_errors import FieldError
from notifications import destinations, services
from notifications.choices import ChannelKind, DeliveryStatus
from notifications.models import Channel
from notifications.services import ChannelSpec


@pytest.fixture
def no_sending(monkeypatch):
    """Any request or connection at all fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a connection was attempted: {args!r}")

    monkeypatch.setattr(urllib3.HTTPConnectionPool, "urlopen", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.1/hook",
        "https://192.168.1.5/hook",
        "https://172.16.0.1/hook",
        "https://169.254.169.254/latest/meta-data",  # the cloud metadata service
        "https://100.64.0.1/hook",  # carrier-grade NAT
        "https://127.0.0.1/hook",
        "https://[::1]/hook",
        "https://[fd00::1]/hook",
        "https://[::ffff:10.0.0.1]/hook",
        "https://0.0.0.0/hook",
        "http://hooks.example.com/hook",  # not HTTPS
        "ftp://example.com/",
    ],
)
def test_private_reserved_and_plain_http_urls_are_refused_at_save(url, owner, no_sending, settings):
    settings.NOTIFICATIONS_ALLOW_LOOPBACK = False
    with pytest.raises(FieldError) as refused:
        services.create_channel(owner, ChannelSpec(kind=ChannelKind.WEBHOOK, name="x", url=url))
    assert refused.value.field == "url"
    assert not Channel.objects.exists()


def test_a_name_that_resolves_to_a_private_address_is_refused(owner, no_sending, monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("10.1.2.3", 0))])
    with pytest.raises(FieldError):
        services.create_channel(
            owner, ChannelSpec(kind=ChannelKind.WEBHOOK, name="x", url="https://internal.example/h")
        )


def test_loopback_allowed_for_tests_still_refuses_every_other_private_address(owner, no_sending, settings):
    settings.NOTIFICATIONS_ALLOW_LOOPBACK = True
    destinations.check("http://127.0.0.1:8080/hook")
    for url in ("http://10.0.0.1/hook", "https://10.0.0.1/hook", "http://192.168.0.1/"):
        with pytest.raises(destinations.RefusedDestination):
            destinations.check(url)


@pytest.mark.django_db(transaction=True)
def test_a_url_that_turned_private_after_saving_is_refused_at_send_without_sending(owner, no_sending, monkeypatch):
    public = [(2, 1, 6, "", ("93.184.215.14", 0))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: public)
    channel = services.create_channel(
        owner, ChannelSpec(kind=ChannelKind.WEBHOOK, secret="s", name="x", url="https://hooks.example/h")
    )
    # The name is pointed at a private address after the check at save time (DNS rebinding).
    public[:] = [(2, 1, 6, "", ("10.0.0.1", 0))]
    arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    delivery = channel.deliveries.get()
    assert delivery.status == DeliveryStatus.FAILED  # permanent: no retry
    assert delivery.response_code is None and "private" in delivery.error


@pytest.mark.django_db(transaction=True)
def test_a_stored_private_url_is_refused_at_send_without_sending(owner, no_sending):
    # A row written around the service (the admin, a migration): the send-time check still holds.
    channel = Channel.objects.create(owner=owner, kind=ChannelKind.WEBHOOK, name="x", url="https://10.0.0.1/hook")
    arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    assert channel.deliveries.get().status == DeliveryStatus.FAILED


@pytest.mark.django_db(transaction=True)
def test_the_send_connects_to_the_address_that_was_checked_not_a_later_answer(owner, receiver, monkeypatch):
    # Given a name that resolves to the allowed loopback when checked, and to a private address on any later lookup
    real = socket.getaddrinfo
    lookups = []

    def rebinding(host, *args, **kwargs):
        if host != "localhost":
            return real(host, *args, **kwargs)
        lookups.append(host)
        address = "127.0.0.1" if len(lookups) == 1 else "10.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0))]

    url = receiver.url().replace("127.0.0.1", "localhost")
    channel = Channel.objects.create(owner=owner, kind=ChannelKind.WEBHOOK, name="x", url=url)
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    # When a notification is sent
    arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    # Then it went to the checked loopback address, named by its host, and the name was looked up once
    [request] = receiver.requests
    assert request.headers["Host"] == f"localhost:{receiver.server.server_address[1]}"
    assert lookups == ["localhost"]
    assert channel.deliveries.get().status == DeliveryStatus.SENT


@pytest.mark.django_db(transaction=True)
def test_only_the_start_of_a_large_answer_is_read_and_kept(owner, receiver):
    receiver.reply = b"x" * 2_000_000
    channel = services.create_channel(
        owner, ChannelSpec(kind=ChannelKind.WEBHOOK, secret="s", name="x", url=receiver.url())
    )
    arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    assert len(channel.deliveries.get().response_excerpt) == 500
