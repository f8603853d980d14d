"""Personal real-name verification: the ID number's form, one number per account, masking everywhere, and the
operator's choice of what needs it (top-ups over a limit, creating a team)."""

import logging
from datetime import date

import pytest
from django.urls import reverse

from accounts import identity, verification
from accounts.models import RealNameVerification
from billing import payments
from billing.subsidies import is_verified_enterprise
from inference.models import Endpoint
from inference.tests.fixtures import fund
from teams import services as teams
from teams.models import Membership, Role
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


def number(region="110105", born="19491231", sequence="002") -> str:
    """A well-formed ID number: the check character computed, not copied."""
    first17 = region + born + sequence
    return first17 + identity.check_character(first17)


VALID = number()  # 11010519491231002X: its check character is X


@pytest.fixture(autouse=True)
def english(client, settings):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"


def test_the_check_character_follows_iso_7064_including_x():
    assert VALID == "11010519491231002X"
    assert identity.clean_number(" 110105 19491231 002x ") == VALID  # spaces and a lower-case x are fine
    # 4·7 + 4·9 + 0·10 + … + 3·2 = 260, and 260 mod 11 = 7, the position of "5" in "10X98765432"
    assert identity.clean_number(number("440308", "19900307", "123")) == "440308199003071235"


@pytest.mark.parametrize(
    "bad",
    [
        "11010519491231002",  # 17 characters
        "1101051949123100XX",  # X only at the end
        "110105194912310021",  # wrong check character
        "990105194912310020",  # no such province
        number(born="19491332"),  # no such date
        number(born="18991231"),  # before 1900
        number(born="20991231"),  # born in the future
        "",
    ],
)
def test_malformed_numbers_are_refused_with_the_reason(bad):
    with pytest.raises(identity.FieldError) as refused:
        identity.clean_number(bad, today=date(2026, 12, 1))
    assert refused.value.field == "number" and refused.value.code == "invalid_id"


def test_verifying_on_the_page_keeps_only_a_masked_number(client, owner):
    client.force_login(owner)
    page = client.get(reverse("console:real-name"))
    assert "Development provider" in page.content.decode()  # the simulated provider says so
    response = client.post(reverse("console:real-name"), {"real_name": "张三丰", "number": VALID}, follow=True)
    html = response.content.decode()
    assert response.status_code == 200 and "**************002X" in html and "张**" in html
    assert VALID not in html and "张三丰" not in html
    row = RealNameVerification.objects.get(user=owner)
    assert row.number_last4 == "002X" and len(row.number_hash) == 64


@pytest.mark.parametrize(
    "posted",
    [
        {"real_name": "张三", "number": "110105194912310021"},  # the service refuses the number
        {"real_name": "", "number": VALID},  # the form refuses the name
        {"real_name": "张" * 61, "number": VALID},  # too long a name
    ],
)
def test_a_refused_form_never_sends_the_number_back(client, owner, posted):
    client.force_login(owner)
    response = client.post(reverse("console:real-name"), posted)
    assert response.status_code == 400
    assert posted["number"] not in response.content.decode()


def test_a_failing_provider_is_a_clear_503_and_its_error_never_logs_the_number(client, owner, settings, caplog):
    settings.IDENTITY_PROVIDER = "accounts.tests.test_real_name.BrokenProvider"
    client.force_login(owner)
    with caplog.at_level(logging.DEBUG):
        response = client.post(reverse("console:real-name"), {"real_name": "张三", "number": VALID})
    assert response.status_code == 503 and "not available right now" in response.content.decode()
    assert "identity provider" in caplog.text and VALID not in caplog.text
    assert VALID not in response.content.decode()


class BrokenProvider:
    name = "broken"

    def verify(self, real_name, number):
        raise RuntimeError(f"upstream refused {number}")  # an error that carries the number


class RejectingProvider:
    name = "rejecting"

    def verify(self, real_name, number):
        return identity.Answer(ok=False, reason="the name does not match the number")


def test_whether_a_number_is_in_use_is_told_only_for_a_pair_the_provider_confirms(owner, stranger, settings):
    identity.verify(owner, real_name="张三", number=VALID)
    settings.IDENTITY_PROVIDER = "accounts.tests.test_real_name.RejectingProvider"
    with pytest.raises(identity.ServiceError) as refused:
        identity.verify(stranger, real_name="王五", number=VALID)
    assert refused.value.code == "not_verified" and "does not match" in str(refused.value.message)


def test_well_formed_attempts_are_limited_per_day(owner, settings):
    settings.IDENTITY_PROVIDER = "accounts.tests.test_real_name.RejectingProvider"
    for sequence in range(identity.ATTEMPTS_PER_DAY):
        with pytest.raises(identity.ServiceError) as refused:
            identity.verify(owner, real_name="张三", number=number(sequence=f"{sequence:03d}"))
        assert refused.value.code == "not_verified"
    settings.IDENTITY_PROVIDER = "accounts.identity.DevelopmentProvider"
    with pytest.raises(identity.ServiceError) as refused:
        identity.verify(owner, real_name="张三", number=VALID)
    assert refused.value.code == "too_many_attempts"


def test_names_with_rare_characters_and_interpuncts_are_accepted():
    assert identity.clean_name("𠮷野 家") == "𠮷野 家"
    assert identity.clean_name("阿依古丽·买买提") == "阿依古丽·买买提"
    with pytest.raises(identity.FieldError):
        identity.clean_name("<script>")


def test_one_number_verifies_one_account(owner, stranger):
    identity.verify(owner, real_name="张三", number=VALID)
    with pytest.raises(identity.FieldError) as refused:
        identity.verify(stranger, real_name="李四", number=VALID.lower())
    assert refused.value.code == "id_in_use"
    with pytest.raises(identity.Conflict):
        identity.verify(owner, real_name="张三", number=number(sequence="005"))


def test_the_api_verifies_and_answers_masked(owner_api):
    assert owner_api.get("/api/v1/real-name").status_code == 404
    bad = owner_api.post("/api/v1/real-name", {"real_name": "张三", "number": "123"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"]["number"]
    done = owner_api.post("/api/v1/real-name", {"real_name": "张三", "number": VALID}, format="json")
    assert done.status_code == 201
    body = owner_api.get("/api/v1/real-name").json()
    assert body["number"] == "**************002X" and body["name"] == "张*"
    assert VALID not in done.content.decode()


def test_the_admin_list_shows_the_number_masked(client, owner, settings):
    identity.verify(owner, real_name="张三", number=VALID)
    staff = UserFactory(email="root@example.com", is_staff=True, is_superuser=True)
    client.force_login(staff)
    html = client.get(reverse("admin:console_realnameverification_changelist")).content.decode()
    assert "**************002X" in html and VALID not in html


def test_a_top_up_over_the_limit_needs_verification_first(client, owner, owner_api, settings):
    settings.REAL_NAME_REQUIRED_FOR = ["topup"]
    settings.REAL_NAME_TOPUP_LIMIT = "1000"
    assert owner_api.post("/api/v1/topups", {"amount": "1000"}, format="json").status_code == 201
    refused = owner_api.post("/api/v1/topups", {"amount": "1000.01"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "real_name_required"
    assert reverse("console:real-name") in refused.json()["message"]
    client.force_login(owner)
    page = client.post(reverse("billing:topup"), {"amount": "2000"})
    assert page.status_code == 403 and reverse("console:real-name") in page.content.decode()
    identity.verify(owner, real_name="张三", number=VALID)
    assert owner_api.post("/api/v1/topups", {"amount": "2000"}, format="json").status_code == 201


def test_creating_a_team_needs_verification_when_the_operator_says_so(owner, settings):

    settings.REAL_NAME_REQUIRED_FOR = ["topup", "team"]
    with pytest.raises(identity.RealNameRequired):
        teams.create_team(owner, name="Lab", slug="lab")
    identity.verify(owner, real_name="张三", number=VALID)
    assert teams.create_team(owner, name="Lab", slug="lab").slug == "lab"


def test_publishing_an_endpoint_needs_verification_when_the_operator_says_so(
    owner, owner_client, owner_api, settings, inference_catalog, instant, eager_tasks
):

    settings.REAL_NAME_REQUIRED_FOR = ["endpoint"]
    fund(owner)
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    page = owner_client.post(reverse("endpoints:deploy", args=["qwen2.5-0.5b-instruct-vllm"]), {"name": "api"})
    html = page.content.decode()
    assert page.status_code == 403 and "Publishing an inference endpoint needs real-name verification" in html
    assert f'href="{reverse("console:real-name")}" id="verify-first"' in html
    refused = owner_api.post("/api/v1/endpoints", {"template": "qwen2.5-0.5b-instruct-vllm"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "real_name_required"
    assert not Endpoint.objects.exists()  # nothing launched, nothing charged

    identity.verify(owner, real_name="张三", number=VALID)
    assert (
        owner_api.post("/api/v1/endpoints", {"template": "qwen2.5-0.5b-instruct-vllm"}, format="json").status_code
        == 201
    )


def test_the_page_lists_what_the_operator_asks_verification_for(client, owner, settings):
    settings.REAL_NAME_REQUIRED_FOR = ["topup", "endpoint"]
    settings.REAL_NAME_TOPUP_LIMIT = "500"
    client.force_login(owner)
    html = client.get(reverse("console:real-name")).content.decode()
    assert "Here it is needed for: top-ups over ¥500, publishing an inference endpoint." in html
    assert "creating a team" not in html


def test_refused_top_ups_and_teams_link_to_the_verification_page(client, owner, settings):
    settings.REAL_NAME_REQUIRED_FOR = ["topup", "team"]
    client.force_login(owner)
    topup = client.post(reverse("billing:topup"), {"amount": "5000"})
    assert topup.status_code == 403 and 'id="verify-first"' in topup.content.decode()
    team = client.post(reverse("teams:list"), {"name": "Lab", "slug": "lab"})
    assert team.status_code == 403 and 'id="verify-first"' in team.content.decode()
    small = client.post(reverse("billing:topup"), {"amount": "abc"})
    assert 'id="verify-first"' not in small.content.decode()  # other refusals do not send people to verify


def _approved_enterprise(user):

    application = verification.apply(
        user,
        company_name="示例科技有限公司",
        licence_number=_licence(),
        contact_name="李四",
        contact_phone="13800138000",
    )
    return verification.approve(application, by=UserFactory(is_staff=True))


def _licence() -> str:

    first17 = "91110108MA01ABCD1"
    return first17 + verification.credit_code_check_character(first17)


def test_an_approved_enterprise_counts_for_its_holder_and_for_the_teams_it_owns(owner, owner_api, settings):

    settings.REAL_NAME_REQUIRED_FOR = ["topup", "team"]
    member = UserFactory(email="member@example.com")
    with pytest.raises(identity.RealNameRequired):
        teams.create_team(owner, name="Lab", slug="lab")
    _approved_enterprise(owner)
    team = teams.create_team(owner, name="Lab", slug="lab")  # the enterprise itself, not a person, is verified
    assert owner_api.post("/api/v1/topups", {"amount": "5000"}, format="json").status_code == 201

    # A billing member who never verified tops up the enterprise's team: the team's verification counts.
    Membership.objects.create(team=team, user=member, role=Role.BILLING)
    assert payments.start_topup(team.account, "5000", base_url="http://testserver", by=member).amount == 5000
    assert is_verified_enterprise(team.account)  # its programmes and special VAT invoices too
    # ...but not for the member's own wallet, and not for a team whose owners are not verified.
    with pytest.raises(identity.RealNameRequired):
        payments.start_topup(member, "5000", base_url="http://testserver")
    other = teams.create_team(owner, name="Other", slug="other")
    Membership.objects.filter(team=other, user=owner).update(role=Role.ADMIN)
    Membership.objects.create(team=other, user=member, role=Role.OWNER)
    assert not is_verified_enterprise(type(owner).objects.get(pk=other.account_id))
    with pytest.raises(identity.RealNameRequired):
        payments.start_topup(other.account, "5000", base_url="http://testserver", by=member)
    # Joining someone else's team as an owner lends it nothing; a suspended creator no longer counts.
    stranger = UserFactory(email="stranger-lab@example.com")
    identity.verify(stranger, real_name="王五", number=number(sequence="004"))
    theirs = teams.create_team(stranger, name="Theirs", slug="theirs")
    Membership.objects.create(team=theirs, user=owner, role=Role.OWNER)
    assert not is_verified_enterprise(type(owner).objects.get(pk=theirs.account_id))
    type(owner).objects.filter(pk=owner.pk).update(is_active=False)
    assert not is_verified_enterprise(type(owner).objects.get(pk=team.account_id))
