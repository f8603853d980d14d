"""The notification settings pages: list and add, edit, delete, send a test, the delivery log — as the owner, a
stranger and team members; with the number of queries of the list pages held."""

import pytest
from django.test import Client
from django.urls import reverse

from notifications import services
from notifications.choices import ChannelKind
from notifications.models import Channel, Delivery
from notifications.services import ChannelSpec

pytestmark = pytest.mark.django_db(transaction=True)


def _browser(user, team_slug=None) -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.cookies["django_language"] = "en"
    client.force_login(user)
    if team_slug:
        assert client.post(reverse("teams:switch"), {"team": team_slug}).status_code == 302
    return client


def _webhook(owner, url, name="ops"):
    return services.create_channel(owner, ChannelSpec(kind=ChannelKind.WEBHOOK, name=name, url=url, secret="s"))


def test_the_account_menu_links_the_page_and_it_lists_the_channels(owner, receiver):
    _webhook(owner, receiver.url())
    page = _browser(owner).get(reverse("notifications:channels"))
    assert page.status_code == 200
    text = page.content.decode()
    assert reverse("notifications:channels") in text and "ops" in text and "table-responsive" in text


def test_adding_a_channel_through_the_form_and_htmx(owner, receiver):
    browser = _browser(owner)
    response = browser.post(
        reverse("notifications:channels"),
        {"kind": "dingtalk", "name": "钉钉群", "url": receiver.url(), "secret": "SECabc", "enabled": "on"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and "钉钉群" in response.content.decode()
    channel = Channel.objects.get()
    assert channel.owner == owner and channel.secret == "SECabc"


def test_a_private_url_is_shown_beside_the_field_and_nothing_is_saved(owner):
    response = _browser(owner).post(
        reverse("notifications:channels"),
        {"kind": "webhook", "name": "x", "url": "https://10.0.0.1/h", "enabled": "on"},
    )
    assert response.status_code == 400 and "private or reserved" in response.content.decode()
    assert not Channel.objects.exists()


def test_editing_keeps_the_secret_when_the_field_is_left_empty(owner, receiver):
    channel = _webhook(owner, receiver.url())
    response = _browser(owner).post(
        reverse("notifications:channel", args=[channel.public_id]),
        {"kind": "webhook", "name": "renamed", "url": receiver.url(), "events": ["arrears"], "enabled": "on"},
    )
    assert response.status_code == 302
    channel.refresh_from_db()
    assert (channel.name, channel.events, channel.secret) == ("renamed", ["arrears"], "s")


def test_the_test_button_delivers_at_once_and_shows_the_result_in_the_log(owner, receiver):
    channel = _webhook(owner, receiver.url())
    response = _browser(owner).post(
        reverse("notifications:channel-test", args=[channel.public_id]), HTTP_HX_REQUEST="true"
    )
    text = response.content.decode()
    assert response.status_code == 200 and 'id="test-result"' in text and "answered 200" in text
    assert 'id="delivery-table"' in text and "<td>test</td>" in text
    assert len(receiver.requests) == 1


def test_a_failing_test_says_why(owner, receiver):
    channel = _webhook(owner, receiver.url())
    receiver.status = 500
    response = _browser(owner).post(
        reverse("notifications:channel-test", args=[channel.public_id]), HTTP_HX_REQUEST="true"
    )
    assert "The test failed: HTTP 500" in response.content.decode()
    assert Delivery.objects.get().status == "failed"  # a test is tried once


def test_deleting_a_channel(owner, receiver):
    channel = _webhook(owner, receiver.url())
    response = _browser(owner).post(reverse("notifications:channel-delete", args=[channel.public_id]))
    assert response.status_code == 302 and not Channel.objects.exists()


def test_another_users_channel_is_a_404_on_every_page(owner, stranger, receiver):
    channel = _webhook(owner, receiver.url())
    browser = _browser(stranger)
    for name in ("notifications:channel", "notifications:channel-test", "notifications:channel-delete"):
        url = reverse(name, args=[channel.public_id])
        assert browser.get(url).status_code in (404, 405)
        assert browser.post(url, {"kind": "webhook", "name": "x", "url": receiver.url()}).status_code == 404
    assert "ops" not in browser.get(reverse("notifications:channels")).content.decode()
    assert receiver.requests == [] and Channel.objects.get().name == "ops"


def test_a_team_channel_is_managed_by_a_team_admin_only(team, member, receiver):
    admin, developer = member("admin"), member("developer")
    added = _browser(admin, team.slug).post(
        reverse("notifications:channels"),
        {"kind": "webhook", "name": "team hook", "url": receiver.url(), "secret": "s", "enabled": "on"},
    )
    assert added.status_code == 302
    channel = Channel.objects.get()
    assert channel.owner == team.account

    dev = _browser(developer, team.slug)
    page = dev.get(reverse("notifications:channels")).content.decode()
    assert "team hook" in page and 'id="channel-form"' not in page
    assert 'id="send-test"' not in dev.get(reverse("notifications:channel", args=[channel.public_id])).content.decode()
    assert (
        dev.post(
            reverse("notifications:channels"), {"kind": "email", "name": "x", "email": "x@example.com"}
        ).status_code
        == 403
    )
    assert dev.post(reverse("notifications:channel-test", args=[channel.public_id])).status_code == 403
    assert dev.post(reverse("notifications:channel-delete", args=[channel.public_id])).status_code == 403
    assert receiver.requests == [] and Channel.objects.exists()


def test_list_and_log_pages_use_the_same_queries_for_1_or_20_rows(owner, receiver, django_assert_max_num_queries):
    browser = _browser(owner)
    first = _webhook(owner, receiver.url())
    services.send_test(owner, first.public_id)
    with django_assert_max_num_queries(12) as few:
        assert browser.get(reverse("notifications:channels")).status_code == 200
    with django_assert_max_num_queries(14) as few_log:
        assert browser.get(reverse("notifications:channel", args=[first.public_id])).status_code == 200
    for i in range(19):
        _webhook(owner, receiver.url(), name=f"hook {i}")
        services.send_test(owner, first.public_id)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert browser.get(reverse("notifications:channels")).status_code == 200
    with django_assert_max_num_queries(len(few_log.captured_queries)):
        page = browser.get(reverse("notifications:channel", args=[first.public_id]))
    assert page.content.decode().count("<td>test</td>") == 20


def test_the_page_speaks_chinese_by_default(owner):
    client = Client()
    client.force_login(owner)
    text = client.get(reverse("notifications:channels")).content.decode()
    assert "通知渠道" in text and "添加渠道" in text and "签名 Webhook" in text
