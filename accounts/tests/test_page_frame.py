"""The page frame (header, menus, sidebar, footer): its parts that show no one's data are cached per process, so
what differs between people, pages and languages must still show as it should, one request after another."""

import re

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


def _page(user, path, language="en") -> str:
    client = Client()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language  # the switch's choice: pages ignore Accept-Language
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


def test_the_back_office_link_is_offered_to_staff_only_whoever_asked_first():
    staff, person = UserFactory(is_staff=True), UserFactory()
    back_office = f'href="{reverse("ops:index")}"'
    assert back_office in _page(staff, reverse("teams:list"))
    html = _page(person, reverse("teams:list"))
    assert back_office not in html
    assert person.email in html and staff.email not in html  # the account menu names the person asking
    assert back_office in _page(staff, reverse("teams:list"))


def test_the_sidebar_marks_the_section_of_each_page():
    person = UserFactory()

    def marked(html):
        sidebar = html[html.index('class="sidebar') :]
        return re.findall(r'class="nav-link active" href="([^"]+)"', sidebar[: sidebar.index("</nav>")])

    assert marked(_page(person, reverse("instances:list"))) == [reverse("instances:list")]
    assert marked(_page(person, reverse("storage:disks"))) == [reverse("storage:index")]
    assert marked(_page(person, reverse("teams:list"))) == []  # no section of its own


def test_the_menus_follow_the_language_of_each_request():
    person = UserFactory()
    assert "Instances" in _page(person, reverse("teams:list"), "en")
    chinese = _page(person, reverse("teams:list"), "zh-hans")
    assert "实例" in chinese and ">Instances<" not in chinese and "Log out" not in chinese
    assert "billed per minute" not in chinese  # the footer
    assert "Log out" in _page(person, reverse("teams:list"), "en")


def test_each_response_has_its_own_csrf_token_and_address_in_the_frame():
    person = UserFactory()
    first = _page(person, reverse("teams:list") + "?a=1")
    second = _page(person, reverse("storage:disks"))
    assert 'name="next" type="hidden" value="/teams/?a=1"' in first
    assert 'name="next" type="hidden" value="/storage/disks/"' in second
    token = 'name="csrfmiddlewaretoken" value="'
    assert first.split(token)[1][:64] != second.split(token)[1][:64]
