"""Student verification (学生认证): a university address under ``.edu.cn`` proves a student, by a code mailed there.

:func:`send_code` checks the address, makes a six-digit code (only its keyed hash is kept) and mails it; the
person types it back (:func:`confirm`) within ``CODE_MINUTES`` and ``MAX_ATTEMPTS`` tries. Verified, the account
has the student programme's prices (a subsidy programme whose eligibility is "student": the quote applies it like
any other, ``billing.subsidies``) for ``STUDENT_VERIFIED_DAYS``; then they verify again. One address verifies one
account. Codes go out at most once a minute and ``CODES_PER_DAY`` times a day per account.
"""

import hashlib
import hmac
import logging
import re
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import Conflict, ServiceError
from core.field_errors import FieldError

from .models import StudentVerification

log = logging.getLogger(__name__)
CODE_MINUTES = 30
MAX_ATTEMPTS = 5
RESEND_SECONDS = 60
CODES_PER_DAY = 10
CODES_PER_ADDRESS = 5  # a day, whichever accounts ask: nobody can flood a student's mailbox
# A mailbox of a university in mainland China: any host under edu.cn (pku.edu.cn, mails.tsinghua.edu.cn…).
# Written without flags, so that the API's schema states it as it is (the pattern of StudentAddressSerializer).
ADDRESS = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.)+[Ee][Dd][Uu]\.[Cc][Nn]$")


class TooManyCodes(ServiceError):
    status = 429
    code = "too_many_codes"


def _digest(user, code: str) -> str:
    key = settings.SECRET_KEY.encode()
    return hmac.new(key, f"student:{getattr(user, 'pk', '')}:{code}".encode(), hashlib.sha256).hexdigest()


def clean_address(value) -> str:
    address = value.strip() if isinstance(value, str) else ""
    if not ADDRESS.match(address) or len(address) > 254:
        raise FieldError(
            "email",
            _("Give your university address: it ends in .edu.cn, e.g. name@pku.edu.cn."),
            code="invalid_student_address",
        )
    return address.lower()


def status(user) -> StudentVerification | None:
    return StudentVerification.objects.filter(user=user).first()


def is_verified(user, at=None) -> bool:
    """Whether ``user`` is a verified student now (one indexed query)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    row = StudentVerification.objects.filter(user=user, verified_at__isnull=False).first()
    return row is not None and row.is_valid(at)


def send_code(user, email) -> StudentVerification:
    """Mail a new code to ``email`` (a ``.edu.cn`` address) for ``user`` to type back. The address becomes the
    account's only when the code comes back (:func:`confirm`): until then it is pending, and reserves nothing."""
    address = clean_address(email)
    now = timezone.now()
    with transaction.atomic():
        try:
            with transaction.atomic():
                row, _created = StudentVerification.objects.select_for_update().get_or_create(user=user)
        except IntegrityError:  # a first request of the same person at the same moment made it
            row = StudentVerification.objects.select_for_update().get(user=user)
        if row.code_sent_at and (now - row.code_sent_at).total_seconds() < RESEND_SECONDS:
            wait = RESEND_SECONDS - int((now - row.code_sent_at).total_seconds())
            raise TooManyCodes(
                _("A code was sent a moment ago: wait %(seconds)s seconds before asking for another.")
                % {"seconds": wait},
                code="too_soon",
            )
        for key, limit in (
            (f"students:codes:{user.pk}:{now:%Y%m%d}", CODES_PER_DAY),
            (f"students:address:{_digest(None, address)}:{now:%Y%m%d}", CODES_PER_ADDRESS),
        ):
            cache.add(key, 0, timeout=86400)
            if cache.incr(key) > limit:
                raise TooManyCodes(_("Too many codes today: try again tomorrow."))
        # Told only behind the limits above, so addresses cannot be tried one after the other.
        if StudentVerification.objects.filter(email__iexact=address).exclude(user=user).exists():
            raise Conflict(_("This university address already verified another account."), code="student_address_taken")
        code = f"{secrets.randbelow(10**6):06d}"
        row.pending_email, row.code_hash, row.code_sent_at, row.attempts = address, _digest(user, code), now, 0
        row.save(update_fields=["pending_email", "code_hash", "code_sent_at", "attempts"])
        subject = _("Your student verification code")
        body = _(
            "Your code is %(code)s. Type it on the student verification page within %(minutes)s minutes.\n\n"
            "If you did not ask for it, ignore this mail: nothing changes without the code."
        ) % {"code": code, "minutes": CODE_MINUTES}
        transaction.on_commit(lambda: _mail(subject, body, address))
    return row


def _mail(subject: str, body: str, address: str) -> None:
    try:
        send_mail(subject, body, None, [address])
    except Exception:  # noqa: BLE001 - the code is saved; asking again in a minute sends another
        log.exception("the student verification code could not be mailed")


def confirm(user, code) -> StudentVerification:
    """Check the code typed back; verified, the student's prices apply from now on."""
    typed = code.strip() if isinstance(code, str) else ""
    now = timezone.now()
    with transaction.atomic():
        row = StudentVerification.objects.select_for_update().filter(user=user).first()
        if row is None or not row.code_hash or row.code_sent_at is None:
            raise Conflict(_("Ask for a code first."), code="no_code")
        if now - row.code_sent_at > timedelta(minutes=CODE_MINUTES) or row.attempts >= MAX_ATTEMPTS:
            raise Conflict(_("This code has expired: ask for a new one."), code="code_expired")
        if not re.fullmatch(r"\d{6}", typed) or not hmac.compare_digest(row.code_hash, _digest(user, typed)):
            row.attempts += 1
            row.save(update_fields=["attempts"])  # kept: the refusal is raised after the commit
            left = MAX_ATTEMPTS - row.attempts
        else:
            left = None
            row.email, row.pending_email, row.verified_at, row.code_hash = row.pending_email, "", now, ""
            row.expires_at = now + timedelta(days=settings.STUDENT_VERIFIED_DAYS)
            try:
                with transaction.atomic():
                    row.save(update_fields=["email", "pending_email", "verified_at", "code_hash", "expires_at"])
            except IntegrityError as exc:
                raise Conflict(
                    _("This university address already verified another account."), code="student_address_taken"
                ) from exc
    if left is not None:
        raise FieldError(
            "code", _("That is not the code we sent (%(left)s tries left).") % {"left": left}, code="wrong_code"
        )
    if hasattr(user, "_verified_student"):
        del user._verified_student
    return row
