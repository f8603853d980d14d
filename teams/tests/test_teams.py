"""Teams from the outside: create one, invite by e-mail, join from the link, roles, removal, and the API."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from teams import services
from teams.models import Invitation, Membership, TeamEvent
from teams.roles import Role
from tests.fixtures.factories import UserFactory
from tests.fixtures.personas import _token_client

pytestmark = pytest.mark.django_db


def _link(mail) -> str:
    """The invitation link's path, as the e-mail gives it."""
    url = re.search(r"https?://\S+/teams/invitations/\S+/", mail.body).group(0)
    return url.split("://", 1)[1].split("/", 1)[1].join(["/", ""])


@pytest.fixture(autouse=True)
def english(client, settings):
    """The pages in English (the console's default is Chinese; one test below reads them in Chinese)."""
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"


@pytest.fixture
def team(owner):
    return services.create_team(owner, name="视觉实验室", slug="vision-lab")


def _join(team, user, role):
    return Membership.objects.create(team=team, user=user, role=role)


@pytest.fixture
def sent(django_capture_on_commit_callbacks):
    """Run what the block leaves for after its commit (the invitation e-mail), as a real commit would."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def test_owner_creates_a_team_invites_and_the_invitee_joins_from_the_link(client, owner, mailoutbox, sent):
    client.force_login(owner)
    response = client.post(reverse("teams:list"), {"name": "视觉实验室", "slug": "vision-lab"})
    assert response.status_code == 302
    page = client.get(response["Location"])
    assert "视觉实验室" in page.content.decode() and "owner@example.com" in page.content.decode()

    with sent():
        response = client.post(
            reverse("teams:invite", args=["vision-lab"]), {"email": "Student@Example.com", "role": "developer"}
        )
    assert response.status_code == 302
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["student@example.com"]
    link = _link(mailoutbox[0])

    client.logout()
    anonymous = client.get(link)
    assert anonymous.status_code == 200
    assert reverse("account_signup") in anonymous.content.decode()  # no account yet: sign up first

    student = UserFactory(email="student@example.com")
    client.force_login(student)
    listing = client.get(reverse("teams:list")).content.decode()
    assert "视觉实验室" in listing  # the waiting invitation is shown on the teams page too
    joined = client.post(link)
    assert joined.status_code == 302 and joined["Location"] == reverse("teams:detail", args=["vision-lab"])
    assert Membership.objects.get(user=student).role == Role.DEVELOPER
    assert client.post(link).status_code == 404  # a link works once
    actions = list(TeamEvent.objects.values_list("action", flat=True))
    assert actions == ["joined", "invited", "created"]


def test_a_forwarded_link_lets_nobody_else_in(client, team, owner, stranger, mailoutbox, sent):
    with sent():
        services.invite(services.membership(owner, team.slug), "student@example.com", Role.DEVELOPER)
    client.force_login(stranger)
    response = client.post(_link(mailoutbox[0]))
    assert response.status_code == 403
    assert "student@example.com" in response.content.decode()
    assert not Membership.objects.filter(user=stranger).exists()


def test_an_expired_or_withdrawn_invitation_is_refused_with_the_reason(client, team, owner, mailoutbox, sent):
    member = services.membership(owner, team.slug)
    with sent():
        invitation = services.invite(member, "student@example.com", Role.DEVELOPER)
    student = UserFactory(email="student@example.com")
    client.force_login(student)
    link = _link(mailoutbox[0])
    with time_machine.travel(timezone.now() + timedelta(days=8)):
        expired = client.post(link)
    assert expired.status_code == 404 and "expired" in expired.content.decode()
    services.revoke_invitation(member, invitation.public_id)
    assert client.post(link).status_code == 404
    assert client.get(reverse("teams:invitation", args=["forged"])).status_code == 404
    assert not Membership.objects.filter(user=student).exists()


def test_inviting_again_renews_the_invitation_and_members_cannot_be_invited(team, owner, mailoutbox):
    member = services.membership(owner, team.slug)
    first = services.invite(member, "student@example.com", Role.DEVELOPER)
    second = services.invite(member, "STUDENT@example.com", Role.READ_ONLY)
    first.refresh_from_db()
    assert first.revoked_at is not None and second.role == Role.READ_ONLY
    assert Invitation.objects.filter(team=team, revoked_at__isnull=True).count() == 1
    with pytest.raises(services.Conflict):
        services.invite(member, "owner@example.com", Role.ADMIN)


@pytest.mark.parametrize(
    ("role", "may_invite"),
    [(Role.OWNER, True), (Role.ADMIN, True), (Role.DEVELOPER, False), (Role.BILLING, False), (Role.READ_ONLY, False)],
)
def test_only_owners_and_admins_invite(client, team, role, may_invite, mailoutbox, sent):
    someone = UserFactory()
    _join(team, someone, role)
    client.force_login(someone)
    page = client.get(reverse("teams:detail", args=[team.slug]))
    assert page.status_code == 200
    assert ('id="invite-form"' in page.content.decode()) is may_invite
    with sent():
        response = client.post(
            reverse("teams:invite", args=[team.slug]), {"email": "new@example.com", "role": "developer"}
        )
    assert response.status_code == (302 if may_invite else 403)
    assert len(mailoutbox) == (1 if may_invite else 0)


def test_an_admin_cannot_make_or_remove_owners_and_the_last_owner_stays(client, team, owner):
    admin = UserFactory()
    _join(team, admin, Role.ADMIN)
    client.force_login(admin)
    make_owner = client.post(reverse("teams:member-role", args=[team.slug, admin.public_id]), {"role": Role.OWNER})
    assert make_owner.status_code == 403
    remove_owner = client.post(reverse("teams:member-remove", args=[team.slug, owner.public_id]))
    assert remove_owner.status_code == 403
    client.force_login(owner)
    leave = client.post(reverse("teams:member-remove", args=[team.slug, owner.public_id]))
    assert leave.status_code == 409 and "owner" in leave.content.decode()
    assert Membership.objects.get(user=owner).role == Role.OWNER


def test_a_removed_member_loses_the_team_at_once(client, team, owner):
    developer = UserFactory()
    _join(team, developer, Role.DEVELOPER)
    client.force_login(owner)
    assert client.post(reverse("teams:member-remove", args=[team.slug, developer.public_id])).status_code == 302
    client.force_login(developer)
    assert client.get(reverse("teams:detail", args=[team.slug])).status_code == 404
    assert team.events.filter(action="removed", subject=developer.email).exists()


def test_strangers_get_404_on_every_team_route(client, team, owner, stranger):
    invitation = services.invite(services.membership(owner, team.slug), "x@example.com", Role.DEVELOPER)
    client.force_login(stranger)
    gets = [reverse("teams:detail", args=[team.slug])]
    posts = [
        (reverse("teams:invite", args=[team.slug]), {"email": "y@example.com", "role": "developer"}),
        (reverse("teams:member-role", args=[team.slug, owner.public_id]), {"role": "read_only"}),
        (reverse("teams:member-remove", args=[team.slug, owner.public_id]), {}),
        (reverse("teams:invitation-revoke", args=[team.slug, invitation.public_id]), {}),
    ]
    assert [client.get(url).status_code for url in gets] == [404]
    assert [client.post(url, data).status_code for url, data in posts] == [404] * len(posts)
    assert Membership.objects.get(user=owner).role == Role.OWNER


def test_bad_input_gets_a_clear_error_on_the_page(client, owner, team):
    client.force_login(owner)
    taken = client.post(reverse("teams:list"), {"name": "Another", "slug": "vision-lab"})
    assert taken.status_code == 409 and "taken" in taken.content.decode()
    for slug in ["-bad", "UPPER!", "x" * 41]:
        response = client.post(reverse("teams:list"), {"name": "Another", "slug": slug})
        assert response.status_code == 400
    reserved = client.post(reverse("teams:list"), {"name": "Another", "slug": "invitations"})
    assert reserved.status_code == 409  # taken by the team pages' own addresses, as a slug another team holds
    bad_email = client.post(reverse("teams:invite", args=[team.slug]), {"email": "not an address", "role": "developer"})
    assert bad_email.status_code == 400
    bad_role = client.post(reverse("teams:member-role", args=[team.slug, owner.public_id]), {"role": "emperor"})
    assert bad_role.status_code == 400


def test_an_unverified_user_cannot_create_a_team(client):
    unverified = UserFactory(verified=False)
    client.force_login(unverified)
    response = client.post(reverse("teams:list"), {"name": "Lab", "slug": "lab"})
    assert response.status_code == 403 and "Verify" in response.content.decode()


def test_the_team_pages_in_chinese(client, owner, team, settings):
    client.force_login(owner)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    page = client.get(reverse("teams:detail", args=[team.slug]))
    text = page.content.decode()
    assert "成员" in text and "邀请" in text


def test_team_page_queries_do_not_grow_with_members(client, owner, team, django_assert_max_num_queries):
    client.force_login(owner)
    for _ in range(3):
        _join(team, UserFactory(), Role.DEVELOPER)
    with django_assert_max_num_queries(14) as few:
        small = client.get(reverse("teams:detail", args=[team.slug]))
    assert small.status_code == 200 and small.content.decode().count("<tr") >= 4  # the owner and three members
    for _ in range(20):
        _join(team, UserFactory(), Role.READ_ONLY)
    with django_assert_max_num_queries(len(few.captured_queries)):
        large = client.get(reverse("teams:detail", args=[team.slug]))
    assert large.status_code == 200 and large.content.decode().count("<tr") >= 24


# The API ------------------------------------------------------------------------------------------------------


def test_the_api_creates_lists_invites_and_accepts(owner, mailoutbox, sent):
    api = _token_client(owner)
    created = api.post("/api/v1/teams", {"name": "NLP", "slug": "nlp"}, format="json")
    assert created.status_code == 201 and created.json()["role"] == "owner"
    assert [t["slug"] for t in api.get("/api/v1/teams").json()] == ["nlp"]
    with sent():
        invited = api.post(
            "/api/v1/teams/nlp/invitations", {"email": "dev@example.com", "role": "billing"}, format="json"
        )
    assert invited.status_code == 201
    token = _link(mailoutbox[0]).rstrip("/").rsplit("/", 1)[1]
    dev = UserFactory(email="dev@example.com")
    accepted = _token_client(dev).post("/api/v1/teams/invitations/accept", {"token": token}, format="json")
    assert accepted.status_code == 200 and accepted.json()["role"] == "billing"
    members = api.get("/api/v1/teams/nlp").json()["members"]
    assert {m["email"]: m["role"] for m in members} == {"owner@example.com": "owner", "dev@example.com": "billing"}


def test_the_api_answers_roles_and_strangers_with_json_errors(owner, stranger, team):
    reader = UserFactory()
    _join(team, reader, Role.READ_ONLY)
    as_reader = _token_client(reader)
    assert as_reader.get(f"/api/v1/teams/{team.slug}").status_code == 200
    refused = as_reader.post(f"/api/v1/teams/{team.slug}/invitations", {"email": "a@example.com"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    as_stranger = _token_client(stranger)
    assert as_stranger.get(f"/api/v1/teams/{team.slug}").status_code == 404
    gone = as_stranger.delete(f"/api/v1/teams/{team.slug}/members/{owner.public_id}")
    assert gone.status_code == 404 and gone.json()["code"] == "not_found"
    bad = _token_client(owner).post("/api/v1/teams", {"name": "", "slug": "ok"}, format="json")
    assert bad.status_code == 400 and "name" in bad.json().get("errors", {})
    forged = _token_client(stranger).post("/api/v1/teams/invitations/accept", {"token": "forged"}, format="json")
    assert forged.status_code == 404 and forged.json()["code"] == "invitation_invalid"


def test_leaving_through_the_api(owner, team):
    developer = UserFactory()
    _join(team, developer, Role.DEVELOPER)
    api = _token_client(developer)
    assert api.delete(f"/api/v1/teams/{team.slug}/members/{developer.public_id}").status_code == 204
    assert api.get(f"/api/v1/teams/{team.slug}").status_code == 404
    assert team.events.filter(action="left").exists()


def test_the_first_login_after_opening_an_invitation_comes_back_to_it_and_nowhere_else(client, team, owner):
    with_link = services.invite(services.membership(owner, team.slug), "student@example.com", Role.DEVELOPER)
    path = reverse("teams:invitation", args=[services.invitation_token(with_link)])
    student = UserFactory(email="student@example.com")
    client.get(path)  # signed out: the page remembers itself for after the login
    login = {"login": student.email, "password": "correct horse battery"}
    assert client.post(reverse("account_login"), login)["Location"] == path
    client.logout()
    session = client.session
    session["after_login"] = "//evil.example/"
    session.save()
    assert client.post(reverse("account_login"), login)["Location"] == reverse("console:dashboard")


@pytest.mark.parametrize("role", [Role.DEVELOPER, Role.BILLING, Role.READ_ONLY])
def test_members_without_the_members_permission_change_no_role_and_remove_nobody(client, team, owner, role):
    someone, other = UserFactory(), UserFactory()
    _join(team, someone, role)
    _join(team, other, Role.DEVELOPER)
    client.force_login(someone)
    promote = client.post(reverse("teams:member-role", args=[team.slug, other.public_id]), {"role": Role.ADMIN})
    remove = client.post(reverse("teams:member-remove", args=[team.slug, other.public_id]))
    assert (promote.status_code, remove.status_code) == (403, 403)
    assert Membership.objects.get(user=other).role == Role.DEVELOPER
    assert (
        client.post(reverse("teams:member-role", args=[team.slug, someone.public_id]), {"role": "owner"}).status_code
        == 403
    )


def test_a_request_on_its_way_when_its_sender_was_demoted_acts_with_the_new_role(team, owner):
    second, third = UserFactory(), UserFactory()
    _join(team, second, Role.OWNER)
    _join(team, third, Role.OWNER)
    seen_before = services.membership(second, team.slug)  # read as the request began: still an owner
    services.change_role(services.membership(owner, team.slug), second.public_id, Role.READ_ONLY)
    with pytest.raises(services.Forbidden):
        services.change_role(seen_before, third.public_id, Role.READ_ONLY)
    with pytest.raises(services.Forbidden):
        services.invite(seen_before, "late@example.com", Role.ADMIN)
    assert Membership.objects.get(user=third).role == Role.OWNER


def test_a_sole_owner_cannot_demote_themselves_through_the_api(owner, team):
    api = _token_client(owner)
    refused = api.patch(f"/api/v1/teams/{team.slug}/members/{owner.public_id}", {"role": "admin"}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "last_owner"
    assert Membership.objects.get(user=owner).role == Role.OWNER


def test_a_removal_by_an_upper_case_id_of_oneself_is_leaving(client, team):
    developer = UserFactory()
    _join(team, developer, Role.DEVELOPER)
    client.force_login(developer)
    response = client.post(reverse("teams:member-remove", args=[team.slug, str(developer.public_id).upper()]))
    assert response.status_code == 302 and response["Location"] == reverse("teams:list")
    assert team.events.filter(action="left").exists()


def test_odd_input_is_refused_plainly(client, owner, team):
    client.force_login(owner)
    two_lines = client.post(reverse("teams:list"), {"name": "Lab\r\nBcc: x@example.com", "slug": "lab-two"})
    assert two_lines.status_code == 400 and not Membership.objects.filter(team__slug="lab-two").exists()
    long_address = "a" * 250 + "@example.com"
    response = client.post(reverse("teams:invite", args=[team.slug]), {"email": long_address, "role": "developer"})
    assert response.status_code == 400 and not Invitation.objects.exists()
    assert (
        client.post(reverse("teams:member-role", args=[team.slug, "not-a-uuid"]), {"role": "admin"}).status_code == 404
    )


def test_the_after_login_page_must_be_on_this_site(client, owner):
    session = client.session
    session["after_login"] = "/\\evil.example/"
    session.save()
    response = client.post(reverse("account_login"), {"login": owner.email, "password": "correct horse battery"})
    assert response["Location"] == reverse("console:dashboard")


def test_the_invitation_s_sign_up_form_is_prefilled_with_the_invited_address(client, team, owner, mailoutbox, sent):
    with sent():
        services.invite(services.membership(owner, team.slug), "student+ml@example.com", Role.DEVELOPER)
    page = client.get(_link(mailoutbox[0])).content.decode()
    signup = re.search(r'id="invitation-signup" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    form = client.get(signup).content.decode()
    assert re.search(r'<input[^>]*name="email"[^>]*value="student\+ml@example.com"', form)
