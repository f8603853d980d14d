"""The page frame (header, menus, sidebar, footer) is kept rendered per process, yet every response shows its own
user, context, language, page and CSRF token."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from teams import services as team_services
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([A-Za-z0-9]+)"')


def _client(user, language="en") -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.cookies["django_language"] = language
    return client


def _header(html: str) -> str:
    return html.split('id="main"')[0]


def test_each_user_sees_their_own_header_and_staff_their_links():
    alice = UserFactory(email="alice@example.com")
    bob = UserFactory(email="bob@example.com", is_staff=True)
    pages = [reverse("storage:disks"), reverse("console:tokens")]
    for _round in range(2):  # the second round is served from the kept frame
        for path in pages:
            mine, theirs = _client(alice).get(path).content.decode(), _client(bob).get(path).content.decode()
            assert "alice@example.com" in _header(mine) and "bob@example.com" not in mine
            assert "bob@example.com" in _header(theirs) and "alice@example.com" not in theirs
            assert reverse("ops:index") in theirs and reverse("ops:index") not in mine
    alice.email, bob.is_staff = "alice.new@example.com", False
    alice.save()
    bob.save()
    mine, theirs = _client(alice).get(pages[0]).content.decode(), _client(bob).get(pages[0]).content.decode()
    assert "alice.new@example.com" in _header(mine)
    assert reverse("ops:index") not in theirs


def test_the_menu_marks_the_page_in_view_and_the_language_switch_returns_to_it():
    user = UserFactory(email="menu@example.com")
    client = _client(user)
    for path, section in [
        (reverse("storage:disks"), reverse("storage:index")),
        (reverse("billing:transactions") + "?page=2", reverse("billing:wallet")),
    ]:
        for _round in range(2):
            html = _header(client.get(path).content.decode())
            active = re.findall(r'<a class="nav-link active" href="([^"]+)"', html)
            assert active and set(active) == {section}
            assert f'name="next" type="hidden" value="{path.replace("&", "&amp;")}"' in html


def test_the_frame_follows_the_language():
    user = UserFactory(email="lang@example.com")
    english = _client(user, "en").get(reverse("storage:disks")).content.decode()
    chinese = _client(user, "zh-hans").get(reverse("storage:disks")).content.decode()
    assert "Log out" in english and "Log out" not in chinese
    assert "退出" in chinese or "登出" in chinese
    assert '<html lang="en">' in english and '<html lang="zh-hans">' in chinese


def test_the_team_badge_follows_the_context_and_the_teams_name():
    user = UserFactory(email="owner@example.com")
    team = team_services.create_team(user, name="Lab One", slug="lab-one")
    client = _client(user)
    path = reverse("storage:disks")
    assert 'id="context-badge"' not in client.get(path).content.decode()
    response = client.post(
        reverse("teams:switch"), {"team": team.slug, "next": path, "csrfmiddlewaretoken": _token(client, path)}
    )
    assert response.status_code == 302
    assert "Lab One" in _header(client.get(path).content.decode())
    team.name = "Lab Two"
    team.save()
    html = _header(client.get(path).content.decode())
    assert "Lab Two" in html and "Lab One" not in html


def _token(client: Client, path: str) -> str:
    return TOKEN.search(client.get(path).content.decode())[1]


def test_every_response_carries_a_token_of_its_own_session_that_the_console_accepts():
    first = UserFactory(email="first@example.com")
    second = UserFactory(email="second@example.com")
    path = reverse("storage:disks")
    a, b = _client(first), _client(second)
    tokens_a = {_token(a, path) for _ in range(3)}
    token_b = _token(b, path)
    assert len(tokens_a) == 3 and token_b not in tokens_a  # masked afresh for every response, never a kept one
    # The token in a's page works for a, and b's does not.
    refused = a.post(reverse("set_language"), {"language": "en", "next": path, "csrfmiddlewaretoken": token_b})
    assert refused.status_code == 403
    accepted = a.post(reverse("set_language"), {"language": "en", "next": path, "csrfmiddlewaretoken": _token(a, path)})
    assert accepted.status_code == 302
    header_token = re.search(r'"X-CSRFToken": "([A-Za-z0-9]+)"', a.get(path).content.decode())[1]
    via_header = a.post(reverse("set_language"), {"language": "en", "next": path}, HTTP_X_CSRFTOKEN=header_token)
    assert via_header.status_code == 302


def test_a_long_query_string_is_not_kept_and_each_address_returns_to_itself(client):
    from console.templatetags import frame

    frame.forget()
    for query in ["?" + "&" * 8000, "?q=1", "?q=2"]:
        html = client.get(reverse("marketplace:list") + query).content.decode()
        assert f'name="next" type="hidden" value="/marketplace/{query.replace("&", "&amp;")}"' in html
    kept = sum(len(key) + len(text) for key, text in frame._kept.items())
    assert kept < 40_000  # the frame once for the page, whatever the addresses


def test_a_template_parsed_anew_shows_its_own_part_under_the_same_name():
    from django.template import Context, Template

    before = Template('{% load frame %}{% frame "x" %}old{% endframe %}')
    after = Template('{% load frame %}{% frame "x" %}new{% endframe %}')
    assert before.render(Context()) == "old" and after.render(Context()) == "new"


def test_a_row_key_names_each_object_once_when_relations_point_back():
    from billing.models import Account, Voucher
    from console.templatetags.frame import loaded

    voucher = Voucher(amount=1)
    voucher.account = Account(balance=2)
    voucher.account.voucher = voucher  # a one-to-one relation caches both ways
    key = loaded(voucher)
    assert "Account" in repr(key) and loaded(voucher) == key


def test_a_row_key_names_an_object_a_view_set_on_the_row_by_its_own_values():
    from billing.models import Account, Voucher
    from console.templatetags.frame import loaded

    voucher = Voucher(amount=1)
    voucher.shown = [Account(balance=2)]  # as a view sets what a row shows beside its own columns
    before = loaded(voucher)
    voucher.shown[0].balance = 3
    assert loaded(voucher) != before


def test_a_part_is_rendered_afresh_and_not_kept_while_its_unless_condition_holds():
    from django.template import Context, Template

    part = Template('{% load frame %}{% frame "typed" key unless typed %}{{ text }}{% endframe %}')
    assert part.render(Context({"key": 1, "text": "what alice typed", "typed": True})) == "what alice typed"
    assert part.render(Context({"key": 1, "text": "stored", "typed": False})) == "stored"  # nothing typed was kept
    assert part.render(Context({"key": 1, "text": "other", "typed": False})) == "stored"  # kept for its key
    assert part.render(Context({"key": 1, "text": "what bob typed", "typed": True})) == "what bob typed"


def test_a_whole_list_is_kept_once_and_follows_a_change_to_any_one_row():
    from django.template import Context, Template

    from console.templatetags import frame

    frame.forget()
    rows = [{"id": n, "amount": f"{n}.00"} for n in range(200)]  # a key far longer than LONGEST_KEY
    shown = Template(
        '{% load frame %}{% frame "list" rows|keys %}{% for row in rows %}{% frame "row" row|loaded %}'
        "{{ row.id }}={{ row.amount }};{% endframe %}{% endfor %}{% endframe %}"
    )
    first = shown.render(Context({"rows": rows}))
    assert "7=7.00;" in first and len(frame._kept) == 201  # every row, and the list under its key's digest
    assert all(len(key) <= frame.LONGEST_KEY for key in frame._kept)
    changed = [*rows[:7], {"id": 7, "amount": "9.99"}, *rows[8:]]
    again = shown.render(Context({"rows": changed}))
    assert "7=9.99;" in again and "7=7.00;" not in again and again.count(";") == 200
    assert shown.render(Context({"rows": rows})) == first


def test_the_kept_parts_never_hold_more_than_their_budget(monkeypatch):
    from django.template import Context, Template

    from console.templatetags import frame

    frame.forget()
    monkeypatch.setattr(frame, "KEPT_CHARS", 20_000)
    part = Template('{% load frame %}{% frame "big" n %}{{ text }}{% endframe %}')
    for n in range(30):
        assert part.render(Context({"n": n, "text": "x" * 1000})) == "x" * 1000
    held = sum(len(key) + len(text) for key, text in frame._kept.items())
    assert held <= 20_000 and 10 < len(frame._kept) < 20 and frame._chars == held
    assert part.render(Context({"n": "huge", "text": "y" * 2000})) == "y" * 2000  # over a sixteenth: not kept
    assert frame._chars == held and not any("y" in text for text in frame._kept.values())


def test_a_row_rendered_inside_a_list_leaves_the_address_and_what_was_typed_out_of_the_kept_list(rf):
    from django.template import Context, Template

    from console.templatetags import frame

    frame.forget()
    shown = Template(
        '{% load frame %}{% frame "list" rows %}{% for row in rows %}'
        '{% frame "row" row unless typed %}{{ row }}{% if typed %}:{{ typed }}{% endif %}@{{ frame_here }};'
        "{% endframe %}{% endfor %}{% endframe %}"
    )
    alice = shown.render(Context({"rows": [1, 2], "request": rf.get("/a/?secret=alice"), "typed": ""}))
    assert alice == "1@/a/?secret=alice;2@/a/?secret=alice;"
    bob = shown.render(Context({"rows": [1, 2], "request": rf.get("/b/"), "typed": ""}))
    assert bob == "1@/b/;2@/b/;"  # the list was kept without alice's address
    typed = shown.render(Context({"rows": [3], "request": rf.get("/c/"), "typed": "draft"}))
    assert typed == "3:draft@/c/;"
    later = shown.render(Context({"rows": [3], "request": rf.get("/c/"), "typed": ""}))
    assert later == "3@/c/;"  # what was typed kept neither the row nor the list around it


def test_a_part_may_not_hold_a_block():
    from django.template import Template, TemplateSyntaxError

    with pytest.raises(TemplateSyntaxError, match="may not hold a"):
        Template('{% load frame %}{% frame "x" %}{% block title %}{% endblock %}{% endframe %}')
