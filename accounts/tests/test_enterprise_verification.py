"""Enterprise verification (企业认证): a user applies with the company's details, staff approve or reject with a
reason the user sees, and "verified enterprises only" subsidy programmes apply from the approval on."""

from decimal import Decimal

import pytest
from django.urls import reverse

from accounts import verification
from accounts.models import EnterpriseVerification
from accounts.ops.audit import Actor
from accounts.ops.choices import AuditAction
from accounts.ops.models import AuditEntry
from backoffice import services as ops_services
from billing.choices import Eligibility
from billing.quote import quote
from billing.subsidies import is_verified_enterprise
from core.errors import Conflict, ServiceError

pytestmark = pytest.mark.django_db

CODE = "91350100M000100Y43"  # a valid unified social credit code (check character matches)
FORM = {
    "company_name": "Kunpeng AI Ltd",
    "licence_number": CODE,
    "contact_name": "Li Lei",
    "contact_phone": "13800138000",
}
URL = "/api/v1/enterprise-verification"


@pytest.fixture
def english(client):
    client.cookies["django_language"] = "en"
    return client


def test_a_user_applies_on_the_page_and_sees_the_application_waiting(english, owner):
    english.force_login(owner)
    response = english.post(
        reverse("console:enterprise-verification"), FORM | {"licence_number": "9135 0100 m000 100y43"}
    )
    assert response.status_code == 302
    page = english.get(reverse("console:enterprise-verification")).content.decode()
    assert "Pending review" in page and CODE in page and 'id="verification-form"' not in page


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("licence_number", "91350100M000100Y44", "last character does not match"),
        ("licence_number", "12345", "18 characters"),
        ("company_name", "   ", "Enter the company name"),
        ("contact_phone", "call me", "phone number"),
    ],
)
def test_a_bad_application_is_refused_with_a_clear_message(english, owner, field, value, message):
    english.force_login(owner)
    response = english.post(reverse("console:enterprise-verification"), FORM | {field: value})
    assert response.status_code == 400 and message in response.content.decode()
    assert not EnterpriseVerification.objects.exists()


def test_the_api_applies_shows_the_status_and_refuses_a_second_pending_application(owner_api, stranger_api):
    assert owner_api.get(URL).status_code == 404
    created = owner_api.post(URL, FORM, format="json")
    assert created.status_code == 201 and created.json()["status"] == "pending"
    again = owner_api.post(URL, FORM, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert again.status_code == 409 and again.json()["code"] == "verification_pending"
    assert owner_api.get(URL).json()["company_name"] == "Kunpeng AI Ltd"
    assert stranger_api.get(URL).status_code == 404  # nobody sees another's application


def test_bad_api_input_is_a_400_with_code_message_and_errors(owner_api):
    response = owner_api.post(URL, FORM | {"licence_number": "X"}, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_licence_number" and "18 characters" in response.json()["message"]
    missing = owner_api.post(URL, {}, format="json").json()
    assert missing["code"] == "invalid" and "company_name" in missing["errors"]


def test_a_read_only_token_and_an_anonymous_visitor_cannot_apply(teammate_api, anon_api):
    assert teammate_api.post(URL, FORM, format="json").status_code == 403
    assert anon_api.post(URL, FORM, format="json").status_code in (401, 403)
    assert not EnterpriseVerification.objects.exists()


def test_approval_makes_the_user_a_verified_enterprise_for_subsidies_and_is_audited(
    owner, ops_user, catalog, xinchuang_subsidy
):
    xinchuang_subsidy.eligibility = Eligibility.VERIFIED_ENTERPRISE
    xinchuang_subsidy.save()
    application = verification.apply(owner, **FORM)
    assert quote(chip=catalog["ascend-910b"], user=owner).subsidy_total == 0

    ops_services.review_verification(Actor(ops_user, ip="10.0.0.9"), public_id=application.public_id, approve=True)

    fresh_owner = type(owner).objects.get(pk=owner.pk)
    assert is_verified_enterprise(fresh_owner)
    assert quote(chip=catalog["ascend-910b"], user=fresh_owner).payable_per_card_hour == Decimal("1.71")
    entry = AuditEntry.objects.get()
    assert entry.action == AuditAction.VERIFICATION_APPROVED and entry.before == {"status": "pending"}
    assert entry.actor == ops_user and entry.ip == "10.0.0.9"
    with pytest.raises(Conflict):
        ops_services.review_verification(Actor(ops_user), public_id=application.public_id, approve=False, reason="x")


def test_a_rejection_needs_a_reason_which_the_user_sees_and_can_apply_again(english, owner, ops_user):
    application = verification.apply(owner, **FORM)
    with pytest.raises(ServiceError, match="reason"):
        ops_services.review_verification(Actor(ops_user), public_id=application.public_id, approve=False)
    ops_services.review_verification(
        Actor(ops_user), public_id=application.public_id, approve=False, reason="The licence photo is unreadable."
    )

    english.force_login(owner)
    page = english.get(reverse("console:enterprise-verification")).content.decode()
    assert "Rejected" in page and "The licence photo is unreadable." in page and 'id="verification-form"' in page
    assert english.post(reverse("console:enterprise-verification"), FORM).status_code == 302
    assert verification.current(owner).status == "pending" and not is_verified_enterprise(owner)


def test_the_review_queue_lists_pending_applications_and_approves_from_the_page(english, owner, ops_user):
    application = verification.apply(owner, **FORM)
    english.force_login(ops_user)
    assert "Kunpeng AI Ltd" in english.get(reverse("ops:reviews")).content.decode()
    english.post(reverse("ops:review-verification", args=[application.public_id]), {"decision": "approve"})
    application.refresh_from_db()
    assert application.status == "approved" and application.reviewed_by == ops_user
