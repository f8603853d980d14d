"""Enterprise verification (企业认证, SPEC §3): users apply with their company's details; staff approve or reject.

The review itself (with its audit row and the role check) is ``backoffice.services.review_verification``, which
calls :func:`approve` / :func:`reject` here. ``billing.subsidies.is_verified_enterprise`` reads
:func:`is_verified`, so "verified enterprises only" subsidy programmes apply from the moment of approval.

A team counts as its enterprise's: a team's account is verified while the person who created it is a verified
enterprise and still one of its active owners, so the enterprise's team gets its programmes, its special VAT
invoices and passes the real-name checks. Joining someone else's team as an owner lends it nothing.
"""

import re

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import Conflict, NotFound, ServiceError
from teams.accounts import team_of
from teams.roles import Role

from .models import EnterpriseVerification

Status = EnterpriseVerification.Status

# The unified social credit code (统一社会信用代码, GB 32100-2015): 18 characters from this alphabet, the last a
# check character over the first 17 with these weights.
CREDIT_CODE_ALPHABET = "0123456789ABCDEFGHJKLMNPQRTUWXY"
CREDIT_CODE_WEIGHTS = (1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28)
PHONE = re.compile(r"^\+?[0-9][0-9 \-]{5,30}$")
# A code as the API accepts it (``clean_licence_number`` drops spaces and dashes and reads letters as capitals),
# and the name of its format in the API's schema (its check character is more than a pattern says).
CREDIT_CODE_AS_TYPED = r"^[\s-]*(?:[0-9A-HJ-NP-RTUWXYa-hj-np-rtuwxy][\s-]*){18}$"
CREDIT_CODE_FORMAT = "cn-unified-social-credit-code"
MAX_REASON = 500


def credit_code_check_character(first17: str) -> str:
    """The check character that completes the first 17 characters of a unified social credit code."""
    total = sum(CREDIT_CODE_ALPHABET.index(c) * w for c, w in zip(first17, CREDIT_CODE_WEIGHTS, strict=True))
    return CREDIT_CODE_ALPHABET[(31 - total % 31) % 31]


def clean_licence_number(value: str) -> str:
    """The code in upper case without spaces, or a ServiceError that says what is wrong with it."""
    code = re.sub(r"[\s-]", "", value or "").upper()
    if len(code) != 18 or any(c not in CREDIT_CODE_ALPHABET for c in code):
        raise ServiceError(
            _("The unified social credit code has 18 characters: digits and capital letters (no I, O, S, V or Z)."),
            code="invalid_licence_number",
        )
    if credit_code_check_character(code[:17]) != code[17]:
        raise ServiceError(
            _("This unified social credit code is not valid: its last character does not match. Check for typos."),
            code="invalid_licence_number",
        )
    return code


def check_phone(value: str) -> str:
    if not PHONE.match(value):
        raise ServiceError(_("Enter a phone number of digits, e.g. 010-12345678 or 13800138000."), code="invalid_phone")
    return value


def _required(value: str, limit: int, message: str, code: str) -> str:
    value = (value or "").strip()
    if not value:
        raise ServiceError(message, code=code)
    if len(value) > limit:
        raise ServiceError(_("At most %(n)d characters, please.") % {"n": limit}, code=code)
    return value


def current(user) -> EnterpriseVerification | None:
    """The user's latest application (their status), or None."""
    return EnterpriseVerification.objects.for_user(user).order_by("-submitted_at", "-pk").first()


def is_verified(user) -> bool:
    """Whether the user's enterprise verification has been approved (their latest application decides); for a
    team's account, whether its creator is a verified enterprise and still an active owner of it."""
    team = team_of(user)
    if team is not None:
        creator = (
            get_user_model()
            .objects.filter(
                pk=team.created_by_id, is_active=True, team_memberships__team=team, team_memberships__role=Role.OWNER
            )
            .first()
        )
        return creator is not None and is_verified(creator)
    latest = current(user)
    return latest is not None and latest.status == Status.APPROVED


def apply(user, *, company_name: str, licence_number: str, contact_name: str, contact_phone: str):
    """Submit an application. Refused while one is pending, or once the user is verified."""
    fields = {
        "company_name": _required(company_name, 200, _("Enter the company name."), "company_name_required"),
        "licence_number": clean_licence_number(licence_number),
        "contact_name": _required(contact_name, 100, _("Enter a contact person."), "contact_name_required"),
        "contact_phone": _required(contact_phone, 32, _("Enter a contact phone number."), "contact_phone_required"),
    }
    check_phone(fields["contact_phone"])
    latest = current(user)
    if latest is not None and latest.status == Status.PENDING:
        raise Conflict(_("Your application is already waiting for review."), code="verification_pending")
    if latest is not None and latest.status == Status.APPROVED:
        raise Conflict(_("Your enterprise is already verified."), code="already_verified")
    try:
        with transaction.atomic():
            return EnterpriseVerification.objects.create(user=user, **fields)
    except IntegrityError:  # a concurrent submission of the same user won
        raise Conflict(_("Your application is already waiting for review."), code="verification_pending") from None


def get_for_review(public_id) -> EnterpriseVerification:
    found = EnterpriseVerification.objects.select_related("user").filter(public_id=public_id).first()
    if found is None:
        raise NotFound(_("No such application."))
    return found


def _decide(application: EnterpriseVerification, status: str, reason: str, by) -> EnterpriseVerification:
    """Move a pending application to ``status`` by compare-and-set; refuse if it was already decided."""
    now = timezone.now()
    moved = EnterpriseVerification.objects.filter(pk=application.pk, status=Status.PENDING).update(
        status=status, reason=reason, reviewed_by=by, reviewed_at=now
    )
    if not moved:
        raise Conflict(_("This application was already reviewed."), code="already_reviewed")
    application.status, application.reason, application.reviewed_by, application.reviewed_at = status, reason, by, now
    _forget_cached_answer(application.user)
    return application


def approve(application: EnterpriseVerification, *, by, reason: str = "") -> EnterpriseVerification:
    return _decide(application, Status.APPROVED, (reason or "").strip()[:MAX_REASON], by)


def reject(application: EnterpriseVerification, *, by, reason: str) -> EnterpriseVerification:
    """Reject with a reason the applicant sees (required: they need to know what to fix)."""
    reason = (reason or "").strip()
    if not reason:
        raise ServiceError(_("Give the applicant a reason for the rejection."), code="reason_required")
    if len(reason) > MAX_REASON:
        raise ServiceError(_("At most %(n)d characters, please.") % {"n": MAX_REASON}, code="reason_too_long")
    return _decide(application, Status.REJECTED, reason, by)


def _forget_cached_answer(user) -> None:
    # billing.subsidies memoises the answer on the user object for the length of a request.
    if hasattr(user, "_verified_enterprise"):
        del user._verified_enterprise
